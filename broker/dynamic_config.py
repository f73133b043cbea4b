"""Dynamic broker configuration (Kafka's ``DynamicBrokerConfig``): broker keys changed at run time.

Kafka keeps two levels of dynamic broker configs beside ``server.properties``: per broker (AlterConfigs on
the BROKER resource named by the broker id, ZooKeeper's ``/config/brokers/<id>``) and cluster-wide defaults
(the BROKER resource with an empty name, ``/config/brokers/<default>``). A key's value comes from the first
level that sets it -- per broker, cluster default, ``server.properties``, Kafka's default -- which is the
order DescribeConfigs lists its synonyms in. odradek's embedded controller stores both levels with the rest
of the cluster metadata, so they survive a restart.

Which keys may change is Kafka 3.9's ``DynamicBrokerConfig.AllDynamicConfigs``, restricted to the keys
odradek knows: the topic defaults (only the first broker synonym of each topic key: ``log.retention.ms``
but not ``log.retention.hours``), the log cleaner's and thread pools' keys, and ``producer.id.expiration.ms``.
Kafka's listener, SSL/SASL, connection-quota, metrics-reporter and tiered-storage keys are refused as not
dynamic: odradek serves plaintext listeners fixed at start-up. The topic defaults are acted on at once
(every topic without an override of its own follows them); the others are stored and described only.
Keys Kafka does not know are custom configs: accepted and stored, never described, as in Kafka.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Mapping

from odradek.broker.config import BROKER_KEYS, IGNORED_PREFIXES, BrokerConfig
from odradek.storage.config_types import ConfigError, ConfigKey
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

OTHER_DYNAMIC_CONFIGS = (
    # LogCleaner.ReconfigurableConfigs (message.max.bytes is a topic default above)
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
    # DynamicListenerConfig's network threads; DynamicProducerStateManagerConfig
    "num.network.threads",
    "producer.id.expiration.ms",
    # DynamicConnectionQuota's broker-wide creation rate (read at each accept)
    "max.connection.creation.rate",
)

DYNAMIC_KEYS: dict[str, ConfigKey] = {
    **DYNAMIC_LOG_KEYS,
    **{name: BROKER_KEYS[name] for name in THREAD_POOL_CONFIGS + OTHER_DYNAMIC_CONFIGS},
}
"""Every broker key odradek lets AlterConfigs change (DescribeConfigs reports the others read-only)."""


def _synonyms_of() -> dict[str, tuple[str, ...]]:
    """Kafka's brokerConfigSynonyms: broker keys naming one setting in different units, most specific first."""
    return {s.name: tuple(x.name for x in key.synonyms) for key in TOPIC_CONFIG if len(key.synonyms) > 1 for s in key.synonyms}


BROKER_SYNONYMS: dict[str, tuple[str, ...]] = _synonyms_of()


def broker_config_synonyms(name: str) -> tuple[str, ...]:
    return BROKER_SYNONYMS.get(name, (name,))


def is_kafka_key(name: str) -> bool:
    """Whether Kafka knows the name (a custom key is anything else): odradek's table and Kafka's families."""
    return name in BROKER_KEYS or name in DYNAMIC_KEYS or name.startswith(IGNORED_PREFIXES)


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


@dataclass
class DynamicBrokerConfig:
    """The static configuration and both dynamic levels; ``current`` is what the broker runs with."""

    static: BrokerConfig
    per_broker: dict[str, str] = field(default_factory=dict)
    cluster_default: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.current = self._config(self.per_broker, self.cluster_default)

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
        not_dynamic = [name for name in props if is_kafka_key(name) and name not in DYNAMIC_KEYS]
        if not_dynamic:
            raise DynamicConfigError(f"Cannot update these configs dynamically: {scala_set(not_dynamic)}")
        for name, value in props.items():
            if name in DYNAMIC_KEYS:
                DYNAMIC_KEYS[name].parse(value)
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
        kept = dict(props)
        not_dynamic = [name for name in kept if is_kafka_key(name) and name not in DYNAMIC_KEYS]
        if not_dynamic:
            log.error("Non-dynamic configs configured in ZooKeeper will be ignored: %s", scala_set(not_dynamic))
        invalid = []
        for name in [n for n in kept if n in DYNAMIC_KEYS]:
            try:
                DYNAMIC_KEYS[name].parse(kept[name])
            except ConfigError:
                invalid.append(name)
        if invalid:
            level = "broker" if per_broker else "default cluster"
            log.error("Dynamic %s config contains invalid values in: %s, these configs will be ignored", level, scala_set(invalid))
        return {k: v for k, v in kept.items() if k not in not_dynamic and k not in invalid}

    def update(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Replace one level (validated, or loaded from the metadata through :meth:`from_persistent`)."""
        level = self.level(per_broker)
        level.clear()
        level.update(props)
        self.current = self._config(self.per_broker, self.cluster_default)
