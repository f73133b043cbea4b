"""Segment rolling: by size, by time, on a full index, and when offsets leave the 32-bit relative range."""

from __future__ import annotations

from odradek.protocol.record_batch import assign_offset_and_epoch, parse_header
from odradek.storage.checkpoints import LEADER_EPOCH_CHECKPOINT
from tests.validated import validated


def test_rolls_when_the_next_append_would_pass_segment_bytes(open_log, make_batch):
    log = open_log({"segment.bytes": "3000"})
    batch_size = len(make_batch(5, value_size=100))
    for _ in range(20):
        log.append_as_leader(validated(make_batch(5, value_size=100)), leader_epoch=0)
    assert len(log.segments) > 1
    for segment in log.segments[:-1]:
        assert 3000 - batch_size < segment.size <= 3000
    assert [s.base_offset for s in log.segments] == [i * 5 * (3000 // batch_size) for i in range(len(log.segments))]


def test_rolls_after_segment_ms_by_batch_timestamps(open_log, make_batch, clock):
    log = open_log({"segment.ms": "60000"})
    log.append_as_leader(validated(make_batch(1, timestamp=clock.now)), leader_epoch=0)
    log.append_as_leader(validated(make_batch(1, timestamp=clock.now + 60_000)), leader_epoch=0)
    assert len(log.segments) == 1  # not more than segment.ms yet
    log.append_as_leader(validated(make_batch(1, timestamp=clock.now + 60_001)), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_rolls_after_segment_ms_by_wall_clock_without_timestamps(open_log, make_batch, shift_timestamps, clock):
    log = open_log({"segment.ms": "1000"})
    untimed = shift_timestamps(make_batch(1), -1)  # no timestamp: segment age counts from its creation
    log.append_as_leader(validated(untimed), leader_epoch=0)
    clock.advance(999)
    log.append_as_leader(validated(untimed), leader_epoch=0)
    assert len(log.segments) == 1
    clock.advance(2)
    log.append_as_leader(validated(untimed), leader_epoch=0)
    assert len(log.segments) == 2


def test_rolls_when_the_offset_index_is_full(open_log, make_batch):
    log = open_log({"segment.index.bytes": "80", "index.interval.bytes": "1"})  # 10 offset index entries
    for _ in range(30):
        log.append_as_leader(validated(make_batch(1)), leader_epoch=0)
    assert len(log.segments) > 1
    assert log.segments[0].offset_index.entries <= 10


def test_rolls_when_an_offset_no_longer_fits_a_relative_offset(open_log, make_batch):
    log = open_log()
    log.append_as_follower(make_batch(1))
    far = make_batch(1)
    header = parse_header(far)
    assign_offset_and_epoch(far, 0, header, 2**31 + 5, header.partition_leader_epoch)
    log.append_as_follower(far)
    assert [s.base_offset for s in log.segments] == [0, 2**31 + 5]
    assert log.log_end_offset == 2**31 + 6


def test_roll_writes_a_producer_snapshot_and_new_epochs_are_checkpointed(open_log, make_batch):
    log = open_log({"segment.bytes": "500"})
    for epoch in range(4):
        log.append_as_leader(validated(make_batch(2, value_size=150)), leader_epoch=epoch)
    snapshots = sorted(p.name for p in log.dir.glob("*.snapshot"))
    assert snapshots == [f"{s.base_offset:020d}.snapshot" for s in log.segments[1:]]
    assert (log.dir / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n4\n0 0\n1 2\n2 4\n3 6\n"
