"""Opening a partition directory after a clean or an unclean shutdown (Kafka's LogLoader).

Loading finishes or undoes what a crash left of a cleaner swap, lists the segments, recovers those that
may hold unflushed data (every batch re-validated, the invalid tail cut, indexes rebuilt) and rebuilds the
producer state from the latest snapshot plus the batches after it. The ``Log`` it feeds only sees the
result (:class:`LoadedLog`); truncation reuses :func:`rebuild_producer_state`.
"""

from __future__ import annotations

import bisect
import logging
import os
from pathlib import Path
from typing import Sequence

from odradek.protocol.record_batch import BatchHeader
from odradek.protocol.values import Fields
from odradek.storage.checkpoints import fsync_dir
from odradek.storage.file_records import FileRecords
from odradek.storage.leader_epoch import LeaderEpochFileCache
from odradek.storage.log_config import LogConfig
from odradek.storage.producer_state import ProducerStateManager, read_end_txn_marker
from odradek.storage.segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    create_segment,
    file_offset,
    open_segment,
    unlink_if_exists,
)

log = logging.getLogger("odradek.storage")

_TEMPORARY_SUFFIXES = (".tmp", CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX)
_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


class LoadedLog(Fields):
    """What loading found (Kafka's LoadedLogOffsets plus the segments): the log starts from it."""

    __slots__ = _FIELDS = ("segments", "log_start_offset", "log_end_offset", "recovery_point")

    def __init__(self, segments: list[LogSegment], log_start_offset: int, log_end_offset: int, recovery_point: int) -> None:
        self.segments = segments
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self.recovery_point = recovery_point


class LogLoader:
    """Loads one partition directory into segments, leader epochs and producer state."""

    def __init__(self, dir: Path, config: LogConfig, epoch_cache: LeaderEpochFileCache, producer_state: ProducerStateManager, now_ms: int) -> None:
        self.dir = dir
        self.config = config
        self.epoch_cache = epoch_cache
        self.producer_state = producer_state
        self.now_ms = now_ms

    def load(self, log_start_checkpoint: int | None, recovery_point: int, had_clean_shutdown: bool) -> LoadedLog:
        """After a clean shutdown nothing is scanned: segments are listed, not opened, and only the last one
        is read to find the log end offset. After an unclean one every batch from the segment holding the
        recovery point on is re-validated (size, magic, CRC, offset order); the first invalid or partial
        batch and everything after it is removed. A segment whose index is missing is recovered too, and
        indexes found corrupt later are rebuilt when first opened."""
        names, changed = self._complete_interrupted_swaps()
        bases: list[int] = []
        for name in names:
            stem, _, suffix = name.partition(".")
            if "." + suffix == LOG_SUFFIX and stem.isdigit():
                bases.append(int(stem))
        present = set(bases)
        for name in names:
            stem, _, suffix = name.partition(".")
            if "." + suffix in _INDEX_SUFFIXES and stem.isdigit() and int(stem) not in present:
                unlink_if_exists(self.dir / name)  # an index without its log, as Kafka removes them
        segments = [open_segment(self.dir, base, self.config, self.now_ms) for base in sorted(bases)]

        log_start = log_start_checkpoint or 0
        recovered = changed
        for segment in segments:
            if not segment.indexes_exist():
                log.warning("Could not find index files of %s; recovering the segment and rebuilding them", segment.path(LOG_SUFFIX))
                self._recover_segment(segment, segments, log_start)
                recovered = True
        if not had_clean_shutdown and segments:
            segments = self._recover_unflushed(segments, recovery_point, log_start)
            recovered = True
        if recovered:
            # Recovery's own producer states (and a finished swap) wrote and removed snapshots behind this
            # one's back (Kafka's removeStraySnapshots reloads them the same way).
            self.producer_state.reload_snapshots()

        if not segments:
            segments = [create_segment(self.dir, log_start_checkpoint or 0, self.config, self.now_ms)]
        log_end_offset = segments[-1].read_next_offset()
        segments[-1].release()
        log_start_offset = max(log_start_checkpoint or 0, segments[0].base_offset)
        if log_start_offset > log_end_offset:
            log.warning("Log start offset %d is beyond the log end %d of %s; deleting all segments", log_start_offset, log_end_offset, self.dir)
            for segment in segments:
                segment.delete()
            segments = [create_segment(self.dir, log_start_offset, self.config, self.now_ms)]
            log_end_offset = log_start_offset
        segments[-1].become_active()

        recovery_point = log_end_offset if had_clean_shutdown else min(recovery_point, log_end_offset)
        self.epoch_cache.truncate_from_end(log_end_offset, write=False)
        self.epoch_cache.truncate_from_start(log_start_offset, write=False)
        state = self.producer_state
        if state.latest_snapshot_offset is None and had_clean_shutdown:
            # No snapshot after a clean shutdown: no idempotent producer ever wrote here (Kafka's upgrade path).
            state.map_end_offset = log_end_offset
            state.take_snapshot()
        else:
            rebuild_producer_state(state, segments, log_start_offset, log_end_offset, self.now_ms)
        return LoadedLog(segments, log_start_offset, log_end_offset, recovery_point)

    def _complete_interrupted_swaps(self) -> tuple[list[str], bool]:
        """Finish or undo what a crash left of a cleaner swap (Kafka's LogLoader), then list the directory;
        and whether anything was removed or renamed.

        ``.cleaned`` files were never committed, and neither was a ``.swap`` file at or above the lowest of
        them (its segment's renaming had not finished): both go, with ``.deleted`` and ``.tmp`` files. Every
        ``.log.swap`` left was committed: the files of the segments it replaced -- any whose offset lies in
        [its base offset, its next offset) -- are deleted, then the ``.swap`` suffixes are dropped.
        """
        names = os.listdir(self.dir)
        cleaned = [offset for name in names if name.endswith(CLEANED_FILE_SUFFIX) and (offset := file_offset(name)) is not None]
        min_cleaned = min(cleaned, default=None)
        swaps = []
        removed = False
        for name in names:
            if name.endswith(_TEMPORARY_SUFFIXES):
                removed = True
                unlink_if_exists(self.dir / name)
            elif name.endswith(SWAP_FILE_SUFFIX):
                offset = file_offset(name)
                if offset is None or (min_cleaned is not None and offset >= min_cleaned):
                    log.info("Deleting %s of an interrupted swap that had not finished", self.dir / name)
                    removed = True
                    unlink_if_exists(self.dir / name)
                else:
                    swaps.append(name)
        replaced: list[tuple[int, int]] = []
        for name in swaps:
            if name.endswith(LOG_SUFFIX + SWAP_FILE_SUFFIX):
                base = file_offset(name)
                assert base is not None
                records = FileRecords.open(self.dir / name)
                try:
                    next_offset = max((header.next_offset for _, header in records.batch_headers()), default=base)
                finally:
                    records.close()
                replaced.append((base, next_offset))
        if replaced:
            low, high = min(r[0] for r in replaced), max(r[1] for r in replaced)
            for name in os.listdir(self.dir):
                offset = file_offset(name)
                if offset is not None and low <= offset < high and not name.endswith(SWAP_FILE_SUFFIX):
                    log.info("Deleting %s, replaced by the cleaned segment of an interrupted swap", self.dir / name)
                    unlink_if_exists(self.dir / name)
        for name in swaps:
            log.info("Recovering %s from an interrupted swap by renaming it", self.dir / name)
            os.rename(self.dir / name, self.dir / name[: -len(SWAP_FILE_SUFFIX)])
        if swaps:
            fsync_dir(self.dir)
        changed = bool(swaps) or removed
        return (os.listdir(self.dir) if changed else names), changed

    def _recover_unflushed(self, segments: list[LogSegment], recovery_point: int, log_start: int) -> list[LogSegment]:
        """Recover the segments from the one holding the recovery point on; the first with an invalid tail
        ends the log (the segments after it are deleted)."""
        bases = [segment.base_offset for segment in segments]
        first = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
        for i in range(first, len(segments)):
            if self._recover_segment(segments[i], segments, log_start) > 0:
                for later in segments[i + 1 :]:
                    log.warning("Deleting segment %s after corruption in an earlier one", later.path(LOG_SUFFIX))
                    later.delete()
                return segments[: i + 1]
        return segments

    def _recover_segment(self, segment: LogSegment, segments: list[LogSegment], log_start: int) -> int:
        """Kafka's recoverSegment: a producer state of its own, rebuilt up to the segment's base, follows the
        recovered batches so that the segment's transaction index is rewritten with the aborted transactions
        its markers end; it is snapshotted at the segment's end, where the next segment's recovery resumes."""
        epoch_cache = self.epoch_cache
        state = ProducerStateManager(self.dir, self.producer_state.producer_id_expiration_ms)
        rebuild_producer_state(state, segments, log_start, segment.base_offset, self.now_ms)
        txn_index = segment.txn_index

        def on_batch(header: BatchHeader, data: memoryview) -> None:
            latest = epoch_cache.latest_epoch
            if header.partition_leader_epoch >= 0 and (latest is None or header.partition_leader_epoch > latest):
                epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            marker = read_end_txn_marker(data) if header.is_control and header.producer_id >= 0 else None
            completed = state.apply_batch(header, marker)
            if completed is not None:
                state.complete_txn(completed, txn_index)

        truncated = segment.recover(on_batch)
        state.take_snapshot()
        return truncated


def rebuild_producer_state(state: ProducerStateManager, segments: Sequence[LogSegment], log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
    """Reload the latest snapshot at or below the log end and replay the batch headers after it (Kafka's
    rebuildProducerState; a marker's record is read too), then snapshot the result at the log end."""
    state.truncate_and_reload(log_start_offset, log_end_offset, now_ms)
    start = max(state.map_end_offset, log_start_offset)
    if start < log_end_offset:
        bases = [segment.base_offset for segment in segments]
        for segment in segments[max(bisect.bisect_right(bases, start) - 1, 0) :]:
            if segment.base_offset >= log_end_offset:
                break
            found = segment.translate_offset(start)
            if found is None:
                continue
            for position, header in segment.batches_from(found.position):
                if header.base_offset >= log_end_offset:
                    break
                if header.base_offset + header.last_offset_delta >= start:
                    marker = read_end_txn_marker(segment.read_batch(position, header)) if header.is_control and header.producer_id >= 0 else None
                    completed = state.apply_batch(header, marker)
                    if completed is not None:
                        state.complete_txn(completed)
    state.map_end_offset = log_end_offset
    state.take_snapshot()
