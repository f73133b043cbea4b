"""Retention by time and size, and DeleteRecords: whole segments, oldest first, below the high watermark."""

from __future__ import annotations

import pytest

from odradek.storage.log import OffsetOutOfRangeError
from tests.validated import validated


def _fill(log, make_batch, timestamps):
    for ts in timestamps:
        log.append_as_leader(validated(make_batch(4, value_size=100, timestamp=ts)), leader_epoch=0)
    log.high_watermark = log.log_end_offset


def test_retention_ms_deletes_segments_whose_newest_record_is_too_old(open_log, make_batch, clock):
    log = open_log({"segment.bytes": "1500", "retention.ms": "10000"})
    now = clock.now
    _fill(log, make_batch, [now - 50_000] * 6 + [now - 20_000] * 6 + [now - 1_000] * 6)
    segments_before = [(s.base_offset, s.max_timestamp) for s in log.segments]
    assert log.delete_old_segments(now) > 0
    kept = [(s.base_offset, s.max_timestamp) for s in log.segments]
    assert kept == [entry for entry in segments_before if now - entry[1] <= 10_000]
    assert log.log_start_offset == log.segments[0].base_offset
    assert not (log.dir / "00000000000000000000.log").exists()
    assert log.read(log.log_start_offset, 100).size > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)


def test_retention_bytes_deletes_oldest_segments_until_under_the_limit(open_log, make_batch, clock):
    log = open_log({"segment.bytes": "1500", "retention.bytes": "4000"})
    _fill(log, make_batch, [clock.now] * 30)
    sizes = [s.size for s in log.segments]
    log.delete_old_segments(clock.now)
    assert log.size_in_bytes <= sum(sizes) and log.size_in_bytes - log.segments[0].size < 4000 <= log.size_in_bytes + sizes[0]
    removed = len(sizes) - len(log.segments)
    assert sum(sizes) - sum(sizes[:removed]) >= 4000  # never below the limit
    assert sum(sizes) - sum(sizes[: removed + 1]) < 4000  # but as close as whole segments allow


def test_nothing_at_or_above_the_high_watermark_is_deleted(open_log, make_batch, clock):
    log = open_log({"segment.bytes": "1500", "retention.ms": "1"})
    _fill(log, make_batch, [clock.now - 100_000] * 20)
    third = log.segments[2].base_offset
    log.high_watermark = third
    assert log.delete_old_segments(clock.now) == 2  # the third segment holds the high watermark
    assert log.segments[0].base_offset == log.log_start_offset == third


def test_when_every_segment_expired_the_log_rolls_and_keeps_its_offsets(open_log, make_batch, clock):
    log = open_log({"retention.ms": "1000"})
    _fill(log, make_batch, [clock.now - 5000] * 3)
    end = log.log_end_offset
    assert log.delete_old_segments(clock.now) == 1
    assert [s.base_offset for s in log.segments] == [end]
    assert (log.log_start_offset, log.log_end_offset) == (end, end)
    info = log.append_as_leader(validated(make_batch(1, timestamp=clock.now)), leader_epoch=0)
    assert info.first_offset == end


def test_compact_only_topics_keep_expired_segments(open_log, make_batch, clock):
    log = open_log({"segment.bytes": "1500", "retention.ms": "1", "cleanup.policy": "compact"})
    _fill(log, make_batch, [clock.now - 100_000] * 20)
    assert log.delete_old_segments(clock.now) == 0


def test_delete_records_moves_the_log_start_and_drops_whole_segments_below_it(open_log, make_batch, clock):
    log = open_log({"segment.bytes": "1500"})
    _fill(log, make_batch, [clock.now] * 20)
    third = log.segments[2].base_offset
    assert log.delete_records_before(third + 1) == third + 1
    assert log.segments[0].base_offset == third
    assert log.read(third + 1, 1).fetch_offset_metadata.segment_base_offset == third
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(log.high_watermark + 1)


def test_segments_are_deleted_only_when_retention_runs(open_log, make_batch, clock):
    log = open_log({"segment.bytes": "1500", "retention.ms": "60000"})
    _fill(log, make_batch, [clock.now] * 20)
    count = len(log.segments)
    newest = clock.now + 3  # each batch's records are stamped ts .. ts + 3
    assert log.delete_old_segments(newest + 60_000) == 0
    assert log.delete_old_segments(newest + 60_001) == count
