"""The leader epoch cache: epoch -> first offset written in it, persisted as ``leader-epoch-checkpoint``.

It answers OffsetForLeaderEpoch (a follower or a consumer asking where an epoch ended, to detect
truncation) with Kafka's LeaderEpochFileCache semantics, and follows the log through truncation at either
end.
"""

from __future__ import annotations

import bisect
from pathlib import Path

from odradek.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    def __init__(self, dir: Path) -> None:
        self._checkpoint = LeaderEpochCheckpointFile(dir / LEADER_EPOCH_CHECKPOINT)
        self._epochs: list[int] = []
        self._start_offsets: list[int] = []
        for epoch, start_offset in self._checkpoint.read():
            self._put(epoch, start_offset)
        self._written = self.entries
        """What the checkpoint file holds: a write that would not change it is skipped, as Kafka writes the
        file only when its entries change (a restart's LeaderAndIsr re-assigns every partition's epoch)."""

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._start_offsets))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._start_offsets[0]) if self._epochs else None

    def assign(self, epoch: int, start_offset: int, *, sync: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; entries it contradicts are dropped (Kafka's assign).

        Cheap when nothing changes -- the append path calls it for every batch. ``sync=False`` leaves the
        checkpoint's fsync to a caller that syncs many at once.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._start_offsets[-1]:
            return False
        keep = len(self._epochs)
        while keep and (self._epochs[keep - 1] >= epoch or self._start_offsets[keep - 1] >= start_offset):
            keep -= 1
        self._replace(self._epochs[:keep] + [epoch], self._start_offsets[:keep] + [start_offset], sync=sync)
        return True

    def _put(self, epoch: int, start_offset: int) -> None:
        self._epochs.append(epoch)
        self._start_offsets.append(start_offset)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch: the largest epoch <= requested and the start offset of
        the epoch after it; the log end offset for the latest epoch; UNDEFINED for unknown epochs."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # The log start offset moved past the requested epoch: answer with the earliest known start.
            return requested_epoch, self._start_offsets[0]
        return self._epochs[higher - 1], self._start_offsets[higher]

    def epoch_for_offset(self, offset: int) -> int | None:
        index = bisect.bisect_right(self._start_offsets, offset)
        return self._epochs[index - 1] if index else None

    # Truncations are written without fsync, as in Kafka 3.7+ (KAFKA-15046): after a crash the log is
    # recovered and the cache truncated again from it, so a lost truncation costs nothing; assignments of
    # new epochs are synced. ``write=False`` (the log loader's truncations, which Kafka flushes
    # asynchronously too) leaves the file as it is until the next write or ``flush``: at a restart the
    # loader drops an epoch that starts at the log end and the partition's LeaderAndIsr assigns it again,
    # which then writes nothing.

    def truncate_from_end(self, end_offset: int, *, write: bool = True) -> None:
        """Drop epochs starting at or after ``end_offset`` (the log was truncated to it)."""
        if end_offset >= 0 and self._start_offsets and self._start_offsets[-1] >= end_offset:
            keep = bisect.bisect_left(self._start_offsets, end_offset)
            self._replace(self._epochs[:keep], self._start_offsets[:keep], sync=False, write=write)

    def truncate_from_start(self, start_offset: int, *, write: bool = True) -> None:
        """The log now starts at ``start_offset``: drop older epochs, moving the one covering it up to it."""
        removed = bisect.bisect_right(self._start_offsets, start_offset)
        if removed and (removed > 1 or self._start_offsets[0] != start_offset):
            epochs = [self._epochs[removed - 1], *self._epochs[removed:]]
            self._replace(epochs, [start_offset, *self._start_offsets[removed:]], sync=False, write=write)

    def flush(self) -> None:
        """Write a truncation left unwritten (``write=False``), unless the partition's directory is gone
        (Kafka's writeIfDirExists): the log manager's checkpoints and the log's close call this."""
        if self.entries != self._written and self._checkpoint.path.parent.is_dir():
            self._replace(self._epochs, self._start_offsets, sync=False)

    def clear_and_flush(self) -> None:
        self._replace([], [])

    def _replace(self, epochs: list[int], start_offsets: list[int], *, sync: bool = True, write: bool = True) -> None:
        """Write the new entries unless the file holds them already, then take them: a failed write (a full
        disk) changes nothing."""
        entries = list(zip(epochs, start_offsets))
        if write and entries != self._written:
            self._checkpoint.write(entries, sync=sync)
            self._written = entries
        self._epochs, self._start_offsets = epochs, start_offsets
