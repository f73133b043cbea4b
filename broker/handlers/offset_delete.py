"""OffsetDelete: remove a group's committed offsets for some partitions (KIP-496).

An Empty group loses any of them; a consumer group with members only those of topics no member subscribes
to (the others answer GROUP_SUBSCRIBED_TO_TOPIC); other groups with members refuse with NON_EMPTY_GROUP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.broker.coordinator.group.group_requests import partition_exists
from odradek.controller.metadata_image import MetadataImage
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.protocol.message_types.offset_delete import OffsetDeleteRequest, OffsetDeleteResponseDict, OffsetDeleteResponsePartitionDict


def handle(group_coordinator: CoordinatorRuntime, metadata: MetadataImage, authorization: Authorization, request: Request[OffsetDeleteRequest]) -> OffsetDeleteResponseDict:
    """Needs DELETE on the group (else GROUP_AUTHORIZATION_FAILED) and READ on each topic (else its
    partitions get TOPIC_AUTHORIZATION_FAILED), as Kafka."""
    body = request.body
    if not authorization.authorize(request, AclOperation.DELETE, ResourceType.GROUP, body.group_id):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "topics": []}
    readable = authorization.filter_authorized(request, AclOperation.READ, ResourceType.TOPIC, {t.name for t in body.topics})
    errors: dict[TopicPartition, ErrorCode] = {}
    known = []
    for topic in body.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition_exists(metadata, *tp):
                known.append(tp)
            else:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    error, results = group_coordinator.coordinator.delete_offsets(body.group_id, known)
    if error != ErrorCode.NONE:
        return {"error_code": error, "topics": []}
    errors.update(results)
    by_topic: dict[str, list[OffsetDeleteResponsePartitionDict]] = {}
    for (name, index), e in errors.items():
        by_topic.setdefault(name, []).append({"partition_index": index, "error_code": e})
    return {"error_code": ErrorCode.NONE, "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()]}
