"""IncrementalAlterConfigs (KIP-339): SET, DELETE, and APPEND/SUBTRACT on list configs, one key at a time.

As Kafka's ``prepareIncrementalConfigs``: APPEND and SUBTRACT start from the resource's override (a topic's,
or the dynamic broker level's), else the key's default (``cleanup.policy`` APPEND ``compact`` gives
``delete,compact``); APPEND skips values already present. Everything else is AlterConfigs' (validation,
validate-only, dynamic broker configs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Mapping

from odradek.broker.authorization import Authorization
from odradek.broker.dynamic_config import DynamicBrokerConfig
from odradek.broker.handlers.alter_configs import alter
from odradek.controller.metadata_image import MetadataImage
from odradek.controller.metadata_support import MetadataSupport
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.values import CodeEnum
from odradek.storage.config_types import ConfigKey, ConfigType

if TYPE_CHECKING:
    from odradek.protocol.message_types.incremental_alter_configs import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponseDict


class OpType(CodeEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _list_value(current: dict[str, str], name: str, op: OpType, keys: Mapping[str, ConfigKey]) -> list[str]:
    """The list an APPEND or SUBTRACT applies to; the key must be a LIST config."""
    key = keys.get(name)
    if key is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown config name: {name}")
    if key.type is not ConfigType.LIST:
        verb = "append" if op is OpType.APPEND else "subtract"
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {name}")
    old = current.get(name, key.render(key.default))
    if op is OpType.APPEND:
        return old.split(",") if old else []
    return (old or "").split(",")  # Kafka's getOrElse(""): a key with neither value nor default


def apply_ops(current: dict[str, str], configs: list[Any], keys: Mapping[str, ConfigKey]) -> dict[str, str]:
    overrides = dict(current)
    for config in configs:
        try:
            op = OpType(config.config_operation)
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {config.config_operation}") from None
        if op is OpType.SET:
            overrides[config.name] = config.value
        elif op is OpType.DELETE:
            overrides.pop(config.name, None)
        elif op is OpType.APPEND:
            values = _list_value(overrides, config.name, op, keys)
            values += [v for v in config.value.split(",") if v not in values]
            overrides[config.name] = ",".join(values)
        else:
            values = _list_value(overrides, config.name, op, keys)
            for v in config.value.split(","):
                if v in values:
                    values.remove(v)
            overrides[config.name] = ",".join(values)
    return overrides


def handle(
    metadata: MetadataImage, dynamic_config: DynamicBrokerConfig, broker_defaults: dict[str, str], metadata_support: MetadataSupport, authorization: Authorization,
    request: Request[IncrementalAlterConfigsRequest],
) -> IncrementalAlterConfigsResponseDict | Awaitable[IncrementalAlterConfigsResponseDict]:
    return alter(metadata, dynamic_config, broker_defaults, metadata_support, authorization, request, apply_ops, lambda config: config.config_operation == OpType.DELETE)
