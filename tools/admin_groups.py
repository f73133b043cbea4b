"""``odradek groups``: kafka-consumer-groups.sh without a JVM: --list, --describe (offsets and lag; --members
[--verbose]; --state), --delete,
--reset-offsets (--to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime; a dry run unless --execute)
for --topic t[:p,...] or --all-topics.

Prints what Kafka 3.9's ConsumerGroupCommand prints, column widths and all. Where Kafka's tool prints rows in
the iteration order of a Java HashMap keyed by TopicPartition, so does this command (:func:`java_hash_order`):
the order is part of what the user sees.
"""

from __future__ import annotations

import argparse
import datetime
import struct
import sys

from odradek.broker.network.kafka_client import KafkaClient
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.java_hash import hash_map_spread, topic_partition_hash
from odradek.tools.admin_common import (
    EARLIEST,
    LATEST,
    CommandError,
    TopicPartition,
    add_bootstrap_server,
    broker_error,
    list_offsets,
    print_error,
    run_command,
    topic_metadata,
)

MISSING = "-"
CONSUMER_PROTOCOL = "consumer"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_server(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="List all consumer groups.")
    action.add_argument("--describe", action="store_true", help="Describe a consumer group: its committed offsets, log end offsets and lag.")
    action.add_argument("--delete", action="store_true", help="Delete consumer groups (they must have no members).")
    action.add_argument("--reset-offsets", action="store_true", help="Reset a group's offsets (a dry run unless --execute).")
    parser.add_argument("--group", action="append", default=[], help="The consumer group.")
    parser.add_argument("--all-groups", action="store_true", help="Every consumer group (with --describe, --delete, --reset-offsets).")
    parser.add_argument("--topic", action="append", default=[], help="With --reset-offsets: a topic, or topic:0,1 for some partitions.")
    parser.add_argument("--all-topics", action="store_true", help="With --reset-offsets: every topic the group has offsets for.")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="With --describe: committed offsets, log end offsets and lag (the default).")
    view.add_argument("--members", action="store_true", help="With --describe: the group's members.")
    view.add_argument("--state", action="store_true", help="With --describe: the group's coordinator, assignor, state and member count.")
    parser.add_argument("--verbose", action="store_true", help="With --describe --members: each member's partitions.")
    parser.add_argument("--execute", action="store_true", help="Commit the reset offsets.")
    parser.add_argument("--dry-run", action="store_true", help="Only show the new offsets (the default).")
    scenario = parser.add_mutually_exclusive_group()
    scenario.add_argument("--to-earliest", action="store_true", help="Reset to the earliest offset.")
    scenario.add_argument("--to-latest", action="store_true", help="Reset to the latest offset.")
    scenario.add_argument("--to-offset", type=int, help="Reset to this offset (kept within the partition's offsets).")
    scenario.add_argument("--shift-by", type=int, help="Move the committed offset by this many (kept within the partition's offsets).")
    scenario.add_argument("--to-datetime", help="Reset to the first offset at or after YYYY-MM-DDTHH:mm:SS.sss[timezone].")


def main(args: argparse.Namespace) -> int:
    if not args.list and not args.group and not args.all_groups:
        print_error("Option [describe, delete, reset-offsets] takes one of these options: [all-groups, group]")
        return 1
    if args.reset_offsets and args.execute and args.dry_run:
        print_error("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        return 1
    if args.reset_offsets and not args.execute and not args.dry_run:
        print_error(
            "WARN: No action will be performed as the --execute option is missing.In a future major release, the default "
            "behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. "
            "You should add the --dry-run option explicitly if you are scripting this command and want to keep the current "
            "default behavior without prompting."
        )
    command = list_groups if args.list else describe if args.describe else delete if args.delete else reset_offsets
    return run_command(args, command, lambda exc: print(f"\nError: {exc}"))


def java_hash_order(keys: list[TopicPartition]) -> list[TopicPartition]:
    """The order a java.util.HashMap (default capacity, doubling past 3/4 full) iterates TopicPartition keys
    inserted in this order: by bucket of the spread hash, then in insertion order within a bucket."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(tp: TopicPartition) -> int:
        return hash_map_spread(topic_partition_hash(*tp)) & (capacity - 1)

    return [tp for _, _, tp in sorted((bucket(tp), i, tp) for i, tp in enumerate(keys))]


async def list_groups(client: KafkaClient, args: argparse.Namespace) -> None:
    for group_id in await consumer_groups(client):
        print(group_id)


async def consumer_groups(client: KafkaClient) -> list[str]:
    """AdminClient.listConsumerGroups: groups of the consumer protocol, and simple groups (no protocol), from
    every broker (each lists only the groups it coordinates)."""
    return [g.group_id for g in await listed_groups(client) if g.protocol_type in (CONSUMER_PROTOCOL, "")]


async def listed_groups(client: KafkaClient) -> list:
    """ListGroups' entries from every broker of the cluster."""
    await client.refresh_metadata([])
    groups = []
    for node_id in sorted(client.nodes):
        response = await client.request(ApiKey.ListGroups, {"states_filter": [], "types_filter": []}, node_id=node_id)
        if response.error_code != ErrorCode.NONE:
            raise broker_error(response.error_code, None)
        groups += response.groups
    return groups


async def group_ids(client: KafkaClient, args: argparse.Namespace) -> list[str]:
    """--group, or every consumer group with --all-groups."""
    return await consumer_groups(client) if args.all_groups else args.group


async def describe_group(client: KafkaClient, group: str):
    response = await client.coordinator_request(group, ApiKey.DescribeGroups, {"groups": [group], "include_authorized_operations": False})
    described = response.groups[0]
    if described.error_code != ErrorCode.NONE:
        raise broker_error(described.error_code, None)
    return described


async def committed_offsets(client: KafkaClient, group: str) -> dict[TopicPartition, int]:
    body = {"group_id": group, "topics": None, "groups": [{"group_id": group, "topics": None}], "require_stable": False}
    response = await client.coordinator_request(group, ApiKey.OffsetFetch, body)
    topics = response.groups[0].topics if hasattr(response, "groups") and response.groups else response.topics
    return {(t.name, p.partition_index): p.committed_offset for t in topics for p in t.partitions if p.committed_offset >= 0}


def decode_assignment(data: bytes) -> list[TopicPartition]:
    """The partitions of a consumer protocol Assignment (any version: they all start with the topics)."""
    if not data:
        return []
    position = 2
    (count,) = struct.unpack_from(">i", data, position)
    position += 4
    out = []
    for _ in range(max(count, 0)):
        (length,) = struct.unpack_from(">h", data, position)
        topic = data[position + 2 : position + 2 + length].decode()
        position += 2 + length
        (partitions,) = struct.unpack_from(">i", data, position)
        position += 4
        out += [(topic, p) for p in struct.unpack_from(f">{partitions}i", data, position)]
        position += 4 * partitions
    return out


async def describe(client: KafkaClient, args: argparse.Namespace) -> None:
    if args.members:
        await describe_members(client, args)
    elif args.state:
        await describe_state(client, args)
    else:
        await describe_offsets(client, args)


async def describe_members(client: KafkaClient, args: argparse.Namespace) -> None:
    """ConsumerGroupCommand.printMembers (which prints the header whatever the group's state)."""
    for group in sorted(await group_ids(client, args)):
        described = await describe_group(client, group)
        members = [(m, decode_assignment(m.member_assignment)) for m in described.members]
        widths = {"group": 15, "id": 15, "instance": 17, "host": 15, "client": 15}
        with_instance = False
        if _should_print(group, described.group_state, len(members)):
            for m, _ in members:
                widths["group"] = max(widths["group"], len(group))
                widths["id"] = max(widths["id"], len(m.member_id))
                widths["instance"] = max(widths["instance"], len(m.group_instance_id or ""))
                widths["host"] = max(widths["host"], len(m.client_host))
                widths["client"] = max(widths["client"], len(m.client_id))
                with_instance = with_instance or bool(m.group_instance_id)

        def line(group_: str, member_id: str, instance: str, host: str, client_id: str, partitions: str) -> str:
            cells = f"{group_:<{widths['group']}} {member_id:<{widths['id']}} "
            if with_instance:
                cells += f"{instance:<{widths['instance']}} "
            return cells + f"{host:<{widths['host']}} {client_id:<{widths['client']}} {partitions:<15} "

        print("\n" + line("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS") + ("ASSIGNMENT" if args.verbose else ""))
        for m, assignment in members:
            by_topic: dict[str, list[str]] = {}
            for topic, index in assignment:
                by_topic.setdefault(topic, []).append(str(index))
            partitions = ", ".join(sorted("(" + ",".join(sorted(ps)) + ")" for ps in by_topic.values())) or MISSING
            print(line(group, m.member_id, m.group_instance_id or "", m.client_host, m.client_id, str(len(assignment))) + (partitions if args.verbose else ""))


async def describe_state(client: KafkaClient, args: argparse.Namespace) -> None:
    """ConsumerGroupCommand.printStates."""
    for group in sorted(await group_ids(client, args)):
        described = await describe_group(client, group)
        if not _should_print(group, described.group_state, 1):
            continue
        node = await client.find_coordinator(group)
        coordinator = f"{node.host}:{node.port}  ({node.node_id})"
        width = max(25, len(coordinator))
        row = "\n{:<%d} {:<25} {:<20} {:<15} {}" % width
        sys.stdout.write(row.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"))
        sys.stdout.write(row.format(group, coordinator, described.protocol_data, described.group_state, len(described.members)) + "\n")
        sys.stdout.flush()


async def describe_offsets(client: KafkaClient, args: argparse.Namespace) -> None:
    for group in sorted(await group_ids(client, args)):
        described = await describe_group(client, group)
        committed = await committed_offsets(client, group)
        rows: list[tuple[str, ...]] = []
        assigned: set[TopicPartition] = set()
        members = [(m, decode_assignment(m.member_assignment)) for m in described.members]
        for member, partitions in sorted((x for x in members if x[1]), key=lambda x: -len(x[1])):
            assigned.update(partitions)
            rows += await _partition_rows(client, group, partitions, committed, (member.member_id, member.client_host, member.client_id))
        unassigned = [tp for tp in committed if tp not in assigned]
        if unassigned:
            rows += await _partition_rows(client, group, unassigned, committed, (MISSING, MISSING, MISSING))
        if not _should_print(group, described.group_state, len(rows)):
            continue
        widths = [max([15] + [len(r[i]) for r in rows]) for i in (0, 1, 6, 7)]
        header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")
        out = []
        for row in [header, *rows]:
            out.append(
                f"\n{row[0]:<{widths[0]}} {row[1]:<{widths[1]}} {row[2]:<10} {row[3]:<15} {row[4]:<15} {row[5]:<15} "
                f"{row[6]:<{widths[2]}} {row[7]:<{widths[3]}} {row[8]}"
            )
        sys.stdout.write("".join(out))
        sys.stdout.flush()


def _should_print(group: str, state: str, rows: int) -> bool:
    """ConsumerGroupCommand.shouldPrintMemberState: what a group's state makes the tool say first."""
    if state == "Dead":
        print(f"\nError: Consumer group '{group}' does not exist.")
        return False
    if state == "Empty":
        print_error(f"\nConsumer group '{group}' has no active members.")
    elif state in ("PreparingRebalance", "CompletingRebalance"):
        print_error(f"\nWarning: Consumer group '{group}' is rebalancing.")
    return rows > 0


async def _partition_rows(client: KafkaClient, group: str, partitions: list[TopicPartition], committed: dict[TopicPartition, int], member: tuple[str, str, str]) -> list[tuple[str, ...]]:
    ordered = java_hash_order(sorted(partitions, key=lambda tp: tp[1]))
    ends = await list_offsets(client, ordered, LATEST)
    rows = []
    for tp in ordered:
        offset, end = committed.get(tp), ends.get(tp)
        lag = end - offset if offset is not None and end is not None else None
        cells = [offset, end, lag]
        rows.append((group, tp[0], str(tp[1]), *(MISSING if c is None else str(c) for c in cells), *member))
    return rows


async def delete(client: KafkaClient, args: argparse.Namespace) -> None:
    failed = {}
    groups = await group_ids(client, args)
    for group in groups:
        result = (await client.coordinator_request(group, ApiKey.DeleteGroups, {"groups_names": [group]})).results[0]
        if result.error_code != ErrorCode.NONE:
            failed[group] = result.error_code
    if not failed:
        print(f"Deletion of requested consumer groups ('{', '.join(groups)}') was successful.")
        return
    print("\nError: Deletion of some consumer groups failed:")
    for group, code in failed.items():
        exception = _exception_names.get(code, "org.apache.kafka.common.KafkaException")
        print(f"* Group '{group}' could not be deleted due to: java.util.concurrent.ExecutionException: {exception}: {ErrorCode(code).message}")
    succeeded = [g for g in groups if g not in failed]
    if succeeded:
        print(f"\nThese consumer groups were deleted successfully: '{chr(39).join(succeeded)}', '")


_exception_names = {
    ErrorCode.GROUP_ID_NOT_FOUND: "org.apache.kafka.common.errors.GroupIdNotFoundException",
    ErrorCode.NON_EMPTY_GROUP: "org.apache.kafka.common.errors.GroupNotEmptyException",
}
"""The Java exceptions the admin client raises for DeleteGroups' errors, as the tool prints them."""


def parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: ISO 8601 with milliseconds, UTC unless a zone is given."""
    date, sep, time_part = text.partition("T")
    if not sep:
        raise CommandError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format")
    if not any(c in time_part for c in "+-Z"):
        text += "Z"
    try:
        return int(datetime.datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000)
    except ValueError:
        raise CommandError(f'Unparseable date: "{text}"') from None


async def _partitions_to_reset(client: KafkaClient, args: argparse.Namespace, group: str) -> list[TopicPartition]:
    if args.all_topics:
        return list(await committed_offsets(client, group))
    if not args.topic:
        raise CommandError("One of the reset scopes should be defined: --all-topics, --topic.")
    specified, whole = [], []
    for arg in args.topic:
        if ":" in arg:
            topic, _, partitions = arg.partition(":")
            specified += [(topic, int(p)) for p in partitions.split(",")]
        else:
            whole.append(arg)
    metadata = await topic_metadata(client, whole) if whole else {}
    return specified + [(t, p.partition_index) for t in whole if t in metadata for p in metadata[t].partitions]


async def _clamped(client: KafkaClient, requested: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """ConsumerGroupCommand.checkOffsetsRange: within [log start, log end]."""
    starts = await list_offsets(client, list(requested), EARLIEST)
    ends = await list_offsets(client, list(requested), LATEST)
    return {tp: min(max(offset, starts.get(tp, offset)), ends.get(tp, offset)) for tp, offset in requested.items()}


async def new_offsets(client: KafkaClient, args: argparse.Namespace, group: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    if args.to_offset is not None:
        return await _clamped(client, {tp: args.to_offset for tp in partitions})
    if args.shift_by is not None:
        committed = await committed_offsets(client, group)
        missing = [tp for tp in partitions if tp not in committed]
        if missing:
            raise CommandError(f"Cannot shift offset for partition {missing[0][0]}-{missing[0][1]} since there is no current committed offset")
        return await _clamped(client, {tp: committed[tp] + args.shift_by for tp in partitions})
    if args.to_datetime is not None:
        found = await list_offsets(client, partitions, parse_datetime(args.to_datetime))
        empty = [tp for tp in partitions if tp not in found]
        for topic, index in empty:
            print(f"\nWarn: Partition {index} from topic {topic} is empty. Falling back to latest known offset.")
        return found | await list_offsets(client, empty, LATEST)
    if args.to_earliest or args.to_latest:
        return await list_offsets(client, partitions, EARLIEST if args.to_earliest else LATEST)
    raise CommandError("Option '[reset-offsets]' requires one of the following scenarios: [to-offset, to-datetime, by-duration, to-earliest, to-latest, shift-by, from-file]")


async def reset_offsets(client: KafkaClient, args: argparse.Namespace) -> None:
    plans: dict[str, dict[TopicPartition, int]] = {}
    for group in await group_ids(client, args):
        state = (await describe_group(client, group)).group_state
        if state not in ("Empty", "Dead"):
            print(f"\nError: Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}.")
            plans[group] = {}
            continue
        partitions = await _partitions_to_reset(client, args, group)
        offsets = await new_offsets(client, args, group, partitions)
        plans[group] = {tp: offsets[tp] for tp in java_hash_order([tp for tp in partitions if tp in offsets])}
        if args.execute:
            await commit_offsets(client, group, plans[group])
    if plans:
        row = "{:<30} {:<30} {:<10} {:<15}"
        out = ["\n" + row.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
        out += [row.format(group, topic, index, offset) for group, plan in plans.items() for (topic, index), offset in plan.items()]
        sys.stdout.write("".join(out))
        sys.stdout.flush()


async def commit_offsets(client: KafkaClient, group: str, offsets: dict[TopicPartition, int]) -> None:
    """AdminClient.alterConsumerGroupOffsets: an OffsetCommit outside any generation."""
    by_topic: dict[str, list[dict]] = {}
    for (topic, index), offset in offsets.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "committed_offset": offset, "committed_leader_epoch": -1, "committed_metadata": ""})
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
    response = await client.coordinator_request(group, ApiKey.OffsetCommit, body)
    for topic in response.topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.NONE:
                raise broker_error(p.error_code, None)
