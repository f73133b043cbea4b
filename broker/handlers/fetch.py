"""Fetch: read slices of segment files below the high watermark and send them with sendfile.

Kafka's rules kept here: topic names (v0-12) or topic ids (v13+); incremental fetch sessions (KIP-227,
v7+); ``max_bytes`` across the response and ``partition_max_bytes`` per partition, but the first
partition with data returns at least one whole batch even if it is larger (KIP-74, v3+); a fetch inside a
batch returns that whole batch (the client skips the records before its offset); long polling until
``min_bytes`` arrive or ``max_wait_ms`` passes, woken by appends. Followers (replica id ≥ 0) read up to the
log end offset and tell the leader their position.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from odradek.broker.fetch_session import FetchContext, FetchPartition, PartitionOutcome
from odradek.broker.replica_manager import FetchRecords
from odradek.protocol.api import Request
from odradek.protocol import legacy_records
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import UnsupportedCompressionTypeError
from odradek.storage.log import OffsetOutOfRangeError
from odradek.storage.transaction_index import AbortedTxn, CorruptTransactionIndexError

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer

READ_COMMITTED = 1
_LOOKUP_ERRORS = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})
"""A consumer's partitions Kafka's KafkaApis sets aside before reading (the topic or partition is not in
its metadata): answered after the partitions it read, whatever the request's order."""
_MAGIC_FOR_VERSION = {0: 0, 1: 0, 2: 1, 3: 1}
"""Fetch v0-v3 read message sets of magic 0 (v0-v1) or 1 (v2-v3): the only versions that copy records."""


@dataclass
class PartitionRead:
    request: FetchPartition
    error: int = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = None
    length: int = 0
    aborted_transactions: list[AbortedTxn] = field(default_factory=list)


def handle(server: "KafkaServer", request: Request) -> Any:
    body = request.body
    version = request.header.api_version
    uses_ids = version >= 13
    replica_id = body.replica_state.replica_id if version >= 15 else body.replica_id
    is_follower = replica_id >= 0
    now_ms = int(time.time() * 1000)

    requested = []
    for topic in body.topics:
        name = topic.topic if not uses_ids else server.replica_manager.by_topic_id.get(topic.topic_id)
        key_topic = topic.topic_id if uses_ids else topic.topic
        for p in topic.partitions:
            requested.append(
                FetchPartition((key_topic, p.partition), name, topic.topic_id, p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch, p.log_start_offset)
            )
    forgotten = []
    for topic in body.forgotten_topics_data:
        key_topic = topic.topic_id if uses_ids else topic.topic
        forgotten.extend((key_topic, p) for p in topic.partitions)

    if version >= 7:
        context = server.fetch_sessions.new_context(body.session_id, body.session_epoch, requested, forgotten, is_follower, now_ms)
    else:
        context = FetchContext(requested=requested)
    if context.error != ErrorCode.NONE:
        return {"error_code": context.error, "session_id": 0, "responses": []}

    max_bytes = min(body.max_bytes if version >= 3 else 2**31 - 1, server.config["fetch.max.bytes"])
    isolation = body.isolation_level if version >= 4 else 0
    hard_limit = version <= 2
    magic = _MAGIC_FOR_VERSION.get(version)

    def read_all() -> list[PartitionRead]:
        return _read(server, context.partitions(), max_bytes, isolation, replica_id, hard_limit, magic)

    reads = read_all()
    total = sum(r.length for r in reads)
    if body.max_wait_ms <= 0 or total >= body.min_bytes or any(r.error for r in reads) or not reads:
        return _respond(server, context, reads, version, is_follower, isolation == READ_COMMITTED, now_ms)
    # Watch from now on: appends made before the connection's writer starts the wait must wake it.
    keys = [(r.request.topic, r.request.partition) for r in reads if r.request.topic is not None]
    watching = server.replica_manager.watchers.register(keys)
    return _long_poll(server, context, keys, watching, read_all, body, version, is_follower, isolation == READ_COMMITTED)


async def _long_poll(server: "KafkaServer", context: FetchContext, keys: list, watching: Any, read_all: Any, body: Any, version: int, is_follower: bool, read_committed: bool) -> dict:
    deadline = time.monotonic() + body.max_wait_ms / 1000
    while True:
        await server.replica_manager.wait_for_change(keys, deadline - time.monotonic(), watching)
        reads = read_all()
        if time.monotonic() >= deadline or sum(r.length for r in reads) >= body.min_bytes or any(r.error for r in reads):
            break
        watching = server.replica_manager.watchers.register(keys)
    return _respond(server, context, reads, version, is_follower, read_committed, int(time.time() * 1000))


def _read(server: "KafkaServer", partitions: list[FetchPartition], max_bytes: int, isolation: int, replica_id: int, hard_limit: bool, magic: int | None) -> list[PartitionRead]:
    replicas = server.replica_manager
    budget = max_bytes
    min_one = not hard_limit
    reads = []
    for fp in partitions:
        read = PartitionRead(fp)
        reads.append(read)
        try:
            if fp.topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
            partition = replicas.leader_partition(fp.topic, fp.partition, fp.current_leader_epoch)
            log = partition.log
            if replica_id >= 0:
                partition.update_follower(replica_id, fp.fetch_offset)
                upper = log.log_end_offset
            elif isolation == READ_COMMITTED:
                upper = partition.last_stable_offset
            else:
                upper = partition.high_watermark
            read.high_watermark = partition.high_watermark
            read.last_stable_offset = partition.last_stable_offset
            read.log_start_offset = log.log_start_offset
            limit = min(fp.max_bytes, budget)
            if limit < 0:
                # Kafka's segment read refuses a negative size (IllegalArgumentException): this partition
                # alone answers UNKNOWN_SERVER_ERROR, the others are served.
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Invalid max size {limit} for log read")
            info = log.read(fp.fetch_offset, limit, upper, min_one)
            if info.size > 0:
                if isolation == READ_COMMITTED and replica_id < 0:
                    read.aborted_transactions = log.aborted_transactions(fp.fetch_offset, info)
                if magic is None:
                    read.records, read.length = FetchRecords(info.slices, info.size), info.size
                else:
                    read.records = _down_convert(log, info, magic, fp.fetch_offset)
                    read.length = len(read.records)
                budget = max(0, budget - info.size)
                min_one = False
        except OffsetOutOfRangeError:
            read.error = ErrorCode.OFFSET_OUT_OF_RANGE
            read.high_watermark = read.last_stable_offset = read.log_start_offset = -1
        except KafkaError as exc:
            read.error = exc.code
            read.high_watermark = read.last_stable_offset = read.log_start_offset = -1
        except CorruptTransactionIndexError:  # Kafka's read throws; the partition answers UNKNOWN_SERVER_ERROR
            read.error = ErrorCode.UNKNOWN_SERVER_ERROR
            read.high_watermark = read.last_stable_offset = read.log_start_offset = -1
    return reads


def _down_convert(log: Any, info: Any, magic: int, fetch_offset: int) -> bytes:
    """Old fetch versions get the stored batches rewritten in their magic, as Kafka's ``RecordsUtil.downConvert``."""
    if not log.config.message_downconversion_enable:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "Down-conversion of fetched records is disabled")
    try:
        return legacy_records.down_convert(info.read(), magic, first_offset=fetch_offset)
    except UnsupportedCompressionTypeError as exc:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc)) from None


def _respond(server: "KafkaServer", context: FetchContext, reads: list[PartitionRead], version: int, is_follower: bool, read_committed: bool, now_ms: int) -> dict:
    outcomes = {r.request.key: PartitionOutcome(r.error, r.high_watermark, r.last_stable_offset, r.log_start_offset, r.length) for r in reads}
    if version >= 7:
        session_id, included = server.fetch_sessions.finish(context, outcomes, is_follower, now_ms)
    else:
        session_id, included = 0, [r.request.key for r in reads]
    by_key = {r.request.key: r for r in reads}
    if not is_follower:
        # Kafka answers a consumer's partitions it cannot look up after the others (KafkaApis' "erroneous").
        included = [k for k in included if by_key[k].error not in _LOOKUP_ERRORS] + [k for k in included if by_key[k].error in _LOOKUP_ERRORS]
    topics: list[dict] = []
    last_topic = object()
    for key in included:
        r = by_key[key]
        fp = r.request
        if fp.key[0] != last_topic:
            topics.append({"topic": fp.topic or "", "topic_id": fp.topic_id, "partitions": []})
            last_topic = fp.key[0]
        topics[-1]["partitions"].append(
            {
                "partition_index": fp.partition,
                "error_code": r.error,
                "high_watermark": r.high_watermark,
                "last_stable_offset": r.last_stable_offset,
                "log_start_offset": r.log_start_offset,
                # Kafka lists aborted transactions only for READ_COMMITTED.
                "aborted_transactions": [{"producer_id": t.producer_id, "first_offset": t.first_offset} for t in r.aborted_transactions] if read_committed else None,
                "preferred_read_replica": -1,
                "records": r.records if r.records is not None else b"",
            }
        )
    return {"error_code": ErrorCode.NONE, "session_id": session_id, "responses": topics}
