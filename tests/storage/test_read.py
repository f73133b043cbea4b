"""Reads: zero-copy slices bounded by offsets and bytes, as Kafka's LocalLog.read serves fetches."""

from __future__ import annotations

import os
import random

import pytest

from odradek.protocol.record_batch import parse_header
from odradek.storage.log import OffsetOutOfRangeError
from tests.validated import validated


@pytest.fixture
def log_of_batches(open_log, make_batch):
    """Batches of 10 records (offsets 0-9, 10-19, ...) in segments of about 2 KB."""
    log = open_log({"segment.bytes": "2000", "index.interval.bytes": "300"})
    for _ in range(60):
        log.append_as_leader(validated(make_batch(10, value_size=20)), leader_epoch=1)
    log.high_watermark = log.log_end_offset
    return log


def test_read_returns_slices_of_the_segment_file(log_of_batches, batches_in):
    info = log_of_batches.read(0, 10_000)
    [piece] = info.slices
    assert os.pread(piece.file.fileno(), piece.length, piece.position) == info.read()
    assert batches_in(info.read())[0][1:] == (0, 9)


def test_read_in_the_middle_of_a_batch_starts_at_the_batch(log_of_batches, batches_in):
    for offset in (13, 17, 19, 250, 599):
        data = log_of_batches.read(offset, 1).read()
        position, base, last = batches_in(data)[0]
        assert position == 0 and base <= offset <= last and base == offset // 10 * 10


def test_a_batch_larger_than_max_bytes_is_returned_whole(log_of_batches, batches_in):
    info = log_of_batches.read(100, 10)
    assert [entry[1:] for entry in batches_in(info.read())] == [(100, 109)]
    assert not info.first_entry_incomplete
    partial = log_of_batches.read(100, 10, min_one_message=False)  # Kafka hands out the cut bytes, flagged
    assert partial.size == 10 and partial.first_entry_incomplete and batches_in(partial.read()) == []


def test_max_bytes_limits_the_read_and_may_cut_the_last_batch(log_of_batches, batches_in):
    batch_size = parse_header(log_of_batches.read(0, 1).read()).size
    info = log_of_batches.read(0, int(batch_size * 2.5))
    assert info.size == int(batch_size * 2.5)
    assert [entry[1] for entry in batches_in(info.read())] == [0, 10]


def test_reads_never_pass_max_offset(log_of_batches, batches_in):
    for max_offset in (10, 20, 55, 300):
        data = log_of_batches.read(0, 1_000_000, max_offset).read()
        offsets = batches_in(data)
        assert offsets and all(last < max_offset or base < max_offset for _, base, last in offsets)
        assert max(last for _, _, last in offsets) < (max_offset + 9) // 10 * 10
        assert len(data) == sum(parse_header(data, p).size for p, _, _ in offsets)  # whole batches only
    assert log_of_batches.read(20, 1000, 20).size == 0


def test_data_comes_from_one_segment_per_read(log_of_batches, batches_in):
    second = log_of_batches.segments[1]
    data = log_of_batches.read(second.base_offset - 10, 1_000_000).read()
    assert batches_in(data)[-1][2] == second.base_offset - 1
    data = log_of_batches.read(second.base_offset, 1_000_000).read()
    assert batches_in(data)[0][1] == second.base_offset


def test_offsets_outside_the_log_are_out_of_range(log_of_batches):
    with pytest.raises(OffsetOutOfRangeError):
        log_of_batches.read(log_of_batches.log_end_offset + 1, 100)
    log_of_batches.delete_records_before(100)
    with pytest.raises(OffsetOutOfRangeError):
        log_of_batches.read(99, 100)
    assert log_of_batches.read(log_of_batches.log_end_offset, 100).size == 0


def test_slices_stay_readable_after_their_segment_is_deleted(log_of_batches):
    info = log_of_batches.read(0, 100_000)
    expected = info.read()
    log_of_batches.delete_records_before(log_of_batches.segments[2].base_offset)
    assert not (log_of_batches.dir / "00000000000000000000.log").exists()
    assert info.read() == expected


def test_every_offset_maps_to_its_batch(log_of_batches, batches_in):
    for offset in random.Random(7).sample(range(600), 100):
        _, base, last = batches_in(log_of_batches.read(offset, 1).read())[0]
        assert base <= offset <= last


def test_a_read_at_the_end_of_each_append_gets_the_next_batch_after_a_truncation_too(open_log, make_batch, batches_in):
    """Readers at the end (followers, tailing consumers) fetch the offset just past the last append: each
    finds the batch appended after it, also once a truncation has put other batches at the same positions."""
    log = open_log({"segment.bytes": "100000", "index.interval.bytes": "4096"})
    ends = []
    for size in (3, 1, 4, 1, 5):
        ends.append(log.log_end_offset)
        log.append_as_leader(validated(make_batch(size, value_size=30)), leader_epoch=1)
    log.high_watermark = log.log_end_offset
    for offset in ends:
        assert batches_in(log.read(offset, 1).read())[0][1] == offset
    assert log.read(log.log_end_offset, 1).read() == b""
    log.truncate_to(ends[2])
    for size in (2, 2, 6):
        ends.append(log.log_end_offset)
        log.append_as_leader(validated(make_batch(size, value_size=10)), leader_epoch=2)
    log.high_watermark = log.log_end_offset
    for offset in (*ends[:2], *ends[5:]):
        assert batches_in(log.read(offset, 1).read())[0][1] == offset
    for offset in range(log.log_end_offset):
        _, base, last = batches_in(log.read(offset, 1).read())[0]
        assert base <= offset <= last
