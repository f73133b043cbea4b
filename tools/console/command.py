"""``odradek console --bootstrap-server host:port``: the web console as a process of its own, for any
Kafka-compatible cluster (Apache Kafka included). docs/console.md."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from odradek.tools.admin_common import add_bootstrap_server
from odradek.tools.console import missing_message, missing_modules


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_server(parser)
    parser.add_argument("--listener", help="URL to serve on (console.listener), default http://127.0.0.1:9644; port 0 picks a free one")
    parser.add_argument("--config", type=Path, metavar="FILE", help="console.* properties: console.listener, console.basic.auth.user, console.basic.auth.password, console.bearer.token")


def main(args: argparse.Namespace) -> int:
    if missing_modules():
        print(f"odradek console: {missing_message()}", file=sys.stderr)
        return 1
    import anyio

    from odradek.broker.config import read_properties
    from odradek.broker.security.client import client_security
    from odradek.storage.config_types import ConfigError
    from odradek.tools.console.web import Console, ConsoleSettings

    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)", stream=sys.stdout)
    try:
        props = read_properties(args.config) if args.config else {}
        if args.listener:
            props["console.listener"] = args.listener
        settings = ConsoleSettings.from_properties(props, title="odradek console")
        security = client_security(read_properties(args.command_config)) if args.command_config else None
        sock = settings.bind()
    except (ValueError, OSError, ConfigError) as exc:
        print(f"odradek console: {exc}", file=sys.stderr)
        return 1
    console = Console(args.bootstrap_server, settings, security=security)

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(console.serve, sock)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    break
            tg.cancel_scope.cancel()

    try:
        import uvloop  # noqa: F401

        options = {"use_uvloop": True}
    except ImportError:
        options = {}
    anyio.run(run, backend="asyncio", backend_options=options)
    return 0
