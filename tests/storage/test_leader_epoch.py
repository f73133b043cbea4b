"""The leader epoch cache and ``leader-epoch-checkpoint`` (Kafka's LeaderEpochFileCache semantics)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from odradek.storage.checkpoints import LEADER_EPOCH_CHECKPOINT
from odradek.storage.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochFileCache
from tests.validated import validated


class Pinned:
    """A checkpoint file as it is now, held open so that the filesystem cannot give its inode to another file:
    a rewrite (a new file renamed over it) then always shows as another inode, and no rewrite as the same."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: IO[bytes] = open(path, "rb")  # held open on purpose; ``rewritten`` closes it

    def rewritten(self) -> bool:
        try:
            return os.stat(self.path).st_ino != os.fstat(self.file.fileno()).st_ino
        finally:
            self.file.close()


def _cache(tmp_path, entries):
    cache = LeaderEpochFileCache(tmp_path)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_assign_keeps_epochs_and_offsets_monotonic(tmp_path):
    cache = _cache(tmp_path, [(1, 0), (1, 5), (2, 10), (4, 20)])
    assert cache.entries == [(1, 0), (2, 10), (4, 20)]
    cache.assign(3, 15)  # an older epoch after newer ones removes them
    assert cache.entries == [(1, 0), (2, 10), (3, 15)]
    cache.assign(5, 12)  # a start offset below existing starts removes those too
    assert cache.entries == [(1, 0), (2, 10), (5, 12)]
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n3\n1 0\n2 10\n5 12\n"
    assert LeaderEpochFileCache(tmp_path).entries == cache.entries


def test_end_offset_for_epoch(tmp_path):
    cache = _cache(tmp_path, [(1, 0), (3, 10), (5, 30)])
    assert cache.end_offset_for(5, 42) == (5, 42)  # the current epoch ends at the LEO
    assert cache.end_offset_for(3, 42) == (3, 30)
    assert cache.end_offset_for(4, 42) == (3, 30)  # unknown epoch: the largest below it
    assert cache.end_offset_for(1, 42) == (1, 10)
    assert cache.end_offset_for(0, 42) == (0, 0)  # older than everything: the earliest start
    assert cache.end_offset_for(6, 42) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 42) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_truncation_from_either_end(tmp_path):
    cache = _cache(tmp_path, [(1, 0), (3, 10), (5, 30)])
    cache.truncate_from_end(30)
    assert cache.entries == [(1, 0), (3, 10)]
    cache.truncate_from_start(12)
    assert cache.entries == [(3, 12)]
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n1\n3 12\n"


def test_epoch_for_offset(tmp_path):
    cache = _cache(tmp_path, [(1, 0), (3, 10)])
    assert [cache.epoch_for_offset(o) for o in (0, 9, 10, 99)] == [1, 1, 3, 3]


def test_log_truncation_updates_the_epoch_cache(open_log, make_batch):
    log = open_log()
    for epoch in (1, 1, 2, 4, 4):
        log.append_as_leader(validated(make_batch(2)), leader_epoch=epoch)
    assert log.epoch_cache.entries == [(1, 0), (2, 4), (4, 6)]
    assert log.end_offset_for_epoch(2) == (2, 6)
    log.truncate_to(5)
    assert log.epoch_cache.entries == [(1, 0), (2, 4)]
    assert log.end_offset_for_epoch(2) == (2, 5) and log.latest_epoch == 2


def test_a_write_that_changes_nothing_is_skipped(tmp_path):
    """Kafka writes the checkpoint only when its entries change: a restart's LeaderAndIsr assigning the epoch
    the file already holds writes nothing (with thousands of partitions, thousands of fsyncs saved)."""
    _cache(tmp_path, [(0, 0), (3, 10)])
    written = Pinned(tmp_path / LEADER_EPOCH_CHECKPOINT)
    cache = LeaderEpochFileCache(tmp_path)
    cache.assign(3, 10)
    cache.assign(3, 12)
    cache.clear_and_flush()
    cache.assign(0, 0)
    cache.assign(3, 10)
    assert written.rewritten()  # the clear was written
    written = Pinned(tmp_path / LEADER_EPOCH_CHECKPOINT)
    assert LeaderEpochFileCache(tmp_path).entries == [(0, 0), (3, 10)]
    cache.assign(3, 10)
    assert not written.rewritten()
    cache.assign(4, 20)  # a new epoch is written (and synced) before assign returns
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n3\n0 0\n3 10\n4 20\n"


def test_a_loading_truncation_is_written_at_the_next_write_or_flush(tmp_path):
    """The log loader's truncations (``write=False``) stay in memory: an assignment that restores the file's
    entries writes nothing, one that does not writes them all, and ``flush`` writes a truncation left alone."""
    _cache(tmp_path, [(0, 0), (2, 5)])
    written = Pinned(tmp_path / LEADER_EPOCH_CHECKPOINT)
    cache = LeaderEpochFileCache(tmp_path)
    cache.truncate_from_end(5, write=False)  # epoch 2 has no records: a loaded log ends where it starts
    assert cache.entries == [(0, 0)]
    cache.assign(2, 5)  # the restarted leader's epoch: what the file holds
    assert not written.rewritten()
    cache.truncate_from_end(5, write=False)
    cache.assign(3, 5)
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 0\n3 5\n"
    cache.truncate_from_start(2, write=False)
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 0\n3 5\n"
    cache.flush()
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 2\n3 5\n"


def test_a_restart_rewrites_no_checkpoint(open_log, make_batch):
    """An empty log and one whose last epoch has no records yet: reopened, their loader drops the epoch that
    starts at the log end, and becoming leader again in the same epoch restores it without a write. A
    truncation nothing restores is written at the log's close."""
    empty, held = open_log(name="empty-0"), open_log(name="held-0")
    empty.assign_epoch_start_offset(0, 0)
    held.append_as_leader(validated(make_batch(3)), leader_epoch=0)
    held.assign_epoch_start_offset(1, 3)
    paths = [log.dir / LEADER_EPOCH_CHECKPOINT for log in (empty, held)]
    written = [Pinned(p) for p in paths]
    for log in (empty, held):
        log.close()
    empty, held = open_log(name="empty-0"), open_log(name="held-0")
    assert empty.epoch_cache.entries == [] and held.epoch_cache.entries == [(0, 0)]
    empty.assign_epoch_start_offset(0, 0)
    held.assign_epoch_start_offset(1, 3)
    assert [pinned.rewritten() for pinned in written] == [False, False]
    assert held.epoch_cache.entries == [(0, 0), (1, 3)]
    empty.close()
    held.close()
    reopened = open_log(name="held-0")
    reopened.close()
    assert paths[1].read_text() == "0\n1\n0 0\n"
