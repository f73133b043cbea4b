"""Dynamic broker configuration (Kafka's ``DynamicBrokerConfig``): broker keys changed at run time.

Kafka keeps two levels of dynamic broker configs beside ``server.properties``: per broker (AlterConfigs on
the BROKER resource named by the broker id, ZooKeeper's ``/config/brokers/<id>``) and cluster-wide defaults
(the BROKER resource with an empty name, ``/config/brokers/<default>``). A key's value comes from the first
level that sets it -- per broker, cluster default, ``server.properties``, Kafka's default -- which is the
order DescribeConfigs lists its synonyms in. odradek's embedded controller stores both levels with the rest
of the cluster metadata, so they survive a restart.

Which keys may change is Kafka 3.9's ``DynamicBrokerConfig.AllDynamicConfigs``, with Kafka's rules by level:
the topic defaults (only the first broker synonym of each topic key: ``log.retention.ms`` but not
``log.retention.hours``), the log cleaner's, thread pools', connection limits', producer state's,
metrics reporters' and tiered storage's keys at either level; the listener, SSL and SASL keys per broker
only; the SSL store keys only under a listener prefix (``listener.name.<listener>.<key>``, checked by its
base key's type). The topic defaults and ``max.connection.creation.rate`` are acted on at once (every topic
without an override of its own follows the topic defaults); the others are stored and described only:
odradek has no such threads or buffers to resize, and its listeners, their TLS and SASL settings and its
connection limits are set at start-up (compat-tests/README.md).
Keys Kafka does not know are custom configs: accepted and stored, never described, as in Kafka.
"""

from __future__ import annotations

import logging
import re
from typing import Mapping

from odradek.broker.config import BROKER_KEYS, IGNORED_PREFIXES, BrokerConfig
from odradek.storage.config_types import ConfigError, ConfigKey, ConfigType
from odradek.storage.log_config import TOPIC_CONFIG, LogConfig

# DescribeConfigs ConfigSource values of the two dynamic levels (storage.log_config has the others).
SOURCE_DYNAMIC_BROKER = 2  # DYNAMIC_BROKER_CONFIG
SOURCE_DYNAMIC_DEFAULT_BROKER = 3  # DYNAMIC_DEFAULT_BROKER_CONFIG

log = logging.getLogger("odradek.config")

DEFAULT_ENTITY = "<default>"
"""The name ZooKeeper mode stores cluster-wide broker defaults under (``/config/brokers/<default>``)."""

NON_RECONFIGURABLE_LOG_CONFIGS = frozenset({"message.format.version"})
"""Kafka's DynamicLogConfig.NonReconfigrableLogConfigs (topic key names)."""

DYNAMIC_LOG_KEYS: dict[str, ConfigKey] = {
    key.synonyms[0].name: BROKER_KEYS.get(key.synonyms[0].name)
    or ConfigKey(key.synonyms[0].name, key.type, key.default, key.doc, at_least=key.at_least, valid=key.valid)
    for key in TOPIC_CONFIG
    if key.synonyms and key.name not in NON_RECONFIGURABLE_LOG_CONFIGS
}
"""DynamicLogConfig.ReconfigurableConfigs: the primary broker synonym of each topic key, acted on at once."""

THREAD_POOL_CONFIGS = ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads")
"""Kafka's DynamicThreadPool.ReconfigurableConfigs: a new count must stay within half and double the current."""

DYNAMIC_SECURITY_CONFIGS = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.certificates",
)
"""SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only under a listener prefix (``listener.name.<l>.``)."""

LISTENER_CONFIGS = (
    "advertised.listeners", "listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation", "ssl.client.auth",
    "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms", "sasl.kerberos.service.name",
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
    "max.connections", "max.connection.creation.rate", "num.network.threads",
)
"""DynamicListenerConfig.ReconfigurableConfigs. Only per broker (refused as cluster defaults), except
:data:`CLUSTER_LEVEL_LISTENER_CONFIGS`."""

CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
"""DynamicBrokerConfig.ClusterLevelListenerConfigs: listener keys that may also be cluster defaults."""

PER_BROKER_CONFIGS = frozenset(DYNAMIC_SECURITY_CONFIGS + LISTENER_CONFIGS) - CLUSTER_LEVEL_LISTENER_CONFIGS
"""DynamicBrokerConfig.PerBrokerConfigs."""

OTHER_DYNAMIC_CONFIGS = (
    # LogCleaner.ReconfigurableConfigs (message.max.bytes is a topic default above)
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
    # SocketServer.ReconfigurableConfigs
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    # DynamicProducerStateManagerConfig
    "producer.id.expiration.ms",
    "transaction.partition.verification.enable",
    # DynamicMetricsReporters
    "metric.reporters",
    # DynamicRemoteLogConfig.ReconfigurableConfigs
    "remote.log.index.file.cache.total.size.bytes",
    "remote.fetch.max.wait.ms",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.fetch.max.bytes.per.second",
)

DYNAMIC_KEYS: dict[str, ConfigKey] = {
    **DYNAMIC_LOG_KEYS,
    **{name: BROKER_KEYS[name] for name in THREAD_POOL_CONFIGS + DYNAMIC_SECURITY_CONFIGS + LISTENER_CONFIGS + OTHER_DYNAMIC_CONFIGS},
}
"""Kafka 3.9's DynamicBrokerConfig.AllDynamicConfigs: every broker key AlterConfigs may change (DescribeConfigs
reports the others read-only). Those odradek acts on at run time: the topic defaults and
``max.connection.creation.rate``; the others are stored and described only (docs/operations.md)."""

DYNAMIC_PASSWORD_CONFIGS = tuple(name for name, key in DYNAMIC_KEYS.items() if key.type is ConfigType.PASSWORD)
"""DynamicBrokerConfig.DynamicPasswordConfigs: Kafka stores them encrypted with ``password.encoder.secret``."""

LISTENER_CONFIG = r"listener\.name\.[^.]*\.(.*)"
"""DynamicBrokerConfig.ListenerConfigRegex: a listener's own value of a key (``listener.name.<l>.<key>``),
compiled by ``re``'s cache at its first use (a start with no dynamic configs has none)."""


def listener_base(name: str) -> str | None:
    """The key a listener-prefixed name overrides; None for any other name."""
    found = re.fullmatch(LISTENER_CONFIG, name)
    return found.group(1) if found else None


def _synonyms_of() -> dict[str, tuple[str, ...]]:
    """Kafka's brokerConfigSynonyms: broker keys naming one setting in different units, most specific first."""
    return {s.name: tuple(x.name for x in key.synonyms) for key in TOPIC_CONFIG if len(key.synonyms) > 1 for s in key.synonyms}


BROKER_SYNONYMS: dict[str, tuple[str, ...]] = _synonyms_of()


def broker_config_synonyms(name: str) -> tuple[str, ...]:
    return BROKER_SYNONYMS.get(name, (name,))


LISTENER_MECHANISM_CONFIGS = ("sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class", "sasl.server.callback.handler.class", "connections.max.reauth.ms")
"""DynamicBrokerConfig.ListenerMechanismConfigs: keys a listener sets per SASL mechanism
(``listener.name.<l>.<mechanism>.<key>``)."""


def listener_key(name: str) -> str | None:
    """The broker key a listener's own value stands for: ``listener.name.<l>.<key>`` (or
    ``listener.name.<l>.<mechanism>.<key>`` for :data:`LISTENER_MECHANISM_CONFIGS`) -> ``<key>``; None for
    any other name."""
    base = listener_base(name)
    if base is None:
        return None
    return next((key for key in LISTENER_MECHANISM_CONFIGS if base.endswith(key)), base)


def described_synonyms(name: str) -> tuple[str, ...]:
    """brokerConfigSynonyms(name, matchListenerOverride = true), as DescribeConfigs lists them: a listener's
    own value, then the broker key it overrides; else :func:`broker_config_synonyms`."""
    key = listener_key(name)
    return broker_config_synonyms(name) if key is None else (name, key)


def is_kafka_key(name: str) -> bool:
    """Whether Kafka knows the name (a custom key is anything else): odradek's table and Kafka's families."""
    return name in BROKER_KEYS or name in DYNAMIC_KEYS or name.startswith(IGNORED_PREFIXES)


def _not_dynamic(props: Mapping[str, str]) -> list[str]:
    """DynamicConfig.Broker.nonDynamicProps named in ``props``: Kafka keys that are no dynamic key (a
    listener-prefixed name is none of Kafka's keys: it is checked by its base key's type only)."""
    return [name for name in props if is_kafka_key(name) and listener_base(name) is None and name not in DYNAMIC_KEYS]


def _only_per_broker(name: str) -> bool:
    """DynamicBrokerConfig.perBrokerConfigs: a listener or SSL key, or a listener's own value of any key but
    the cluster-level listener keys, may not be a cluster default."""
    base = listener_base(name)
    return name in PER_BROKER_CONFIGS if base is None else base not in CLUSTER_LEVEL_LISTENER_CONFIGS


def is_password_config(name: str) -> bool:
    """DynamicBrokerConfig.isPasswordConfig: a dynamic password key, prefixed or not."""
    return name.endswith(DYNAMIC_PASSWORD_CONFIGS)


def scala_set(names: list[str]) -> str:
    """How Kafka's messages print a set of names."""
    return f"Set({', '.join(names)})"


class DynamicConfigError(ConfigError):
    """A refused change; answered INVALID_REQUEST with this message, as Kafka's ConfigAdminManager does."""


def _wrapped(message: str) -> DynamicConfigError:
    """A reconfiguration check failed: Kafka wraps it in ``ConfigException("Invalid dynamic configuration", e)``."""
    return DynamicConfigError(f"Invalid value org.apache.kafka.common.config.ConfigException: {message} for configuration Invalid dynamic configuration")


def override_props(props: dict[str, str], overrides: Mapping[str, str]) -> None:
    """Kafka's overrideProps: a key set at a higher level also hides its synonyms from the levels below."""
    for name, value in overrides.items():
        for synonym in broker_config_synonyms(name):
            props.pop(synonym, None)
        props[name] = value


class DynamicBrokerConfig:
    """The static configuration and both dynamic levels; ``current`` is what the broker runs with."""

    def __init__(self, static: BrokerConfig) -> None:
        self.static = static
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        self.current = static
        """The static configuration itself while no dynamic level is set: :meth:`update` makes a new one."""

    def level(self, per_broker: bool) -> dict[str, str]:
        return self.per_broker if per_broker else self.cluster_default

    def _config(self, per_broker: Mapping[str, str], cluster_default: Mapping[str, str]) -> BrokerConfig:
        props = dict(self.static.originals)
        override_props(props, {k: v for k, v in cluster_default.items() if is_kafka_key(k)})
        override_props(props, {k: v for k, v in per_broker.items() if is_kafka_key(k)})
        return BrokerConfig(props, warn_unknown=False)

    def validate(self, props: Mapping[str, str], per_broker: bool) -> BrokerConfig:
        """Kafka's validateConfigs and processReconfiguration(validateOnly): ``props`` would become the whole of
        one level. Returns the broker configuration that would result; raises DynamicConfigError."""
        not_dynamic = _not_dynamic(props)
        if not_dynamic:
            raise DynamicConfigError(f"Cannot update these configs dynamically: {scala_set(not_dynamic)}")
        unprefixed_security = [name for name in props if name in DYNAMIC_SECURITY_CONFIGS]
        if unprefixed_security:
            # Kafka filters a Java HashSet here, so its message names a HashSet.
            names = ", ".join(unprefixed_security)
            raise DynamicConfigError(f"These security configs can be dynamically updated only per-listener using the listener prefix: HashSet({names})")
        for name, value in props.items():
            base = listener_base(name) or name
            if base in DYNAMIC_KEYS:
                DYNAMIC_KEYS[base].parse(value)
        if not per_broker:
            only_per_broker = [name for name in props if _only_per_broker(name)]
            if only_per_broker:
                raise DynamicConfigError(f"Cannot update these configs at default cluster level, broker id must be specified: {scala_set(only_per_broker)}")
        levels = (props, self.cluster_default) if per_broker else (self.per_broker, props)
        new = self._config(*levels)
        for name in THREAD_POOL_CONFIGS:
            self._check_thread_count(name, self.current[name], new[name])
        self._check_cleaner_threads(self.current["log.cleaner.threads"], new["log.cleaner.threads"])
        try:
            LogConfig.from_props({}, new.broker_defaults_for_topics())
        except ConfigError as exc:
            raise _wrapped(str(exc)) from None
        return new

    def check_storable(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Kafka's toPersistentProps: a password is stored encrypted with ``password.encoder.secret``, per
        broker only; without that secret it is refused. (With it, odradek stores the password as it came:
        compat-tests/README.md.)"""
        if not any(value is not None and is_password_config(name) for name, value in props.items()):
            return
        if not per_broker:
            raise DynamicConfigError("Password config can be defined only at broker level")
        if self.static.originals.get("password.encoder.secret") is None:
            raise DynamicConfigError("Password encoder secret not configured")

    @staticmethod
    def _check_thread_count(name: str, old: int, new: int) -> None:
        """DynamicThreadPool.validateReconfiguration."""
        if new == old:
            return
        prefix = f"Dynamic thread count update validation failed for {name}={new}"
        if new < old // 2:
            raise _wrapped(f"{prefix}, value should be at least half the current value {old}")
        if new > old * 2:
            raise _wrapped(f"{prefix}, value should not be greater than double the current value {old}")

    @staticmethod
    def _check_cleaner_threads(old: int, new: int) -> None:
        """LogCleaner.validateReconfiguration. Kafka divides the dedupe buffer by the thread count before it
        checks the count, so zero threads fail with Java's division error, which Kafka answers as it is."""
        if new == old:
            return
        if new == 0:
            raise DynamicConfigError("/ by zero")
        if new < old // 2:
            raise _wrapped(f"Log cleaner threads cannot be reduced to less than half the current value {old}")
        if new > old * 2:
            raise _wrapped(f"Log cleaner threads cannot be increased to more than double the current value {old}")

    @staticmethod
    def from_persistent(props: Mapping[str, str], per_broker: bool) -> dict[str, str]:
        """Stored configs as Kafka's fromPersistentProps takes them at start-up: keys that are not dynamic (any
        more) and values that do not parse are dropped with an error, never stopping the broker."""
        invalid = []
        for name, value in props.items():
            base = listener_base(name) or name
            try:
                if base in DYNAMIC_KEYS:
                    DYNAMIC_KEYS[base].parse(value)
            except ConfigError:
                invalid.append(name)
        if invalid:
            level = "broker" if per_broker else "default cluster"
            log.error("Dynamic %s config contains invalid values in: %s, these configs will be ignored", level, scala_set(invalid))
        dropped = set(invalid)
        for names, message in (
            (_not_dynamic(props), "Non-dynamic configs configured in ZooKeeper will be ignored"),
            ([n for n in props if n in DYNAMIC_SECURITY_CONFIGS], "Security configs can be dynamically updated only using listener prefix, base configs will be ignored"),
            ([n for n in props if not per_broker and _only_per_broker(n)], "Per-broker configs defined at default cluster level will be ignored"),
        ):
            names = [n for n in names if n not in dropped]
            if names:
                log.error("%s: %s", message, scala_set(names))
                dropped.update(names)
        return {k: v for k, v in props.items() if k not in dropped}

    def update(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Replace one level (validated, or loaded from the metadata through :meth:`from_persistent`)."""
        level = self.level(per_broker)
        if level == props:
            return  # the configuration the broker runs with stays as it is (a start with no dynamic configs)
        level.clear()
        level.update(props)
        self.current = self._config(self.per_broker, self.cluster_default)
