"""AlterConfigs: replace a topic's config overrides as a whole (keys left out return to their defaults).

The checks are Kafka's ``ConfigAdminManager`` preprocessing and ``ZkAdminManager.alterTopicConfigs``, shared
with IncrementalAlterConfigs, which differs only in how the new overrides are computed. A change reaches the
running logs through the controller (``set_topic_configs`` -> ``on_topic_configs_changed``).

A GROUP resource is one group's configs (broker/group_config.py), kept with the cluster metadata as Kafka 4.4
keeps them in its metadata log (docs/protocol.md).

A BROKER resource is this broker's dynamic configs (its id) or the cluster-wide defaults (empty name): the
new set is checked as Kafka's ``ConfigAdminManager.preprocess`` checks it (broker/dynamic_config.py), every
refusal answered INVALID_REQUEST with Kafka's message, then stored by the controller, which hands it back
to the broker (``set_broker_configs`` -> ``on_broker_configs_changed``).

The changes go to the mode's :class:`ConfigWrites`: made at once by the embedded controller; in ZooKeeper mode
gathered while the request is checked on the event loop, then written to ZooKeeper on a worker thread and
applied to this broker before the answer goes: the event loop is not held by ZooKeeper round trips, and a
DescribeConfigs sent next on the connection sees the change.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation
from odradek.broker.config import BROKER_KEYS
from odradek.broker.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from odradek.broker.group_config import GROUP_KEYS, broker_lookup, validate_group_configs
from odradek.broker.handlers.describe_configs import ResourceType, config_refusal, resource_type_name
from odradek.controller.metadata_image import MetadataImage
from odradek.controller.metadata_support import MetadataSupport
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.config_types import ConfigError, ConfigKey, InvalidValueError
from odradek.storage.log_config import TOPIC_CONFIG_BY_NAME, LogConfig

if TYPE_CHECKING:
    from odradek.controller.metadata_support import ConfigWrites
    from odradek.protocol.message_types.alter_configs import AlterConfigsRequest, AlterConfigsResourceResponseDict, AlterConfigsResponseDict
    from odradek.protocol.message_types.incremental_alter_configs import IncrementalAlterConfigsRequest

NewOverrides = Callable[[dict[str, str], list[Any], Mapping[str, ConfigKey]], dict[str, str]]
"""(current overrides, the resource's requested configs, the resource's config table) -> the new overrides."""


@dataclass(frozen=True)
class ConfigServices:
    """What the checks of AlterConfigs and IncrementalAlterConfigs use (of kafka_apis ``ALTER_CONFIGS``)."""

    metadata: MetadataImage
    dynamic_config: DynamicBrokerConfig
    broker_defaults: dict[str, str]
    writes: ConfigWrites
    """Where this request's changes go (:meth:`MetadataSupport.config_writes`)."""
    authorization: Authorization


def alter(
    metadata: MetadataImage, dynamic_config: DynamicBrokerConfig, broker_defaults: dict[str, str], metadata_support: MetadataSupport, authorization: Authorization,
    request: Request[AlterConfigsRequest | IncrementalAlterConfigsRequest], new_overrides: NewOverrides, null_allowed: Callable[[Any], bool],
) -> AlterConfigsResponseDict | Awaitable[AlterConfigsResponseDict]:
    """:func:`alter_resources`, answered once its changes are written (IncrementalAlterConfigs' answer has
    AlterConfigs' shape)."""
    writes = metadata_support.config_writes()
    answer = alter_resources(ConfigServices(metadata, dynamic_config, broker_defaults, writes, authorization), request, new_overrides, null_allowed)
    return writes.written(answer)


def _check_configs(configs: list[Any], null_allowed: Callable[[Any], bool]) -> None:
    names = Counter(c.name for c in configs)
    if any(n > 1 for n in names.values()):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c.name for c in configs if c.value is None and not null_allowed(c)]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))


def _check_node_id(own_id: int, name: str) -> None:
    """ConfigAdminManager.validateResourceNameIsCurrentNodeId (DescribeConfigs words its refusal differently)."""
    try:
        node_id = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") from None
    if node_id != own_id:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {own_id}, but received {name}")


def _alter_broker(services: ConfigServices, name: str, configs: list[Any], new_overrides: NewOverrides, validate_only: bool) -> None:
    per_broker = bool(name)
    if per_broker:
        _check_node_id(services.dynamic_config.static.broker_id, name)
    props = new_overrides(dict(services.dynamic_config.level(per_broker)), configs, BROKER_KEYS)
    try:
        services.dynamic_config.validate(props, per_broker)
    except ConfigError as exc:  # DynamicConfigError or a value's InvalidValueError: both INVALID_REQUEST
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    if not validate_only:
        try:
            services.dynamic_config.check_storable(props, per_broker)
        except ConfigError as exc:  # refused as it is written, after the checks: Kafka's INVALID_CONFIG
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): {exc}") from None
        services.writes.set_broker_configs(name or DEFAULT_ENTITY, props)


def _alter_topic(services: ConfigServices, name: str, configs: list[Any], new_overrides: NewOverrides, validate_only: bool) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    topic = services.metadata.topics.get(name)
    overrides = new_overrides(dict(topic.configs) if topic else {}, configs, TOPIC_CONFIG_BY_NAME)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    try:
        LogConfig.from_props(overrides, services.broker_defaults)
    except InvalidValueError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid config value for resource ConfigResource(type=TOPIC, name='{name}'): {exc}") from None
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    if not validate_only:
        services.writes.set_topic_configs(name, overrides)


LIST_OPS = {2: "APPEND", 3: "SUBTRACT"}
"""IncrementalAlterConfigs' list operations by id (its OpType), which Kafka's controller refuses for group keys."""


def _alter_group(services: ConfigServices, name: str, configs: list[Any], new_overrides: NewOverrides, validate_only: bool) -> None:
    """Kafka 4.4's controller applies a group's changes without knowing group keys' types: an APPEND or
    SUBTRACT is refused for every key, LIST or not."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    for config in configs:
        op = LIST_OPS.get(getattr(config, "config_operation", -1))
        if op is not None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Can't {op} to key {config.name} because its type is not LIST.")
    props = new_overrides(dict(services.metadata.group_configs.get(name, {})), configs, {n: g.key for n, g in GROUP_KEYS.items()})
    try:
        validate_group_configs(props, broker_lookup(services.dynamic_config.current))
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    if not validate_only:
        services.writes.set_group_configs(name, props)


def alter_resources(
    services: ConfigServices, request: Request[AlterConfigsRequest | IncrementalAlterConfigsRequest], new_overrides: NewOverrides, null_allowed: Callable[[Any], bool],
) -> AlterConfigsResponseDict:
    body = request.body
    seen = Counter((r.resource_type, r.resource_name) for r in body.resources)
    responses: list[AlterConfigsResourceResponseDict] = []
    for resource in body.resources:
        response: AlterConfigsResourceResponseDict = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": resource.resource_type, "resource_name": resource.resource_name}
        try:
            if seen[resource.resource_type, resource.resource_name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            refusal = config_refusal(services.authorization, request, resource.resource_type, resource.resource_name, AclOperation.ALTER_CONFIGS)
            if refusal is not None:
                raise KafkaError(refusal)
            _check_configs(resource.configs, null_allowed)
            if resource.resource_type == ResourceType.BROKER:
                _alter_broker(services, resource.resource_name, resource.configs, new_overrides, body.validate_only)
            elif resource.resource_type == ResourceType.TOPIC:
                _alter_topic(services, resource.resource_name, resource.configs, new_overrides, body.validate_only)
            elif resource.resource_type == ResourceType.GROUP:
                _alter_group(services, resource.resource_name, resource.configs, new_overrides, body.validate_only)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource_type_name(resource.resource_type)}")
        except KafkaError as exc:
            response.update({"error_code": exc.code, "error_message": exc.message})
        responses.append(response)
    return {"responses": responses}


def _replace(current: dict[str, str], configs: list[Any], keys: Mapping[str, ConfigKey]) -> dict[str, str]:
    return {c.name: c.value for c in configs}


def handle(
    metadata: MetadataImage, dynamic_config: DynamicBrokerConfig, broker_defaults: dict[str, str], metadata_support: MetadataSupport, authorization: Authorization,
    request: Request[AlterConfigsRequest],
) -> AlterConfigsResponseDict | Awaitable[AlterConfigsResponseDict]:
    return alter(metadata, dynamic_config, broker_defaults, metadata_support, authorization, request, _replace, lambda config: False)
