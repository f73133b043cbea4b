"""How the broker's own connections authenticate: the security of the inter-broker listener (Kafka's
``inter.broker.listener.name`` / ``security.inter.broker.protocol``), with TLS verified against the
truststore and SASL with ``sasl.mechanism.inter.broker.protocol`` and the ``username``/``password``
options of that listener's JAAS configuration, as Kafka's brokers log in to each other."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from odradek.broker.config import BrokerConfig
from odradek.broker.security.listeners import SASL_PROTOCOLS, TLS_PROTOCOLS, inter_broker_listener, jaas_config, security_protocol_map
from odradek.broker.security.sasl_client import SaslClient, sasl_client
from odradek.broker.security.tls import client_context
from odradek.storage.config_types import ConfigError


@dataclass(frozen=True)
class ClientSecurity:
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    def sasl_client(self) -> SaslClient | None:
        return sasl_client(self.mechanism, self.username, self.password) if self.mechanism else None


PLAINTEXT = ClientSecurity()


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    mapping = security_protocol_map(config)
    listener = inter_broker_listener(config, mapping)
    protocol = mapping[listener]
    context = client_context(lambda key: config.for_listener(listener, key), listener) if protocol in TLS_PROTOCOLS else None
    if protocol not in SASL_PROTOCOLS:
        return ClientSecurity(protocol, context)
    mechanism = config["sasl.mechanism.inter.broker.protocol"]
    jaas = jaas_config(config, listener, mechanism)
    options = jaas.options if jaas is not None else {}
    if "username" not in options or "password" not in options:
        raise ConfigError(
            f"Listener {listener}: inter-broker SASL/{mechanism} needs the broker's own username and password in "
            f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        )
    return ClientSecurity(protocol, context, mechanism, options["username"], options["password"])
