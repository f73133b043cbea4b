"""The leader epoch cache and ``leader-epoch-checkpoint`` (Kafka's LeaderEpochFileCache semantics)."""

from __future__ import annotations

from odradek.storage.checkpoints import LEADER_EPOCH_CHECKPOINT
from odradek.storage.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochFileCache


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
        log.append_as_leader(make_batch(2), leader_epoch=epoch)
    assert log.epoch_cache.entries == [(1, 0), (2, 4), (4, 6)]
    assert log.end_offset_for_epoch(2) == (2, 6)
    log.truncate_to(5)
    assert log.epoch_cache.entries == [(1, 0), (2, 4)]
    assert log.end_offset_for_epoch(2) == (2, 5) and log.latest_epoch == 2
