"""DescribeShareGroupOffsets (KIP-932; ``kafka-share-groups.sh --describe``): each share partition's start
offset (SPSO) and lag, from the state the share coordinator keeps. The lag (v1+) counts the records from
the SPSO to the high watermark whose delivery is not complete yet (KIP-1226: the SPSO as persisted may
trail records already acknowledged, which the lag leaves out).

Each partition's state is read from its share coordinator, on this broker or another
(ReadShareGroupStateSummary, through the persister), and its high watermark from its leader, this broker
or another (ListOffsets, through the partition metadata client, as Kafka 4.4's KIP-1226); a partition the
group never consumed is answered with start offset -1, as Kafka answers it. Without topics, the group's are
those its members subscribe to, those with state in this broker's share coordinator, and the partitions of
any other topic whose state another broker's share coordinator keeps: Kafka's group coordinator remembers
which topics it initialized (ShareGroupStatePartitionMetadata records), odradek's does not, so it reads
every other topic's state and answers only the partitions that have some.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.group.share_groups import ShareGroupCoordinator
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.share.share_records import SharePartitionKey
from odradek.broker.handlers.share_acknowledgements import when_done
from odradek.broker.share.partition_metadata_client import PartitionMetadataClient
from odradek.broker.share.share_partition_manager import SharePartitionManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import ZERO_UUID

if TYPE_CHECKING:
    from odradek.protocol.message_types.describe_share_group_offsets import (
        DescribeShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsResponseGroupDict,
        DescribeShareGroupOffsetsResponsePartitionDict,
    )

NO_OFFSET = -1
NO_TOPIC_ID = ZERO_UUID


def handle(
    share_groups: ShareGroupCoordinator, share_partitions: SharePartitionManager, partition_metadata_client: PartitionMetadataClient,
    authorization: Authorization, request: Request[DescribeShareGroupOffsetsRequest],
) -> Any:
    replicas = share_partitions.replica_manager
    coordinator = share_partitions.coordinator
    groups: list[DescribeShareGroupOffsetsResponseGroupDict] = []
    reads: list[Deferred[Any]] = []
    probed: list[set[str]] = []
    """Per group entry, in order: the topics read only to find whether the group has state in them."""
    for group in request.body.groups:
        entry: DescribeShareGroupOffsetsResponseGroupDict = {"group_id": group.group_id, "topics": []}
        groups.append(entry)
        probes: set[str] = set()
        probed.append(probes)
        if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id):
            entry["error_code"] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        error = share_groups.coordinator_error(group.group_id)
        if error is not None or coordinator is None:
            entry["error_code"] = error or ErrorCode.COORDINATOR_NOT_AVAILABLE
            continue
        if group.topics is None:
            wanted: dict[str, list[int]] = {}
            for key in coordinator.group_partitions(group.group_id):
                name = replicas.by_topic_id.get(key.topic_id)
                if name is not None:
                    wanted.setdefault(name, []).append(key.partition)
            known = share_groups.groups.groups.get(group.group_id)
            for name in known.subscribed_topics() if known is not None else ():
                topic = share_groups.groups.topics(name)
                if topic is not None:
                    wanted[name] = sorted(set(wanted.get(name, [])) | set(range(topic[1])))
            probes.update(name for name in share_groups.groups.topic_names() if name not in wanted)
            for name in probes:
                topic = share_groups.groups.topics(name)
                if topic is not None:
                    wanted[name] = list(range(topic[1]))
        else:
            wanted = {t.topic_name: list(t.partitions) for t in group.topics}
        for name, partitions in sorted(wanted.items()):
            if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                continue  # as Kafka: topics the caller may not describe are left out
            found = share_groups.groups.topics(name)
            topic_id = found[0] if found is not None else None
            answers = [_partition(share_partitions, partition_metadata_client, group.group_id, topic_id, name, index, reads.append) for index in sorted(partitions)]
            entry["topics"].append({"topic_name": name, "topic_id": topic_id or NO_TOPIC_ID, "partitions": answers})
        entry["error_code"] = ErrorCode.NONE
    return when_done(reads, lambda: {"groups": [_without_stateless(entry, probes) for entry, probes in zip(groups, probed)]})


def _without_stateless(entry: DescribeShareGroupOffsetsResponseGroupDict, probed: set[str]) -> DescribeShareGroupOffsetsResponseGroupDict:
    """``entry`` without the partitions of the ``probed`` topics that hold no state of the group."""
    kept = []
    for topic in entry["topics"]:
        if topic["topic_name"] in probed:
            topic["partitions"] = [p for p in topic["partitions"] if p["start_offset"] != NO_OFFSET or p["error_code"] != ErrorCode.NONE]
            if not topic["partitions"]:
                continue
        kept.append(topic)
    entry["topics"] = kept
    return entry


def _partition(manager: SharePartitionManager, latest: PartitionMetadataClient, group: str, topic_id: Any, name: str, index: int, waiting: Callable[[Deferred[Any]], None]) -> DescribeShareGroupOffsetsResponsePartitionDict:
    """The partition's answer, filled in once its share coordinator and, for a consumed one, its leader
    answered (``waiting`` is handed what it waits for)."""
    answer: DescribeShareGroupOffsetsResponsePartitionDict = {"partition_index": index, "start_offset": NO_OFFSET, "leader_epoch": -1, "lag": -1, "error_code": ErrorCode.NONE}
    if topic_id is None:
        answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return answer
    assert manager.persister is not None
    read = manager.persister.read_summary(SharePartitionKey(group, topic_id, index))
    filled: Deferred[None] = Deferred()
    waiting(filled)

    def summarized(state: Any) -> None:
        if state.error != ErrorCode.NONE or state.start_offset < 0:  # never consumed, reset to uninitialized, or not readable
            filled.complete(None)
            return
        answer["start_offset"], answer["leader_epoch"] = state.start_offset, state.leader_epoch

        def led(high_watermark: int) -> None:
            _lag(answer, state, high_watermark)
            filled.complete(None)

        latest.latest_offset(name, index).add_callback(led)

    read.add_callback(summarized)
    return answer


def _lag(answer: DescribeShareGroupOffsetsResponsePartitionDict, state: Any, high_watermark: int) -> None:
    """The records from the start offset to the leader's high watermark not yet complete; unknown (-1) when
    the leader could not be asked, or the start offset is past the log's end (reset there), as Kafka answers."""
    if high_watermark < 0 or state.start_offset > high_watermark:
        return
    complete = max(0, state.delivery_complete_count)
    answer["lag"] = max(0, high_watermark - state.start_offset - complete)
