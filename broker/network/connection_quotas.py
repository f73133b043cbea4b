"""Connection limits (Kafka's ``ConnectionQuotas``), sans-IO: the socket server asks before taking a
connection and tells when one closes.

``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``, ``host:count`` pairs): a connection
from an address that already has its maximum is accepted and closed at once. ``max.connections``: when
the broker has that many, the listener stops accepting until one closes; the inter-broker listener is
exempt when there are other listeners, so brokers can always reach each other.

Creation rates, measured as Kafka's quotas are (``quota.window.num`` samples of ``quota.window.size.seconds``):
``max.connection.creation.rate`` (broker-wide, the inter-broker listener exempt) and its per-listener
``listener.name.<l>.max.connection.creation.rate`` delay accepting (the listener's acceptor waits the throttle
time, at most one window); an address over its ``connection_creation_rate`` quota (``kafka-configs.sh
--entity-type ips``) has the connection accepted and closed once its throttle time has passed, uncounted.
"""

from __future__ import annotations

import socket
from collections import Counter
from typing import Callable

from odradek.broker.quotas import INT_MAX, Rate
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


class CreationRate:
    """One connection creation rate limit and its measured rate (Kafka's connection rate sensor)."""

    def __init__(self, bound: float, rate: Rate) -> None:
        self.bound = bound
        self.rate = rate

    def record(self, now_ms: int) -> int:
        """Count a connection; the time to wait to be back within the bound (Kafka's throttle time)."""
        self.rate.record(1.0, now_ms)
        measured = self.rate.measure(now_ms)
        if measured <= self.bound:
            return 0
        return round((measured - self.bound) / self.bound * self.rate.window_size_ms(now_ms))

    def unrecord(self, now_ms: int) -> None:
        self.rate.record(-1.0, now_ms)


class ConnectionQuotas:
    def __init__(
        self,
        max_connections: int,
        max_per_ip: int,
        per_ip_overrides: dict[str, int] | None = None,
        inter_broker_listener: str | None = None,
        listeners: frozenset[str] = frozenset(),
        *,
        broker_rate: Callable[[], int] = lambda: INT_MAX,
        listener_rates: dict[str, float] | None = None,
        ip_rate: Callable[[str], int | None] = lambda ip: None,
        samples: int = 11,
        window_ms: int = 1000,
    ) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = per_ip_overrides if per_ip_overrides is not None else {}
        self.inter_broker_listener = inter_broker_listener
        self.listeners = listeners
        self.per_ip: Counter[str] = Counter()
        self.total = 0
        self.broker_rate = broker_rate
        """``max.connection.creation.rate`` as the broker runs with it now (it is a dynamic broker config)."""
        self.listener_rates = listener_rates if listener_rates is not None else {}
        self.ip_rate = ip_rate
        """An address's ``connection_creation_rate`` quota, if it (or the default ips entity) has one."""
        self.samples = samples
        self.window_ms = window_ms
        self.rates: dict[tuple[str, str], CreationRate] = {}
        """The measured rates: ("broker", ""), ("listener", name), ("ip", address)."""

    @classmethod
    def from_config(
        cls, config, listeners: list[str], ip_rate: Callable[[str], int | None] = lambda ip: None, broker_rate: Callable[[], int] | None = None
    ) -> "ConnectionQuotas":
        """The overrides' host names are resolved once, at start-up, as Kafka's ``InetAddress.getByName``."""
        overrides = {_address(host): count for host, count in parse_overrides(config["max.connections.per.ip.overrides"]).items()}
        if config["max.connections.per.ip"] == 0 and not overrides:
            raise ConfigError("Value must be greater than 0 for configuration max.connections.per.ip unless max.connections.per.ip.overrides is set")
        inter_broker = config["inter.broker.listener.name"] or DEFAULT_INTER_BROKER_LISTENER
        return cls(
            config["max.connections"], config["max.connections.per.ip"], overrides, inter_broker, frozenset(listeners),
            broker_rate=broker_rate or (lambda: config["max.connection.creation.rate"]),
            listener_rates={name: config.int_for_listener(name, "max.connection.creation.rate") for name in listeners},
            ip_rate=ip_rate,
            samples=config["quota.window.num"],
            window_ms=config["quota.window.size.seconds"] * 1000,
        )

    def _protected(self, listener: str) -> bool:
        """The inter-broker listener, when there are others: brokers can always reach each other."""
        return listener == self.inter_broker_listener and len(self.listeners) > 1

    def slot_available(self, listener: str) -> bool:
        """May the listener accept another connection now (``max.connections``)?"""
        if self._protected(listener):
            return True
        return self.total < self.max_connections

    def _rate(self, kind: str, name: str, bound: float) -> CreationRate:
        limit = self.rates.get((kind, name))
        if limit is None:
            limit = self.rates[(kind, name)] = CreationRate(bound, Rate(self.samples, self.window_ms))
        limit.bound = bound
        return limit

    def _accept_rates(self, listener: str) -> list[CreationRate]:
        limits = [self._rate("listener", listener, self.listener_rates.get(listener, INT_MAX))]
        return limits if self._protected(listener) else [self._rate("broker", "", self.broker_rate()), *limits]

    def accept_throttle_ms(self, listener: str, now_ms: int) -> int:
        """Count a connection the listener accepted against the broker's and the listener's creation rates;
        how long the listener must wait before accepting more (at most one quota window, as Kafka's)."""
        return min(max(limit.record(now_ms) for limit in self._accept_rates(listener)), self.window_ms)

    def ip_throttle_ms(self, listener: str, ip: str, now_ms: int) -> int:
        """Count a connection from ``ip`` against its ``connection_creation_rate``; over it, the time after
        which it is closed, and the connection is taken back from every rate (it is not served)."""
        bound = self.ip_rate(ip)
        if bound is None:
            return 0
        limit = self._rate("ip", ip, bound)
        throttle_ms = min(limit.record(now_ms), self.window_ms)
        if throttle_ms > 0:
            for counted in (limit, *self._accept_rates(listener)):
                counted.unrecord(now_ms)
        return throttle_ms

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
        return str(socket.getaddrinfo(host, None)[0][4][0])  # an IP address (typeshed: str | int)
    except OSError as exc:
        raise ConfigError(f"max.connections.per.ip.overrides: cannot resolve {host}: {exc}") from None
