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
A batch whose records exceed ``INLINE_WALK_BYTES`` decompressed is walked (and rebuilt) on a worker thread,
as Kafka validates on its request handler threads, not the network threads all clients share.
"""

from __future__ import annotations

import inspect
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import anyio

from odradek.broker.handlers import CLOSE_CONNECTION, internal_topics_allowed
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol import legacy_records
from odradek.protocol.record_batch import MAGIC_V2, DecompressedTooLargeError, NO_TIMESTAMP, TimestampType, parse_header, peek_magic, set_max_timestamp, validate_batches
from odradek.protocol.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, CompressionType
from odradek.protocol.record_walk import RecordErrorKind, RecordProblem, TimestampBounds, WalkedBatch, walk_batch
from odradek.protocol.records import Record, build_batch, iter_records_unchecked

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer

log = logging.getLogger("odradek.apis")


INLINE_WALK_BYTES = 1 << 20
"""Records up to this size (decompressed) are walked on the event loop; a larger batch, or a compressed one
that expands beyond it (a bomb), is walked on a worker thread, as Kafka decompresses on its request handler
threads and never on its network threads. Below it the thread hop costs more than the walk; above it a walk
takes milliseconds (up to seconds for 128 MiB) that every other client would wait."""

_append_turns: WeakKeyDictionary[Any, dict[tuple[str, int], anyio.Event]] = WeakKeyDictionary()
"""Per server, the partitions a produce finishing in the background is yet to append to, each with the event
it sets when done: a later produce to such a partition waits for it, so appends keep the order requests
arrived in (a pipelining idempotent producer's sequence numbers depend on it)."""


class _WalkElsewhere(Exception):
    """The batch is too large to walk on the event loop."""


def handle(server: "KafkaServer", request: Request) -> Any:
    produce = _Produce(server, request)
    for index, target in enumerate(produce.targets):
        checked = produce.append_inline(*target)
        if checked is not True:
            return produce.finish_in_background(index, checked)
    return produce.answer()


@dataclass
class _Checked:
    """One partition's records that passed the batch checks, awaiting the record walk."""

    partition: Any
    records: Any
    validated: Any
    bounds: TimestampBounds | None

    @property
    def batch(self) -> tuple[int, Any]:
        return self.validated.batches[0]

    def walk(self, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> WalkedBatch:
        position, header = self.batch
        return walk_batch(self.records, position, header, timestamps=self.bounds, require_keys=self.partition.log.config.compact, max_decompressed=max_decompressed)

    def walk_inline(self) -> WalkedBatch:
        """The walk on the event loop, for a batch small enough (``INLINE_WALK_BYTES``)."""
        _, header = self.batch
        if not header.compression and header.size > INLINE_WALK_BYTES:
            raise _WalkElsewhere
        try:
            return self.walk(INLINE_WALK_BYTES)
        except DecompressedTooLargeError:
            raise _WalkElsewhere from None


@dataclass
class _Produce:
    """One produce request: each partition's records checked, walked and appended in order, on the event loop
    until a batch must be walked elsewhere or a partition still has a produce finishing in the background;
    from there on in a background task."""

    server: "KafkaServer"
    request: Request
    now_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    targets: list[tuple[str, Any, dict]] = field(init=False)
    """(topic, partition data, its response entry) in request order."""
    responses: list[dict] = field(init=False)
    waits: list[tuple[Any, int, dict]] = field(default_factory=list)
    failed: bool = False

    def __post_init__(self) -> None:
        self.targets, self.responses = [], []
        for topic_data in self.request.body.topic_data:
            entries = []
            for pd in topic_data.partition_data:
                entries.append({"index": pd.index, "error_code": ErrorCode.NONE, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1})
                self.targets.append((topic_data.name, pd, entries[-1]))
            self.responses.append({"name": topic_data.name, "partition_responses": entries})

    def append_inline(self, topic: str, pd: Any, entry: dict) -> "_Checked | None | bool":
        """Append one partition's records on the event loop: True when done (or refused); otherwise what the
        background has to go on from (None: the partition waits for an earlier produce's turn)."""
        if (topic, pd.index) in _append_turns.get(self.server, {}):
            return None
        try:
            checked = self._check(topic, pd)
            try:
                walked = checked.walk_inline()
            except _WalkElsewhere:
                return checked
            self._append(checked, *self._validate(checked, walked), entry)
        except KafkaError as exc:
            self._refuse(topic, pd, entry, exc)
        return True

    def finish_in_background(self, start: int, first: _Checked | None) -> Any:
        """Append the partitions from ``start`` on in a background task (each once any earlier produce to it
        is done), walking large batches on a worker thread, then answer. The task runs to its end even if
        the client goes away, so no turn stays taken. acks=0 gets no answer, so a refusal found there is
        only logged, where Kafka closes the connection."""
        turns = _append_turns.setdefault(self.server, {})
        queued = []
        for topic, pd, entry in self.targets[start:]:
            key = (topic, pd.index)
            previous, turns[key] = turns.get(key), anyio.Event()
            queued.append((topic, pd, entry, previous, turns[key]))
        done = anyio.Event()

        async def run() -> None:
            checked = first
            try:
                for topic, pd, entry, previous, mine in queued:
                    try:
                        if previous is not None:
                            await previous.wait()
                        if checked is None:
                            checked = self._check(topic, pd)
                        try:
                            validated = self._validate(checked, checked.walk_inline())
                        except _WalkElsewhere:
                            # The rest of LogValidator's work too: a rebuild into the topic's codec
                            # decodes and re-encodes every record.
                            validated = await anyio.to_thread.run_sync(lambda: self._validate(checked, checked.walk()))
                        self._append(checked, *validated, entry)
                    except KafkaError as exc:
                        self._refuse(topic, pd, entry, exc)
                    except Exception:
                        log.exception("Produce to %s-%d failed", topic, pd.index)
                        self._refuse(topic, pd, entry, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR))
                    finally:
                        checked = None
                        _end_turn(turns, (topic, pd.index), mine)
            finally:
                for topic, pd, _, _, mine in queued:
                    _end_turn(turns, (topic, pd.index), mine)
                done.set()

        assert self.server.background is not None
        self.server.background.start_soon(run)
        if self.request.body.acks == 0:
            return CLOSE_CONNECTION if self.failed else None

        async def answer() -> Any:
            await done.wait()
            result = self.answer()
            return await result if inspect.iscoroutine(result) else result

        return answer()

    def _check(self, topic: str, pd: Any) -> _Checked:
        """Everything Kafka checks before it reads a batch's records (the request, the partition, the batch
        header, CRC and size)."""
        body = self.request.body
        if body.acks not in (-1, 0, 1):
            raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS)
        if body.transactional_id is not None:
            raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "odradek does not support transactions yet")
        partition = self.server.replica_manager.leader_partition(topic, pd.index)
        if self.server.metadata.topics[topic].is_internal and not internal_topics_allowed(self.request):
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
        records = pd.records
        if records is None or len(records) == 0:
            raise KafkaError(ErrorCode.INVALID_RECORD, "Produce request carries no records")
        version = self.request.header.api_version
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
        bounds = None
        if not config.log_append_time:
            bounds = TimestampBounds(self.now_ms, config.effective_timestamp_before_max_ms, config.effective_timestamp_after_max_ms)
        return _Checked(partition, records, validated, bounds)

    def _validate(self, checked: _Checked, walked: WalkedBatch) -> tuple[Any, Any]:
        """The records to append and their headers (``_validate_records``); touches no shared state, so
        it may run on a worker thread."""
        log_ = checked.partition.log
        return _validate_records(checked.records, checked.validated, walked, log_.config, self.now_ms, f"{log_.topic}-{log_.partition}")

    def _append(self, checked: _Checked, records: Any, validated: Any, entry: dict) -> None:
        partition = checked.partition
        config = partition.log.config
        acks = self.request.body.acks
        info = partition.append_as_leader(records, acks, self.now_ms if config.log_append_time else None, config.min_insync_replicas, validated.batches)
        entry.update({
            "base_offset": info.first_offset,
            # The log's answer: for a duplicate of one of the producer's last batches, its original time.
            "log_append_time_ms": info.log_append_time,
            "log_start_offset": partition.log.log_start_offset,
        })
        if acks == -1 and partition.high_watermark <= info.last_offset:
            self.waits.append((partition, info.last_offset, entry))

    def _refuse(self, topic: str, pd: Any, entry: dict, exc: KafkaError) -> None:
        self.failed = True
        entry["error_code"] = exc.code
        if isinstance(exc, RecordValidationError):
            # Kafka fills error_message only for these (ReplicaManager's hasCustomErrorMessage); the
            # other refusals' reasons go to the log.
            entry["error_message"] = exc.message
            entry["record_errors"] = exc.record_errors
        else:
            log.debug("Produce to %s-%d refused: %s", topic, pd.index, exc)

    def answer(self) -> Any:
        body = self.request.body
        if body.acks == 0:
            return CLOSE_CONNECTION if self.failed else None
        response = {"responses": self.responses}
        if not self.waits:
            return response
        return _await_high_watermark(self.server, self.waits, body.timeout_ms, response)


def _end_turn(turns: dict[tuple[str, int], anyio.Event], key: tuple[str, int], mine: anyio.Event) -> None:
    if turns.get(key) is mine:
        del turns[key]
    mine.set()


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


def _validate_records(records: Any, validated: Any, walked: WalkedBatch, config: Any, now_ms: int, topic_partition: str) -> tuple[Any, Any]:
    """What Kafka's LogValidator makes of the one batch a client appends, given its record walk: the records
    to append and their validated headers (new ones when the batch was rebuilt)."""
    (position, header), = validated.batches
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
