"""DeleteRecords: move a partition's log start offset forward; consumers then start at the new low watermark.

As Kafka's ``ReplicaManager.deleteRecordsOnLocalLog`` and ``Partition.deleteRecordsOnLeader``: internal
topics are refused (INVALID_TOPIC_EXCEPTION), a topic without the ``delete`` cleanup policy is
POLICY_VIOLATION, offset -1 means the high watermark and an offset past it is OFFSET_OUT_OF_RANGE.
Failed partitions report low watermark -1. The answer is immediate: on a single node the leader's log start
offset is the low watermark every replica has reached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.controller.metadata_image import MetadataImage
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.protocol.message_types.delete_records import DeleteRecordsPartitionResultDict, DeleteRecordsRequest, DeleteRecordsResponseDict, DeleteRecordsTopicResultDict

INVALID_LOW_WATERMARK = -1


def delete_records(metadata: MetadataImage, replica_manager: ReplicaManager, topic_name: str, index: int, offset: int) -> int:
    """The partition's new low watermark after deleting the records below ``offset``."""
    topic = metadata.topics.get(topic_name)
    if topic is None or index not in topic.partitions:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return replica_manager.delete_records(topic_name, index, offset)


def handle(metadata: MetadataImage, replica_manager: ReplicaManager, authorization: Authorization, request: Request[DeleteRecordsRequest]) -> DeleteRecordsResponseDict:
    """Needs DELETE on each topic, else its partitions are answered TOPIC_AUTHORIZATION_FAILED (Kafka)."""
    deletable = authorization.filter_authorized(request, AclOperation.DELETE, ResourceType.TOPIC, {t.name for t in request.body.topics})
    topics: list[DeleteRecordsTopicResultDict] = []
    for t in request.body.topics:
        partitions: list[DeleteRecordsPartitionResultDict] = []
        for p in t.partitions:
            entry: DeleteRecordsPartitionResultDict = {"partition_index": p.partition_index, "low_watermark": INVALID_LOW_WATERMARK, "error_code": ErrorCode.NONE}
            if t.name not in deletable:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                partitions.append(entry)
                continue
            try:
                entry["low_watermark"] = delete_records(metadata, replica_manager, t.name, p.partition_index, p.offset)
            except KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": t.name, "partitions": partitions})
    return {"topics": topics}
