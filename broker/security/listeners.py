"""What each listener speaks: its security protocol (``listener.security.protocol.map``), its TLS settings
and its SASL mechanisms, checked at start-up as Kafka's ``KafkaConfig`` checks them."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.broker.config import BrokerConfig
from odradek.broker.security.ssl_principal import SslPrincipalMapper
from odradek.broker.security.tls import TlsSettings, server_context
from odradek.storage.config_types import ConfigError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    security_protocol: str
    tls: TlsSettings | None = None


def security_protocol_map(config: BrokerConfig) -> dict[str, str]:
    value = config["listener.security.protocol.map"]
    mapping: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in value.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid value {value} for configuration listener.security.protocol.map: {item!r} is not LISTENER_NAME:SECURITY_PROTOCOL")
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def inter_broker_listener(config: BrokerConfig, mapping: dict[str, str]) -> str:
    """Kafka's ``interBrokerListenerName``: inter.broker.listener.name, or the listener named after
    security.inter.broker.protocol; either way one of advertised.listeners."""
    if config.is_set("inter.broker.listener.name") and config.is_set("security.inter.broker.protocol"):
        raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
    name = (config["inter.broker.listener.name"] or config["security.inter.broker.protocol"]).upper()
    advertised = [l.name for l in config.advertised_listeners]
    if name not in advertised:
        raise ConfigError(
            "inter.broker.listener.name must be a listener name defined in advertised.listeners. "
            f"The valid options based on currently configured listeners are {','.join(advertised)}"
        )
    return name


def listener_securities(config: BrokerConfig) -> dict[str, ListenerSecurity]:
    """Every listener's security, or ConfigError naming what is wrong (the broker refuses to start)."""
    mapping = security_protocol_map(config)
    securities: dict[str, ListenerSecurity] = {}
    for listener in config.listeners + config.advertised_listeners:
        if listener.name not in mapping:
            raise ConfigError(f"No security protocol defined for listener {listener.name}")
    inter_broker_listener(config, mapping)
    for listener in config.listeners:
        protocol = mapping[listener.name]
        tls = None
        if protocol in TLS_PROTOCOLS:
            setting = lambda key, name=listener.name: config.for_listener(name, key)  # noqa: E731
            tls = TlsSettings(server_context(setting, listener.name), SslPrincipalMapper(setting("ssl.principal.mapping.rules")))
        if protocol.startswith("SASL_"):
            raise ConfigError(
                f"Listener {listener.name}://{listener.host}:{listener.port} uses security protocol {protocol}, which odradek "
                "does not implement yet: refusing to serve it unauthenticated"
            )
        securities[listener.name] = ListenerSecurity(listener.name, protocol, tls)
    return securities
