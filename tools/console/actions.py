"""What the console changes, each one admin request as Kafka's admin client sends it; the broker validates,
and a refusal comes back as a :class:`~odradek.tools.admin_common.CommandError` with the broker's message,
which the page shows as it is. The topic changes are odradek topics' own (tools/admin_topics.py)."""

from __future__ import annotations

import argparse

from odradek.broker.network.kafka_client import KafkaClient
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.storage.topic_partition import TopicPartition
from odradek.tools.admin_common import CommandError, broker_error
from odradek.tools.admin_groups import commit_offsets, committed_offsets, describe_group, new_offsets

TOPIC_RESOURCE = 2
SET, DELETE = 0, 1
RESET_SCENARIOS = ("earliest", "latest", "offset", "shift", "datetime")


async def alter_topic_config(client: KafkaClient, name: str, key: str, value: str | None) -> None:
    """Set ``key`` (or remove its override when ``value`` is None) with IncrementalAlterConfigs."""
    op = {"name": key, "config_operation": DELETE if value is None else SET, "value": value or ""}
    body = {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": [op]}], "validate_only": False}
    result = (await client.request(ApiKey.IncrementalAlterConfigs, body)).responses[0]
    if result.error_code != ErrorCode.NONE:
        raise broker_error(result.error_code, result.error_message)


async def delete_group(client: KafkaClient, group_id: str) -> None:
    result = (await client.coordinator_request(group_id, ApiKey.DeleteGroups, {"groups_names": [group_id]})).results[0]
    if result.error_code != ErrorCode.NONE:
        raise broker_error(result.error_code, None)


async def reset_offsets(client: KafkaClient, group_id: str, scenario: str, value: str) -> dict[TopicPartition, int]:
    """kafka-consumer-groups.sh --reset-offsets --all-topics --execute with one scenario (the same code,
    tools/admin_groups.py): only for a group without members. The offsets committed."""
    state = (await describe_group(client, group_id)).group_state
    if state not in ("Empty", "Dead"):
        raise CommandError(f"Assignments can only be reset if the group '{group_id}' is inactive, but the current state is {state}.")
    if scenario not in RESET_SCENARIOS:
        raise CommandError(f"Unknown reset scenario {scenario!r}")
    try:
        number = int(value) if scenario in ("offset", "shift") else None
    except ValueError:
        raise CommandError(f"{scenario} needs a whole number, not {value!r}") from None
    args = argparse.Namespace(
        to_earliest=scenario == "earliest",
        to_latest=scenario == "latest",
        to_offset=number if scenario == "offset" else None,
        shift_by=number if scenario == "shift" else None,
        to_datetime=value if scenario == "datetime" else None,
    )
    partitions = list(await committed_offsets(client, group_id))
    if not partitions:
        raise CommandError(f"Group '{group_id}' has no committed offsets to reset")
    offsets = await new_offsets(client, args, group_id, partitions)
    await commit_offsets(client, group_id, offsets)
    return offsets
