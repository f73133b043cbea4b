"""``odradek offsets``: kafka-get-offsets.sh without a JVM.

Prints ``topic:partition:offset`` for every partition the filters match, ordered as Kafka's GetOffsetShell
orders them (by the text ``topic-partition``, so ``t-10`` before ``t-2``), leaving out partitions with no
offset for the time asked; failures read "Error occurred: <reason>" on stderr, exit code 1.
"""

from __future__ import annotations

import argparse

from odradek.broker.network.kafka_client import KafkaClient
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.tools.admin_common import CommandError, add_bootstrap_server, include_list, is_internal, print_error, run_command, topic_metadata

NAMED_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5}
"""GetOffsetShell's names for ListOffsets' special timestamps."""
UNKNOWN_OFFSET = -1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_server(parser)
    parser.add_argument("--topic", help="The topic to get offsets from: a regular expression; all topics if unset.")
    parser.add_argument("--partitions", help="Comma separated list of partition ids; all partitions if unset.")
    parser.add_argument("--time", default="latest", help="-1 or latest / -2 or earliest / -3 or max-timestamp, or a timestamp in ms: the offset of the first record at or after it. Default latest.")
    parser.add_argument("--exclude-internal-topics", action="store_true", help="Leave out internal topics.")


def main(args: argparse.Namespace) -> int:
    return run_command(args, print_offsets, lambda exc: print_error(f"Error occurred: {exc}"))


def parse_time(value: str) -> int:
    if value in NAMED_TIMES:
        return NAMED_TIMES[value]
    try:
        return int(value)
    except ValueError:
        raise CommandError(
            f"Malformed time argument {value}. Please use -1 or latest / -2 or earliest / -3 or max-timestamp / -4 or "
            "earliest-local / -5 or latest-tiered, or a specified long format timestamp"
        ) from None


def parse_partitions(value: str | None) -> set[int]:
    if not value:
        return set()
    try:
        return {int(p) for p in value.split(",")}
    except ValueError:
        raise CommandError(f"--partitions expects a comma separated list of numeric partition ids, but received: {value}") from None


async def print_offsets(client: KafkaClient, args: argparse.Namespace) -> None:
    timestamp = parse_time(args.time)
    partitions = parse_partitions(args.partitions)
    pattern = include_list(args.topic if args.topic is not None else ".*")
    topics = {
        name: topic
        for name, topic in (await topic_metadata(client)).items()
        if pattern.fullmatch(name) and not (args.exclude_internal_topics and is_internal(name))
    }
    wanted = [(name, p.partition_index) for name, topic in topics.items() for p in topic.partitions if not partitions or p.partition_index in partitions]
    if not wanted:
        raise CommandError("Could not match any topic-partitions with the specified filters")
    by_topic: dict[str, list[dict]] = {}
    for name, index in wanted:
        by_topic.setdefault(name, []).append({"partition_index": index, "current_leader_epoch": -1, "timestamp": timestamp})
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": n, "partitions": ps} for n, ps in by_topic.items()]}
    offsets = {}
    for topic in (await client.request(ApiKey.ListOffsets, body)).topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.NONE:
                print_error(f"Skip getting offsets for topic-partition {topic.name}-{p.partition_index} due to error: {ErrorCode(p.error_code).message}")
            elif p.offset != UNKNOWN_OFFSET:
                offsets[topic.name, p.partition_index] = p.offset
    for (name, index), offset in sorted(offsets.items(), key=lambda item: f"{item[0][0]}-{item[0][1]}"):
        print(f"{name}:{index}:{offset}")
