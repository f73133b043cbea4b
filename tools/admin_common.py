"""What the admin commands (``odradek topics | configs | offsets | groups``) share: the bootstrap and
``--command-config`` options (Kafka's client properties, to reach a secured broker), running a command on
odradek's own client (broker/network/kafka_client.py), Kafka's topic filters, and the look-ups they all do.

Each command prints what the matching Kafka tool prints (kafka-topics.sh, kafka-configs.sh,
kafka-get-offsets.sh), so that scripts written for Kafka's tools read odradek's the same way.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable

import anyio

from odradek.broker.config import read_properties
from odradek.broker.network.kafka_client import DisconnectedError, KafkaClient, ResponseError, UnsupportedVersionError
from odradek.broker.security.client import client_security
from odradek.controller.metadata_image import INTERNAL_TOPICS
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid
from odradek.protocol.schema import Container
from odradek.storage.topic_partition import TopicPartition

CLIENT_ID = "odradek-admin"
REQUEST_TIMEOUT_S = 30.0
CONTROLLER_LOOKUP_BACKOFF_S = 0.1
"""Kafka's admin client asks the metadata again after ``retry.backoff.ms`` (100 ms) while it names no controller."""


class CommandError(Exception):
    """A failure the command reports in its tool's words, exiting 1."""


class BrokerError(CommandError):
    """The broker refused: Kafka's tools word these apart from their own argument checks."""

    def __init__(self, message: str, code: int = ErrorCode.UNKNOWN_SERVER_ERROR) -> None:
        super().__init__(message)
        self.code = code


def broker_error(code: int, message: str | None) -> BrokerError:
    """The text a Java admin client's exception carries: the broker's message, else the code's own."""
    return BrokerError(message or ErrorCode(code).message, code)


def add_bootstrap_server(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="The Kafka server to connect to (host:port[,host:port...])")
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="Kafka client properties for the connection: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.*, ssl.keystore.*",
    )


def run_command(args: argparse.Namespace, command: Callable[[KafkaClient, argparse.Namespace], Awaitable[None]], report: Callable[[Exception], None]) -> int:
    """Run ``command`` with a client connected to ``--bootstrap-server``; a failure goes to ``report`` in the
    tool's words, with exit code 1."""

    try:
        properties = read_properties(args.command_config) if args.command_config else {}
        security = client_security(properties)
        client = KafkaClient(args.bootstrap_server, client_id=CLIENT_ID, request_timeout_s=REQUEST_TIMEOUT_S, security=security)
    except (ValueError, OSError) as exc:  # a malformed --bootstrap-server, an unreadable or wrong --command-config
        report(exc)
        return 1

    async def main() -> None:
        async with client:
            await command(client, args)

    try:
        anyio.run(main)
    except (CommandError, ResponseError, DisconnectedError, UnsupportedVersionError, TimeoutError) as exc:
        report(exc)
        return 1
    return 0


def print_error(message: str) -> None:
    print(message, file=sys.stderr)


def include_list(raw: str) -> re.Pattern[str]:
    """Kafka's TopicFilter: commas are alternatives, spaces and surrounding quotes dropped, the whole name must match."""
    regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", raw.strip().replace(",", "|").replace(" ", "")))
    try:
        return re.compile(regex)
    except re.error:
        raise CommandError(f"{regex} is an invalid regex.") from None


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS


def uuid_string(value: Uuid) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


async def topic_metadata(client: KafkaClient, topics: list[str] | None = None) -> dict[str, Container]:
    """Metadata of the named topics (all if None) that exist, by name."""
    response = await client.refresh_metadata(topics)
    return {t.name: t for t in response.topics if t.error_code == ErrorCode.NONE}


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    synonyms: tuple[tuple[str, str | None, int], ...]


CONFIG_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
"""DescribeConfigs' config_source ids by the names Kafka's ConfigEntry.ConfigSource prints."""
SOURCE_DEFAULT = 5


async def describe_configs(client: KafkaClient, resource_type: int, name: str, *, node_id: int | None = None) -> list[ConfigEntry]:
    body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}], "include_synonyms": True, "include_documentation": False}
    result = (await client.request(ApiKey.DescribeConfigs, body, node_id=node_id)).results[0]
    if result.error_code != ErrorCode.NONE:
        raise broker_error(result.error_code, result.error_message)
    return [
        ConfigEntry(c.name, c.value, c.config_source, c.read_only, c.is_sensitive, tuple((s.name, s.value, s.source) for s in c.synonyms))
        for c in result.configs
    ]


LATEST, EARLIEST = -1, -2
"""ListOffsets' timestamps for the log end and the log start offset."""
UNKNOWN_OFFSET = -1


async def list_offsets(client: KafkaClient, partitions: list[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
    """Offsets for ``timestamp`` (LATEST, EARLIEST or a time), asked of each partition's leader as Kafka's
    admin client asks (another broker answers NOT_LEADER_OR_FOLLOWER); partitions without one are left out."""
    if not partitions:
        return {}
    metadata = await topic_metadata(client, sorted({topic for topic, _ in partitions}))
    leaders = {(name, p.partition_index): p.leader_id for name, t in metadata.items() for p in t.partitions}
    by_leader: dict[int, dict[str, list[dict]]] = {}
    for topic, index in partitions:
        leader = leaders.get((topic, index), -1)
        if leader >= 0:
            by_leader.setdefault(leader, {}).setdefault(topic, []).append({"partition_index": index, "current_leader_epoch": -1, "timestamp": timestamp})
    found: dict[TopicPartition, int] = {}
    for leader, by_topic in by_leader.items():
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        response = await client.request(ApiKey.ListOffsets, body, node_id=leader)
        found.update({(t.name, p.partition_index): p.offset for t in response.topics for p in t.partitions if p.error_code == ErrorCode.NONE and p.offset != UNKNOWN_OFFSET})
    return found


async def controller_request(client: KafkaClient, api_key: int, body: dict) -> Container:
    """A request only the controller serves (CreateTopics, DeleteTopics, CreatePartitions), sent to the
    controller the metadata names, as Kafka's admin client sends it (another broker answers NOT_CONTROLLER).
    Like Kafka's admin client, it asks the metadata again, up to the client's request timeout, while it names
    no controller: a ZooKeeper-mode broker that has just started knows none until the controller's first
    UpdateMetadata (a console in it, asked at once, would otherwise be answered NOT_CONTROLLER)."""
    with anyio.move_on_after(client.request_timeout_s):
        await client.refresh_metadata([])
        while client.controller_id < 0:
            await anyio.sleep(CONTROLLER_LOOKUP_BACKOFF_S)
            await client.refresh_metadata([])
    return await client.request(api_key, body, node_id=client.controller_id if client.controller_id >= 0 else None)
