"""One log segment: ``<base>.log`` plus its ``.index``, ``.timeindex`` and ``.txnindex`` (Kafka's LogSegment).

Segments are opened lazily: a segment loaded from disk touches no file until it is read, appended to or
asked for its timestamps, so a broker with thousands of segments starts in time proportional to the number
of partitions, not to the data. Indexes opened lazily are sanity-checked (ordering, positions inside the
log) and rebuilt from the log's batch headers if they cannot be trusted, so a lost or garbage index never
serves a wrong position.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from odradek.protocol.record_batch import LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V2, BatchHeader, read_prefix
from odradek.protocol.values import Fields, plain_init
from odradek.storage.file_records import FileRecords, FileSlice
from odradek.storage.indexes import INT32_MAX, NO_TIMESTAMP, CorruptIndexError, OffsetIndex, TimeIndex
from odradek.storage.log_config import LogConfig

if TYPE_CHECKING:  # opened at a segment's first aborted transaction
    from odradek.storage.transaction_index import TransactionIndex

log = logging.getLogger("odradek.storage")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
_NEXT_BATCH_POSITIONS = 16
"""How many of the last appends' first batches a segment keeps the place of (``LogSegment._next_batch_at``)."""
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
DELETED_FILE_SUFFIX = ".deleted"
SEGMENT_FILES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def file_name(offset: int, suffix: str) -> str:
    """Kafka names every per-offset file by the offset as 20 zero-padded digits."""
    return f"{offset:020d}{suffix}"


def file_offset(name: str) -> int | None:
    """The offset a segment, index or snapshot file is named by (its digits before the first dot)."""
    stem = name.partition(".")[0]
    return int(stem) if stem.isdigit() else None


def unlink_if_exists(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


class SegmentOverflowError(Exception):
    """An offset that no longer fits the segment's 32-bit relative offsets (the log must roll first)."""


@plain_init
class OffsetPosition(Fields):
    """Where a read starts: the batch holding (or following) an offset, and its size."""

    __slots__ = _FIELDS = ("offset", "position", "size")

    def __init__(self, offset: int, position: int, size: int) -> None:
        self.offset = offset
        self.position = position
        self.size = size


@plain_init
class SegmentRead(Fields):
    """A segment's answer to a read: the bytes to send and the metadata of where the read started."""

    __slots__ = _FIELDS = ("start", "slice", "first_entry_incomplete")

    def __init__(self, start: OffsetPosition, slice: FileSlice | None, first_entry_incomplete: bool) -> None:
        self.start = start
        self.slice = slice
        self.first_entry_incomplete = first_entry_incomplete


class LogSegment:
    def __init__(
        self,
        dir: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        roll_jitter_ms: int,
        created_ms: int,
        file_suffix: str = "",
    ) -> None:
        self.dir = dir
        self.base_offset = base_offset
        self.file_suffix = file_suffix
        """Appended to every file name: ``.cleaned`` while the cleaner writes the segment, ``.swap`` while it is
        swapped in, ``.deleted`` once replaced (Kafka's suffixes; startup recovery reads them)."""
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = created_ms
        self.bytes_since_last_index_entry = 0
        self._log: FileRecords | None = None
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._size: int | None = None
        self._rolling_based_timestamp: int | None = None
        self._max_timestamp_and_offset: tuple[int, int] | None = None
        self._txn_index: TransactionIndex | None = None
        self.indexes_trusted = False
        """True once the indexes were created or rebuilt by this process (no sanity check needed)."""
        self._next_batch_at: dict[int, tuple[int, int]] = {}
        """Where the first batch of each of the last few appends is and its size, by its base offset (the
        offset just past the append before it): the offset a follower or a consumer reading at the end
        fetches next, found here without reading a batch header, nor scanning those after the index entry
        before it."""
        self.active = False
        """The segment appends go to: its indexes are sized for appends (``segment.index.bytes``) when they are
        opened, and trimmed when it stops being active. Until then they hold no file or mapping, so an idle
        partition costs no mmap (vm.max_map_count) and no descriptor."""

    # -- files -----------------------------------------------------------------------------------------------------

    def path(self, suffix: str) -> Path:
        return self.dir / (file_name(self.base_offset, suffix) + self.file_suffix)

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the segment's files from ``old_suffix`` to ``new_suffix``, the log first (Kafka's order, which
        startup recovery relies on). Open files stay open: readers holding the segment keep reading."""
        if self.file_suffix != old_suffix:
            raise ValueError(f"{self} has suffix {self.file_suffix!r}, not {old_suffix!r}")
        renames = [(self.path(suffix), self.dir / (file_name(self.base_offset, suffix) + new_suffix)) for suffix in SEGMENT_FILES]
        for source, target in renames:
            try:
                os.rename(source, target)
            except FileNotFoundError:
                if source.name.endswith(LOG_SUFFIX + old_suffix):
                    raise
        self.file_suffix = new_suffix
        if self._log is not None:
            self._log.path = self.path(LOG_SUFFIX)
        for index, suffix in ((self._offset_index, INDEX_SUFFIX), (self._time_index, TIME_INDEX_SUFFIX)):
            if index is not None:
                index.path = self.path(suffix)
        if self._txn_index is not None:
            self._txn_index.rename(self.path(TXN_INDEX_SUFFIX))

    def set_last_modified(self, mtime_ms: int) -> None:
        """Keep a replaced segment's modification time on its cleaned copy (retention and the cleaner read it)."""
        mtime_ns = mtime_ms * 1_000_000
        os.utime(self.path(LOG_SUFFIX), ns=(mtime_ns, mtime_ns))

    @property
    def log(self) -> FileRecords:
        if self._log is None:
            self._log = FileRecords.open(self.path(LOG_SUFFIX))
        return self._log

    @property
    def size(self) -> int:
        if self._log is not None:
            return self._log.size
        if self._size is None:
            self._size = os.stat(self.path(LOG_SUFFIX)).st_size
        return self._size

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._open_indexes()
        assert self._offset_index is not None
        return self._offset_index

    @property
    def txn_index(self) -> TransactionIndex:
        """The aborted transactions whose abort marker this segment holds; its file exists once one does."""
        if self._txn_index is None:
            from odradek.storage.transaction_index import TransactionIndex

            self._txn_index = TransactionIndex(self.path(TXN_INDEX_SUFFIX))
        return self._txn_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._open_indexes()
        assert self._time_index is not None
        return self._time_index

    def _open_indexes(self) -> None:
        self._offset_index = OffsetIndex(self.path(INDEX_SUFFIX), self.base_offset, self.max_index_size)
        self._time_index = TimeIndex(self.path(TIME_INDEX_SUFFIX), self.base_offset, self.max_index_size)
        if not self.indexes_trusted:
            try:
                self._offset_index.sanity_check(self.size)
                self._time_index.sanity_check(self.size)
            except CorruptIndexError as exc:
                log.warning("%s; rebuilding the indexes of segment %s", exc, self.path(LOG_SUFFIX))
                self.rebuild_indexes()
            self.indexes_trusted = True
        if self.active:
            self.resize_indexes(self.max_index_size)

    def become_active(self) -> None:
        """Appends go here from now on: indexes already open are sized for them, others when opened."""
        self.active = True
        if self._offset_index is not None:
            self.resize_indexes(self.max_index_size)

    def indexes_exist(self) -> bool:
        return self.path(INDEX_SUFFIX).exists() and self.path(TIME_INDEX_SUFFIX).exists()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # -- timestamps ------------------------------------------------------------------------------------------------

    @property
    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(largest timestamp, last offset of the batch holding it); (-1, base) if no batch has a timestamp."""
        if self._max_timestamp_and_offset is None:
            self._max_timestamp_and_offset = self.time_index.last_entry
        return self._max_timestamp_and_offset

    @property
    def max_timestamp(self) -> int:
        return self.max_timestamp_and_offset[0]

    def largest_timestamp(self) -> int:
        """What time retention compares: the max timestamp, or the file's mtime when no batch has one."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return self.last_modified_ms()

    def last_modified_ms(self) -> int:
        return os.stat(self.path(LOG_SUFFIX)).st_mtime_ns // 1_000_000

    def first_batch_timestamp(self) -> int | None:
        if self._rolling_based_timestamp is None:
            for _, header in self.log.batch_headers(0):
                self._rolling_based_timestamp = header.max_timestamp
                break
        return self._rolling_based_timestamp

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Since the first batch's timestamp if it has one, else since the segment was created."""
        first = self._rolling_based_timestamp
        if first is None:  # known after the first append or read: asked at every append
            first = self.first_batch_timestamp()
        if first is not None and first >= 0:
            return message_timestamp - first
        return now_ms - self.created_ms

    def should_roll(self, *, segment_bytes: int, segment_ms: int, max_timestamp: int, max_offset: int, messages_size: int, now_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll: full by size, old by time, an index full, or an offset out of reach."""
        size = self.size
        if size > segment_bytes - messages_size or (size > 0 and self.time_waited_for_roll(now_ms, max_timestamp) > segment_ms - self.roll_jitter_ms):
            return True
        offset_index = self.offset_index
        return offset_index.is_full() or self.time_index.is_full() or not offset_index.can_append_offset(max_offset)

    # -- append ----------------------------------------------------------------------------------------------------

    def append(self, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int, data: bytes | bytearray | memoryview) -> None:
        """Append batches whose offsets are already assigned; add index entries every index.interval.bytes."""
        if not len(data):
            return
        if not self.offset_index.can_append_offset(largest_offset):
            raise SegmentOverflowError(f"offset {largest_offset} does not fit segment {self.base_offset}")
        records = self.log
        physical_position = records.size
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        records.append(data)
        if largest_timestamp > self.max_timestamp_and_offset[0]:
            self._max_timestamp_and_offset = (largest_timestamp, offset_of_max_timestamp)
        if self.bytes_since_last_index_entry > self.index_interval_bytes and not (self.offset_index.is_full() or self.time_index.is_full()):
            # Only a cleaned segment gets here with a full index (it may hold more batches than the segments it
            # replaced had entries): its index just gets sparser. An active segment rolls before.
            self.offset_index.append(largest_offset, physical_position)
            self.time_index.maybe_append(*self.max_timestamp_and_offset)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += len(data)
        if len(data) > MAGIC_OFFSET and data[MAGIC_OFFSET] == MAGIC_V2:  # (a legacy message's offset is its last one: none kept)
            base_offset, size = read_prefix(data, 0)
            next_batch_at = self._next_batch_at
            next_batch_at[base_offset] = (physical_position, size)
            if len(next_batch_at) > _NEXT_BATCH_POSITIONS:
                del next_batch_at[next(iter(next_batch_at))]

    # -- lookup and read -------------------------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> OffsetPosition | None:
        """The first batch whose last offset is >= ``offset``: index lookup, then a scan of batch headers.

        The batch an index entry points at must start at or before the entry's offset; if not, the index is
        corrupt, is rebuilt, and the lookup is repeated.
        """
        known = self._next_batch_at.get(offset)
        if known is not None and known[0] >= starting_position:
            return OffsetPosition(offset, *known)  # a batch starting at ``offset``: the first whose last offset is >= it
        for _ in range(2):
            entry_offset, entry_position = self.offset_index.lookup(offset)
            position = max(entry_position, starting_position)
            check_entry = entry_position > 0 and entry_position >= starting_position
            for batch_position, header in self.log.batch_headers(position):
                if check_entry:
                    if not self.base_offset <= header.base_offset <= entry_offset:
                        break
                    check_entry = False
                if header.base_offset + header.last_offset_delta >= offset:
                    return OffsetPosition(header.base_offset, batch_position, header.batch_length + LOG_OVERHEAD)
            else:
                if not check_entry:
                    return None
            log.warning("Offset index of %s points at %d, not a batch at or before offset %d; rebuilding", self.path(LOG_SUFFIX), entry_position, entry_offset)
            self.rebuild_indexes()
        return None

    def read(self, start_offset: int, max_size: int, max_position: int, min_one_message: bool) -> SegmentRead | None:
        """Kafka's LogSegment.read: from the batch holding ``start_offset``, at most ``max_size`` bytes (but the
        first batch whole when ``min_one_message``), never past ``max_position``. None if the segment holds no
        offset >= ``start_offset``. As in Kafka, the byte limit may cut the last batch; clients drop a partial
        trailing batch.
        """
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.path(LOG_SUFFIX)}")
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        adjusted_max_size = max(max_size, start.size) if min_one_message else max_size
        fetch_size = min(max_position - start.position, adjusted_max_size)
        if adjusted_max_size == 0 or fetch_size <= 0:
            return SegmentRead(start, None, False)
        return SegmentRead(start, self.log.slice(start.position, fetch_size), adjusted_max_size < start.size)

    def read_next_offset(self) -> int:
        """The offset after the last batch: from the last index entry, walk headers to the end (an empty
        segment opens nothing)."""
        if self.size == 0:
            return self.base_offset
        _, position = self.offset_index.lookup(self.offset_index.last_offset)
        next_offset = self.base_offset
        for _, header in self.log.batch_headers(position):
            next_offset = header.base_offset + header.last_offset_delta + 1
        return next_offset

    def batches_from(self, position: int) -> Iterator[tuple[int, BatchHeader]]:
        return self.log.batch_headers(position)

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        return self.log.read(position, header.batch_length + LOG_OVERHEAD)

    def find_timestamp_position(self, timestamp: int, starting_offset: int) -> int:
        """Where to start scanning for the first record with timestamp >= ``timestamp`` (LogSegment.findOffsetByTimestamp)."""
        _, indexed_offset = self.time_index.lookup(timestamp)
        return self.offset_index.lookup(max(indexed_offset, starting_offset))[1]

    # -- recovery --------------------------------------------------------------------------------------------------

    def recover(self, on_batch: Callable[[BatchHeader, memoryview], None] | None = None) -> int:
        """Re-validate every batch (size, magic, CRC, offsets), rebuild the indexes (the transaction index
        too, through ``on_batch``), cut the invalid tail.

        Returns the number of bytes truncated. ``on_batch`` sees each valid batch and its bytes in order
        (epoch cache, producer state and the transaction index).
        """
        # The indexes are about to be rebuilt: checking them first would scan a crashed segment's whole
        # preallocated (zero-filled) index for nothing.
        self.indexes_trusted = True
        self._next_batch_at.clear()
        self.txn_index.reset()
        valid_bytes = self._index_batches(self._valid_batches(on_batch))
        truncated = self.log.size - valid_bytes
        if truncated > 0:
            log.warning("Found invalid or partial batches in %s at byte %d; truncating %d bytes", self.path(LOG_SUFFIX), valid_bytes, truncated)
        self.log.truncate_to(valid_bytes)
        self._finish_index_rebuild()
        return max(truncated, 0)

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from batch headers without touching the log (a lost or corrupt index)."""
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.delete()
        self._offset_index = OffsetIndex(self.path(INDEX_SUFFIX), self.base_offset, self.max_index_size)
        self._time_index = TimeIndex(self.path(TIME_INDEX_SUFFIX), self.base_offset, self.max_index_size)
        self.indexes_trusted = True
        self._index_batches(self.log.batch_headers(0))
        self._finish_index_rebuild()

    def _index_batches(self, batches: Iterator[tuple[int, BatchHeader]]) -> int:
        offset_index, time_index = self.offset_index, self.time_index
        offset_index.reset()
        time_index.reset()
        self._max_timestamp_and_offset = (NO_TIMESTAMP, self.base_offset)
        valid_bytes = 0
        last_index_entry = 0
        for position, header in batches:
            last_offset = header.base_offset + header.last_offset_delta
            if header.max_timestamp > self._max_timestamp_and_offset[0]:
                self._max_timestamp_and_offset = (header.max_timestamp, last_offset)
            if valid_bytes - last_index_entry > self.index_interval_bytes:
                offset_index.append(last_offset, valid_bytes)
                time_index.maybe_append(*self._max_timestamp_and_offset)
                last_index_entry = valid_bytes
            valid_bytes = position + header.batch_length + LOG_OVERHEAD
        self.bytes_since_last_index_entry = valid_bytes - last_index_entry
        return valid_bytes

    def _finish_index_rebuild(self) -> None:
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(*self.max_timestamp_and_offset, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        self._rolling_based_timestamp = None

    def _valid_batches(self, on_batch: Callable[[BatchHeader, memoryview], None] | None) -> Iterator[tuple[int, BatchHeader]]:
        """Batches from the start of the file while each is whole, magic 2, CRC-valid and offset-ordered."""
        next_offset = self.base_offset
        for position, header, data in self.log.batches(verify=True):
            last_offset = header.base_offset + header.last_offset_delta
            if header.last_offset_delta < 0 or header.base_offset < next_offset or last_offset - self.base_offset > INT32_MAX:
                return
            if on_batch is not None:
                on_batch(header, data)
            yield position, header
            next_offset = last_offset + 1

    # -- truncation, roll, close, delete -----------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch from the one holding ``offset``; the segment becomes the active one again."""
        mapping = self.translate_offset(offset)
        self._next_batch_at.clear()
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.become_active()
        truncated = 0 if mapping is None else self.log.truncate_to(mapping.position)
        if self.log.size == 0:
            self._rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        self._max_timestamp_and_offset = self._read_largest_timestamp()
        return truncated

    def _read_largest_timestamp(self) -> tuple[int, int]:
        """The last time index entry, or a larger max timestamp among the batches after it."""
        best = self.time_index.last_entry
        _, position = self.offset_index.lookup(best[1])
        for _, header in self.log.batch_headers(position):
            if header.max_timestamp > best[0]:
                best = (header.max_timestamp, header.base_offset + header.last_offset_delta)
        return best

    def on_become_inactive(self) -> None:
        """Record the max timestamp in the time index (retention reads it) and trim both indexes."""
        self.active = False
        self.time_index.maybe_append(*self.max_timestamp_and_offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def release(self) -> None:
        """Close the files and unmap the indexes (trimmed first, as at close) of a segment that was only
        looked at: its next use opens them again, so an idle partition holds no descriptor and no map."""
        self.close()
        self._size = None

    def flush(self) -> None:
        if self._log is not None:
            self._log.flush()
        for index in (self._offset_index, self._time_index, self._txn_index):
            if index is not None:
                index.flush()

    def close(self) -> None:
        """Trim and close the indexes (opened ones only) and the log file."""
        if self._time_index is not None and self._max_timestamp_and_offset is not None:
            self._time_index.maybe_append(*self._max_timestamp_and_offset, skip_full_check=True)
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.trim_to_valid_size()
                index.close()
        self._offset_index = self._time_index = None
        if self._txn_index is not None:
            self._txn_index.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def release_indexes(self) -> None:
        """Unmap and close the indexes without trimming them (the segment is going away)."""
        for index in (self._offset_index, self._time_index, self._txn_index):
            if index is not None:
                index.close()
        self._offset_index = self._time_index = self._txn_index = None

    def delete(self) -> None:
        """Remove the segment's files. An open log file stays readable for slices already handed out."""
        self.release_indexes()
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            try:
                self.path(suffix).unlink()
            except FileNotFoundError:
                pass
        if self._log is not None:
            self._log.delete()
            self._log = None
        else:
            try:
                self.path(LOG_SUFFIX).unlink()
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(baseOffset={self.base_offset}, size={self.size})"


def open_segment(dir: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
    """The segment object for files that exist (or are about to): nothing is opened until first use."""
    return LogSegment(
        dir,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.max_index_size,
        roll_jitter_ms=config.random_segment_jitter(),
        created_ms=now_ms,
    )


def create_segment(dir: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
    """A new, empty, active segment with its files created, as Kafka does at roll; they are opened (and the
    indexes preallocated) on first use. Files of an older segment at that offset go first."""
    for suffix in SEGMENT_FILES:
        unlink_if_exists(dir / file_name(base_offset, suffix))
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        os.close(os.open(dir / file_name(base_offset, suffix), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644))
    segment = open_segment(dir, base_offset, config, now_ms)
    segment.indexes_trusted = True
    segment.become_active()
    return segment
