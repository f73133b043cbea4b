"""The console inside ``odradek serve`` (``console.listener`` set): bound at start-up beside the Kafka
listeners, it talks to the cluster through this broker's first listener as any client would, so any broker
of a cluster shows the whole cluster."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from odradek.broker.config import read_properties
from odradek.broker.security.client import client_security
from odradek.tools.console.web import Console, ConsoleSettings

KEYS = ("console.listener", "console.basic.auth.user", "console.basic.auth.password", "console.bearer.token")


def open_console(config: Any, broker_id: int, address: tuple[str, int]) -> tuple[Console, socket.socket]:
    """The console and its bound socket; ValueError for a setting that cannot work, OSError when the
    port cannot be bound or the client config read."""
    settings = ConsoleSettings.from_properties({key: config[key] for key in KEYS}, title=f"odradek · broker {broker_id}")
    client_config = config["console.client.config"]
    security = client_security(read_properties(Path(client_config))) if client_config else None
    host, port = address
    bootstrap = f"{'127.0.0.1' if host in ('', '0.0.0.0') else '::1' if host == '::' else host}:{port}"
    return Console(bootstrap, settings, security=security), settings.bind()
