"""OffsetForLeaderEpoch: the end offset of a leader epoch, from the partition's epoch cache.

Consumers (Java client) validate their position with it after metadata changes, and followers truncate
with it; the answer must be the true end offset of the requested epoch (the start offset of the next
higher epoch, or the log end offset for the current one), or clients report truncation.

Followers need CLUSTER_ACTION; consumers (KIP-320) DESCRIBE on the topic, else its partitions are answered
TOPIC_AUTHORIZATION_FAILED after the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.protocol.message_types.offset_for_leader_epoch import EpochEndOffsetDict, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponseDict, OffsetForLeaderTopicResultDict


def handle(replica_manager: ReplicaManager, authorization: Authorization, request: Request[OffsetForLeaderEpochRequest]) -> OffsetForLeaderEpochResponseDict:
    names = {t.topic for t in request.body.topics}
    if authorization.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False):
        describable = names
    else:
        describable = authorization.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    topics: list[OffsetForLeaderTopicResultDict] = []
    refused: list[OffsetForLeaderTopicResultDict] = []
    for t in request.body.topics:
        if t.topic not in describable:
            refused.append({"topic": t.topic, "partitions": [{"partition": p.partition, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "leader_epoch": -1, "end_offset": -1} for p in t.partitions]})
            continue
        partitions: list[EpochEndOffsetDict] = []
        for p in t.partitions:
            entry: EpochEndOffsetDict = {"partition": p.partition, "error_code": ErrorCode.NONE, "leader_epoch": -1, "end_offset": -1}
            try:
                epoch, end_offset = replica_manager.last_offset_for_leader_epoch(t.topic, p.partition, p.leader_epoch, p.current_leader_epoch)
                entry.update({"leader_epoch": epoch, "end_offset": end_offset})
            except KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"topic": t.topic, "partitions": partitions})
    return {"topics": topics + refused}
