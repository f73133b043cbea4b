"""``odradek topics``: kafka-topics.sh without a JVM (--create, --list, --describe, --alter, --delete).

Output and failures read as Kafka 3.9's TopicCommand prints them: "Created topic t.", the describe lines with
their tabs, and "Error while executing topic command : <reason>" on stdout with exit code 1.
"""

from __future__ import annotations

import argparse

from odradek.broker.network.kafka_client import KafkaClient
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.tools.admin_common import (
    SOURCE_DEFAULT,
    BrokerError,
    CommandError,
    add_bootstrap_server,
    describe_configs,
    broker_error,
    controller_request,
    include_list,
    is_internal,
    run_command,
    topic_metadata,
    uuid_string,
)

TOPIC_RESOURCE = 2
TIMEOUT_MS = 30000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_server(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    for name, help_text in (
        ("create", "Create a new topic."),
        ("list", "List all available topics."),
        ("describe", "List details for the given topics."),
        ("alter", "Alter the number of partitions of a topic."),
        ("delete", "Delete a topic."),
    ):
        action.add_argument(f"--{name}", action="store_true", help=help_text)
    parser.add_argument("--topic", help="The topic to create, alter, describe or delete; a regular expression (except for --create).")
    parser.add_argument("--partitions", type=int, help="The number of partitions for the topic being created or altered.")
    parser.add_argument("--replication-factor", type=int, help="The replication factor for each partition in the topic being created.")
    parser.add_argument("--config", action="append", default=[], metavar="NAME=VALUE", help="A topic configuration override for the topic being created.")
    parser.add_argument("--if-exists", action="store_true", help="When altering, describing or deleting: only if the topic exists.")
    parser.add_argument("--if-not-exists", action="store_true", help="When creating: only if the topic does not exist already.")
    parser.add_argument("--exclude-internal", action="store_true", help="Exclude internal topics when listing or describing.")


def main(args: argparse.Namespace) -> int:
    if not args.list and not args.topic:
        print("Missing required argument \"[topic]\"")
        return 1
    command = {"create": create, "list": list_topics, "describe": describe, "alter": alter, "delete": delete}
    chosen = next(name for name in command if getattr(args, name))
    return run_command(args, command[chosen], lambda exc: print(f"Error while executing topic command : {exc}"))


def _configs(items: list[str]) -> dict[str, str]:
    configs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise CommandError('requirement failed: Invalid topic config: all configs to be added must be in the format "key=val".')
        configs[name.strip()] = value.strip()
    return configs


async def create(client: KafkaClient, args: argparse.Namespace) -> None:
    if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
        raise CommandError("The replication factor must be between 1 and 32767 inclusive")
    if args.partitions is not None and args.partitions < 1:
        raise CommandError("The partitions must be greater than 0")
    if "." in args.topic or "_" in args.topic:
        print("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. To avoid issues it is best to use either, but not both.")
    try:
        await create_topic(client, args.topic, -1 if args.partitions is None else args.partitions, -1 if args.replication_factor is None else args.replication_factor, _configs(args.config))
    except BrokerError as exc:
        if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
            return
        raise
    print(f"Created topic {args.topic}.")


async def create_topic(client: KafkaClient, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
    """CreateTopics for one topic (-1: the broker's default partitions or replication factor)."""
    topic = {"name": name, "num_partitions": partitions, "replication_factor": replication_factor, "configs": [{"name": k, "value": v} for k, v in configs.items()]}
    result = (await controller_request(client, ApiKey.CreateTopics, {"topics": [topic], "timeout_ms": TIMEOUT_MS})).topics[0]
    if result.error_code != ErrorCode.NONE:
        raise broker_error(result.error_code, result.error_message)


async def create_partitions(client: KafkaClient, names: list[str], count: int) -> None:
    body = {"topics": [{"name": n, "count": count, "assignments": None} for n in names], "timeout_ms": TIMEOUT_MS, "validate_only": False}
    for result in (await controller_request(client, ApiKey.CreatePartitions, body)).results:
        if result.error_code != ErrorCode.NONE:
            raise broker_error(result.error_code, result.error_message)


async def delete_topics(client: KafkaClient, names: list[str]) -> None:
    body = {"topic_names": names, "topics": [{"name": n} for n in names], "timeout_ms": TIMEOUT_MS}
    for result in (await controller_request(client, ApiKey.DeleteTopics, body)).responses:
        if result.error_code != ErrorCode.NONE:
            raise broker_error(result.error_code, getattr(result, "error_message", None))


async def _topics(client: KafkaClient, args: argparse.Namespace, *, require: bool) -> list[str]:
    """TopicCommand.getTopics (sorted, --topic as an include list) and ensureTopicExists."""
    names = sorted(await topic_metadata(client))
    if args.topic is not None:
        pattern = include_list(args.topic)
        names = [n for n in names if pattern.fullmatch(n) and not (args.exclude_internal and is_internal(n))]
    elif args.exclude_internal:
        names = [n for n in names if not is_internal(n)]
    if require and args.topic and not names and not args.if_exists:
        raise CommandError(f"Topic 'Optional[{args.topic}]' does not exist as expected")
    return names


async def list_topics(client: KafkaClient, args: argparse.Namespace) -> None:
    print("\n".join(await _topics(client, args, require=False)))


async def describe(client: KafkaClient, args: argparse.Namespace) -> None:
    names = await _topics(client, args, require=True)
    metadata = await topic_metadata(client, names) if names else {}
    for name in names:
        topic = metadata[name]
        partitions = sorted(topic.partitions, key=lambda p: p.partition_index)
        configs = [c for c in await describe_configs(client, TOPIC_RESOURCE, name) if c.source != SOURCE_DEFAULT]
        print(
            f"Topic: {name}\tTopicId: {uuid_string(topic.topic_id)}\tPartitionCount: {len(partitions)}\t"
            f"ReplicationFactor: {len(partitions[0].replica_nodes)}\tConfigs: {','.join(f'{c.name}={c.value}' for c in configs)}"
        )
        for p in partitions:
            leader = p.leader_id if p.leader_id >= 0 else "none"
            replicas = ",".join(map(str, p.replica_nodes))
            isr = ",".join(map(str, p.isr_nodes))
            # Elr: a ZooKeeper-mode cluster has no eligible leader replicas (KIP-966 is KRaft's).
            print(f"\tTopic: {name}\tPartition: {p.partition_index}\tLeader: {leader}\tReplicas: {replicas}\tIsr: {isr}\tElr: N/A\tLastKnownElr: N/A")


async def alter(client: KafkaClient, args: argparse.Namespace) -> None:
    names = await _topics(client, args, require=True)
    if not names:
        return
    if args.partitions is None:
        raise CommandError("--partitions is required to alter a topic")
    await create_partitions(client, names, args.partitions)


async def delete(client: KafkaClient, args: argparse.Namespace) -> None:
    names = await _topics(client, args, require=True)
    if not names:
        return
    await delete_topics(client, names)
