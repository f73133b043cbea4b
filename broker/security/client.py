"""How the broker's own connections authenticate: the security of the inter-broker listener (Kafka's
``inter.broker.listener.name`` / ``security.inter.broker.protocol``), with TLS verified against the
truststore and SASL with ``sasl.mechanism.inter.broker.protocol`` and the ``username``/``password``
options of that listener's JAAS configuration, as Kafka's brokers log in to each other; and the security
of odradek's admin tools, from Kafka's client properties."""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Mapping

from odradek.broker.config import BrokerConfig
from odradek.protocol.values import FrozenFields
from odradek.broker.security.listeners import SASL_PROTOCOLS, TLS_PROTOCOLS, inter_broker_protocol, jaas_config, tls_setting
from odradek.storage.config_types import ConfigError

if TYPE_CHECKING:
    from odradek.broker.security.gssapi import KerberosLogin
    from odradek.broker.security.oauthbearer import OAuthBearerLogin
    from odradek.broker.security.sasl_client import SaslClient
    from odradek.broker.security.tls import TlsSetting

# The TLS and SASL modules are imported where a connection needs them: a broker whose inter-broker
# listener is PLAINTEXT (every single node) never loads them.


class ClientSecurity(FrozenFields):
    __slots__ = _FIELDS = ("security_protocol", "ssl_context", "mechanism", "username", "password", "token_auth", "kerberos", "oauth")
    security_protocol: str
    ssl_context: ssl.SSLContext | None
    mechanism: str | None
    username: str
    password: str
    token_auth: bool
    """SCRAM as a delegation token (the JAAS option ``tokenauth="true"``: the username is the token id, the
    password its HMAC)."""
    kerberos: "KerberosLogin | None"
    """GSSAPI: the keytab and principal (or the ticket cache) and the brokers' service name."""
    oauth: "OAuthBearerLogin | None"
    """OAUTHBEARER: where the token comes from."""

    def __init__(
        self, security_protocol: str = "PLAINTEXT", ssl_context: ssl.SSLContext | None = None, mechanism: str | None = None, username: str = "", password: str = "",
        token_auth: bool = False, kerberos: "KerberosLogin | None" = None, oauth: "OAuthBearerLogin | None" = None,
    ) -> None:
        self._set(security_protocol, ssl_context, mechanism, username, password, token_auth, kerberos, oauth)

    def sasl_client(self, host: str) -> SaslClient | None:
        """The SASL client of a connection to ``host`` (GSSAPI asks for the service's principal on that host)."""
        if not self.mechanism:
            return None
        if self.kerberos is not None:
            return self.kerberos.client(host)
        if self.oauth is not None:
            return self.oauth.client()
        from odradek.broker.security.sasl_client import sasl_client

        return sasl_client(self.mechanism, self.username, self.password, token_auth=self.token_auth)


PLAINTEXT = ClientSecurity()


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    listener, protocol = inter_broker_protocol(config)
    context = _client_context(lambda key: tls_setting(config, listener, key, sasl=False), listener) if protocol in TLS_PROTOCOLS else None
    if protocol not in SASL_PROTOCOLS:
        return ClientSecurity(protocol, context)
    mechanism = _client_mechanism(config["sasl.mechanism.inter.broker.protocol"], "sasl.mechanism.inter.broker.protocol")
    jaas = jaas_config(config, listener, mechanism)
    options = jaas.options if jaas is not None else {}
    if mechanism == "GSSAPI":
        return ClientSecurity(protocol, context, mechanism, kerberos=_kerberos_login(options, config["sasl.kerberos.service.name"], f"listener.name.{listener.lower()}.gssapi.sasl.jaas.config"))
    if mechanism == "OAUTHBEARER":
        setting = lambda key: config.str_for_listener(listener, key, prefix="oauthbearer.")  # noqa: E731
        return ClientSecurity(protocol, context, mechanism, oauth=_oauth_login(options, setting("sasl.login.callback.handler.class"), setting("sasl.oauthbearer.token.endpoint.url")))
    if "username" not in options or "password" not in options:
        raise ConfigError(
            f"Listener {listener}: inter-broker SASL/{mechanism} needs the broker's own username and password in "
            f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        )
    return _sasl_security(protocol, context, mechanism, options)


def _sasl_security(protocol: str, context: ssl.SSLContext | None, mechanism: str, jaas_options: Mapping[str, str]) -> ClientSecurity:
    token_auth = jaas_options.get("tokenauth", "").lower() == "true"
    return ClientSecurity(protocol, context, mechanism, jaas_options["username"], jaas_options["password"], token_auth)


def _kerberos_login(jaas_options: Mapping[str, str], service_name: str | None, key: str) -> "KerberosLogin":
    """Kafka's ``KerberosLogin``: the service name from the JAAS entry's ``serviceName`` or
    ``sasl.kerberos.service.name``; the keytab and principal with ``useKeyTab=true``, else the ticket cache."""
    from odradek.broker.security.gssapi import KerberosLogin

    service = jaas_options.get("serviceName") or service_name
    if not service:
        raise ConfigError("No serviceName defined in either JAAS or Kafka config")
    if jaas_options.get("useKeyTab", "").lower() == "true":
        if "keyTab" not in jaas_options or "principal" not in jaas_options:
            raise ConfigError(f"{key}: useKeyTab=true needs keyTab and principal")
        return KerberosLogin(service, jaas_options["keyTab"], jaas_options["principal"])
    return KerberosLogin(service)


def _oauth_login(jaas_options: Mapping[str, str], login_handler: str | None, token_endpoint: str | None) -> "OAuthBearerLogin":
    """Kafka's ``OAuthBearerLoginModule`` client side: its secured handler with a ``file:`` token endpoint,
    else the unsecured login (which needs its principal claim: checked now, as Kafka's login at start)."""
    from urllib.parse import unquote, urlparse

    from odradek.broker.security.oauthbearer import LOGIN_HANDLER_CLASSES, OAuthBearerLogin

    if login_handler:
        if login_handler not in LOGIN_HANDLER_CLASSES:
            raise ConfigError(f"sasl.login.callback.handler.class {login_handler} is not implemented by odradek's client (it implements {LOGIN_HANDLER_CLASSES[0]})")
        parsed = urlparse(token_endpoint or "")
        scheme = parsed.scheme.lower()
        if scheme == "file":
            return OAuthBearerLogin(tuple(jaas_options.items()), token_file=unquote(parsed.path))
        if scheme not in ("http", "https"):
            raise ConfigError(f"sasl.oauthbearer.token.endpoint.url {token_endpoint}: a file:, http: or https: URL is needed")
        return OAuthBearerLogin(tuple(jaas_options.items()), token_endpoint=token_endpoint)
    login = OAuthBearerLogin(tuple(jaas_options.items()))
    try:
        login.token()
    except ValueError as exc:
        raise ConfigError(f"OAUTHBEARER login: {exc}") from None
    return login


def _client_context(setting: "TlsSetting", name: str) -> ssl.SSLContext:
    """The TLS context of a connection to a TLS listener (the tls module is imported for one only)."""
    from odradek.broker.security.tls import client_context

    return client_context(setting, name)


def _client_mechanism(mechanism: str, key: str) -> str:
    """A mechanism odradek's client can log in with, or ConfigError naming the setting."""
    from odradek.broker.security.plain import PLAIN
    from odradek.broker.security.scram import SCRAM_MECHANISMS

    if mechanism not in (PLAIN, "GSSAPI", "OAUTHBEARER") and mechanism not in SCRAM_MECHANISMS:
        raise ConfigError(f"{key} {mechanism}: odradek's client implements GSSAPI, OAUTHBEARER, PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512")
    return mechanism


CLIENT_DEFAULTS = {"security.protocol": "PLAINTEXT", "sasl.mechanism": "GSSAPI", "ssl.endpoint.identification.algorithm": "https"}
"""Kafka's client defaults for the keys that choose how a client connects."""


def client_security(properties: Mapping[str, str]) -> ClientSecurity:
    """A client's security from Kafka's client properties (an admin tool's ``--command-config`` file):
    ``security.protocol``, ``ssl.truststore.*``/``ssl.keystore.*`` and ``ssl.endpoint.identification.algorithm``
    for TLS, ``sasl.mechanism`` with the ``username``/``password`` of ``sasl.jaas.config`` (PLAIN and SCRAM:
    the mechanisms odradek's client speaks)."""
    setting = lambda key: properties.get(key, CLIENT_DEFAULTS.get(key))  # noqa: E731
    protocol = str(setting("security.protocol")).upper()
    if protocol not in ("PLAINTEXT", *TLS_PROTOCOLS, *SASL_PROTOCOLS):
        raise ConfigError(f"Invalid value {protocol} for configuration security.protocol")
    context = _client_context(setting, "client") if protocol in TLS_PROTOCOLS else None
    if protocol not in SASL_PROTOCOLS:
        return ClientSecurity(protocol, context)
    mechanism = _client_mechanism(str(setting("sasl.mechanism")), "sasl.mechanism")
    from odradek.broker.security.sasl_mechanism import parse_jaas

    try:
        options = parse_jaas(properties.get("sasl.jaas.config", "")).options
    except ValueError as exc:
        raise ConfigError(f"Invalid sasl.jaas.config: {exc}") from None
    if mechanism == "GSSAPI":
        return ClientSecurity(protocol, context, mechanism, kerberos=_kerberos_login(options, properties.get("sasl.kerberos.service.name"), "sasl.jaas.config"))
    if mechanism == "OAUTHBEARER":
        return ClientSecurity(protocol, context, mechanism, oauth=_oauth_login(options, properties.get("sasl.login.callback.handler.class"), properties.get("sasl.oauthbearer.token.endpoint.url")))
    if "username" not in options or "password" not in options:
        raise ConfigError(f"sasl.jaas.config for {mechanism} needs username and password")
    return _sasl_security(protocol, context, mechanism, options)
