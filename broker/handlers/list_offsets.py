"""ListOffsets: earliest, latest, max timestamp (KIP-734) and by timestamp.

By timestamp the answer is the first offset whose timestamp is at least the target, and -1 when there
is none below the high watermark (librdkafka's suite and Spark's ``startingOffsetsByTimestamp`` rely on
it). ``latest`` is the high watermark, or the last stable offset for READ_COMMITTED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1


def lookup(server: "KafkaServer", topic: str, index: int, timestamp: int, isolation: int, replica_id: int, current_leader_epoch: int) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) as Kafka's ``Partition.fetchOffsetForTimestamp`` answers."""
    partition = server.replica_manager.leader_partition(topic, index, current_leader_epoch)
    log = partition.log
    if replica_id >= 0:
        fetchable = log.log_end_offset
    elif isolation == READ_COMMITTED:
        fetchable = partition.last_stable_offset
    else:
        fetchable = partition.high_watermark
    if timestamp == LATEST:
        return -1, fetchable, _known(log.latest_epoch)  # Kafka: the epoch cache's latest epoch
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        offset = log.log_start_offset
        return -1, offset, _known(log.epoch_for_offset(offset))  # Kafka: the log start offset's epoch
    if timestamp == LATEST_TIERED:
        return -1, -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_and_offset()
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1, -1
    ts, offset, epoch = found
    if offset >= fetchable:
        return -1, -1, -1
    return ts, offset, epoch


def _known(epoch: int | None) -> int:
    """Kafka answers -1 where the epoch cache has no entry."""
    return -1 if epoch is None else epoch


def handle(server: "KafkaServer", request: Request) -> dict:
    body = request.body
    version = request.header.api_version
    topics = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            entry = {"partition_index": p.partition_index, "error_code": ErrorCode.NONE, "timestamp": -1, "offset": -1, "leader_epoch": -1}
            try:
                ts, offset, epoch = lookup(server, t.name, p.partition_index, p.timestamp, body.isolation_level, body.replica_id, p.current_leader_epoch)
                entry.update(timestamp=ts, offset=offset, leader_epoch=epoch)
                if version == 0:
                    entry["old_style_offsets"] = [offset] if offset >= 0 and p.max_num_offsets > 0 else []
            except KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": t.name, "partitions": partitions})
    return {"topics": topics}
