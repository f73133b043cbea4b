"""What an append's batches must satisfy before the log takes them, and what they become (Kafka's LogValidator).

Keyed by the append's origin (``AppendOrigin``, as Kafka's): a CLIENT append is checked in full, a
COORDINATOR append (a batch the broker built itself) is trusted and only framed. Replication appends do not
come here: a follower appends the leader's batches with their offsets, as Kafka's ``appendAsFollower``
skips the validator.

A client's batch is checked in two passes. :func:`check_batches` does what needs no record: the legacy
message sets (magic 0/1, produce v0-v2 and old clients) are converted to magic 2 first, as Kafka 3.x
does; then the batch header and CRC (``record_batch.validate_batches``), the codec the request version
allows and the batch size. :func:`validate_records` then judges the record walk
(``record_walk.walk_batch``, in C, decompressing a compressed batch): record structure against the batch's
length and count, keys on compacted topics, and each record's timestamp against the topic's bounds. The
batch takes its max timestamp from its records (rewritten in place, with its CRC, when the client's
differs) and is appended as received. A compressed batch is rebuilt only into the topic's
``compression.type`` when that names another codec, with offsets assigned, as Kafka rebuilds it.

What passes is a :class:`ValidationResult`, the only thing ``Log.append_as_leader`` takes: the log cannot be
given batches nobody validated (Kafka keeps ``LogValidator`` behind ``UnifiedLog.appendAsLeader``). Nothing
here touches shared state, so every step may run on a worker thread; that is why, unlike Kafka's validator,
this one assigns no offsets: the log patches offsets, the leader epoch and LogAppendTime into the batch
headers under its lock, when it appends.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.values import Fields, plain_init
from odradek.protocol.java_hash import int64
from odradek.protocol.record_batch import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    MAGIC_V2,
    NO_TIMESTAMP,
    BatchHeader,
    CompressionType,
    DecompressedTooLargeError,
    NegativeTimestampError,
    TimestampType,
    ValidatedBatches,
    parse_header,
    peek_magic,
    set_max_timestamp,
    validate_batches,
)
from odradek.protocol.record_walk import RecordErrorKind, RecordProblem, TimestampBounds, WalkedBatch, walk_batch
from odradek.storage.log_config import LONG_MAX, LogConfig
from odradek.storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from odradek.protocol.message_types.produce import BatchIndexAndErrorMessageDict

log = logging.getLogger("odradek.log_validator")

INLINE_WALK_BYTES = 1 << 20
"""Records up to this size (decompressed) may be walked on the event loop; a larger batch, or a compressed one
that expands beyond it (a bomb), is walked on a worker thread, as Kafka decompresses on its request handler
threads and never on its network threads. Below it the thread hop costs more than the walk; above it a walk
takes milliseconds (up to seconds for 128 MiB) that every other client would wait."""

_TOPIC_CODECS = {
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}
"""A topic's ``compression.type`` other than ``producer`` is the codec its batches are stored in."""


class WalkElsewhere(Exception):
    """The batch is too large to walk on the event loop (``INLINE_WALK_BYTES``)."""


class RecordValidationError(KafkaError):
    """Records Kafka's LogValidator refuses one by one: the response names each (ProduceResponse v8+)."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[BatchIndexAndErrorMessageDict]) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors


@plain_init
class ValidationResult(Fields):
    """An append the validator passed (Kafka's ``LogValidator.ValidationResult``): the records to write, as
    received or rebuilt, writable so the log can patch their headers in place, and each batch's (position,
    header); validated for ``origin``, whose producer-state rules the log applies."""

    __slots__ = _FIELDS = ("records", "batches", "origin")

    def __init__(self, records: bytearray | memoryview, batches: list[tuple[int, BatchHeader]], origin: AppendOrigin) -> None:
        self.records = records
        self.batches = batches
        self.origin = origin


class Prechecked:
    """What :func:`precheck` found of a client's magic-2 batch before its partition is known: the header and
    CRC checks' verdict (``validated`` or ``error``) and, past them, the record walk's (``walked`` or
    ``walk_error``; neither when the walk was left to the partition's owner, a batch too large to walk
    inline). A front process does this work and worker 0 takes it in place of its own (docs/multicore.md,
    step 2), raising the same error at the point where its own check would have."""

    __slots__ = ("validated", "error", "walked", "walk_error")

    def __init__(self, validated: ValidatedBatches | None = None, error: KafkaError | None = None, walked: WalkedBatch | None = None, walk_error: KafkaError | None = None) -> None:
        self.validated = validated
        self.error = error
        self.walked = walked
        self.walk_error = walk_error


def precheck(records: Any) -> Prechecked | None:
    """The checks of a client's batch that need neither its partition nor the topic's config: the header and
    CRC (``validate_batches``) and the record walk's structure (no timestamp bounds, no keys required). None
    for what :func:`check_batches` judges first by the request (no records, a legacy message set)."""
    if records is None or len(records) == 0 or peek_magic(records) != MAGIC_V2:
        return None
    try:
        validated = validate_batches(records)
    except KafkaError as exc:
        return Prechecked(error=exc)
    (position, header), = validated.batches
    if not header.compression and header.size > INLINE_WALK_BYTES:
        return Prechecked(validated)
    try:
        walked = walk_batch(records, position, header, timestamps=None, require_keys=False, max_decompressed=INLINE_WALK_BYTES)
    except DecompressedTooLargeError:  # past the inline bound, not refused: the owner walks it on a thread
        return Prechecked(validated)
    except KafkaError as exc:
        return Prechecked(validated, walk_error=exc)
    except Exception:  # anything unforeseen: the owner walks it itself, and meets it again
        return Prechecked(validated)
    return Prechecked(validated, walked=walked)


class CheckedBatches:
    """An append's batches past the checks that read no record; a client's still await the record walk."""

    __slots__ = ("records", "validated", "config", "origin", "now_ms", "topic_partition", "prechecked", "needs_walk")

    def __init__(
        self,
        records: bytearray | memoryview,
        validated: ValidatedBatches,
        config: LogConfig,
        origin: AppendOrigin,
        now_ms: int,
        topic_partition: str,
        prechecked: Prechecked | None = None,
    ) -> None:
        self.records = records
        self.validated = validated
        self.config = config
        self.origin = origin
        self.now_ms = now_ms
        self.topic_partition = topic_partition
        self.prechecked = prechecked
        self.needs_walk = origin is AppendOrigin.CLIENT
        """A client's batch has its records walked; a trusted append is taken as it is (an attribute: asked
        twice per append)."""

    def _timestamp_bounds(self) -> TimestampBounds | None:
        """The bounds of the records' timestamps (KIP-937); None where nothing is bounded: a LogAppendTime
        topic, or both bounds unset (``Long.MAX_VALUE``, which no timestamp passes)."""
        config = self.config
        before, after = config.effective_timestamp_before_max_ms, config.effective_timestamp_after_max_ms
        if config.log_append_time or (before == LONG_MAX and after == LONG_MAX):
            return None
        return TimestampBounds(self.now_ms, before, after)

    def _prewalked(self) -> WalkedBatch | None:
        """The front's walk when it is the one this partition would make: its structural verdict always (a
        malformed record stops the walk whatever the bounds), its result when the topic bounds no timestamp
        and requires no key."""
        pre = self.prechecked
        assert pre is not None
        if pre.walk_error is not None:
            raise pre.walk_error
        if pre.walked is not None and not self.config.compact and self._timestamp_bounds() is None:
            return pre.walked
        return None

    def walk(self, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> WalkedBatch:
        if self.prechecked is not None and (walked := self._prewalked()) is not None:
            return walked
        (position, header), = self.validated.batches
        return walk_batch(self.records, position, header, timestamps=self._timestamp_bounds(), require_keys=self.config.compact, max_decompressed=max_decompressed)

    def walk_inline(self) -> WalkedBatch:
        """The walk, for a batch small enough to walk on the event loop; else :class:`WalkElsewhere`. (A
        front's walk is only of such a batch: :meth:`walk` takes it.)"""
        (_, header), = self.validated.batches
        if not header.compression and header.size > INLINE_WALK_BYTES:
            raise WalkElsewhere
        try:
            return self.walk(INLINE_WALK_BYTES)
        except DecompressedTooLargeError:
            raise WalkElsewhere from None


def check_batches(
    records: Any, config: LogConfig, origin: AppendOrigin, now_ms: int, topic_partition: str, produce_version: int | None = None, prechecked: Prechecked | None = None,
) -> CheckedBatches:
    """Everything checked before a batch's records are read: for a client, the request version's rules (the
    magic and codecs ``produce_version`` may carry), the batch header, CRC and size. ``prechecked``: what
    :func:`precheck` found of these records elsewhere, taken in place of the header and CRC checks."""
    if records is None or len(records) == 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, "Produce request carries no records")
    if origin is not AppendOrigin.CLIENT:
        if not isinstance(records, bytearray):
            records = bytearray(records)
        return CheckedBatches(records, validate_batches(records, from_client=False), config, origin, now_ms, topic_partition)
    assert produce_version is not None, "a client append comes with its produce request's version"
    if prechecked is not None:
        if prechecked.error is not None:
            raise prechecked.error
        assert prechecked.validated is not None
        validated = prechecked.validated
    else:
        if peek_magic(records) != MAGIC_V2:
            if produce_version >= 3:
                # Produce v3+ carries magic-2 batches only (ProduceRequest.validateRecords).
                raise KafkaError(ErrorCode.INVALID_RECORD, f"Produce requests with version {produce_version} must only contain record batches with magic version 2")
            from odradek.protocol import legacy_records  # the message formats before v2, only for clients that send them

            try:
                records = memoryview(bytearray(legacy_records.up_convert(records)))
            except NegativeTimestampError as exc:
                raise _not_rebuilt(exc, topic_partition) from None
        validated = validate_batches(records)
    if produce_version < 7 and any(h.compression == CompressionType.ZSTD for _, h in validated.batches):
        # zstd arrived with Produce v7 (KIP-110): Kafka refuses it in older requests.
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "Produce requests with version below 7 may not use zstd")
    _check_sizes(validated, config.max_message_bytes)
    return CheckedBatches(records, validated, config, origin, now_ms, topic_partition, prechecked)


def validate_records(checked: CheckedBatches, walked: WalkedBatch | None) -> ValidationResult:
    """What Kafka's LogValidator makes of the batches, given a client batch's record walk: the records to
    append and their validated headers (new ones when the batch was rebuilt). A trusted append is taken as
    it is."""
    if not checked.needs_walk:
        return ValidationResult(checked.records, checked.validated.batches, checked.origin)
    assert walked is not None
    records, validated, config = checked.records, checked.validated, checked.config
    (position, header), = validated.batches
    if walked.problems or header.timestamp_type == TimestampType.LOG_APPEND_TIME:  # else nothing to report
        _check_record_errors(records, position, header, walked.problems, config, checked.now_ms, checked.topic_partition)
    target = _TOPIC_CODECS.get(config.compression_type, header.compression)
    if target == header.compression and header.compression and not walked.offsets_in_sequence:
        # Kafka would rebuild the batch from the key-less records of its in-place walk and fail doing so.
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "compressed records with offset deltas other than 0, 1, 2, ...")
    if target != header.compression:
        try:
            rebuilt = _rebuild(records, position, header, target, config.log_append_time)
        except NegativeTimestampError as exc:
            raise _not_rebuilt(exc, checked.topic_partition) from None
        validated = validate_batches(rebuilt)
        _check_sizes(validated, config.max_message_bytes)
        return ValidationResult(rebuilt, validated.batches, checked.origin)
    if not isinstance(records, bytearray) and (not isinstance(records, memoryview) or records.readonly):
        records = bytearray(records)  # the log patches headers in place: a read-only buffer is copied once
    if not config.log_append_time and (walked.max_timestamp != header.max_timestamp or header.timestamp_type != TimestampType.CREATE_TIME):
        # Kafka stores the records' max timestamp, whatever the client wrote (DefaultRecordBatch.setMaxTimestamp).
        set_max_timestamp(records, position, TimestampType.CREATE_TIME, walked.max_timestamp)
        validated.batches[0] = (position, parse_header(records, position))
        validated.max_timestamp = walked.max_timestamp
    return ValidationResult(records, validated.batches, checked.origin)


def _check_sizes(validated: ValidatedBatches, max_message_bytes: int) -> None:
    for _, header in validated.batches:
        if header.size > max_message_bytes:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"The record batch size {header.size} bytes exceeds the maximum allowed batch size {max_message_bytes}",
            )


def _rebuild(records: Any, position: int, header: Any, codec: int, log_append_time: bool) -> memoryview:
    """The batch rewritten as Kafka's LogValidator.buildRecordsAndAssignOffsets writes it: in ``codec``,
    offsets 0, 1, 2, ... in record order (whatever offset deltas the client wrote); producer id, epoch and
    sequence, timestamps, headers and the transactional flag kept. The one case where the broker decodes
    and re-encodes records, so the record codec is imported here, at the first batch rebuilt."""
    from odradek.protocol.records import Record, build_batch, iter_records_unchecked

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


def _not_rebuilt(exc: NegativeTimestampError, topic_partition: str) -> KafkaError:
    """A batch Kafka's LogValidator cannot rebuild (up-converted or recompressed): its MemoryRecordsBuilder
    throws on a negative record timestamp, and its ReplicaManager logs "Error processing append operation on
    partition" and answers the partition UNKNOWN_SERVER_ERROR, without a message."""
    log.error("Error processing append operation on partition %s: %s", topic_partition, exc)
    return KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR)


def _check_record_errors(records: Any, position: int, header: Any, problems: list[RecordProblem], config: LogConfig, now_ms: int, topic_partition: str) -> None:
    """Report every refused record at once, with Kafka's messages (LogValidator.validateRecord and
    processRecordErrors): keys on compacted topics first, then timestamps. A client may not send a
    LogAppendTime batch unless its max timestamp is a CreateTime the topic accepts."""
    errors = {p.index: _problem_message(p, config, now_ms, topic_partition) for p in problems}
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME and (config.log_append_time or header.max_timestamp == NO_TIMESTAMP):
        from odradek.protocol.records import iter_records_unchecked  # the record codec, for a refused batch only

        for index, record in enumerate(iter_records_unchecked(records, position, header)):
            errors.setdefault(index, (
                f"Invalid timestamp type in message DefaultRecord(offset={record.offset}, timestamp={record.timestamp}, "
                f"key={len(record.key or b'')} bytes, value={len(record.value or b'')} bytes). Producer should not set "
                "timestamp type to LogAppendTime.",
                True,
            ))
    if not errors:
        return
    record_errors: list[BatchIndexAndErrorMessageDict] = [{"batch_index": index, "batch_index_error_message": message} for index, (message, _) in sorted(errors.items())]
    if any(is_timestamp for _, is_timestamp in errors.values()):
        raise RecordValidationError(ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp", record_errors)
    shown = ", ".join(f"RecordError(batchIndex={e['batch_index']}, message='{e['batch_index_error_message']}')" for e in record_errors[:3])
    raise RecordValidationError(
        ErrorCode.INVALID_RECORD,
        f"One or more records have been rejected due to {len(record_errors)} record errors in total, and only showing "
        f"the first three errors at most: [{shown}]",
        record_errors,
    )


def _problem_message(problem: RecordProblem, config: LogConfig, now_ms: int, topic_partition: str) -> tuple[str, bool]:
    """(Kafka's message for one refused record, whether it is a timestamp error)."""
    if problem.kind is RecordErrorKind.MISSING_KEY:
        return f"Compacted topic cannot accept message without key in topic partition {topic_partition}", False
    low = int64(now_ms - config.effective_timestamp_before_max_ms)
    high = int64(now_ms + config.effective_timestamp_after_max_ms)
    return (
        f"Timestamp {problem.timestamp} of message with offset {problem.offset_delta} is out of range. "
        f"The timestamp should be within [{low}, {high}]",
        True,
    )
