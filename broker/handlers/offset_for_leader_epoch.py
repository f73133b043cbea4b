"""OffsetForLeaderEpoch: the end offset of a leader epoch, from the partition's epoch cache.

Consumers (Java client) validate their position with it after metadata changes, and followers truncate
with it; the answer must be the true end offset of the requested epoch (the start offset of the next
higher epoch, or the log end offset for the current one), or clients report truncation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer


def handle(server: "KafkaServer", request: Request) -> dict:
    topics = []
    for t in request.body.topics:
        partitions = []
        for p in t.partitions:
            entry = {"partition": p.partition, "error_code": ErrorCode.NONE, "leader_epoch": -1, "end_offset": -1}
            try:
                partition = server.replica_manager.leader_partition(t.topic, p.partition, p.current_leader_epoch)
                epoch, end_offset = partition.log.end_offset_for_epoch(p.leader_epoch)
                entry.update(leader_epoch=epoch, end_offset=end_offset)
            except KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"topic": t.topic, "partitions": partitions})
    return {"topics": topics}
