"""OffsetForLeaderEpoch: the end offset of a leader epoch, from the partition's epoch cache.

Consumers (Java client) validate their position with it after metadata changes, and followers truncate
with it; the answer must be the true end offset of the requested epoch (the start offset of the next
higher epoch, or the log end offset for the current one), or clients report truncation.
"""

from __future__ import annotations

from odradek.broker.replica_manager import ReplicaManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError


def handle(replica_manager: ReplicaManager, request: Request) -> dict:
    topics = []
    for t in request.body.topics:
        partitions = []
        for p in t.partitions:
            entry = {"partition": p.partition, "error_code": ErrorCode.NONE, "leader_epoch": -1, "end_offset": -1}
            try:
                epoch, end_offset = replica_manager.last_offset_for_leader_epoch(t.topic, p.partition, p.leader_epoch, p.current_leader_epoch)
                entry.update(leader_epoch=epoch, end_offset=end_offset)
            except KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"topic": t.topic, "partitions": partitions})
    return {"topics": topics}
