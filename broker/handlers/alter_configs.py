"""AlterConfigs: replace a topic's config overrides as a whole (keys left out return to their defaults).

The checks are Kafka's ``ConfigAdminManager`` preprocessing and ``ZkAdminManager.alterTopicConfigs``, shared
with IncrementalAlterConfigs, which differs only in how the new overrides are computed. A change reaches the
running logs through the controller (``set_topic_configs`` -> ``on_topic_configs_changed``).

odradek has no dynamic broker configs: altering any broker config is refused with INVALID_REQUEST, the
error Kafka gives for a config that cannot be updated dynamically.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Callable

from odradek.broker.handlers.describe_configs import ResourceType, check_broker_resource, resource_type_name
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.config_types import ConfigError, InvalidValueError
from odradek.storage.log_config import LogConfig

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer

NewOverrides = Callable[[dict[str, str], list[Any]], dict[str, str]]
"""(current topic overrides, the resource's requested configs) -> the topic's new overrides."""


def _check_configs(configs: list[Any], null_allowed: Callable[[Any], bool]) -> None:
    names = Counter(c.name for c in configs)
    if any(n > 1 for n in names.values()):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c.name for c in configs if c.value is None and not null_allowed(c)]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))


def _alter_broker(server: "KafkaServer", name: str, configs: list[Any]) -> None:
    check_broker_resource(server, name)
    if configs:
        names = ", ".join(c.name for c in configs)
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Cannot update these configs dynamically: {names} (odradek has no dynamic broker configs; set them in server.properties)",
        )


def _alter_topic(server: "KafkaServer", name: str, configs: list[Any], new_overrides: NewOverrides, validate_only: bool) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    topic = server.metadata.topics.get(name)
    overrides = new_overrides(dict(topic.configs) if topic else {}, configs)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    try:
        LogConfig.from_props(overrides, server.broker_defaults)
    except InvalidValueError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid config value for resource ConfigResource(type=TOPIC, name='{name}'): {exc}") from None
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    if not validate_only:
        assert server.controller is not None
        server.controller.set_topic_configs(name, overrides)


def alter_resources(server: "KafkaServer", request: Request, new_overrides: NewOverrides, null_allowed: Callable[[Any], bool]) -> dict:
    body = request.body
    seen = Counter((r.resource_type, r.resource_name) for r in body.resources)
    responses = []
    for resource in body.resources:
        response = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": resource.resource_type, "resource_name": resource.resource_name}
        try:
            if seen[resource.resource_type, resource.resource_name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            _check_configs(resource.configs, null_allowed)
            if resource.resource_type == ResourceType.BROKER:
                _alter_broker(server, resource.resource_name, resource.configs)
            elif resource.resource_type == ResourceType.TOPIC:
                _alter_topic(server, resource.resource_name, resource.configs, new_overrides, body.validate_only)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource_type_name(resource.resource_type)}")
        except KafkaError as exc:
            response.update(error_code=exc.code, error_message=exc.message)
        responses.append(response)
    return {"responses": responses}


def _replace(current: dict[str, str], configs: list[Any]) -> dict[str, str]:
    return {c.name: c.value for c in configs}


def handle(server: "KafkaServer", request: Request) -> dict:
    return alter_resources(server, request, _replace, lambda config: False)
