"""Produce: validate batches and every record in them, append, answer per partition.

Kafka's LogValidator rules, in two passes. The batch header and CRC (``record_batch.validate_batches``);
then every record of the batch (``record_walk.walk_batch``, in C, decompressing a compressed batch): record
structure against the batch's length and count, keys on compacted topics, and each record's timestamp
against the topic's bounds. The batch then takes its max timestamp from its records (rewritten in place,
with its CRC, when the client's differs) and is appended as received. A compressed batch is rebuilt only
into the topic's ``compression.type`` when that names another codec, with offsets assigned, as Kafka
rebuilds it.
Legacy message sets (magic 0/1, produce v0-v2 and old clients) are converted to magic 2 first, as Kafka
3.x does. acks=0 gets no answer, and any error closes the connection instead (so the client notices);
acks=all waits until the high watermark passes the appended batch.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from odradek.broker.handlers import CLOSE_CONNECTION, internal_topics_allowed
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol import legacy_records
from odradek.protocol.record_batch import MAGIC_V2, NO_TIMESTAMP, TimestampType, parse_header, peek_magic, set_max_timestamp, validate_batches
from odradek.protocol.compression import CompressionType
from odradek.protocol.record_walk import RecordErrorKind, RecordProblem, TimestampBounds, walk_batch
from odradek.protocol.records import Record, build_batch, iter_records_unchecked

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer

log = logging.getLogger("odradek.apis")


def handle(server: "KafkaServer", request: Request) -> Any:
    body = request.body
    acks = body.acks
    now_ms = int(time.time() * 1000)
    results: list[tuple[str, list[dict]]] = []
    waits: list[tuple[Any, int, dict]] = []
    failed = False
    allow_internal = internal_topics_allowed(request)
    for topic_data in body.topic_data:
        partitions = []
        for pd in topic_data.partition_data:
            entry = {"index": pd.index, "error_code": ErrorCode.NONE, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1}
            try:
                if acks not in (-1, 0, 1):
                    raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS)
                if body.transactional_id is not None:
                    raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "odradek does not support transactions yet")
                partition = server.replica_manager.leader_partition(topic_data.name, pd.index)
                if server.metadata.topics[topic_data.name].is_internal and not allow_internal:
                    raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic_data.name}")
                fields, last_offset = _append(server, partition, pd.records, acks, now_ms, request.header.api_version)
                entry.update(fields)
                if acks == -1 and partition.high_watermark <= last_offset:
                    waits.append((partition, last_offset, entry))
            except KafkaError as exc:
                failed = True
                entry["error_code"] = exc.code
                if isinstance(exc, RecordValidationError):
                    # Kafka fills error_message only for these (ReplicaManager's hasCustomErrorMessage); the
                    # other refusals' reasons go to the log.
                    entry["error_message"] = exc.message
                    entry["record_errors"] = exc.record_errors
                else:
                    log.debug("Produce to %s-%d refused: %s", topic_data.name, pd.index, exc)
            partitions.append(entry)
        results.append((topic_data.name, partitions))
    if acks == 0:
        return CLOSE_CONNECTION if failed else None
    response = {"responses": [{"name": name, "partition_responses": parts} for name, parts in results]}
    if not waits:
        return response
    return _await_high_watermark(server, waits, body.timeout_ms, response)


def _append(server: "KafkaServer", partition: Any, records: Any, acks: int, now_ms: int, version: int) -> tuple[dict, int]:
    """Validate and append one partition's records: the response fields, and the last offset appended."""
    if records is None or len(records) == 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, "Produce request carries no records")
    config = partition.log.config
    if peek_magic(records) != MAGIC_V2:
        if version >= 3:
            # Produce v3+ carries magic-2 batches only (ProduceRequest.validateRecords).
            raise KafkaError(ErrorCode.INVALID_RECORD, f"Produce requests with version {version} must only contain record batches with magic version 2")
        records = memoryview(bytearray(legacy_records.up_convert(records)))
    validated = validate_batches(records)
    if version < 7 and any(h.compression == CompressionType.ZSTD for _, h in validated.batches):
        # zstd arrived with Produce v7 (KIP-110): Kafka refuses it in older requests.
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "Produce requests with version below 7 may not use zstd")
    _check_sizes(validated, config.max_message_bytes)
    records, validated = _validate_records(records, validated, config, now_ms, f"{partition.log.topic}-{partition.log.partition}")
    log_append_time = now_ms if config.log_append_time else None
    info = partition.append_as_leader(records, acks, log_append_time, config.min_insync_replicas, validated.batches)
    fields = {
        "base_offset": info.first_offset,
        # The log's answer: for a duplicate of one of the producer's last batches, its original time.
        "log_append_time_ms": info.log_append_time,
        "log_start_offset": partition.log.log_start_offset,
    }
    return fields, info.last_offset


_TOPIC_CODECS = {
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}
"""A topic's ``compression.type`` other than ``producer`` is the codec its batches are stored in."""


def _check_sizes(validated: Any, max_message_bytes: int) -> None:
    for _, header in validated.batches:
        if header.size > max_message_bytes:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"The record batch size {header.size} bytes exceeds the maximum allowed batch size {max_message_bytes}",
            )


def _validate_records(records: Any, validated: Any, config: Any, now_ms: int, topic_partition: str) -> tuple[Any, Any]:
    """Kafka's LogValidator record loop over the one batch a client appends; the records to append and
    their validated headers (new ones when the batch was rebuilt)."""
    (position, header), = validated.batches
    bounds = None
    if not config.log_append_time:
        bounds = TimestampBounds(now_ms, config.effective_timestamp_before_max_ms, config.effective_timestamp_after_max_ms)
    walked = walk_batch(records, position, header, timestamps=bounds, require_keys=config.compact)
    _check_record_errors(records, position, header, walked.problems, config, now_ms, topic_partition)
    target = _TOPIC_CODECS.get(config.compression_type, header.compression)
    if target == header.compression and header.compression and not walked.offsets_in_sequence:
        # Kafka would rebuild the batch from the key-less records of its in-place walk and fail doing so.
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "compressed records with offset deltas other than 0, 1, 2, ...")
    if target != header.compression:
        rebuilt = _rebuild(records, position, header, target, config.log_append_time)
        validated = validate_batches(rebuilt)
        _check_sizes(validated, config.max_message_bytes)
        return rebuilt, validated
    if not config.log_append_time and (walked.max_timestamp != header.max_timestamp or header.timestamp_type != TimestampType.CREATE_TIME):
        # Kafka stores the records' max timestamp, whatever the client wrote (DefaultRecordBatch.setMaxTimestamp).
        if not isinstance(records, bytearray) and (not isinstance(records, memoryview) or records.readonly):
            records = bytearray(records)
        set_max_timestamp(records, position, TimestampType.CREATE_TIME, walked.max_timestamp)
        validated.batches[0] = (position, parse_header(records, position))
        validated.max_timestamp = walked.max_timestamp
    return records, validated


def _rebuild(records: Any, position: int, header: Any, codec: int, log_append_time: bool) -> memoryview:
    """The batch rewritten as Kafka's LogValidator.buildRecordsAndAssignOffsets writes it: in ``codec``,
    offsets 0, 1, 2, ... in record order (whatever offset deltas the client wrote); producer id, epoch and
    sequence, timestamps, headers and the transactional flag kept. The one case where the broker decodes
    and re-encodes records."""
    renumbered = (Record(None, r.timestamp, r.key, r.value, r.headers, r.attributes) for r in iter_records_unchecked(records, position, header))
    return memoryview(bytearray(build_batch(
        renumbered,
        compression=codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append_time else TimestampType.CREATE_TIME,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
    )))


class RecordValidationError(KafkaError):
    """Records Kafka's LogValidator refuses one by one: the response names each (ProduceResponse v8+)."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[dict]) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors


def _check_record_errors(records: Any, position: int, header: Any, problems: list[RecordProblem], config: Any, now_ms: int, topic_partition: str) -> None:
    """Report every refused record at once, with Kafka's messages (LogValidator.validateRecord and
    processRecordErrors): keys on compacted topics first, then timestamps. A client may not send a
    LogAppendTime batch unless its max timestamp is a CreateTime the topic accepts."""
    errors = {p.index: _problem_message(p, config, now_ms, topic_partition) for p in problems}
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME and (config.log_append_time or header.max_timestamp == NO_TIMESTAMP):
        for index, record in enumerate(iter_records_unchecked(records, position, header)):
            errors.setdefault(index, (
                f"Invalid timestamp type in message DefaultRecord(offset={record.offset}, timestamp={record.timestamp}, "
                f"key={len(record.key or b'')} bytes, value={len(record.value or b'')} bytes). Producer should not set "
                "timestamp type to LogAppendTime.",
                True,
            ))
    if not errors:
        return
    record_errors = [{"batch_index": index, "batch_index_error_message": message} for index, (message, _) in sorted(errors.items())]
    if any(is_timestamp for _, is_timestamp in errors.values()):
        raise RecordValidationError(ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp", record_errors)
    shown = ", ".join(f"RecordError(batchIndex={e['batch_index']}, message='{e['batch_index_error_message']}')" for e in record_errors[:3])
    raise RecordValidationError(
        ErrorCode.INVALID_RECORD,
        f"One or more records have been rejected due to {len(record_errors)} record errors in total, and only showing "
        f"the first three errors at most: [{shown}]",
        record_errors,
    )


def _problem_message(problem: RecordProblem, config: Any, now_ms: int, topic_partition: str) -> tuple[str, bool]:
    """(Kafka's message for one refused record, whether it is a timestamp error)."""
    if problem.kind is RecordErrorKind.MISSING_KEY:
        return f"Compacted topic cannot accept message without key in topic partition {topic_partition}", False
    low = _java_long(now_ms - config.effective_timestamp_before_max_ms)
    high = _java_long(now_ms + config.effective_timestamp_after_max_ms)
    return (
        f"Timestamp {problem.timestamp} of message with offset {problem.offset_delta} is out of range. "
        f"The timestamp should be within [{low}, {high}]",
        True,
    )


def _java_long(value: int) -> int:
    """Kafka computes the bounds in Java longs: now + Long.MAX_VALUE wraps, and its message shows that."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


async def _await_high_watermark(server: "KafkaServer", waits: list, timeout_ms: int, response: dict) -> dict:
    """acks=all: answer once the high watermark has passed each batch's last offset (every ISR replica has
    it), or with REQUEST_TIMED_OUT for the partitions where it has not within the request's timeout."""
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000
    for partition, last_offset, entry in waits:
        remaining = deadline - time.monotonic()
        if not await server.replica_manager.wait_for_high_watermark(partition, last_offset + 1, max(remaining, 0)):
            entry["error_code"] = ErrorCode.REQUEST_TIMED_OUT
    return response
