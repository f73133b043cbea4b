"""DescribeShareGroupOffsets (KIP-932; ``kafka-share-groups.sh --describe``): each share partition's start
offset (SPSO) and lag, from the state the share coordinator keeps. The lag (v1+) counts the records from
the SPSO to the high watermark whose delivery is not complete yet (KIP-1226: the SPSO as persisted may
trail records already acknowledged, which the lag leaves out).

Answered from the share coordinators on this broker (a single node, or partitions whose
``__share_group_state`` partition this broker leads); a partition without state here is answered with
start offset -1, as Kafka answers one the group never consumed.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.group.share_groups import ShareGroupCoordinator
from odradek.broker.coordinator.share.share_records import SharePartitionKey, delivery_complete_count
from odradek.broker.share.share_partition_manager import SharePartitionManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.describe_share_group_offsets import (
        DescribeShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsResponseDict,
        DescribeShareGroupOffsetsResponseGroupDict,
        DescribeShareGroupOffsetsResponsePartitionDict,
    )

NO_OFFSET = -1
NO_TOPIC_ID = uuid.UUID(int=0)


def handle(share_groups: ShareGroupCoordinator, share_partitions: SharePartitionManager, authorization: Authorization, request: Request[DescribeShareGroupOffsetsRequest]) -> DescribeShareGroupOffsetsResponseDict:
    replicas = share_partitions.replica_manager
    coordinator = share_partitions.coordinator
    groups: list[DescribeShareGroupOffsetsResponseGroupDict] = []
    for group in request.body.groups:
        entry: DescribeShareGroupOffsetsResponseGroupDict = {"group_id": group.group_id, "topics": []}
        groups.append(entry)
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
        else:
            wanted = {t.topic_name: list(t.partitions) for t in group.topics}
        for name, partitions in sorted(wanted.items()):
            if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                continue  # as Kafka: topics the caller may not describe are left out
            found = share_groups.groups.topics(name)
            topic_id = found[0] if found is not None else None
            answers = [_partition(share_partitions, group.group_id, topic_id, name, index) for index in sorted(partitions)]
            entry["topics"].append({"topic_name": name, "topic_id": topic_id or NO_TOPIC_ID, "partitions": answers})
        entry["error_code"] = ErrorCode.NONE
    return {"groups": groups}


def _partition(manager: SharePartitionManager, group: str, topic_id: Any, name: str, index: int) -> DescribeShareGroupOffsetsResponsePartitionDict:
    answer: DescribeShareGroupOffsetsResponsePartitionDict = {"partition_index": index, "start_offset": NO_OFFSET, "leader_epoch": -1, "lag": -1, "error_code": ErrorCode.NONE}
    if topic_id is None:
        answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return answer
    assert manager.coordinator is not None
    error, state = manager.coordinator.read_state(SharePartitionKey(group, topic_id, index))
    if state is None or state.start_offset < 0:  # never consumed, or reset to uninitialized
        return answer
    answer["start_offset"], answer["leader_epoch"] = state.start_offset, state.leader_epoch
    try:
        high_watermark = manager.replica_manager.get_partition(name, index).high_watermark
    except Exception:  # not hosted here: the lag is unknown
        return answer
    if state.start_offset > high_watermark:  # reset past the log's end: unknown, as Kafka answers it
        return answer
    answer["lag"] = max(0, high_watermark - state.start_offset - delivery_complete_count(state.start_offset, state.batches))
    return answer
