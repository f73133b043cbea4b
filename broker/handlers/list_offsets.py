"""ListOffsets: earliest, latest, max timestamp (KIP-734) and by timestamp.

By timestamp the answer is the first offset whose timestamp is at least the target, and -1 when there
is none below the high watermark (librdkafka's suite and Spark's ``startingOffsetsByTimestamp`` rely on
it). ``latest`` is the high watermark, or the last stable offset for READ_COMMITTED.
"""

from __future__ import annotations

from odradek.broker.replica_manager import ReplicaManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError


def handle(replica_manager: ReplicaManager, request: Request) -> dict:
    body = request.body
    version = request.header.api_version
    topics = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            entry = {"partition_index": p.partition_index, "error_code": ErrorCode.NONE, "timestamp": -1, "offset": -1, "leader_epoch": -1}
            try:
                ts, offset, epoch = replica_manager.fetch_offset_for_timestamp(t.name, p.partition_index, p.timestamp, body.isolation_level, body.replica_id, p.current_leader_epoch)
                entry.update(timestamp=ts, offset=offset, leader_epoch=epoch)
                if version == 0:
                    entry["old_style_offsets"] = [offset] if offset >= 0 and p.max_num_offsets > 0 else []
            except KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": t.name, "partitions": partitions})
    return {"topics": topics}
