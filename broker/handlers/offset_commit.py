"""OffsetCommit: store a group's positions in ``__consumer_offsets`` (answered once committed, acks=all).

Partitions of unknown topics are answered UNKNOWN_TOPIC_OR_PARTITION and not stored. A commit timestamp
of -1 (v1) means now; an explicit retention time (v2-v4) gives the offset its own expiry, persisted in the
v1 record format as Kafka does. The expiry is now + retention in Java longs, as Kafka's
GroupCoordinatorAdapter computes it: a retention near Long.MAX_VALUE wraps to an expiry in the past, and the
offset is committed (and expires at the next expiration pass) rather than refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.broker.coordinator.group.group_metadata_records import OffsetAndMetadata
from odradek.broker.coordinator.group.group_requests import partition_exists
from odradek.controller.metadata_image import MetadataImage
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.java_hash import int64
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.protocol.message_types.offset_commit import OffsetCommitRequest, OffsetCommitResponseDict, OffsetCommitResponsePartitionDict

DEFAULT_TIMESTAMP = -1
DEFAULT_RETENTION_TIME = -1


def handle(group_coordinator: CoordinatorRuntime, metadata: MetadataImage, authorization: Authorization, request: Request[OffsetCommitRequest]) -> OffsetCommitResponseDict | Awaitable[OffsetCommitResponseDict]:
    body = request.body
    if not authorization.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return {"topics": [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": error} for p in t.partitions]} for t in body.topics]}
    readable = authorization.filter_authorized(request, AclOperation.READ, ResourceType.TOPIC, {t.name for t in body.topics})
    runtime = group_coordinator
    now = runtime.coordinator.clock()  # the clock offset expiry compares these timestamps with
    expire = None if body.retention_time_ms == DEFAULT_RETENTION_TIME else int64(now + body.retention_time_ms)
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    order: list[TopicPartition] = []
    for topic in body.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            order.append(tp)
            if topic.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not partition_exists(metadata, *tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch,
                metadata=p.committed_metadata if p.committed_metadata is not None else "",
                commit_timestamp=now if p.commit_timestamp == DEFAULT_TIMESTAMP else p.commit_timestamp,
                expire_timestamp=expire,
            )

    def response(results: dict[TopicPartition, ErrorCode]) -> OffsetCommitResponseDict:
        merged = {**errors, **results}
        topics: dict[str, list[OffsetCommitResponsePartitionDict]] = {}
        for name, index in dict.fromkeys(order):
            topics.setdefault(name, []).append({"partition_index": index, "error_code": merged[(name, index)]})
        return {"topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}

    if not offsets:
        return response({})
    deferred = runtime.coordinator.commit_offsets(body.group_id, body.member_id, body.group_instance_id, body.generation_id_or_member_epoch, offsets, request.header.api_version)
    return runtime.respond(deferred, response)
