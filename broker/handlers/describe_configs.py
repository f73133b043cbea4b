"""DescribeConfigs: a topic's effective configs and the broker's, with Kafka's sources and synonyms.

Kafka Connect reads ``cleanup.policy`` of its internal topics and ksqlDB reads broker configs, so values are
the ones the logs really run with. Sources and synonyms follow Kafka's ``ConfigHelper``: a key's synonyms
are its topic override (if any), then the broker keys it falls back to -- each one set in
``server.properties`` (STATIC_BROKER_CONFIG), then each one's Kafka default (DEFAULT_CONFIG) -- listed from
the first entry naming the primary broker key on. The source is the first synonym's. Kafka's quirk is kept:
``retention.ms`` with only ``log.retention.hours`` set reports DEFAULT_CONFIG and no synonyms, because the
primary key ``log.retention.ms`` appears nowhere.

The broker keys are looked up level by level (broker/dynamic_config.py): this broker's dynamic configs
(DYNAMIC_BROKER_CONFIG), the cluster-wide dynamic defaults (DYNAMIC_DEFAULT_BROKER_CONFIG), then
``server.properties`` and Kafka's defaults. The cluster-default resource (empty name) lists only the keys
set at its level, with only that level's synonyms. A key is read-only unless AlterConfigs may change it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation
from odradek.broker.authorizer.acl import ResourceType as AclResourceType
from odradek.broker.config import BROKER_CONFIG, BROKER_KEYS
from odradek.broker.group_config import GROUP_CONFIG, KAFKA_BROKER_DEFAULTS, SOURCE_DYNAMIC_GROUP
from odradek.broker.dynamic_config import DYNAMIC_KEYS, SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT_BROKER, DynamicBrokerConfig, described_synonyms, listener_key
from odradek.controller.metadata_image import MetadataImage, topic_name_error
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.values import CodeEnum
from odradek.storage.config_types import ConfigKey, ConfigType
from odradek.storage.log_config import SOURCE_DEFAULT, SOURCE_STATIC_BROKER, SOURCE_TOPIC, TOPIC_CONFIG, LogConfig

if TYPE_CHECKING:
    from odradek.protocol.message_types.describe_configs import DescribeConfigsRequest, DescribeConfigsResourceResultDict, DescribeConfigsResponseDict, DescribeConfigsResultDict


class ResourceType(CodeEnum):
    """Kafka's ``ConfigResource.Type`` ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


def resource_type_name(type_id: int) -> str:
    try:
        return ResourceType(type_id).name
    except ValueError:
        return ResourceType.UNKNOWN.name


def _broker_defaults() -> dict[str, str]:
    """Kafka's defaults of the broker keys, as DescribeConfigs renders them (keys without one are absent).

    A few broker keys topic configs fall back to (``compression.gzip.level``...) are not in the broker
    table; their default is the topic key's, as in Kafka.
    """
    rendered = [(synonym.name, key.render(key.default)) for key in TOPIC_CONFIG for synonym in key.synonyms if synonym.scale == 1 and synonym.name not in BROKER_KEYS]
    rendered += [(key.name, key.render(key.default)) for key in BROKER_CONFIG]
    return {name: text for name, text in rendered if text is not None}  # a default of None renders as None


BROKER_DEFAULTS: dict[str, str] = _broker_defaults()


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class DescribedConfig:
    """One config as DescribeConfigs reports it (CreateTopics v5+ reports topic configs the same way)."""

    name: str
    value: str | None
    source: int
    type: ConfigType
    doc: str | None
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: tuple[Synonym, ...] = ()

    def response(self, include_synonyms: bool, include_documentation: bool) -> DescribeConfigsResourceResultDict:
        return {
            "name": self.name,
            "value": self.value,
            "read_only": self.read_only,
            "is_default": self.source == SOURCE_DEFAULT,  # v0 only
            "config_source": self.source,
            "is_sensitive": self.is_sensitive,
            "synonyms": [{"name": s.name, "value": s.value, "source": s.source} for s in self.synonyms] if include_synonyms else [],
            "config_type": self.type,
            "documentation": self.doc if include_documentation else None,
        }


def _is_sensitive(key: ConfigKey | None) -> bool:
    """Kafka's ``maybeSensitive``: passwords, and keys of unknown type, to be safe."""
    return key is None or key.type is ConfigType.PASSWORD


def config_synonyms(dynamic: DynamicBrokerConfig, name: str, sensitive: bool) -> list[Synonym]:
    """The broker-level synonyms of broker key ``name`` (Kafka's ``ConfigHelper.configSynonyms``): the chain
    of broker keys (DynamicBrokerConfig.brokerConfigSynonyms) looked up in each level, level by level. The
    list starts at the key asked about, so a later member of a chain (log.flush.scheduler.interval.ms)
    answers only itself, as in Kafka."""
    chain = described_synonyms(name)
    levels = (
        (dynamic.per_broker, SOURCE_DYNAMIC_BROKER),
        (dynamic.cluster_default, SOURCE_DYNAMIC_DEFAULT_BROKER),
        (dynamic.static.originals, SOURCE_STATIC_BROKER),
        (BROKER_DEFAULTS, SOURCE_DEFAULT),
    )
    found = [Synonym(n, str(level[n]).strip(), source) for level, source in levels for n in chain if n in level]
    found = list(itertools.dropwhile(lambda s: s.name != name, found))
    if sensitive:
        found = [Synonym(s.name, None, s.source) for s in found]
    return found


def topic_config_entries(dynamic: DynamicBrokerConfig, broker_defaults: dict[str, str], overrides: dict[str, str]) -> list[DescribedConfig]:
    """Every topic config key with its effective value for these topic overrides."""
    config = LogConfig.from_props(overrides, broker_defaults)
    entries = []
    for key in TOPIC_CONFIG:
        value = key.render(getattr(config, key.attribute))
        synonyms = config_synonyms(dynamic, key.synonyms[0].name, False) if key.synonyms else []
        if key.name in overrides:
            synonyms.insert(0, Synonym(key.name, value, SOURCE_TOPIC))
        source = synonyms[0].source if synonyms else SOURCE_DEFAULT
        entries.append(DescribedConfig(key.name, value, source, key.type, key.doc, synonyms=tuple(synonyms)))
    return entries


def broker_config_entries(dynamic: DynamicBrokerConfig) -> list[DescribedConfig]:
    """Every broker key with the value it runs with, then any other ``server.properties`` key and every
    listener's own value (``listener.name.<l>.<key>``, of its key's type) set at either dynamic level; a key
    of unknown type is sensitive."""
    entries = []
    current = dynamic.current
    for key in BROKER_CONFIG:
        sensitive = _is_sensitive(key)
        value = None if sensitive else key.render(current[key.name])
        entries.append(_broker_entry(dynamic, key.name, value, key, sensitive))
    listeners_own = [n for n in {**dynamic.cluster_default, **dynamic.per_broker} if listener_key(n) is not None and n not in dynamic.static.originals]
    for name in [*dynamic.static.originals, *listeners_own]:
        if name not in BROKER_KEYS:
            entries.append(_listener_or_unknown_entry(dynamic, name, current.originals.get(name)))
    return entries


def _listener_or_unknown_entry(dynamic: DynamicBrokerConfig, name: str, value: str | None, only_source: int | None = None) -> DescribedConfig:
    """A key no table has: a listener's own value of a broker key (``listener.name.<l>.<key>``) has that
    key's type, as Kafka's ``ConfigHelper.configType`` finds it through the synonyms; anything else is of
    unknown type, so sensitive."""
    base = listener_key(name)
    key = None if base is None else BROKER_KEYS.get(base) or DYNAMIC_KEYS.get(base)
    sensitive = _is_sensitive(key)
    return _broker_entry(dynamic, name, None if sensitive else value, key, sensitive, only_source=only_source)


def default_broker_config_entries(dynamic: DynamicBrokerConfig) -> list[DescribedConfig]:
    """The cluster-wide dynamic defaults: the keys set at that level, each with only that level's synonyms."""
    return [
        _broker_entry(dynamic, name, value, DYNAMIC_KEYS[name], False, only_source=SOURCE_DYNAMIC_DEFAULT_BROKER)
        if name in DYNAMIC_KEYS
        else _listener_or_unknown_entry(dynamic, name, value, only_source=SOURCE_DYNAMIC_DEFAULT_BROKER)
        for name, value in dynamic.cluster_default.items()
        if name in DYNAMIC_KEYS or listener_key(name) is not None
    ]


def _broker_entry(dynamic: DynamicBrokerConfig, name: str, value: str | None, key: ConfigKey | None, sensitive: bool, only_source: int | None = None) -> DescribedConfig:
    synonyms = config_synonyms(dynamic, name, sensitive)
    if only_source is not None:
        synonyms = [s for s in synonyms if s.source == only_source]
    source = synonyms[0].source if synonyms else SOURCE_DEFAULT
    return DescribedConfig(
        name,
        value,
        source,
        key.type if key else ConfigType.UNKNOWN,
        key.doc if key else None,
        read_only=name not in DYNAMIC_KEYS,
        is_sensitive=sensitive,
        synonyms=tuple(synonyms),
    )


def group_config_entries(dynamic: DynamicBrokerConfig, overrides: dict[str, str]) -> list[DescribedConfig]:
    """Every group key (an internal one only if the group sets it) with the value in force: the group's
    override, else its broker key's (that key's synonyms and source), else the key's own default."""
    entries = []
    for g in GROUP_CONFIG:
        if g.internal and g.name not in overrides:
            continue
        if g.broker_key in BROKER_KEYS:
            synonyms = config_synonyms(dynamic, g.broker_key, False)
        else:
            default = g.key.default if g.broker_key is None else KAFKA_BROKER_DEFAULTS[g.broker_key]
            synonyms = [Synonym(g.broker_key or g.name, g.key.render(default), SOURCE_DEFAULT)]
        if g.name in overrides:
            synonyms.insert(0, Synonym(g.name, overrides[g.name], SOURCE_DYNAMIC_GROUP))
        entries.append(DescribedConfig(g.name, synonyms[0].value, synonyms[0].source, g.key.type, g.key.doc, synonyms=tuple(synonyms)))
    return entries


def check_broker_resource(own_id: int, name: str) -> bool:
    """True for this broker's own resource, False for the cluster default (empty name); else Kafka's error."""
    if not name:
        return False
    try:
        broker_id = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if broker_id != own_id:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {own_id} or empty string, but received {name}")
    return True


def resource_config_entries(metadata: MetadataImage, dynamic: DynamicBrokerConfig, broker_defaults: dict[str, str], resource_type: int, name: str) -> list[DescribedConfig]:
    if resource_type == ResourceType.TOPIC:
        reason = topic_name_error(name)
        if reason:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        topic = metadata.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return topic_config_entries(dynamic, broker_defaults, topic.configs)
    if resource_type == ResourceType.BROKER:
        return broker_config_entries(dynamic) if check_broker_resource(dynamic.static.broker_id, name) else default_broker_config_entries(dynamic)
    if resource_type == ResourceType.GROUP:
        if not name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        return group_config_entries(dynamic, metadata.group_configs.get(name, {}))
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource_type_name(resource_type)}")


def config_refusal(authorization: Authorization, request: Request, resource_type: int, name: str, operation: AclOperation) -> ErrorCode | None:
    """Kafka's authorization of a config resource: broker (and logger) configs need ``operation`` on the
    cluster, topic configs on the topic, group configs on the group; None if allowed (or not a type these
    checks cover), else the error."""
    if resource_type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER):
        allowed = authorization.authorize(request, operation, AclResourceType.CLUSTER, CLUSTER_NAME)
        return None if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if resource_type == ResourceType.TOPIC:
        return None if authorization.authorize(request, operation, AclResourceType.TOPIC, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if resource_type == ResourceType.GROUP:
        return None if authorization.authorize(request, operation, AclResourceType.GROUP, name) else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return None


def _selected(entries: Iterable[DescribedConfig], keys: list[str] | None) -> list[DescribedConfig]:
    if not keys:
        return list(entries)
    wanted = set(keys)
    return [e for e in entries if e.name in wanted]


def handle(metadata: MetadataImage, dynamic_config: DynamicBrokerConfig, broker_defaults: dict[str, str], authorization: Authorization, request: Request[DescribeConfigsRequest]) -> DescribeConfigsResponseDict:
    """Resources the client may not DESCRIBE_CONFIGS are answered after the others, as Kafka does."""
    body = request.body
    results: list[DescribeConfigsResultDict] = []
    refused: list[DescribeConfigsResultDict] = []
    for resource in body.resources:
        result: DescribeConfigsResultDict = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "configs": [],
        }
        refusal = config_refusal(authorization, request, resource.resource_type, resource.resource_name, AclOperation.DESCRIBE_CONFIGS)
        if refusal is not None:
            result.update({"error_code": refusal, "error_message": refusal.message})
            refused.append(result)
            continue
        try:
            entries = _selected(resource_config_entries(metadata, dynamic_config, broker_defaults, resource.resource_type, resource.resource_name), resource.configuration_keys)
            result["configs"] = [e.response(body.include_synonyms, body.include_documentation) for e in entries]
        except KafkaError as exc:
            result.update({"error_code": exc.code, "error_message": exc.message})
        results.append(result)
    return {"results": results + refused}
