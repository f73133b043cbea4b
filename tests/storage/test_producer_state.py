"""Idempotent producers: Kafka 3.9's sequence and epoch rules, duplicates, and the .snapshot files."""

from __future__ import annotations

import struct

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import crc32c
from odradek.storage.producer_state import read_snapshot
from tests.validated import validated

PID = 1001


@pytest.fixture
def log(open_log):
    return open_log()


def _send(log, make_batch, seq, count=1, epoch=0, pid=PID, **kwargs):
    return log.append_as_leader(validated(make_batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **kwargs)), leader_epoch=0)


def _error(call) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        call()
    return raised.value.code


def test_in_order_sequences_are_appended(log, make_batch):
    assert _send(log, make_batch, 0, 3).first_offset == 0
    assert _send(log, make_batch, 3, 2).first_offset == 3
    assert log.producer_state.last_entry(PID).last_seq == 4


def test_a_gap_is_out_of_order_and_nothing_is_written(log, make_batch):
    _send(log, make_batch, 0, 3)
    size = log.size_in_bytes
    assert _error(lambda: _send(log, make_batch, 4)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (log.log_end_offset, log.size_in_bytes) == (3, size)


def test_a_retry_of_one_of_the_last_five_batches_returns_its_original_offsets(log, make_batch):
    infos = [_send(log, make_batch, seq * 2, 2) for seq in range(7)]
    size = log.size_in_bytes
    for original in infos[2:]:
        seq = original.first_offset  # offsets and sequences coincide here
        retry = _send(log, make_batch, seq, 2)
        assert retry.duplicate and (retry.first_offset, retry.last_offset) == (original.first_offset, original.last_offset)
    assert log.size_in_bytes == size and log.log_end_offset == 14
    # the 6th-newest batch is no longer remembered: its retry is out of order
    assert _error(lambda: _send(log, make_batch, 2, 2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER



def test_a_follower_keeps_the_last_five_batches_and_answers_their_retries_once_it_leads(open_log, make_batch):
    """Followers build the producers' state as they append what they fetch (no sequence checks), keeping each
    producer's last five batches as the leader does: after a leader change, a retry of any of them is a
    duplicate answered with the original offsets and timestamp (Kafka's ``findDuplicateBatch``)."""
    follower = open_log(name="follower-0")
    for seq in range(0, 14, 2):
        follower.append_as_follower(make_batch(2, producer_id=PID, producer_epoch=0, base_sequence=seq, base_offset=seq, partition_leader_epoch=0, timestamp=1000 + seq))
    size = follower.size_in_bytes
    for seq in range(4, 14, 2):
        retry = _send(follower, make_batch, seq, 2)
        assert retry.duplicate and (retry.first_offset, retry.last_offset, retry.log_append_time) == (seq, seq + 1, 1000 + seq + 1)
    assert follower.size_in_bytes == size and follower.log_end_offset == 14
    assert _error(lambda: _send(follower, make_batch, 2, 2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

def test_an_older_epoch_is_fenced(log, make_batch):
    _send(log, make_batch, 0, epoch=5)
    assert _error(lambda: _send(log, make_batch, 1, epoch=4)) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_an_epoch_bump_must_restart_at_sequence_zero(log, make_batch):
    _send(log, make_batch, 0, 5, epoch=1)
    assert _error(lambda: _send(log, make_batch, 5, epoch=2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _send(log, make_batch, 0, epoch=2).first_offset == 5


def test_an_unknown_producer_may_start_at_any_sequence(log, make_batch):
    # Kafka 3.9 accepts it: the producer's earlier state may have been removed by retention (KIP-360)
    assert _send(log, make_batch, 42).first_offset == 0
    assert _error(lambda: _send(log, make_batch, 44)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequences_wrap_after_int32_max(log, make_batch):
    _send(log, make_batch, 2**31 - 2, 2)
    assert log.producer_state.last_entry(PID).last_seq == 2**31 - 1
    assert _send(log, make_batch, 0).first_offset == 2
    batch = make_batch(3, producer_id=PID, producer_epoch=0, base_sequence=2**31 - 1 - 1)
    assert _error(lambda: log.append_as_leader(validated(batch), leader_epoch=0)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_producers_are_independent(log, make_batch):
    _send(log, make_batch, 0, pid=1)
    _send(log, make_batch, 0, pid=2)
    _send(log, make_batch, 1, pid=1)
    assert _error(lambda: _send(log, make_batch, 3, pid=2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_non_idempotent_batches_skip_the_checks(log, make_batch):
    log.append_as_leader(validated(make_batch(1)), leader_epoch=0)
    log.append_as_leader(validated(make_batch(1)), leader_epoch=0)
    assert log.log_end_offset == 2 and not log.producer_state.producers


def test_state_is_reloaded_from_the_snapshot_after_a_clean_shutdown(open_log, make_batch):
    log = open_log()
    _send(log, make_batch, 0, 4, epoch=3, pid=77)
    log.close()
    snapshot = log.dir / "00000000000000000004.snapshot"
    [entry] = read_snapshot(snapshot)
    assert (entry.producer_id, entry.producer_epoch, entry.last_seq, entry.last_data_offset, entry.last_offset_delta) == (77, 3, 3, 3, 3)
    reopened = open_log(had_clean_shutdown=True)
    assert _send(reopened, make_batch, 0, 4, epoch=3, pid=77).duplicate
    assert _send(reopened, make_batch, 4, 1, epoch=3, pid=77).first_offset == 4


def test_snapshot_bytes_are_kafkas_format(open_log, make_batch):
    log = open_log()
    _send(log, make_batch, 10, 2, epoch=1, pid=5, timestamp=1234)
    log.close()
    data = (log.dir / "00000000000000000002.snapshot").read_bytes()
    version, crc = struct.unpack_from(">hI", data)
    assert version == 1 and crc == crc32c(data[6:])
    assert struct.unpack_from(">i", data, 6) == (1,)
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (5, 1, 11, 1, 1, 1235, -1, -1)
    assert len(data) == 10 + 46  # one 46-byte entry


def test_a_corrupt_snapshot_is_ignored_and_state_rebuilt_from_the_log(open_log, make_batch):
    log = open_log()
    _send(log, make_batch, 0, 4, pid=9)
    log.close()
    snapshot = log.dir / "00000000000000000004.snapshot"
    snapshot.write_bytes(snapshot.read_bytes()[:-1] + b"\x00")
    reopened = open_log(recovery_point=0)
    assert reopened.producer_state.last_entry(9).last_seq == 3


def test_truncation_rewinds_producer_state(open_log, make_batch):
    log = open_log({"segment.bytes": "400"})
    for seq in range(0, 20, 2):
        _send(log, make_batch, seq, 2, value_size=60)
    log.truncate_to(12)
    assert log.producer_state.last_entry(PID).last_seq == 11
    assert _send(log, make_batch, 12, 2).first_offset == 12
