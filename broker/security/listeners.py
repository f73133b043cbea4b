"""What each listener speaks: its security protocol (``listener.security.protocol.map``), its TLS settings
and its SASL mechanisms, checked at start-up as Kafka's ``KafkaConfig`` checks them."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from odradek.broker.config import BrokerConfig
from odradek.protocol.values import FrozenFields
from odradek.storage.config_types import ConfigError

if TYPE_CHECKING:
    from odradek.broker.security.oauthbearer import TokenValidator
    from odradek.broker.security.sasl_authenticator import SaslSettings
    from odradek.broker.security.sasl_mechanism import JaasConfig, SaslServer
    from odradek.broker.security.scram import CredentialStore
    from odradek.broker.security.tls import TlsSettings

# The TLS and SASL modules are imported by the listener that needs them: a broker with PLAINTEXT listeners
# only (every single node by default) never loads them.

log = logging.getLogger("odradek.config")

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


class ListenerSecurity(FrozenFields):
    __slots__ = _FIELDS = ("name", "security_protocol", "tls", "sasl")
    name: str
    security_protocol: str
    tls: TlsSettings | None
    sasl: SaslSettings | None

    def __init__(self, name: str, security_protocol: str, tls: TlsSettings | None = None, sasl: SaslSettings | None = None) -> None:
        self._set(name, security_protocol, tls, sasl)


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


def inter_broker_protocol(config: BrokerConfig) -> tuple[str, str]:
    """The inter-broker listener (:func:`inter_broker_listener`) and its security protocol."""
    mapping = security_protocol_map(config)
    listener = inter_broker_listener(config, mapping)
    return listener, mapping[listener]


def jaas_config(config: BrokerConfig, listener: str, mechanism: str) -> JaasConfig | None:
    """Kafka's ``JaasContext.loadServerContext``: ``listener.name.<listener>.<mechanism>.sasl.jaas.config``,
    else ``<mechanism>.sasl.jaas.config``. A broker ignores a bare ``sasl.jaas.config`` (a client's key),
    with Kafka's warning; Kafka's static JAAS file (``java.security.auth.login.config``) is not read."""
    key = f"{mechanism.lower()}.sasl.jaas.config"
    from odradek.broker.security.sasl_mechanism import parse_jaas

    text = config.originals.get(f"listener.name.{listener.lower()}.{key}") or config.originals.get(key)
    if not text:
        if config.originals.get("sasl.jaas.config"):
            log.warning("Server config sasl.jaas.config should be prefixed with SASL mechanism name, ignoring config")
        return None
    try:
        return parse_jaas(text)
    except ValueError as exc:
        raise ConfigError(f"Listener {listener}: invalid sasl.jaas.config for {mechanism}: {exc}") from None


def _mechanism_server(config: BrokerConfig, listener: str, mechanism: str, credentials: CredentialStore) -> Callable[[], SaslServer]:
    """How to make the server side of one enabled mechanism, checking its configuration now."""
    from odradek.broker.security.oauthbearer import OAUTHBEARER, OAuthBearerServer
    from odradek.broker.security.plain import PLAIN, PlainServer
    from odradek.broker.security.scram import SCRAM_MECHANISMS, ScramServer

    if mechanism in SCRAM_MECHANISMS:
        scram = SCRAM_MECHANISMS[mechanism]
        return lambda: ScramServer(scram, credentials)
    if mechanism == "GSSAPI":
        return _gssapi_server(config, listener)
    if mechanism not in (PLAIN, OAUTHBEARER):
        raise ConfigError(
            f"Listener {listener}: SASL mechanism {mechanism} is not implemented by odradek (it implements "
            f"{', '.join((PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER, 'GSSAPI'))}): set sasl.enabled.mechanisms"
        )
    jaas = jaas_config(config, listener, mechanism)
    if jaas is None:
        raise ConfigError(
            f"Listener {listener}: no JAAS configuration for SASL mechanism {mechanism}: set "
            f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config (or {mechanism.lower()}.sasl.jaas.config)"
        )
    options = jaas.options
    if mechanism == PLAIN:
        return lambda: PlainServer(options)
    validator = _oauthbearer_validator(config, listener, options)
    return lambda: OAuthBearerServer(validator)


def _gssapi_server(config: BrokerConfig, listener: str) -> Callable[[], SaslServer]:
    """Kerberos: the keytab and principal of the listener's ``Krb5LoginModule`` entry, and the principal
    mapping rules, checked now (the GSS-API library is loaded here, for a GSSAPI listener only)."""
    from odradek.broker.security.gssapi import Acceptor, GssapiServer, KerberosName, default_realm, parse_rules
    from odradek.broker.security.sasl_mechanism import SaslError

    jaas = jaas_config(config, listener, "GSSAPI")
    options = jaas.options if jaas is not None else {}
    if options.get("useKeyTab", "").lower() != "true" or "keyTab" not in options or "principal" not in options:
        raise ConfigError(
            f"Listener {listener}: {'no JAAS configuration' if jaas is None else 'no keytab'} for SASL mechanism GSSAPI: set "
            f"listener.name.{listener.lower()}.gssapi.sasl.jaas.config to "
            'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="..." principal="...";'
        )
    try:
        KerberosName.parse(options["principal"])
        rules = parse_rules(config.list_for_listener(listener, "sasl.kerberos.principal.to.local.rules"))
    except ValueError as exc:
        raise ConfigError(f"Listener {listener}: {exc}") from None
    acceptor = Acceptor(options["keyTab"], options["principal"])
    try:
        acceptor.check()  # refused at start, not at the first client
    except (OSError, SaslError) as exc:
        raise ConfigError(f"Listener {listener}: {exc}") from None
    realm = default_realm()
    return lambda: GssapiServer(acceptor, rules, realm)


def _oauthbearer_validator(config: BrokerConfig, listener: str, jaas_options: dict[str, str]) -> TokenValidator:
    """The listener's ``[listener.name.<l>.]oauthbearer.sasl.server.callback.handler.class``: Kafka's
    secured validator (JWKS) when named, else the unsecured one Kafka defaults to."""
    from odradek.broker.security.oauthbearer import UnsecuredValidator

    setting = lambda key: config.str_for_listener(listener, key, prefix="oauthbearer.")  # noqa: E731
    handler = setting("sasl.server.callback.handler.class")
    if not handler:
        return UnsecuredValidator(jaas_options)
    from odradek.broker.security.oauthbearer_jwks import VALIDATOR_CLASSES, JwksValidator, JwksValidatorSettings

    if handler not in VALIDATOR_CLASSES:
        raise ConfigError(f"Listener {listener}: OAUTHBEARER sasl.server.callback.handler.class {handler} is not implemented by odradek (it implements {', '.join(VALIDATOR_CLASSES)})")
    jwks_url = setting("sasl.oauthbearer.jwks.endpoint.url")
    if not jwks_url:
        raise ConfigError("The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url must be non-null")
    settings = JwksValidatorSettings(
        jwks_url=jwks_url,
        clock_skew_seconds=config.int_for_listener(listener, "sasl.oauthbearer.clock.skew.seconds", prefix="oauthbearer."),
        expected_audience=tuple(config.list_for_listener(listener, "sasl.oauthbearer.expected.audience", prefix="oauthbearer.")),
        expected_issuer=setting("sasl.oauthbearer.expected.issuer"),
        scope_claim_name=setting("sasl.oauthbearer.scope.claim.name") or "",
        sub_claim_name=setting("sasl.oauthbearer.sub.claim.name") or "",
        refresh_ms=config.int_for_listener(listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms", prefix="oauthbearer."),
        retry_backoff_ms=config.int_for_listener(listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", prefix="oauthbearer."),
        retry_backoff_max_ms=config.int_for_listener(listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", prefix="oauthbearer."),
        jaas_options=dict(jaas_options),
    )
    try:
        return JwksValidator(settings)  # imports PyJWT, which comes with the tls extra, like cryptography
    except ModuleNotFoundError as exc:
        if exc.name != "jwt":
            raise
        raise ConfigError(f"Listener {listener}: OAUTHBEARER sasl.server.callback.handler.class {handler} needs the PyJWT package (pip install 'odradek[tls]')") from None


def sasl_settings(config: BrokerConfig, listener: str, credentials: CredentialStore) -> SaslSettings:
    from odradek.broker.security.sasl_authenticator import SaslSettings

    enabled = config.list_for_listener(listener, "sasl.enabled.mechanisms")
    if not enabled:
        raise ConfigError(f"Listener {listener}: sasl.enabled.mechanisms is empty")
    return SaslSettings(
        enabled,
        {m: _mechanism_server(config, listener, m, credentials) for m in enabled},
        {m: config.int_for_listener(listener, "connections.max.reauth.ms", prefix=f"{m.lower()}.") for m in enabled},
        config["connection.failed.authentication.delay.ms"],
        config.int_for_listener(listener, "sasl.server.max.receive.size"),
    )


def tls_setting(config: BrokerConfig, listener: str, key: str, sasl: bool) -> "str | list[str] | None":
    """A listener's TLS key; on SASL_SSL, ``ssl.client.auth`` only listener-prefixed, as in Kafka (clients
    authenticate with SASL there; the broker-wide value is for SSL listeners)."""
    if sasl and key == "ssl.client.auth" and f"listener.name.{listener.lower()}.{key}" not in config.originals:
        if config["ssl.client.auth"] != "none":
            log.warning(
                "Broker configuration 'ssl.client.auth' is applied only to SSL listeners. Listener-prefixed configuration can be used "
                "to enable SSL client authentication for SASL_SSL listeners."
            )
        return "none"
    value = config.for_listener(listener, key)
    if isinstance(value, (int, float)):  # bool is an int
        raise TypeError(f"{key} is not a TLS key (its value: {value!r})")
    return value


def listener_securities(config: BrokerConfig, credentials: CredentialStore) -> dict[str, ListenerSecurity]:
    """Every listener's security, or ConfigError naming what is wrong (the broker refuses to start)."""
    mapping = security_protocol_map(config)
    securities: dict[str, ListenerSecurity] = {}
    for listener in config.listeners + config.advertised_listeners:
        if listener.name not in mapping:
            raise ConfigError(f"No security protocol defined for listener {listener.name}")
    inter_broker = inter_broker_listener(config, mapping)
    names = [l.name for l in config.listeners]
    advertised = [l.name for l in config.advertised_listeners]
    if not set(advertised) <= set(names):
        raise ConfigError(
            "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners. "
            f"Found {','.join(advertised)}. The valid options based on the current configuration are {','.join(names)}"
        )
    if mapping[inter_broker] in SASL_PROTOCOLS:
        mechanism = config["sasl.mechanism.inter.broker.protocol"]
        if mechanism not in config.list_for_listener(inter_broker, "sasl.enabled.mechanisms"):
            raise ConfigError("sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for inter-broker communication")
    for listener in config.listeners:
        protocol = mapping[listener.name]
        tls = None
        if protocol in TLS_PROTOCOLS:
            from odradek.broker.security.ssl_principal import SslPrincipalMapper
            from odradek.broker.security.tls import TlsSettings, server_context

            setting = lambda key, name=listener.name, sasl=protocol == "SASL_SSL": tls_setting(config, name, key, sasl)  # noqa: E731
            rules = config.str_for_listener(listener.name, "ssl.principal.mapping.rules")
            tls = TlsSettings(server_context(setting, listener.name), SslPrincipalMapper("DEFAULT" if rules is None else rules))
        sasl = sasl_settings(config, listener.name, credentials) if protocol in SASL_PROTOCOLS else None
        securities[listener.name] = ListenerSecurity(listener.name, protocol, tls, sasl)
    return securities
