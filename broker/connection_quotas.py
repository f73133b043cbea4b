"""Connection limits (Kafka's ``ConnectionQuotas``), sans-IO: the socket server asks before taking a
connection and tells when one closes.

``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``, ``host:count`` pairs): a connection
from an address that already has its maximum is accepted and closed at once. ``max.connections``: when
the broker has that many, the listener stops accepting until one closes; the inter-broker listener is
exempt when there are other listeners, so brokers can always reach each other.
"""

from __future__ import annotations

import socket
from collections import Counter
from dataclasses import dataclass, field

from odradek.storage.config_types import ConfigError

DEFAULT_INTER_BROKER_LISTENER = "PLAINTEXT"


def parse_overrides(value: str | None) -> dict[str, int]:
    """Kafka's ``max.connections.per.ip.overrides``: comma-separated ``host:count``."""
    overrides: dict[str, int] = {}
    for item in (value or "").split(","):
        if not item.strip():
            continue
        host, sep, count = item.strip().rpartition(":")
        if not sep or not host or not count.strip().lstrip("-").isdigit():
            raise ConfigError(f"Invalid value {value} for configuration max.connections.per.ip.overrides: expected host:count pairs")
        overrides[host.strip()] = int(count)
    return overrides


@dataclass
class ConnectionQuotas:
    max_connections: int
    max_per_ip: int
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    inter_broker_listener: str | None = None
    listeners: frozenset[str] = frozenset()
    per_ip: Counter[str] = field(default_factory=Counter)
    total: int = 0

    @classmethod
    def from_config(cls, config, listeners: list[str]) -> "ConnectionQuotas":
        """The overrides' host names are resolved once, at start-up, as Kafka's ``InetAddress.getByName``."""
        overrides = {_address(host): count for host, count in parse_overrides(config["max.connections.per.ip.overrides"]).items()}
        if config["max.connections.per.ip"] == 0 and not overrides:
            raise ConfigError("Value must be greater than 0 for configuration max.connections.per.ip unless max.connections.per.ip.overrides is set")
        inter_broker = config["inter.broker.listener.name"] or DEFAULT_INTER_BROKER_LISTENER
        return cls(config["max.connections"], config["max.connections.per.ip"], overrides, inter_broker, frozenset(listeners))

    def slot_available(self, listener: str) -> bool:
        """May the listener accept another connection now (``max.connections``)?"""
        if listener == self.inter_broker_listener and len(self.listeners) > 1:
            return True
        return self.total < self.max_connections

    def open(self, ip: str) -> int | None:
        """Count a new connection from ``ip``; None if it may stay, else the maximum its address already has
        (then it is not counted: the caller closes it)."""
        limit = self.per_ip_overrides.get(ip, self.max_per_ip)
        if self.per_ip[ip] >= limit:
            return limit
        self.per_ip[ip] += 1
        self.total += 1
        return None

    def close(self, ip: str) -> None:
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]
        self.total -= 1


def _address(host: str) -> str:
    try:
        return socket.getaddrinfo(host, None)[0][4][0]
    except OSError as exc:
        raise ConfigError(f"max.connections.per.ip.overrides: cannot resolve {host}: {exc}") from None
