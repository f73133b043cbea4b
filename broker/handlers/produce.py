"""Produce: validate batch headers and CRCs, append as received, answer per partition.

Records are never decoded: the batch header says everything the broker checks (size, count, offsets,
producer id/epoch/sequence, timestamps), and the log patches offsets and the leader epoch in place. The
exceptions are Kafka's: a compacted topic's records must have keys (those batches are decoded to check
it), and a topic whose ``compression.type`` names a codec stores its batches in that codec (batches in
another codec are re-encoded).
Legacy message sets (magic 0/1, produce v0-v2 and old clients) are converted to magic 2 first, as Kafka
3.x does. acks=0 gets no answer, and any error closes the connection instead (so the client notices);
acks=all waits until the high watermark passes the appended batch.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from odradek.broker.handlers import CLOSE_CONNECTION, internal_topics_allowed
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol import legacy_records
from odradek.protocol.record_batch import MAGIC_V2, peek_magic, validate_batches
from odradek.protocol.compression import CompressionType
from odradek.protocol.records import build_batch, iter_records_unchecked

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer


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
                entry["error_message"] = exc.message
                if isinstance(exc, RecordValidationError):
                    entry["record_errors"] = exc.record_errors
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
    if config.compact:
        _check_keys(records, validated, f"{partition.log.topic}-{partition.log.partition}")
    _check_sizes(validated, config.max_message_bytes)
    target = _TOPIC_CODECS.get(config.compression_type)
    if target is not None and any(header.compression != target for _, header in validated.batches):
        records = _recompress(records, validated, target)
        validated = validate_batches(records)
        _check_sizes(validated, config.max_message_bytes)
    log_append_time = None
    if config.log_append_time:
        log_append_time = now_ms
    else:
        _check_timestamps(config, validated, now_ms)
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


def _recompress(records: Any, validated: Any, codec: int) -> memoryview:
    """Rewrite batches into the topic's codec, as Kafka's LogValidator does when ``compression.type`` is
    set and differs from the producer's: the one case where the broker decodes and re-encodes records.
    Producer id, epoch and sequence, timestamps, headers and the transactional flag are kept."""
    out = bytearray()
    for position, header in validated.batches:
        if header.compression == codec:
            out += records[position : position + header.size]
            continue
        out += build_batch(
            iter_records_unchecked(records, position, header),
            base_offset=header.base_offset,
            compression=codec,
            timestamp_type=header.timestamp_type,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            partition_leader_epoch=header.partition_leader_epoch,
            is_transactional=header.is_transactional,
        )
    return memoryview(out)


class RecordValidationError(KafkaError):
    """Records Kafka's LogValidator refuses one by one: the response names each (ProduceResponse v8+)."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[dict]) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors


def _check_keys(records: Any, validated: Any, topic_partition: str) -> None:
    """A compacted topic refuses records without a key (Kafka's LogValidator.validateKey). The one check that
    decodes records, so it runs for compacted topics only."""
    errors = [
        {"batch_index": index, "batch_index_error_message": f"Compacted topic cannot accept message without key in topic partition {topic_partition}"}
        for position, header in validated.batches
        for index, record in enumerate(iter_records_unchecked(records, position, header))
        if record.key is None
    ]
    if errors:
        shown = ", ".join(f"RecordError(batchIndex={e['batch_index']}, message='{e['batch_index_error_message']}')" for e in errors[:3])
        raise RecordValidationError(
            ErrorCode.INVALID_RECORD,
            f"One or more records have been rejected due to {len(errors)} record errors in total, and only showing "
            f"the first three errors at most: [{shown}]",
            errors,
        )


def _check_timestamps(config: Any, validated: Any, now_ms: int) -> None:
    """CreateTime bounds (KIP-937), from each batch's max timestamp: the header carries it, no decoding."""
    before, after = config.effective_timestamp_before_max_ms, config.effective_timestamp_after_max_ms
    for _, header in validated.batches:
        ts = header.max_timestamp
        if ts < 0:
            continue
        if now_ms - ts > before or ts - now_ms > after:
            raise KafkaError(
                ErrorCode.INVALID_TIMESTAMP,
                f"Timestamp {ts} of message is out of range. The timestamp should be within [{now_ms - before}, {now_ms + after}]",
            )


async def _await_high_watermark(server: "KafkaServer", waits: list, timeout_ms: int, response: dict) -> dict:
    """acks=all: answer once the high watermark has passed each batch's last offset (every ISR replica has
    it), or with REQUEST_TIMED_OUT for the partitions where it has not within the request's timeout."""
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000
    for partition, last_offset, entry in waits:
        remaining = deadline - time.monotonic()
        if not await server.replica_manager.wait_for_high_watermark(partition, last_offset + 1, max(remaining, 0)):
            entry["error_code"] = ErrorCode.REQUEST_TIMED_OUT
    return response
