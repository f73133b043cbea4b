"""AlterShareGroupOffsets (KIP-932; ``kafka-share-groups.sh --reset-offsets``): each share partition named
starts again at the offset given, with nothing in flight.

As Kafka 4.4: the group must be empty (NON_EMPTY_GROUP) and is made if it does not exist; a topic or
partition that does not exist is answered UNKNOWN_TOPIC_OR_PARTITION on its own; the answer waits for the
share coordinator to write the new state (a DescribeShareGroupOffsets that follows sees it). The tool
computes the offsets (earliest, latest, a datetime...) itself with ListOffsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.group.share_groups import ShareGroupCoordinator
from odradek.broker.handlers.share_acknowledgements import when_done
from odradek.broker.share.share_partition_manager import SharePartitionManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import ZERO_UUID

if TYPE_CHECKING:
    from odradek.protocol.message_types.alter_share_group_offsets import (
        AlterShareGroupOffsetsRequest,
        AlterShareGroupOffsetsResponsePartitionDict,
        AlterShareGroupOffsetsResponseTopicDict,
    )

NO_TOPIC_ID = ZERO_UUID
INVALID_GROUP_ID_MESSAGE = "The group id is invalid."


def group_refusal(share_groups: ShareGroupCoordinator, share_partitions: SharePartitionManager, authorization: Authorization, request: Request[Any], operation: AclOperation, create: bool) -> dict | None:
    """The top-level answer of Alter/DeleteShareGroupOffsets when the group cannot be changed, else None."""
    group = request.body.group_id
    if not group:
        return {"error_code": ErrorCode.INVALID_GROUP_ID, "error_message": INVALID_GROUP_ID_MESSAGE, "responses": []}
    if not authorization.authorize(request, operation, ResourceType.GROUP, group):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "error_message": ErrorCode.GROUP_AUTHORIZATION_FAILED.message, "responses": []}
    if share_partitions.coordinator is None:
        return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": None, "responses": []}
    persisted = bool(share_partitions.coordinator.group_partitions(group))
    error, message = share_groups.empty_group(group, create or persisted)
    if error != ErrorCode.NONE:
        return {"error_code": error, "error_message": message, "responses": []}
    return None


def handle(share_groups: ShareGroupCoordinator, share_partitions: SharePartitionManager, authorization: Authorization, request: Request[AlterShareGroupOffsetsRequest]) -> Any:
    refusal = group_refusal(share_groups, share_partitions, authorization, request, AclOperation.READ, create=True)
    if refusal is not None:
        return refusal
    group = request.body.group_id
    writes: list[tuple[AlterShareGroupOffsetsResponsePartitionDict, Deferred[ErrorCode]]] = []
    topics: list[AlterShareGroupOffsetsResponseTopicDict] = []
    for topic in request.body.topics:
        found = share_groups.groups.topics(topic.topic_name)
        allowed = authorization.authorize(request, AclOperation.READ, ResourceType.TOPIC, topic.topic_name)
        answer: AlterShareGroupOffsetsResponseTopicDict = {"topic_name": topic.topic_name, "topic_id": found[0] if found and allowed else NO_TOPIC_ID, "partitions": []}
        topics.append(answer)
        for p in topic.partitions:
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED if not allowed else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if found is None or not 0 <= p.partition_index < found[1] else None
            partition: AlterShareGroupOffsetsResponsePartitionDict = {"partition_index": p.partition_index, "error_code": error or ErrorCode.NONE, "error_message": error.message if error else None}
            answer["partitions"].append(partition)
            if error is None and found is not None:
                writes.append((partition, share_partitions.reset_start_offset(group, found[0], p.partition_index, p.start_offset)))

    def respond() -> dict:
        for partition, written in writes:
            if written.value != ErrorCode.NONE:
                partition.update({"error_code": written.value, "error_message": written.value.message})
        return {"error_code": ErrorCode.NONE, "error_message": None, "responses": topics}

    return when_done([d for _, d in writes], respond)
