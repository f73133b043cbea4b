"""Reading a broker's log directories offline: which partitions and segments they hold, and their records.

This is the storage half of the ``odradek-log`` Spark data source, kept free of Spark so it can be used and
tested on its own. It only ever opens files read-only, so it is safe to point at the log directories of a
running broker as well as at a copy of them:

* It never reads past the high watermark the broker last checkpointed in ``replication-offset-checkpoint``
  (Kafka's text format: ``0``, a count line, then ``topic partition offset`` lines). Records above it may
  not be replicated yet and could be truncated away; a partition missing from that file is treated as
  Kafka treats it on startup, with a high watermark of 0. A directory without the file (a copy of only
  the partition folders) is read up to the end of its valid data.
* It stops at the first batch that is incomplete or fails its CRC: the torn tail of a segment that is
  being appended to, or that a crash left behind.
* It never memory-maps a segment (a broker truncating one under a mapping would crash the reader with
  SIGBUS), and reads with ``os.pread``.

Control batches (transaction markers) are skipped, as Kafka's consumers never hand them to applications.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from odradek.protocol.legacy_records import iter_deep
from odradek.protocol.record_batch import (
    MAGIC_OFFSET,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    RecordsError,
    read_batch_header,
)
from odradek.protocol.records import Record, iter_records
from odradek.storage.checkpoints import LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile
from odradek.storage.file_records import FileRecords, walk_entries
from odradek.storage.indexes import OffsetIndex
from odradek.storage.topic_partition import TopicPartition

Header = tuple[str, bytes | None]
LogRecord = tuple[int, int, int, bytes | None, bytes | None, list[Header]]
"""(offset, timestamp ms, timestamp type, key, value, headers): one record as a consumer sees it."""

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
METADATA_LOG = "__cluster_metadata"
"""KRaft's metadata log lives in a partition-like folder but is no topic; it is never listed."""

# Kafka's UnifiedLog.parseTopicPartitionName: "<topic>-<partition>". Folders of deleted topics
# ("<topic>-<p>.<id>-delete"), future replicas ("-future") and stray logs ("-stray") do not match.
_PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>\d+)")
_SEGMENT_FILE = re.compile(r"(?P<base>\d{20})\.log")
_BASE_OFFSET = struct.Struct(">q")

_MIN_ENTRY_SIZE = 26
"""The smallest log entry (a magic-0 message with null key and value): anything shorter is a torn tail."""


class CorruptSegmentError(Exception):
    """A rolled segment (one no broker appends to any more) holding an incomplete or CRC-invalid entry."""


class DataLossError(Exception):
    """Records a reader asked for are gone (deleted by retention or DeleteRecords, or compacted away).

    Spark's Kafka source raises the same condition unless ``failOnDataLoss`` is false.
    """


@dataclass(frozen=True, slots=True)
class PartitionLog:
    """One partition's folder in a log directory, as found when the directory was scanned."""

    topic: str
    partition: int
    directory: Path
    segment_base_offsets: tuple[int, ...]
    log_start_offset: int
    high_watermark: int | None
    """The checkpointed high watermark; None when the log directory has no ``replication-offset-checkpoint``."""

    def segment_path(self, base_offset: int, suffix: str = LOG_SUFFIX) -> Path:
        return self.directory / f"{base_offset:020d}{suffix}"

    def segments_overlapping(self, start: int, end: int | None) -> Iterator[tuple[int, int | None]]:
        """(base offset, next segment's base offset or None) of the segments that may hold [start, end)."""
        bounds = self.segment_base_offsets
        for i, base in enumerate(bounds):
            following = bounds[i + 1] if i + 1 < len(bounds) else None
            if (following is None or following > start) and (end is None or base < end):
                yield base, following


def scan_log_dirs(log_dirs: Iterable[Path]) -> dict[TopicPartition, PartitionLog]:
    """Every topic partition held in ``log_dirs`` (Kafka's ``log.dirs``), with its segments and checkpoints."""
    found: dict[TopicPartition, PartitionLog] = {}
    for log_dir in log_dirs:
        if not log_dir.is_dir():
            raise FileNotFoundError(f"log directory {log_dir} does not exist")
        hw_file = log_dir / REPLICATION_OFFSET_CHECKPOINT
        high_watermarks = OffsetCheckpointFile(hw_file).read() if hw_file.exists() else None
        log_starts = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read()
        for entry in sorted(log_dir.iterdir()):
            match = _PARTITION_DIR.fullmatch(entry.name)
            if match is None or match["topic"] == METADATA_LOG or not entry.is_dir():
                continue
            tp = (match["topic"], int(match["partition"]))
            if tp in found:
                raise ValueError(
                    f"partition {tp[0]}-{tp[1]} is in two log directories: {found[tp].directory} and {entry}"
                )
            bases = tuple(sorted(int(m["base"]) for f in os.listdir(entry) if (m := _SEGMENT_FILE.fullmatch(f))))
            first_base = bases[0] if bases else 0
            found[tp] = PartitionLog(
                topic=tp[0],
                partition=tp[1],
                directory=entry,
                segment_base_offsets=bases,
                # Kafka checkpoints a log start offset only when it lies above the first segment's base.
                log_start_offset=max(first_base, log_starts.get(tp, first_base)),
                high_watermark=None if high_watermarks is None else high_watermarks.get(tp, 0),
            )
    return found


def read_segment(log_path: Path, start: int, end: int | None, *, active: bool) -> Iterator[LogRecord]:
    """The records of one segment with offsets in [start, end) (``end`` None: to the end of valid data).

    ``active``: whether this is the partition's last segment, the one a broker appends to. Its first
    incomplete or CRC-invalid entry is the torn tail of a write in progress (or of a crash) and ends the
    read quietly; in a rolled segment, the same is corruption and raises CorruptSegmentError. A segment
    deleted since it was listed raises FileNotFoundError.
    """
    base_offset = int(log_path.name[: -len(LOG_SUFFIX)])
    log_file = FileRecords.open(log_path, writable=False)
    try:
        position = _index_lookup(log_path.with_suffix(INDEX_SUFFIX), base_offset, start)
        for entry_position, entry in _entries_from(log_file, position, base_offset, start):
            if (
                end is not None
                and entry is not None
                and entry[MAGIC_OFFSET] == MAGIC_V2
                and _BASE_OFFSET.unpack_from(entry)[0] >= end
            ):
                return
            records = None if entry is None else _entry_records(entry, start)
            if records is None:
                if active:
                    return
                raise CorruptSegmentError(
                    f"{log_path} holds an incomplete or corrupt batch at position {entry_position}"
                )
            for record in records:
                if end is not None and record[0] >= end:
                    return
                if record[0] >= start:
                    yield record
    finally:
        log_file.close()


def _log_entries(records: FileRecords, position: int) -> Iterator[tuple[int, memoryview | None]]:
    """(position, bytes) of each complete entry (a magic-2 batch or a legacy message) from ``position``;
    a last (position, None) if the file ends in an incomplete entry."""
    for position, entry in walk_entries(records.read, position, records.size, min_size=_MIN_ENTRY_SIZE, whole=True, entry=_entry_bytes):
        yield position, entry
        position += len(entry)
    if position < records.size:
        yield position, None


def _entry_bytes(position: int, size: int, buf: bytes, at: int) -> tuple[int, memoryview]:
    return position, memoryview(buf)[at : at + size]


def _entries_from(records: FileRecords, position: int, base_offset: int, target: int) -> Iterator[tuple[int, memoryview | None]]:
    """The log entries from ``position`` if a valid entry of this segment at or below ``target`` is there,
    else from the top of the segment: an index position is a hint, never trusted blindly."""
    if position:
        entries = _log_entries(records, position)
        first = next(entries, None)
        if (
            first is not None
            and first[1] is not None
            and base_offset <= _BASE_OFFSET.unpack_from(first[1])[0] <= target
            and _entry_records(first[1], target) is not None
        ):
            return itertools.chain([first], entries)
    return _log_entries(records, 0)


def _log_records(records: Iterator[Record], timestamp_type: int) -> Iterator[LogRecord]:
    for r in records:
        assert r.offset is not None and r.timestamp is not None  # a decoded record carries both
        yield r.offset, r.timestamp, timestamp_type, r.key, r.value, r.headers


def _entry_records(entry: memoryview, start: int) -> Iterable[LogRecord] | None:
    """The records of one log entry at or past ``start`` (control batches have none for readers), or None
    if the entry is corrupt."""
    magic = entry[MAGIC_OFFSET]
    if magic == MAGIC_V2:
        try:
            header = read_batch_header(entry)
        except RecordsError:
            return None
        if header.is_control or header.last_offset < start:
            return ()
        # The CRC held, so a record that fails to decode is real corruption: iter_records raises it.
        return _log_records(iter_records(entry), header.timestamp_type)
    if magic in (MAGIC_V0, MAGIC_V1):
        try:
            messages = list(iter_deep(entry))
        except RecordsError:
            return None
        return ((m.offset, m.timestamp, int(m.timestamp_type), m.key, m.value, []) for m in messages)
    return None


def _index_lookup(index_path: Path, base_offset: int, target: int) -> int:
    """The position the offset index gives for the last entry at or below ``target`` (0 without an index).

    The index of an active segment is preallocated with zeros and still being written, so only the entries
    before the first zero relative offset past slot 0 are searched.
    """
    try:
        index = OffsetIndex(index_path, base_offset, 0, writable=False)
    except FileNotFoundError:
        return 0
    in_use = 1 + bisect.bisect_left(range(1, index.entries), True, key=lambda slot: index.entry(slot)[0] == 0)
    index.truncate_to_entries(min(in_use, index.entries))
    return max(index.lookup(target)[1], 0)
