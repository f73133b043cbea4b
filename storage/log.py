"""One partition's log (Kafka's UnifiedLog + LocalLog, local storage only; loading is ``log_loader``'s).

A ``Log`` owns the partition directory ``<topic>-<partition>``: its segments, leader epoch cache, producer
state and ``partition.metadata``. It tracks the log start offset, the log end offset (LEO), the high
watermark and the recovery point (everything below it is known to be on disk).

Appends are synchronous and sequential: the leader path patches offsets, leader epoch and LogAppendTime
into the producer's batches in place (header fields only) and writes them as they are; reads answer with
``FileSlice``s of segment files for sendfile. Nothing here owns a thread or timer: the broker calls
``flush_due`` / ``delete_old_segments`` from its own. Mutations hold a lock, so a flush may run on a worker
thread while appends continue; reads take no lock (they work on an immutable snapshot of the segment list).

Transactions: the producer state knows each producer's open transaction; a transaction marker (a control
batch the leader appends for WriteTxnMarkers with the COORDINATOR origin, or a follower copies) ends it,
and an aborted one is recorded in the ``.txnindex`` of the segment holding its marker. The last stable
offset bounds READ_COMMITTED reads; ``aborted_transactions`` answers what such a read must skip.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.kafka_uuid import Uuid, random_uuid
from odradek.protocol.record_batch import (
    BatchHeader,
    assign_offset_and_epoch,
    iter_batch_positions,
    set_log_append_time,
    validate_batches,
)
from odradek.protocol.values import Fields, TupleFields, plain_init
from odradek.storage.checkpoints import fsync_dir, read_partition_metadata, write_partition_metadata
from odradek.storage.file_records import FileSlice
from odradek.storage.leader_epoch import LeaderEpochFileCache
from odradek.storage.log_config import LogConfig
from odradek.storage.log_loader import LogLoader, rebuild_producer_state
from odradek.storage.log_validator import ValidationResult
from odradek.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateManager,
    read_end_txn_marker,
)
from odradek.storage.segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    SEGMENT_FILES,
    SWAP_FILE_SUFFIX,
    LogSegment,
    create_segment,
    unlink_if_exists,
)
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.storage.transaction_index import AbortedTxn

log = logging.getLogger("odradek.storage")

NO_TIMESTAMP = -1


class OffsetOutOfRangeError(KafkaError):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, message)


@plain_init
class AppendInfo(Fields):
    """What an append did, as Kafka's LogAppendInfo reports it to the produce path."""

    __slots__ = _FIELDS = ("first_offset", "last_offset", "max_timestamp", "offset_of_max_timestamp", "log_append_time", "log_start_offset", "valid_bytes", "duplicate")

    def __init__(self, first_offset: int, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int, log_append_time: int, log_start_offset: int, valid_bytes: int, duplicate: bool = False) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.max_timestamp = max_timestamp
        self.offset_of_max_timestamp = offset_of_max_timestamp
        self.log_append_time = log_append_time
        """The LogAppendTime stamped on the batches, or -1 (CreateTime topics)."""
        self.log_start_offset = log_start_offset
        self.valid_bytes = valid_bytes
        self.duplicate = duplicate
        """True when the batch repeated one of the producer's last 5: nothing was written, the offsets are the
        original append's and the produce succeeds with them."""


@plain_init
class LogOffsetMetadata(Fields):
    __slots__ = _FIELDS = ("message_offset", "segment_base_offset", "relative_position")

    def __init__(self, message_offset: int, segment_base_offset: int = -1, relative_position: int = -1) -> None:
        self.message_offset = message_offset
        self.segment_base_offset = segment_base_offset
        self.relative_position = relative_position


class FetchDataInfo(Fields):
    """The result of a read: slices of segment files (at most one segment's worth, as in Kafka)."""

    _FIELDS = ("fetch_offset_metadata", "slices", "first_entry_incomplete")
    __slots__ = (*_FIELDS, "size")

    def __init__(self, fetch_offset_metadata: LogOffsetMetadata, slices: tuple[FileSlice, ...] = (), first_entry_incomplete: bool = False) -> None:
        self.fetch_offset_metadata = fetch_offset_metadata
        self.slices = slices
        self.first_entry_incomplete = first_entry_incomplete
        self.size = slices[0].length if len(slices) == 1 else sum(piece.length for piece in slices)
        """The bytes read, summed once (a read is at most one segment's: one slice or none)."""

    def read(self) -> bytes:
        return b"".join(piece.read() for piece in self.slices)


class TimestampAndOffset(TupleFields):
    """A ListOffsets answer: the found record's timestamp, its offset and its batch's leader epoch (-1 if none)."""

    timestamp: int
    offset: int
    leader_epoch: int


def log_delete_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuid hex>-delete``, the topic cut so that the name fits in 255 characters
    (Kafka's ``LocalLog.logDirNameWithSuffixCappedLength``)."""
    suffix = f"-{partition}.{random_uuid().hex}-delete"
    return topic[: 255 - len(suffix)] + suffix


def log_future_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuid hex>-future``: a replica being moved to another log directory (Kafka's
    ``logFutureDirName``), cut to 255 characters as the delete name is."""
    suffix = f"-{partition}.{random_uuid().hex}-future"
    return topic[: 255 - len(suffix)] + suffix


SUFFIXED_DIRS = ("-delete", "-future", "-stray")
"""Kafka's ``.<uuid>-delete``, ``-future`` and ``-stray`` directories, named after their partition."""


def parse_topic_partition(dir_name: str) -> TopicPartition:
    """``<topic>-<partition>`` (topics may contain '-', partitions never do), also with Kafka's
    ``.<uuid>-delete``/``-future``/``-stray`` suffix (``UnifiedLog.parseTopicPartitionName``)."""
    if dir_name.endswith(SUFFIXED_DIRS) and "." in dir_name:
        dir_name = dir_name[: dir_name.rindex(".")]
    topic, dash, partition = dir_name.rpartition("-")
    if not dash or not topic or not partition.isdigit():
        raise ValueError(f"Found directory {dir_name}, '{dir_name}' is not in the form of topic-partition")
    return topic, int(partition)


def _now_ms() -> int:
    return int(time.time() * 1000)


class Log:
    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        *,
        time_ms: Callable[[], int] = _now_ms,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        """Use ``Log.open``: this only sets up empty state."""
        self.dir = dir
        self.topic, self.partition = parse_topic_partition(dir.name)
        self._config = config
        self._time_ms = time_ms
        self._lock = threading.RLock()
        self._listing: tuple[tuple[LogSegment, ...], tuple[int, ...]] = ((), ())
        self._log_start_offset = 0
        self._log_end_offset = 0
        self._high_watermark = 0
        self._recovery_point = 0
        self._pending_roll_flush = 0
        self.last_flush_ms = time_ms()
        self.topic_id: Uuid | None = None
        self.epoch_cache = LeaderEpochFileCache(dir)
        self.producer_state = ProducerStateManager(dir, producer_id_expiration_ms)
        self._position_cache: tuple[int, int, int] | None = None
        self._closed = False
        self._truncations = 0
        """Counts truncations, so the cleaner can tell its view of the log went stale (Kafka aborts cleaning)."""
        self._retired: list[tuple[int, LogSegment]] = []
        """Segments the cleaner replaced, renamed ``.deleted``, and when to delete them (file.delete.delay.ms):
        until then readers that picked them up keep reading them."""

    # -- opening and recovery ------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        dir: Path,
        config: LogConfig,
        *,
        log_start_offset: int | None = None,
        recovery_point: int = 0,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = False,
        topic_id: Uuid | None = None,
        time_ms: Callable[[], int] = _now_ms,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> Log:
        """Load (or create) the partition directory, as Kafka's LogLoader does.

        After a clean shutdown nothing is scanned: segments are listed, not opened, and only the last one
        is read to find the log end offset. After an unclean one every batch from the segment holding the
        recovery point on is re-validated (size, magic, CRC, offset order); the first invalid or partial
        batch and everything after it is removed. A segment whose index is missing is recovered too, and
        indexes found corrupt later are rebuilt when first opened.
        """
        dir.mkdir(parents=True, exist_ok=True)
        self = cls(dir, config, time_ms=time_ms, producer_id_expiration_ms=producer_id_expiration_ms)
        loader = LogLoader(dir, config, self.epoch_cache, self.producer_state, time_ms())
        loaded = loader.load(log_start_offset, recovery_point, had_clean_shutdown)
        self._set_segments(loaded.segments)
        self._log_start_offset = loaded.log_start_offset
        self._log_end_offset = loaded.log_end_offset
        self._recovery_point = self._pending_roll_flush = loaded.recovery_point
        self._init_topic_id(topic_id)
        self.high_watermark = self._log_start_offset if high_watermark is None else high_watermark
        return self

    def _init_topic_id(self, topic_id: Uuid | None) -> None:
        self.topic_id = read_partition_metadata(self.dir)
        if topic_id is not None:
            self.assign_topic_id(topic_id)

    def assign_topic_id(self, topic_id: Uuid, *, sync: bool = True) -> None:
        """Record the topic id in ``partition.metadata``; a different id than the stored one is refused."""
        if self.topic_id is None:
            write_partition_metadata(self.dir, topic_id, sync=sync)
            self.topic_id = topic_id
        elif self.topic_id != topic_id:
            raise KafkaError(
                ErrorCode.INCONSISTENT_TOPIC_ID,
                f"Tried to assign topic ID {topic_id} to log for topic partition {self.topic}-{self.partition}, "
                f"but log already contained topic ID {self.topic_id}",
            )

    def _set_segments(self, segments: list[LogSegment]) -> None:
        """Publish a new segment list and its base offsets in one assignment: retention and the cleaner
        replace segments on worker threads while fetches read without the lock, and a reader taking
        ``self._listing`` once always holds a matching pair (whichever snapshot it started with)."""
        self._listing = (tuple(segments), tuple(segment.base_offset for segment in segments))
        self._position_cache = None

    @property
    def _segments(self) -> tuple[LogSegment, ...]:
        return self._listing[0]

    @property
    def _bases(self) -> tuple[int, ...]:
        return self._listing[1]

    # -- offsets -------------------------------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """New topic configs apply to the next segments; the active one keeps its index interval."""
        self._config = config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, or the first offset of an open transaction below it, or of one whose marker is
        not yet below the high watermark (Kafka's lastStableOffset): READ_COMMITTED reads stop there. Never
        below the log start offset (DeleteRecords may remove an open transaction's first records)."""
        first_unstable = self.producer_state.first_unstable_offset
        high_watermark = self._high_watermark
        return high_watermark if first_unstable is None else min(max(first_unstable, self._log_start_offset), high_watermark)

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Kept within [log start offset, log end offset], as Kafka's updateHighWatermark does."""
        with self._lock:
            self._high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)
            self.producer_state.on_high_watermark_updated(self._high_watermark)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self._log_end_offset - self._recovery_point

    # -- append --------------------------------------------------------------------------------------------------

    def append_as_leader(self, validated: ValidationResult, leader_epoch: int, log_append_time: int | None = None) -> AppendInfo:
        """Append an append the validator passed (``storage.log_validator``) for this partition at the LEO.

        Only a :class:`ValidationResult` is taken: what the log writes has passed Kafka's LogValidator
        checks for its origin. Offsets, the partition leader epoch and (for LogAppendTime topics) the
        timestamp are patched into its records in place -- header fields only, no record is decoded -- and
        the bytes are written as they are. Idempotent-producer checks run before anything is written and
        raise KafkaError (INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE); a
        duplicate of one of the producer's last 5 batches is not written and answered with its original
        offsets.
        """
        if not isinstance(validated, ValidationResult):
            raise TypeError(f"a leader appends only what LogValidator passed, not {type(validated).__name__}")
        batches, headers, origin = validated.records, validated.batches, validated.origin
        size = len(batches)
        if size > self._config.segment_bytes:
            raise KafkaError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"Message batch size is {size} bytes in append to partition {self.topic}-{self.partition}, which "
                f"exceeds the maximum configured segment size of {self._config.segment_bytes}.",
            )
        with self._lock:
            self._check_open()
            offset = first_offset = self._log_end_offset
            max_timestamp, offset_of_max_timestamp = NO_TIMESTAMP, -1
            producers = False
            for position, header in headers:
                producers = producers or header.producer_id >= 0
                assign_offset_and_epoch(batches, position, header, offset, leader_epoch)
                if log_append_time is not None:
                    set_log_append_time(batches, position, log_append_time)
                    header.max_timestamp = log_append_time
                offset += header.last_offset_delta + 1
                if header.max_timestamp > max_timestamp:
                    max_timestamp, offset_of_max_timestamp = header.max_timestamp, offset - 1
            last_offset = offset - 1

            # Batches without a producer id (a producer that is not idempotent) leave the producer state alone.
            updates, completed, duplicate = self._analyze_producer_state(batches, headers, origin) if producers else ({}, [], None)
            if duplicate is not None:
                return AppendInfo(
                    duplicate.first_offset, duplicate.last_offset, duplicate.timestamp, duplicate.last_offset,
                    duplicate.timestamp, self._log_start_offset, 0, duplicate=True,
                )
            segment = self._maybe_roll(size, max_timestamp, last_offset, first_offset)
            if leader_epoch >= 0:
                self.epoch_cache.assign(leader_epoch, first_offset)
            segment.append(last_offset, max_timestamp, offset_of_max_timestamp, batches)
            self._after_append(segment, last_offset, updates, completed)
            return AppendInfo(
                first_offset, last_offset, max_timestamp, offset_of_max_timestamp,
                log_append_time if log_append_time is not None else -1, self._log_start_offset, size,
            )

    def append_as_follower(self, batches: bytes | bytearray | memoryview) -> AppendInfo | None:
        """Append batches fetched from the leader, keeping their offsets and epochs.

        Batches are CRC-checked here (Kafka's follower path does the same); a partial batch at the end of a
        fetch response is ignored. The first offset must be at or beyond the LEO. Returns None when there
        was nothing whole to append.
        """
        view = memoryview(batches)
        end = max((pos + size for pos, _, size in iter_batch_positions(view)), default=0)
        if end == 0:
            return None
        validated = validate_batches(view[:end], from_client=False)
        headers = list(validated.batches)
        first_offset = headers[0][1].base_offset
        last_offset = headers[-1][1].base_offset + headers[-1][1].last_offset_delta
        previous = -1
        max_timestamp, offset_of_max_timestamp = NO_TIMESTAMP, -1
        for _, header in headers:
            batch_last = header.base_offset + header.last_offset_delta
            if header.base_offset <= previous:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Out of order offsets found in append to {self.topic}-{self.partition}")
            previous = batch_last
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max_timestamp = header.max_timestamp, batch_last
        with self._lock:
            self._check_open()
            if first_offset < self._log_end_offset:
                raise KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"Unexpected offset in append to {self.topic}-{self.partition}. First offset {first_offset} is "
                    f"less than the next offset {self._log_end_offset}.",
                )
            updates, completed, _ = self._analyze_producer_state(view, headers, AppendOrigin.REPLICATION)
            segment = self._maybe_roll(end, max_timestamp, last_offset, first_offset)
            for _, header in headers:
                if header.partition_leader_epoch >= 0:
                    self.epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            segment.append(last_offset, max_timestamp, offset_of_max_timestamp, view[:end])
            self._after_append(segment, last_offset, updates, completed)
            return AppendInfo(first_offset, last_offset, max_timestamp, offset_of_max_timestamp, -1, self._log_start_offset, end)

    def _analyze_producer_state(
        self, batches: bytearray | memoryview, headers: list[tuple[int, BatchHeader]], origin: AppendOrigin
    ) -> tuple[dict[int, ProducerAppendInfo], list[CompletedTxn], BatchMetadata | None]:
        """Kafka's analyzeAndValidateProducerState: each producer's pending update, the transactions the
        append's markers end, or the retained batch a client's batch duplicates. Nothing changes yet."""
        updates: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        state = self.producer_state
        for position, header in headers:
            if header.producer_id < 0:
                continue
            if origin is AppendOrigin.CLIENT:
                entry = state.last_entry(header.producer_id)
                duplicate = entry.find_duplicate_batch(header) if entry is not None else None
                if duplicate is not None:
                    return updates, completed, duplicate
            info = updates.get(header.producer_id)
            if info is None:
                info = updates[header.producer_id] = state.prepare_update(header.producer_id, origin)
            marker = read_end_txn_marker(batches[position : position + header.size]) if header.is_control else None
            txn = info.append(header, marker)
            if txn is not None:
                completed.append(txn)
        return updates, completed, None

    def _after_append(self, segment: LogSegment, last_offset: int, updates: dict[int, ProducerAppendInfo], completed: list[CompletedTxn]) -> None:
        """Kafka's order: the log end moves, producers are updated, then each ended transaction is completed
        (an aborted one indexed in the segment that holds its marker)."""
        self._log_end_offset = last_offset + 1
        state = self.producer_state
        for info in updates.values():
            state.update(info)
        for txn in completed:
            state.complete_txn(txn, segment.txn_index)
        state.map_end_offset = self._log_end_offset
        if self._log_end_offset - self._recovery_point >= self._config.flush_messages:  # unflushed_messages
            self.flush()

    def _maybe_roll(self, messages_size: int, max_timestamp: int, max_offset: int, first_offset: int) -> LogSegment:
        segment = self._listing[0][-1]  # the active segment (as ``_segments``, a property call fewer per append)
        config = self._config
        if segment.should_roll(
            segment_bytes=config.segment_bytes,
            segment_ms=config.segment_ms,
            max_timestamp=max_timestamp,
            max_offset=max_offset,
            messages_size=messages_size,
            now_ms=self._time_ms(),
        ):
            return self.roll(first_offset)
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected offset, LEO); the old one is trimmed and, on the next
        ``flush_due``, fsynced (Kafka flushes it asynchronously too)."""
        with self._lock:
            new_offset = max(expected_next_offset or 0, self._log_end_offset)
            active = self._segments[-1]
            if active.base_offset == new_offset:
                if active.size == 0:
                    return active
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Trying to roll a new log segment for {self.dir} with start offset {new_offset} that already exists")
            active.on_become_inactive()
            segment = create_segment(self.dir, new_offset, self._config, self._time_ms())
            self._set_segments([*self._segments, segment])
            self.producer_state.map_end_offset = new_offset
            self.producer_state.take_snapshot(sync=False)
            self._pending_roll_flush = max(self._pending_roll_flush, new_offset)
            return segment

    def assign_epoch_start_offset(self, leader_epoch: int, start_offset: int, *, sync: bool = True) -> None:
        """A new leader epoch starts at ``start_offset`` (the LEO when this broker becomes leader)."""
        with self._lock:
            self.epoch_cache.assign(leader_epoch, start_offset, sync=sync)

    # -- read ------------------------------------------------------------------------------------------------------

    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None, min_one_message: bool = True) -> FetchDataInfo:
        """Slices of the log from the batch holding ``start_offset``, below ``max_offset`` (the high watermark or
        last stable offset; the LEO when None), at most ``max_bytes`` -- except that with ``min_one_message``
        the first batch is returned whole even if larger (KIP-74).

        As in Kafka's LocalLog.read: data comes from one segment; reading mid-batch starts at the batch's
        first byte; the byte limit may cut the last batch (clients drop a partial trailing batch); an offset
        outside [log start, LEO] raises OffsetOutOfRangeError.
        """
        segments, bases = self._listing
        log_end = self._log_end_offset
        if start_offset < self._log_start_offset or start_offset > log_end:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition {self.topic}-{self.partition}, but we only "
                f"have log segments in the range {self._log_start_offset} to {log_end}."
            )
        if max_offset is None or max_offset > log_end:
            max_offset = log_end
        if start_offset >= max_offset:
            return FetchDataInfo(LogOffsetMetadata(start_offset))
        max_segment_base, max_position = self._offset_position(max_offset, segments, bases, log_end)
        index = bisect.bisect_right(bases, start_offset) - 1
        while 0 <= index < len(segments):
            segment = segments[index]
            if segment.base_offset > max_segment_base:
                break
            limit = max_position if segment.base_offset == max_segment_base else segment.size
            result = segment.read(start_offset, max_bytes, limit, min_one_message)
            if result is not None:
                metadata = LogOffsetMetadata(start_offset, segment.base_offset, result.start.position)
                pieces = (result.slice,) if result.slice is not None else ()
                return FetchDataInfo(metadata, pieces, result.first_entry_incomplete)
            index += 1
        return FetchDataInfo(LogOffsetMetadata(log_end, segments[-1].base_offset, segments[-1].size))

    def aborted_transactions(self, start_offset: int, info: FetchDataInfo) -> list[AbortedTxn]:
        """The aborted transactions a READ_COMMITTED fetch answers with the data of ``info`` (Kafka's
        LocalLog.addAbortedTransactions): those overlapping [start offset, upper bound), the bound being the
        first offset indexed at or after the fetched bytes' end, else the next segment's base, else the LEO;
        the segments' transaction indexes are searched from the fetched one until one is complete."""
        segments, bases = self._listing
        index = bisect.bisect_left(bases, info.fetch_offset_metadata.segment_base_offset)
        if index >= len(segments) or segments[index].base_offset != info.fetch_offset_metadata.segment_base_offset:
            return []
        upper_bound = segments[index].offset_index.fetch_upper_bound_offset(info.fetch_offset_metadata.relative_position + info.size)
        if upper_bound is None:
            upper_bound = segments[index + 1].base_offset if index + 1 < len(segments) else self._log_end_offset
        return _collect_aborted_txns(segments[index:], start_offset, upper_bound)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Kafka's collectAbortedTransactions: the aborted transactions overlapping [start, upper bound), from
        the transaction indexes of the segment holding ``start_offset`` and those after it (the cleaner's)."""
        segments, bases = self._listing
        return _collect_aborted_txns(segments[max(bisect.bisect_right(bases, start_offset) - 1, 0) :], start_offset, upper_bound_offset)

    def _offset_position(self, offset: int, segments: tuple[LogSegment, ...], bases: tuple[int, ...], log_end: int) -> tuple[int, int]:
        """(segment base, position) of the batch holding ``offset``: where a read bounded by it must stop."""
        if offset >= log_end:
            return segments[-1].base_offset, segments[-1].size
        cached = self._position_cache
        if cached is not None and cached[0] == offset:
            return cached[1], cached[2]
        segment = segments[max(bisect.bisect_right(bases, offset) - 1, 0)]
        found = segment.translate_offset(offset)
        position = found.position if found is not None else segment.size
        self._position_cache = (offset, segment.base_offset, position)
        return segment.base_offset, position

    # -- timestamps ----------------------------------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets for a real timestamp: the first record with timestamp >= ``timestamp`` (time index, then
        the batches after the entry, decoding only the batch that holds it). The special timestamps (earliest,
        latest, max...) are the ListOffsets handler's: it answers them from the log's offsets."""
        start = self._log_start_offset
        for segment in self._segments:
            if segment.largest_timestamp() >= timestamp:
                break
        else:
            return None
        from odradek.protocol.records import iter_records  # the record codec: the one batch that holds it is decoded

        for position, header in segment.batches_from(segment.find_timestamp_position(timestamp, start)):
            if header.max_timestamp >= timestamp:
                for record in iter_records(segment.read_batch(position, header)):
                    assert record.timestamp is not None and record.offset is not None  # a decoded record carries both
                    if record.timestamp >= timestamp and record.offset >= start:
                        return TimestampAndOffset(record.timestamp, record.offset, header.partition_leader_epoch)
        return None

    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        """ListOffsets MAX_TIMESTAMP (KIP-734): the first record carrying the largest timestamp in the log."""
        segment = max(self._segments, key=lambda s: s.max_timestamp)
        max_timestamp, offset = segment.max_timestamp_and_offset
        _, position = segment.offset_index.lookup(offset)
        from odradek.protocol.records import iter_records  # as offset_for_timestamp

        for batch_position, header in segment.batches_from(position):
            if header.max_timestamp == max_timestamp:
                for record in iter_records(segment.read_batch(batch_position, header)):
                    if record.timestamp == max_timestamp:
                        assert record.offset is not None  # a decoded record carries one
                        return TimestampAndOffset(max_timestamp, record.offset, header.partition_leader_epoch)
                return None
        return None

    # -- leader epochs ---------------------------------------------------------------------------------------------

    @property
    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= requested, the offset where it ended); (-1, -1) if unknown."""
        return self.epoch_cache.end_offset_for(leader_epoch, self._log_end_offset)

    def epoch_for_offset(self, offset: int) -> int | None:
        return self.epoch_cache.epoch_for_offset(offset)

    # -- log start offset, retention, truncation -----------------------------------------------------------------

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """Move the log start offset forward (never past the high watermark). Segments wholly below it go on
        the next ``delete_old_segments``."""
        with self._lock:
            if new_log_start_offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {new_log_start_offset} of partition "
                    f"{self.topic}-{self.partition} since it is larger than the high watermark {self._high_watermark}"
                )
            if new_log_start_offset <= self._log_start_offset:
                return False
            # The only step that writes, first: if it fails (a full disk), nothing has moved.
            self.epoch_cache.truncate_from_start(new_log_start_offset)
            self._log_start_offset = new_log_start_offset
            self._high_watermark = max(self._high_watermark, new_log_start_offset)
            self._recovery_point = max(self._recovery_point, new_log_start_offset)
            self.producer_state.on_log_start_offset_incremented(new_log_start_offset)
            return True

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: records below ``offset`` (-1: the high watermark) disappear; returns the new low watermark."""
        with self._lock:
            if offset == -1:
                offset = self._high_watermark
            if offset < 0 or offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"The offset {offset} for partition {self.topic}-{self.partition} is not in the range "
                    f"[{self._log_start_offset}, {self._high_watermark}]"
                )
            self.maybe_increment_log_start_offset(offset)
            self._delete_log_start_offset_breached_segments()
            return self._log_start_offset

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention (Kafka's deleteOldSegments): segments below the log start offset, then by retention.bytes,
        then by retention.ms -- whole segments, oldest first, only below the high watermark. When every
        segment is deletable the log first rolls, so the active segment itself is never deleted. Returns the
        number of segments deleted."""
        now = self._time_ms() if now_ms is None else now_ms
        with self._lock:
            deleted = self._delete_log_start_offset_breached_segments()
            if self._config.delete:
                deleted += self._delete_retention_size_breached_segments()
                deleted += self._delete_retention_ms_breached_segments(now)
            return deleted

    def _delete_log_start_offset_breached_segments(self) -> int:
        start = self._log_start_offset
        return self._delete_old_segments(lambda segment, following: following is not None and following.base_offset <= start)

    def _delete_retention_ms_breached_segments(self, now_ms: int) -> int:
        retention_ms = self._config.retention_ms
        if retention_ms < 0:
            return 0
        return self._delete_old_segments(lambda segment, following: now_ms - segment.largest_timestamp() > retention_ms)

    def _delete_retention_size_breached_segments(self) -> int:
        retention_bytes = self._config.retention_bytes
        size = self.size_in_bytes
        if retention_bytes < 0 or size < retention_bytes:
            return 0
        excess = size - retention_bytes

        def should_delete(segment: LogSegment, following: LogSegment | None) -> bool:
            nonlocal excess
            if excess - segment.size >= 0:
                excess -= segment.size
                return True
            return False

        return self._delete_old_segments(should_delete)

    def _delete_old_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> int:
        segments = self._segments
        deletable: list[LogSegment] = []
        for i, segment in enumerate(segments):
            following = segments[i + 1] if i + 1 < len(segments) else None
            upper_bound = following.base_offset if following is not None else self._log_end_offset
            if following is None and segment.size == 0:
                break
            if self._high_watermark >= upper_bound and predicate(segment, following):
                deletable.append(segment)
            else:
                break
        if not deletable:
            return 0
        if len(deletable) == len(segments):
            self.roll()
        remaining = [segment for segment in self._segments if segment not in deletable]
        self.maybe_increment_log_start_offset(remaining[0].base_offset)
        self._set_segments(remaining)
        for segment in deletable:
            log.info("Deleting segment %s of %s-%d", segment.base_offset, self.topic, self.partition)
            segment.delete()
            self.producer_state.remove_snapshot(segment.base_offset)
        return len(deletable)

    def truncate_to(self, target_offset: int) -> bool:
        """Remove every offset >= ``target_offset`` (a follower diverging from its leader). True if anything was
        removed. Indexes, leader epochs, producer state and the high watermark follow."""
        if target_offset < 0:
            raise ValueError(f"Cannot truncate partition {self.topic}-{self.partition} to a negative offset ({target_offset}).")
        with self._lock:
            if target_offset >= self._log_end_offset:
                self.epoch_cache.truncate_from_end(self._log_end_offset)
                return False
            if self._segments[0].base_offset > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            self._truncations += 1
            keep = [segment for segment in self._segments if segment.base_offset <= target_offset]
            for segment in self._segments[len(keep) :]:
                segment.delete()
                self.producer_state.remove_snapshot(segment.base_offset)
            self._set_segments(keep)
            keep[-1].truncate_to(target_offset)
            self._log_end_offset = target_offset
            self.epoch_cache.truncate_from_end(target_offset)
            self._log_start_offset = min(target_offset, self._log_start_offset)
            self._recovery_point = min(self._recovery_point, target_offset)
            self._pending_roll_flush = min(self._pending_roll_flush, target_offset)
            rebuild_producer_state(self.producer_state, self._segments, self._log_start_offset, self._log_end_offset, self._time_ms())
            self.high_watermark = min(self._high_watermark, self._log_end_offset)
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Drop everything and start empty at ``new_offset`` (a follower far behind its leader's log start)."""
        with self._lock:
            self._truncations += 1
            for segment in self._segments:
                segment.delete()
            self._set_segments([create_segment(self.dir, new_offset, self._config, self._time_ms())])
            self._log_end_offset = self._log_start_offset = self._recovery_point = new_offset
            self._pending_roll_flush = new_offset
            self.epoch_cache.clear_and_flush()
            self.producer_state.truncate_fully_and_start_at(new_offset)
            self.producer_state.take_snapshot()
            self._high_watermark = new_offset

    # -- compaction (the log cleaner's side) ---------------------------------------------------------------------

    @property
    def lock(self) -> threading.RLock:
        """Held by every change to the segment list. The cleaner holds it while it pins the segments it reads
        (opening their files, so deletion cannot race a lazy open) and while it swaps cleaned ones in."""
        return self._lock

    @property
    def truncations(self) -> int:
        return self._truncations

    @property
    def closed(self) -> bool:
        """Closed or deleted: its segments are gone from under anyone who still holds the log."""
        return self._closed

    def last_records_of_active_producers(self) -> dict[int, tuple[int, int]]:
        """producer id -> (offset of its last data batch or -1, its epoch): the batches the cleaner must keep
        so that sequence numbers and epochs survive compaction (Kafka's lastRecordsOfActiveProducers)."""
        with self._lock:
            return {pid: (entry.last_data_offset, entry.producer_epoch) for pid, entry in self.producer_state.producers.items()}

    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        """An empty ``<base>.log.cleaned`` with its indexes, for the cleaner to fill (Kafka's
        createNewCleanedSegment); files an aborted cleaning left under that name go first."""
        config = self._config
        segment = LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.max_index_size,
            roll_jitter_ms=0,
            created_ms=self._time_ms(),
            file_suffix=CLEANED_FILE_SUFFIX,
        )
        for suffix in SEGMENT_FILES:
            unlink_if_exists(segment.path(suffix))
        segment.indexes_trusted = True
        segment.log  # noqa: B018 -- create the files now: a cleaning may leave the segment empty
        segment.offset_index  # noqa: B018
        return segment

    def replace_segments(self, cleaned: LogSegment, replaced: list[LogSegment], truncations: int) -> bool:
        """Swap a flushed ``.cleaned`` segment in for the segments it was cleaned from (Kafka's replaceSegments).

        Crash-safe by file names alone: the cleaned files become ``.swap`` (the commit point), the replaced
        ones ``.deleted``, then the ``.swap`` suffix is dropped; ``_complete_interrupted_swaps`` finishes or
        undoes whatever a crash interrupted. Refused (False) if the log changed under the cleaner: closed,
        truncated since ``truncations`` was read, or one of ``replaced`` already gone (retention,
        DeleteRecords). Replaced segments stay open for readers that picked them up and are deleted
        file.delete.delay.ms later.
        """
        with self._lock:
            current = self._segments
            if self._closed or truncations != self._truncations or not all(any(s is c for c in current) for s in replaced):
                return False
            cleaned.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
            kept = [s for s in current if not any(s is r for r in replaced)]
            self._set_segments(sorted([*kept, cleaned], key=lambda segment: segment.base_offset))
            delete_at = self._time_ms() + self._config.file_delete_delay_ms
            for segment in replaced:
                segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
                self._retired.append((delete_at, segment))
                if segment.base_offset != cleaned.base_offset:
                    self.producer_state.remove_snapshot(segment.base_offset)
            cleaned.change_file_suffixes(SWAP_FILE_SUFFIX, "")
        fsync_dir(self.dir)
        return True

    def delete_retired_segments(self, now_ms: int | None = None) -> int:
        """Delete the replaced segments whose file.delete.delay.ms elapsed; returns how many."""
        now = self._time_ms() if now_ms is None else now_ms
        with self._lock:
            due = [segment for delete_at, segment in self._retired if delete_at <= now]
            self._retired = [(delete_at, segment) for delete_at, segment in self._retired if delete_at > now]
        for segment in due:
            segment.delete()
        return len(due)

    # -- durability ----------------------------------------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``offset`` (default: the LEO); it becomes the recovery point."""
        with self._lock:
            target = self._log_end_offset if offset is None else offset
            recovery_point = self._recovery_point
            if target <= recovery_point:
                return
            first = max(bisect.bisect_right(self._bases, recovery_point) - 1, 0)
            segments = [s for s in self._segments[first:] if s.base_offset < target]
        for segment in segments:
            segment.flush()
        self.producer_state.flush_snapshots(target)
        if any(segment.base_offset >= recovery_point for segment in segments):
            fsync_dir(self.dir)  # segments and snapshots created since the last flush
        with self._lock:
            if target > self._recovery_point:
                self._recovery_point = target
                self.last_flush_ms = self._time_ms()

    def flush_due(self, now_ms: int) -> bool:
        """Flush what is due: segments rolled since the last flush, and everything if ``flush.ms`` elapsed."""
        if self._pending_roll_flush > self._recovery_point:
            self.flush(self._pending_roll_flush)
            flushed = True
        else:
            flushed = False
        if now_ms - self.last_flush_ms >= self._config.flush_ms and self._log_end_offset > self._recovery_point:
            self.flush()
            flushed = True
        return flushed

    def remove_expired_producers(self, now_ms: int) -> None:
        with self._lock:
            self.producer_state.remove_expired_producers(now_ms)

    def close(self) -> None:
        """Snapshot producer state at the LEO, trim the active indexes and close every file."""
        with self._lock:
            if self._closed:
                return
            self.producer_state.map_end_offset = self._log_end_offset
            self.producer_state.take_snapshot()
            self.epoch_cache.flush()
            for segment in self._segments:
                segment.close()
            for _, segment in self._retired:
                segment.delete()
            self._retired = []
            self._closed = True

    def delete(self) -> Path:
        """Close the log and rename its directory ``<topic>-<partition>.<id>-delete`` (Kafka's
        ``logDeleteDirName``); the log manager removes it after ``file.delete.delay.ms``, and a startup
        finds any left over by the name. Open log files stay readable for slices already handed out."""
        with self._lock:
            for segment in (*self._segments, *(segment for _, segment in self._retired)):
                segment.release_indexes()
            self._retired = []
            self._set_segments([])
            self._closed = True
            doomed = self.dir.with_name(log_delete_dir_name(*parse_topic_partition(self.dir.name)))
            os.rename(self.dir, doomed)
            self.dir = doomed
            return doomed

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"The log {self.dir} is closed")

    def __repr__(self) -> str:
        return (
            f"Log(dir={self.dir}, topicId={self.topic_id}, logStartOffset={self._log_start_offset}, "
            f"logEndOffset={self._log_end_offset}, highWatermark={self._high_watermark})"
        )


def _collect_aborted_txns(segments: tuple[LogSegment, ...], start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
    """Search the segments' transaction indexes in order until one holds an entry ending past the bound."""
    aborted: list[AbortedTxn] = []
    for segment in segments:
        found, complete = segment.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
        aborted.extend(found)
        if complete:
            break
    return aborted
