"""Log compaction for ``cleanup.policy=compact`` topics (Kafka 3.9's LogCleaner, Cleaner, LogCleanerManager).

Each compacted log splits at its cleaner checkpoint (``cleaner-offset-checkpoint`` in its log directory)
into a clean head and a dirty tail. The dirty part that may be cleaned ends at the first uncleanable
offset: the active segment, the last stable offset, and any segment younger than min.compaction.lag.ms
stay out. A log is cleaned when its dirty bytes exceed min.cleanable.dirty.ratio of its size, or when a
dirty segment has waited longer than max.compaction.lag.ms.

Cleaning maps every key of the cleanable dirty part to its last offset, then recopies the log up to the
end of the map, segment group by segment group, keeping a record only if no later record has its key.
Kept batches keep their offsets (the log becomes sparse), their codec, producer fields and last offset;
a batch that lost records is rebuilt. Tombstones (null values) survive the first cleaning that sees them:
their batch gets a delete horizon (KIP-534: the DELETE_HORIZON attribute, carried in the base timestamp)
of now + delete.retention.ms, and a cleaning after it drops them. The last batch of every active producer
is kept, emptied if need be, so that sequence numbers and epochs survive. Each cleaned group is written to
``.cleaned`` files, flushed, and swapped in by ``Log.replace_segments``.

Transactions as Kafka cleans them (``CleanedTransactionMetadata``): batches of aborted transactions are
dropped (their keys never enter the map), and so are markers whose transaction left no data behind -- at
once for a COMMIT, and for an ABORT once its data is gone; the marker's batch first gets a delete horizon
like a tombstone's, and only a cleaning after it drops the marker. An ABORT marker kept carries its entry
into the cleaned segment's transaction index.

Not as Kafka: the key map holds as many keys as Kafka's
(log.cleaner.dedupe.buffer.size / 24 bytes, times log.cleaner.io.buffer.load.factor) but a Python entry
costs several times Kafka's 24 bytes; one log is cleaned at a time, on the caller's thread
(log.cleaner.threads is not acted on), and I/O is not throttled.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, TypeVar

from odradek.protocol.compression import compress
from odradek.protocol.record_batch import (
    COMPRESSION_MASK,
    DELETE_HORIZON_FLAG,
    NO_TIMESTAMP,
    BatchHeader,
    TimestampType,
    encode_batch,
    parse_header,
)
from odradek.protocol.records import Record, encode_record, iter_records
from odradek.storage.checkpoints import OffsetCheckpointFile
from odradek.storage.cleaned_transactions import CleanedTransactionMetadata
from odradek.storage.file_records import FileRecords
from odradek.storage.indexes import INT32_MAX
from odradek.storage.log import Log
from odradek.storage.segment import CLEANED_FILE_SUFFIX, LogSegment
from odradek.storage.topic_partition import TopicPartition

log = logging.getLogger("odradek.storage.cleaner")

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
_MAP_SLOT_BYTES = 24
"""What one key costs in Kafka's SkimpyOffsetMap: a 16-byte MD5 of the key and an 8-byte offset."""


def _parse_bool(text: str) -> bool:
    return text.strip().lower() == "true"


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings storage acts on (Kafka's CleanerConfig), with Kafka's defaults;
    log.cleaner.backoff.ms is the broker's schedule."""

    enable: bool = True
    dedupe_buffer_size: int = 134_217_728
    dedupe_buffer_load_factor: float = 0.9

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> CleanerConfig:
        values = {attribute: parse(str(props[key])) for key, attribute, parse in _CLEANER_KEYS if key in props}
        return cls(**values)

    @property
    def max_map_entries(self) -> int:
        """How many keys one cleaning maps at most: Kafka's slots of the buffer times the load factor (the one
        cleaning at a time has all of the buffer, as Kafka's single default thread does)."""
        slots = min(self.dedupe_buffer_size, INT32_MAX) // _MAP_SLOT_BYTES
        return max(int(slots * self.dedupe_buffer_load_factor), 1)


_CLEANER_KEYS: tuple[tuple[str, str, Callable[[str], Any]], ...] = (
    ("log.cleaner.enable", "enable", _parse_bool),
    ("log.cleaner.dedupe.buffer.size", "dedupe_buffer_size", int),
    ("log.cleaner.io.buffer.load.factor", "dedupe_buffer_load_factor", float),
)


class OffsetMap:
    """Key -> offset of its last record in the mapped range, keyed by the key's MD5 as Kafka's
    SkimpyOffsetMap is, and bounded in entries as Kafka's is by its buffer."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1
        """The last offset mapped: records past it were not looked at and are kept as they are."""

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._offsets)

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[hashlib.md5(key, usedforsecurity=False).digest()] = offset

    def get(self, key: bytes) -> int:
        return self._offsets.get(hashlib.md5(key, usedforsecurity=False).digest(), -1)


@dataclass
class CleanerStats:
    """What one cleaning read and wrote, for its log line (Kafka's CleanerStats)."""

    started: float = field(default_factory=time.monotonic)
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0


# -- choosing what to clean (LogCleanerManager) ------------------------------------------------------------------


class _HasBaseOffset(Protocol):
    @property
    def base_offset(self) -> int: ...


_S = TypeVar("_S", bound=_HasBaseOffset)


def segments_between(segments: Sequence[_S], from_offset: int, to_offset: int) -> list[_S]:
    """Kafka's ``logSegments(from, to)``: from the segment holding ``from_offset`` (or the first) to the last one
    starting below ``to_offset``."""
    if from_offset >= to_offset:
        return []
    bases = [segment.base_offset for segment in segments]
    first = max(bisect.bisect_right(bases, from_offset) - 1, 0)
    return [segment for segment in segments[first:] if segment.base_offset < to_offset]


def cleanable_offsets(log_: Log, last_clean_offset: int | None, now_ms: int) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, checkpoint must be reset) -- Kafka's cleanableOffsets.

    A checkpoint below the log start offset or past the log end is reset to the log start offset. The
    cleanable range stops at the last stable offset, the active segment and the first segment whose
    largest timestamp is within min.compaction.lag.ms of now. Call with the log's lock held.
    """
    start = log_.log_start_offset
    checkpoint = start if last_clean_offset is None else last_clean_offset
    force_update = False
    if checkpoint < start:
        if not log_.config.delete:
            log.warning("Resetting first dirty offset of %s-%d to log start offset %d since the checkpointed offset %d is invalid.", log_.topic, log_.partition, start, checkpoint)
        checkpoint, force_update = start, True
    elif checkpoint > log_.log_end_offset:
        log.warning(
            "The last checkpoint dirty offset for partition %s-%d is %d, which is larger than the log end offset %d. "
            "Resetting to the log start offset %d.", log_.topic, log_.partition, checkpoint, log_.log_end_offset, start,
        )
        checkpoint, force_update = start, True
    segments = log_.segments
    active = segments[-1]
    limits = [log_.last_stable_offset, active.base_offset]  # nothing unstable is ever cleaned
    min_lag = max(log_.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for segment in segments_between(segments, checkpoint, active.base_offset):
            if segment.largest_timestamp() > now_ms - min_lag:
                limits.append(segment.base_offset)
                break
    return checkpoint, max(checkpoint, min(limits)), force_update


def max_compaction_delay(log_: Log, first_dirty_offset: int, now_ms: int) -> int:
    """How long past max.compaction.lag.ms the oldest dirty segment's first batch is (0: not overdue)."""
    segments = log_.segments
    timestamps = [
        timestamp
        for segment in segments_between(segments, first_dirty_offset, segments[-1].base_offset)
        if (timestamp := segment.first_batch_timestamp()) is not None and timestamp > 0
    ]
    clean_until = now_ms - max(log_.config.max_compaction_lag_ms, 0)
    earliest = min(timestamps, default=None)
    return clean_until - earliest if earliest is not None and earliest < clean_until else 0


@dataclass(frozen=True)
class LogToClean:
    """A compacted log and the sizes that rank it (Kafka's LogToClean)."""

    topic_partition: TopicPartition
    log: Log
    log_dir: Path
    first_dirty_offset: int
    first_uncleanable_offset: int
    """The base offset of the first segment not cleaned: the cleanable range ends here."""
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool

    @classmethod
    def measure(cls, tp: TopicPartition, log_: Log, log_dir: Path, first_dirty: int, uncleanable: int, need_compaction_now: bool) -> LogToClean:
        """Call with the log's lock held (segment sizes of segments being deleted are not to be asked)."""
        segments = log_.segments
        active = segments[-1]
        following = segments_between(segments, uncleanable, active.base_offset)
        first_uncleanable = following[0].base_offset if following else active.base_offset
        cleanable = sum(s.size for s in segments_between(segments, min(first_dirty, first_uncleanable), first_uncleanable))
        clean = sum(s.size for s in segments if s.base_offset < first_dirty)
        return cls(tp, log_, log_dir, first_dirty, first_uncleanable, clean, cleanable, need_compaction_now)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


# -- cleaning one log (Cleaner) ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _PinnedSegment:
    """A segment as the cleaner found it under the log's lock: its open file, so that retention deleting the
    segment meanwhile cannot make a lazy open create an empty file, and the sizes that group it."""

    segment: LogSegment
    records: FileRecords
    size: int
    index_bytes: int
    time_index_bytes: int
    last_modified_ms: int

    @classmethod
    def pin(cls, segment: LogSegment) -> _PinnedSegment:
        return cls(
            segment,
            segment.log,
            segment.size,
            segment.offset_index.entries * segment.offset_index.ENTRY.size,
            segment.time_index.entries * segment.time_index.ENTRY.size,
            segment.last_modified_ms(),
        )

    @property
    def base_offset(self) -> int:
        return self.segment.base_offset


def _rebuild_batch(header: BatchHeader, retained: list[Record], delete_horizon_ms: int | None) -> bytes:
    """The batch with only ``retained``, as Kafka's cleaner rebuilds it: same base and last offset, codec,
    timestamp type, producer fields and leader epoch; with a delete horizon the base timestamp carries it
    and record timestamps are deltas from it."""
    base_timestamp = retained[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
    assert base_timestamp is not None
    payload = b"".join(encode_record(r, r.offset - header.base_offset, r.timestamp - base_timestamp) for r in retained)  # type: ignore[operator]
    if header.compression:
        payload = compress(header.compression, payload)
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(r.timestamp for r in retained)  # type: ignore[type-var, assignment]  # decoded records carry timestamps
    attributes = header.attributes & ~DELETE_HORIZON_FLAG
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG
    return encode_batch(
        payload,
        base_offset=header.base_offset,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        records_count=len(retained),
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
    )


def _empty_batch(header: BatchHeader) -> bytes:
    """A batch emptied of records but kept for its offsets and producer fields (Kafka's writeEmptyHeader)."""
    return encode_batch(
        b"",
        base_offset=header.base_offset,
        attributes=header.attributes & ~(DELETE_HORIZON_FLAG | COMPRESSION_MASK),
        last_offset_delta=header.last_offset_delta,
        base_timestamp=NO_TIMESTAMP,
        max_timestamp=header.max_timestamp,
        records_count=0,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
    )


def group_segments_by_size(segments: list[_PinnedSegment], max_size: int, max_index_size: int, first_uncleanable_offset: int) -> list[list[_PinnedSegment]]:
    """Consecutive segments whose logs and indexes together stay within segment.bytes and segment.index.bytes
    and whose offsets fit one segment's 32-bit relative offsets (Kafka's groupSegmentsBySize)."""
    groups = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        log_size, index_size, time_index_size = group[0].size, group[0].index_bytes, group[0].time_index_bytes
        while rest:
            candidate = rest[0]
            last_offset = rest[1].base_offset - 1 if len(rest) > 1 else first_uncleanable_offset - 1
            if not (
                log_size + candidate.size <= max_size
                and index_size + candidate.index_bytes <= max_index_size
                and time_index_size + candidate.time_index_bytes <= max_index_size
                and (candidate.size == 0 or last_offset - group[0].base_offset <= INT32_MAX)
            ):
                break
            group.append(rest.pop(0))
            log_size += candidate.size
            index_size += candidate.index_bytes
            time_index_size += candidate.time_index_bytes
        groups.append(group)
    return groups


@dataclass(frozen=True)
class _Round:
    """What stays fixed while one log is cleaned."""

    log: Log
    now_ms: int
    upper: int
    """The first uncleanable offset: the cleanable range ends here."""
    truncations: int
    last_records: dict[int, tuple[int, int]]
    stats: CleanerStats


class Cleaner:
    def __init__(self, offset_map: OffsetMap) -> None:
        self.offset_map = offset_map

    def clean(self, to_clean: LogToClean, now_ms: int) -> tuple[int, CleanerStats] | None:
        """Clean the log; returns (the first offset not cleaned, stats), or None if the log changed under the
        cleaner (truncated, closed, segments deleted) and the rest of the cleaning was abandoned."""
        log_ = to_clean.log
        upper = to_clean.first_uncleanable_offset
        with log_.lock:
            if log_.closed:
                return None
            pinned = [_PinnedSegment.pin(segment) for segment in log_.segments if segment.base_offset < upper]
            round_ = _Round(log_, now_ms, upper, log_.truncations, log_.last_records_of_active_producers(), CleanerStats())
        self._build_offset_map(log_, segments_between(pinned, to_clean.first_dirty_offset, upper), to_clean.first_dirty_offset, upper)
        end_offset = self.offset_map.latest_offset + 1
        config = log_.config
        groups = group_segments_by_size([p for p in pinned if p.base_offset < end_offset], config.segment_bytes, config.max_index_size, upper)
        transactions = CleanedTransactionMetadata()  # carried from group to group, as Kafka's
        for group in groups:
            if not self._clean_segments(group, round_, transactions):
                return None
        return end_offset, round_.stats

    def _build_offset_map(self, log_: Log, dirty: list[_PinnedSegment], start: int, end: int) -> None:
        offset_map = self.offset_map
        offset_map.clear()
        transactions = CleanedTransactionMetadata()
        transactions.add_aborted_transactions(log_.collect_aborted_transactions(start, end))
        for i, pinned in enumerate(dirty):
            if self._map_segment(pinned, start, transactions):
                return  # full: this cleaning covers what was mapped, the next one goes on from there
            offset_map.latest_offset = (dirty[i + 1].base_offset if i + 1 < len(dirty) else end) - 1

    def _map_segment(self, pinned: _PinnedSegment, start: int, transactions: CleanedTransactionMetadata) -> bool:
        """Map the keys of one segment at or after ``start``, except aborted ones; True if the map filled up."""
        offset_map = self.offset_map
        for _, header, batch in pinned.records.batches():
            if header.last_offset < start:
                continue
            if header.is_control:
                transactions.on_control_batch_read(header, batch)
            elif not transactions.on_batch_read(header):
                for record in iter_records(batch):
                    if record.key is not None and record.offset >= start:  # type: ignore[operator]
                        if len(offset_map) >= offset_map.capacity:
                            return True
                        offset_map.put(record.key, record.offset)  # type: ignore[arg-type]
            offset_map.latest_offset = header.last_offset
        return False

    def _clean_segments(self, group: list[_PinnedSegment], round_: _Round, transactions: CleanedTransactionMetadata) -> bool:
        """Recopy a group of segments into one ``.cleaned`` segment and swap it in (Kafka's cleanSegments); a
        transaction's data and its marker may lie in different groups."""
        log_ = round_.log
        cleaned = log_.new_cleaned_segment(group[0].base_offset)
        transactions.cleaned_index = cleaned.txn_index
        swapped = False
        try:
            for i, pinned in enumerate(group):
                # The whole segment's aborted transactions: the cleaned segment's index is rebuilt from them.
                upper = group[i + 1].base_offset if i + 1 < len(group) else pinned.segment.read_next_offset()
                transactions.add_aborted_transactions(log_.collect_aborted_transactions(pinned.base_offset, upper))
                for _, header, batch in pinned.records.batches():
                    round_.stats.bytes_read += header.size
                    out = self._filter_batch(header, batch, round_, transactions)
                    if out is not None:
                        kept = parse_header(out)
                        cleaned.append(kept.last_offset, kept.max_timestamp, kept.last_offset, out)
                        round_.stats.bytes_written += len(out)
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.set_last_modified(group[-1].last_modified_ms)
            log.info("Swapping in cleaned segment %s for segment(s) %s in log %s", cleaned, [p.segment for p in group], log_)
            swapped = log_.replace_segments(cleaned, [p.segment for p in group], round_.truncations)
        finally:
            if not swapped and cleaned.file_suffix == CLEANED_FILE_SUFFIX:
                cleaned.delete()  # never committed; a swap that failed once committed is finished at startup
        return swapped

    def _filter_batch(self, header: BatchHeader, batch: memoryview, round_: _Round, transactions: CleanedTransactionMetadata) -> bytes | memoryview | None:
        """What of one batch goes into the cleaned segment (Kafka's log cleaner RecordFilter + filterTo).

        A batch of an aborted transaction is discarded, a marker with nothing left to mark once its delete
        horizon has passed (the first cleaning to find it sets the horizon); either stays as an empty batch
        when it is its producer's last."""
        stats = round_.stats
        if header.is_control:
            can_discard = transactions.on_control_batch_read(header, batch)
            discard = can_discard and header.has_delete_horizon and header.base_timestamp <= round_.now_ms
        else:
            can_discard = discard = transactions.on_batch_read(header)
        last_of_producer = _is_last_batch_of_producer(header, round_.last_records)
        if discard and not last_of_producer:
            stats.messages_read += header.records_count
            return None
        records = [] if discard else list(iter_records(batch))
        if header.is_control:
            retained = records
        else:
            retained = [record for record in records if self._should_retain(header, record, round_.now_ms)]
        stats.messages_read += header.records_count if discard else len(records)
        stats.messages_written += len(retained)
        if retained:
            tombstones = not header.is_control and any(record.value is None for record in retained)
            set_horizon = not header.has_delete_horizon and (tombstones or (header.is_control and can_discard))
            if len(retained) == len(records) and not set_horizon:
                return batch
            if set_horizon:
                horizon: int | None = round_.now_ms + round_.log.config.delete_retention_ms
            else:
                horizon = header.base_timestamp if header.has_delete_horizon else None
            return _rebuild_batch(header, retained, horizon)
        if last_of_producer or header.next_offset == round_.upper:
            # The producer's last sequence and epoch must survive; so must the offset the cleaned range ends at.
            return _empty_batch(header)
        return None

    def _should_retain(self, header: BatchHeader, record: Record, now_ms: int) -> bool:
        """Kafka's shouldRetainRecord: past the mapped range, or the key's last record -- a tombstone only until
        its batch's delete horizon. Records without a key (not accepted by a compacted topic) go."""
        assert record.offset is not None
        if record.offset > self.offset_map.latest_offset:
            return True
        if record.key is None or record.offset < self.offset_map.get(record.key):
            return False
        return record.value is not None or not header.has_delete_horizon or now_ms < header.base_timestamp


def _is_last_batch_of_producer(header: BatchHeader, last_records: dict[int, tuple[int, int]]) -> bool:
    if header.producer_id < 0 or header.producer_id not in last_records:
        return False
    last_data_offset, epoch = last_records[header.producer_id]
    if last_data_offset >= 0:
        return header.last_offset == last_data_offset
    return header.is_control and header.producer_epoch == epoch


# -- the cleaner as the broker runs it (LogCleaner + LogCleanerManager) ---------------------------------------------


def _now_ms() -> int:
    return int(time.time() * 1000)


class LogCleaner:
    """Picks the filthiest cleanable compacted log, cleans it, checkpoints how far it got, and repeats until no
    log is cleanable -- what one of Kafka's cleaner threads does between backoffs. Owns no thread: the
    broker calls ``clean_logs`` from a worker thread every log.cleaner.backoff.ms."""

    def __init__(self, config: CleanerConfig, log_dirs: Iterable[Path], *, time_ms: Callable[[], int] = _now_ms) -> None:
        self.config = config
        self.log_dirs = [Path(d) for d in log_dirs]
        self._time_ms = time_ms
        self._cleaner = Cleaner(OffsetMap(config.max_map_entries))
        self._uncleanable: set[TopicPartition] = set()
        self._checkpoint_lock = threading.Lock()
        """Checkpoint files are rewritten by the cleaning thread and by topic deletion on the event loop."""

    # -- checkpoints -------------------------------------------------------------------------------------------

    def checkpoints(self) -> dict[TopicPartition, int]:
        """The cleaner checkpoint of every partition, from every log directory."""
        with self._checkpoint_lock:
            offsets: dict[TopicPartition, int] = {}
            for log_dir in self.log_dirs:
                offsets.update(OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT).read())
            return offsets

    def update_checkpoint(self, log_dir: Path, live: set[TopicPartition], *, update: TopicPartition | None = None, offset: int = 0, remove: TopicPartition | None = None) -> None:
        """Rewrite one directory's checkpoint: entries of partitions no longer ``live`` or ``remove``d drop out."""
        with self._checkpoint_lock:
            checkpoint = OffsetCheckpointFile(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT)
            offsets = {tp: o for tp, o in checkpoint.read().items() if tp in live and tp != remove}
            if update is not None:
                offsets[update] = offset
            checkpoint.write(offsets)

    # -- cleaning ----------------------------------------------------------------------------------------------

    def clean_logs(self, logs: Iterable[tuple[TopicPartition, Log, Path]], now_ms: int | None = None, live: set[TopicPartition] | None = None) -> int:
        """Clean every log that is due, filthiest first, each at most once; ``logs`` are the broker's open logs
        with their log directories, ``live`` every partition it has (default: those of ``logs``), whose
        checkpoints are kept. Returns how many logs were cleaned."""
        now = self._time_ms() if now_ms is None else now_ms
        logs = list(logs)
        live = {tp for tp, _, _ in logs} if live is None else live
        tried: set[TopicPartition] = set()
        cleaned = 0
        while (to_clean := self.grab_filthiest_compacted_log(logs, live, now, tried)) is not None:
            tried.add(to_clean.topic_partition)
            cleaned += self._clean(to_clean, live, now)
        return cleaned

    def grab_filthiest_compacted_log(self, logs: list[tuple[TopicPartition, Log, Path]], live: set[TopicPartition], now_ms: int, skip: set[TopicPartition]) -> LogToClean | None:
        """The compacted log with the largest dirty ratio above its min.cleanable.dirty.ratio, or with dirty
        segments past max.compaction.lag.ms; None if no log is cleanable."""
        checkpoints = self.checkpoints()
        candidates = []
        for tp, log_, log_dir in logs:
            if tp in skip or tp in self._uncleanable:
                continue
            try:
                if not log_.config.compact:
                    continue
                with log_.lock:
                    if log_.closed:
                        continue
                    first_dirty, uncleanable, reset = cleanable_offsets(log_, checkpoints.get(tp), now_ms)
                    overdue = max_compaction_delay(log_, first_dirty, now_ms) > 0
                    to_clean = LogToClean.measure(tp, log_, log_dir, first_dirty, uncleanable, overdue)
            except Exception:
                # One partition's bad state must not stop the cleaner for the others (Kafka's uncleanable set).
                log.exception("Unexpected exception measuring %s-%d for cleaning; the partition is marked uncleanable", *tp)
                self._uncleanable.add(tp)
                continue
            if reset:
                self.update_checkpoint(log_dir, live, update=tp, offset=first_dirty)
            if to_clean.total_bytes > 0:
                candidates.append(to_clean)
        cleanable = [
            c for c in candidates
            if (c.need_compaction_now and c.cleanable_bytes > 0) or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
        ]
        return max(cleanable, key=lambda c: c.cleanable_ratio, default=None)

    def _clean(self, to_clean: LogToClean, live: set[TopicPartition], now_ms: int) -> int:
        tp, log_ = to_clean.topic_partition, to_clean.log
        truncations = log_.truncations
        try:
            result = self._cleaner.clean(to_clean, now_ms)
        except Exception:
            if log_.closed or log_.truncations != truncations:
                return 0  # deleted or truncated under the cleaner: what it read may have been cut short
            log.exception("Unexpected exception cleaning %s-%d; the partition is marked uncleanable", *tp)
            self._uncleanable.add(tp)
            return 0
        if result is None:
            log.info("Cleaning of %s-%d abandoned: the log changed while it was cleaned", *tp)
            return 0
        end_offset, stats = result
        self.update_checkpoint(to_clean.log_dir, live, update=tp, offset=end_offset)
        elapsed = time.monotonic() - stats.started
        log.info(
            "Log cleaner cleaned log %s-%d (dirty section = [%d, %d]): %d bytes (%d messages) read, %d bytes "
            "(%d messages) written in %.3f s",
            tp[0], tp[1], to_clean.first_dirty_offset, end_offset, stats.bytes_read, stats.messages_read,
            stats.bytes_written, stats.messages_written, elapsed,
        )
        return 1
