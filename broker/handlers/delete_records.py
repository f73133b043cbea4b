"""DeleteRecords: move a partition's log start offset forward; consumers then start at the new low watermark.

As Kafka's ``ReplicaManager.deleteRecordsOnLocalLog`` and ``Partition.deleteRecordsOnLeader``: internal
topics are refused (INVALID_TOPIC_EXCEPTION), a topic without the ``delete`` cleanup policy is
POLICY_VIOLATION, offset -1 means the high watermark and an offset past it is OFFSET_OUT_OF_RANGE.
Failed partitions report low watermark -1. The answer is immediate: on a single node the leader's log start
offset is the low watermark every replica has reached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.controller.metadata import INTERNAL_TOPICS
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer

INVALID_LOW_WATERMARK = -1


def delete_records(server: "KafkaServer", topic_name: str, index: int, offset: int) -> int:
    """The partition's new low watermark after deleting the records below ``offset``."""
    topic = server.metadata.topics.get(topic_name)
    if topic is None or index not in topic.partitions:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if topic_name in INTERNAL_TOPICS:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot delete records of internal topic {topic_name}")
    partition = server.replica_manager.leader_partition(topic_name, index)
    if not partition.log.config.delete:
        raise KafkaError(ErrorCode.POLICY_VIOLATION, f"Records of partition {topic_name}-{index} can not be deleted due to the configured policy")
    try:
        return partition.log.delete_records_before(offset)
    except OSError as exc:
        # A full or failed disk: the request is answered, and the deletion can be asked again once it is fixed.
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Failed to delete records of {topic_name}-{index}: {exc}") from exc


def handle(server: "KafkaServer", request: Request) -> dict:
    topics = []
    for t in request.body.topics:
        partitions = []
        for p in t.partitions:
            entry = {"partition_index": p.partition_index, "low_watermark": INVALID_LOW_WATERMARK, "error_code": ErrorCode.NONE}
            try:
                entry["low_watermark"] = delete_records(server, t.name, p.partition_index, p.offset)
            except KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": t.name, "partitions": partitions})
    return {"topics": topics}
