"""Follower-side operations (truncation, appends that keep offsets) and the fsync policies."""

from __future__ import annotations

import struct

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import assign_offset_and_epoch, parse_header
from tests.validated import validated


def test_truncate_to_removes_later_batches_segments_and_index_entries(open_log, make_batch, batches_in):
    log = open_log({"segment.bytes": "2000", "index.interval.bytes": "200"})
    for i in range(40):
        log.append_as_leader(validated(make_batch(5, value_size=40)), leader_epoch=i // 10)
    log.high_watermark = log.log_end_offset
    target = 102  # offsets 100-104 form one batch: it goes too, as in Kafka
    holder = next(s for s in reversed(log.segments) if s.base_offset <= target)
    assert log.truncate_to(target)
    assert log.log_end_offset == target and log.high_watermark == target
    assert log.segments[-1] is holder
    index = struct.unpack(f">{holder.offset_index.entries * 2}i", holder.path(".index").read_bytes()[: holder.offset_index.entries * 8])
    assert all(holder.base_offset + relative < target for relative in index[0::2])
    data = b"".join(s.log.read(0, s.size) for s in log.segments)
    assert batches_in(data)[-1][2] == 99
    assert log.epoch_cache.entries == [(0, 0), (1, 50), (2, 100)]  # epochs starting below the target stay
    assert log.append_as_leader(validated(make_batch(1)), leader_epoch=7).first_offset == target
    assert batches_in(log.read(99, 10_000).read())[-1][1:] == (102, 102)


def test_truncating_below_the_first_segment_starts_the_log_over(open_log, make_batch):
    log = open_log({"segment.bytes": "600"})
    for _ in range(10):
        log.append_as_leader(validated(make_batch(2, value_size=100)), leader_epoch=1)
    log.high_watermark = log.log_end_offset
    log.delete_records_before(log.segments[2].base_offset)
    log.truncate_to(1)
    assert (log.log_start_offset, log.log_end_offset, [s.base_offset for s in log.segments]) == (1, 1, [1])
    assert log.epoch_cache.entries == []


def test_follower_appends_keep_the_leaders_offsets_and_epochs(open_log, make_batch):
    leader_bytes = bytearray()
    for offset, epoch in ((0, 3), (4, 3), (8, 5)):
        batch = make_batch(4)
        assign_offset_and_epoch(batch, 0, parse_header(batch), offset, epoch)
        leader_bytes += batch
    follower = open_log(name="follower-0")
    info = follower.append_as_follower(bytes(leader_bytes) + bytes(leader_bytes[:30]))  # a cut last batch is dropped
    assert (info.first_offset, info.last_offset, follower.log_end_offset) == (0, 11, 12)
    assert follower.epoch_cache.entries == [(3, 0), (5, 8)]
    assert follower.read(0, 1_000_000).read() == bytes(leader_bytes)
    with pytest.raises(KafkaError) as refused:
        follower.append_as_follower(bytes(leader_bytes[: len(leader_bytes) // 3]))  # offsets below the LEO
    assert refused.value.code == ErrorCode.UNKNOWN_SERVER_ERROR  # Kafka's UnexpectedAppendOffsetException
    assert follower.append_as_follower(bytes(leader_bytes[:30])) is None


def test_flush_messages_fsyncs_every_n_messages(open_log, make_batch):
    log = open_log({"flush.messages": "10"})
    for _ in range(4):
        log.append_as_leader(validated(make_batch(3)), leader_epoch=0)
    assert log.recovery_point == 12 and log.unflushed_messages == 0
    log.append_as_leader(validated(make_batch(3)), leader_epoch=0)
    assert log.recovery_point == 12 and log.unflushed_messages == 3


def test_flush_ms_fsyncs_when_due(open_log, make_batch, clock):
    log = open_log({"flush.ms": "1000"})
    log.append_as_leader(validated(make_batch(3)), leader_epoch=0)
    assert not log.flush_due(clock.now + 999) and log.recovery_point == 0
    assert log.flush_due(clock.now + 1000) and log.recovery_point == 3


def test_without_a_flush_policy_only_rolled_segments_are_flushed(open_log, make_batch, clock):
    log = open_log({"segment.bytes": "500"})
    for _ in range(5):
        log.append_as_leader(validated(make_batch(1, value_size=300)), leader_epoch=0)
    assert log.recovery_point == 0
    assert log.flush_due(clock.now + 10**9)
    assert log.recovery_point == log.active_segment.base_offset < log.log_end_offset
