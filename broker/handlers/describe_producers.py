"""DescribeProducers (KIP-664): the producers a partition's leader tracks, for finding hanging transactions.

Each entry is the log's producer state: id, epoch, last sequence, last timestamp, coordinator epoch and
the first offset of its open transaction (-1 when none). Errors as Kafka's ``handleDescribeProducersRequest``:
an illegal topic name is INVALID_TOPIC_EXCEPTION, an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION
(with Kafka's default messages), a topic the client may not READ TOPIC_AUTHORIZATION_FAILED, and a partition
led elsewhere NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.controller.metadata_image import MetadataImage, topic_name_error
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.protocol.message_types.describe_producers import DescribeProducersRequest, DescribeProducersResponseDict, PartitionResponseDict, ProducerStateDict, TopicResponseDict


def active_producers(replica_manager: ReplicaManager, topic: str, index: int) -> list[ProducerStateDict]:
    return [
        {
            "producer_id": producer_id,
            "producer_epoch": entry.producer_epoch,
            "last_sequence": entry.last_seq,
            "last_timestamp": entry.last_timestamp,
            "coordinator_epoch": entry.coordinator_epoch,
            "current_txn_start_offset": -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
        }
        for producer_id, entry in replica_manager.active_producers(topic, index)
    ]


def _topic_error(metadata: MetadataImage, authorization: Authorization, request: Request, name: str) -> KafkaError | None:
    reason = topic_name_error(name)
    if reason:
        return KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
    if not authorization.authorize(request, AclOperation.READ, ResourceType.TOPIC, name):
        return KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED.message)
    if name not in metadata.topics:
        return KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message)
    return None


def handle(metadata: MetadataImage, replica_manager: ReplicaManager, authorization: Authorization, request: Request[DescribeProducersRequest]) -> DescribeProducersResponseDict:
    topics: list[TopicResponseDict] = []
    for t in request.body.topics:
        topic_error = _topic_error(metadata, authorization, request, t.name)
        partitions: list[PartitionResponseDict] = []
        for index in t.partition_indexes:
            entry: PartitionResponseDict = {"partition_index": index, "error_code": ErrorCode.NONE, "error_message": None, "active_producers": []}
            try:
                if topic_error is not None:
                    raise topic_error
                entry["active_producers"] = active_producers(replica_manager, t.name, index)
            except KafkaError as exc:
                entry.update({"error_code": exc.code, "error_message": exc.message})
            partitions.append(entry)
        topics.append({"name": t.name, "partitions": partitions})
    return {"topics": topics}
