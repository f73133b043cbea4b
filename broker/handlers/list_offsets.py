"""ListOffsets: earliest, latest, max timestamp (KIP-734) and by timestamp.

By timestamp the answer is the first offset whose timestamp is at least the target, and -1 when there
is none below the high watermark (librdkafka's suite and Spark's ``startingOffsetsByTimestamp`` rely on
it). ``latest`` is the high watermark, or the last stable offset for READ_COMMITTED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.protocol.message_types.list_offsets import ListOffsetsPartitionResponseDict, ListOffsetsRequest, ListOffsetsResponseDict, ListOffsetsTopicResponseDict


def handle(replica_manager: ReplicaManager, authorization: Authorization, request: Request[ListOffsetsRequest]) -> ListOffsetsResponseDict:
    """Topics the client may not DESCRIBE are answered TOPIC_AUTHORIZATION_FAILED, after the others (Kafka)."""
    body = request.body
    version = request.header.api_version
    describable = authorization.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.TOPIC, {t.name for t in body.topics})
    topics: list[ListOffsetsTopicResponseDict] = []
    refused: list[ListOffsetsTopicResponseDict] = []
    for t in body.topics:
        if t.name not in describable:
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            refused.append({"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": error, "timestamp": -1, "offset": -1, "leader_epoch": -1} for p in t.partitions]})
            continue
        partitions: list[ListOffsetsPartitionResponseDict] = []
        for p in t.partitions:
            entry: ListOffsetsPartitionResponseDict = {"partition_index": p.partition_index, "error_code": ErrorCode.NONE, "timestamp": -1, "offset": -1, "leader_epoch": -1}
            try:
                ts, offset, epoch = replica_manager.fetch_offset_for_timestamp(t.name, p.partition_index, p.timestamp, body.isolation_level, body.replica_id, p.current_leader_epoch)
                entry.update({"timestamp": ts, "offset": offset, "leader_epoch": epoch})
                if version == 0:
                    entry["old_style_offsets"] = [offset] if offset >= 0 and p.max_num_offsets > 0 else []
            except KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": t.name, "partitions": partitions})
    return {"topics": topics + refused}
