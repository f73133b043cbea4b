"""Transactions in the log: the last stable offset, markers, the transaction index, snapshots and recovery.

Transactional batches are appended as a producer sends them, markers as WriteTxnMarkers appends them
(a control batch with the COORDINATOR origin); what is observed is what a READ_COMMITTED fetch and ListOffsets read: the
last stable offset, the aborted transactions a read answers, and the ``.txnindex`` files. The bytes of an
index entry are compared with Kafka's own files in tests/storage/test_transactions_vs_kafka.py.
"""

from __future__ import annotations

import gc
import random
import signal
import struct
import subprocess
import sys
import textwrap
import time

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import iter_batch_positions
from odradek.storage.transaction_index import AbortedTxn, read_transaction_index
from tests.validated import validated

SEGMENT = {"segment.bytes": "2000", "index.interval.bytes": "300"}
TXN_INDEX = "00000000000000000000.txnindex"


class Producer:
    """One transactional producer's appends: its batches continue its sequence."""

    def __init__(self, log, make_batch, write_marker, producer_id: int, epoch: int = 0) -> None:
        self.log, self.make_batch, self.write_marker = log, make_batch, write_marker
        self.producer_id, self.epoch, self.sequence = producer_id, epoch, 0

    def send(self, count: int = 1, **kwargs) -> int:
        batch = self.make_batch(count, producer_id=self.producer_id, producer_epoch=self.epoch, base_sequence=self.sequence, is_transactional=True, **kwargs)
        self.sequence += count
        info = self.log.append_as_leader(validated(batch), leader_epoch=0)
        self.log.high_watermark = self.log.log_end_offset
        return info.first_offset

    def end(self, commit: bool, coordinator_epoch: int = 0) -> int:
        info = self.write_marker(self.log, self.producer_id, self.epoch, coordinator_epoch, commit)
        self.log.high_watermark = self.log.log_end_offset
        return info.first_offset


def aborted_read(log, offset: int = 0) -> list[tuple[int, int]]:
    info = log.read(offset, 1 << 20, log.last_stable_offset)
    return [(txn.producer_id, txn.first_offset) for txn in log.aborted_transactions(offset, info)]


def crash(log) -> None:
    """Drop a log without closing it: no snapshot at the log end, indexes left as they are."""
    del log
    gc.collect()


@pytest.fixture
def log(open_log):
    return open_log(SEGMENT)


@pytest.fixture
def producer(make_batch, write_marker):
    """``producer(log, producer id[, epoch])``: a transactional producer writing to ``log``."""
    return lambda log, producer_id, epoch=0: Producer(log, make_batch, write_marker, producer_id, epoch)


def test_an_open_transaction_holds_the_last_stable_offset_until_its_commit(log, make_batch, producer):
    log.append_as_leader(validated(make_batch(3)), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 3
    a = producer(log, 10)
    assert a.send(2) == 3
    a.send(2)
    assert (log.high_watermark, log.last_stable_offset) == (7, 3)
    marker = a.end(commit=True)
    assert marker == 7
    assert log.last_stable_offset == log.high_watermark == 8
    assert aborted_read(log) == []
    assert not (log.dir / TXN_INDEX).exists()  # Kafka creates the index with its first aborted transaction


def test_a_marker_not_yet_below_the_high_watermark_still_holds_the_last_stable_offset(log, producer, write_marker):
    a = producer(log, 10)
    a.send(2)
    write_marker(log, 10, 0, 0, True)
    assert (log.log_end_offset, log.high_watermark, log.last_stable_offset) == (3, 2, 0)
    log.high_watermark = 3
    assert log.last_stable_offset == 3


def test_the_last_stable_offset_is_never_below_the_log_start_offset(log, make_batch, producer):
    producer(log, 10).send(2)  # 0-1, open
    log.append_as_leader(validated(make_batch(3)), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 0
    log.delete_records_before(1)
    assert log.last_stable_offset == 1


def test_an_aborted_transaction_is_indexed_with_the_last_stable_offset_it_leaves(log, producer):
    a, b = producer(log, 10), producer(log, 20)
    a.send(2)  # 0-1
    b.send(1)  # 2
    a.send(1)  # 3
    assert a.end(commit=False) == 4
    # b's transaction is still open: the log stays unstable from its first offset
    assert log.last_stable_offset == 2
    b.send(1)  # 5
    assert b.end(commit=False) == 6
    assert log.last_stable_offset == 7
    assert read_transaction_index(log.dir / TXN_INDEX) == [AbortedTxn(10, 0, 4, 2), AbortedTxn(20, 2, 6, 7)]
    assert (log.dir / TXN_INDEX).read_bytes() == struct.pack(">hqqqq", 0, 10, 0, 4, 2) + struct.pack(">hqqqq", 0, 20, 2, 6, 7)
    assert aborted_read(log) == [(10, 0), (20, 2)]
    assert aborted_read(log, 5) == [(20, 2)]


def test_a_marker_of_an_empty_transaction_changes_neither_the_index_nor_the_last_stable_offset(log, producer):
    a = producer(log, 10)
    a.end(commit=False)
    assert log.last_stable_offset == 1
    assert not (log.dir / TXN_INDEX).exists()


def test_a_marker_from_a_fenced_coordinator_or_producer_epoch_is_refused(log, producer, write_marker):
    a = producer(log, 10, epoch=3)
    a.send(1)
    a.end(commit=True, coordinator_epoch=5)
    with pytest.raises(KafkaError) as raised:
        write_marker(log, 10, 3, 4, False)
    assert raised.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    with pytest.raises(KafkaError) as raised:
        write_marker(log, 10, 2, 5, False)
    assert raised.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == 2


def test_a_non_transactional_write_inside_a_transaction_is_refused(log, make_batch, producer):
    producer(log, 10).send(1)
    with pytest.raises(KafkaError) as raised:
        log.append_as_leader(validated(make_batch(1, producer_id=10, producer_epoch=0, base_sequence=1)), leader_epoch=0)
    assert raised.value.code == ErrorCode.INVALID_TXN_STATE


def test_a_clean_restart_keeps_the_open_transaction_in_the_snapshot(open_log, producer):
    log = open_log(SEGMENT)
    a, b = producer(log, 10), producer(log, 20)
    a.send(2)
    b.send(1)
    a.end(commit=False)
    log.close()
    reopened = open_log(SEGMENT, had_clean_shutdown=True, high_watermark=4)
    assert reopened.last_stable_offset == 2
    assert reopened.producer_state.last_entry(20).current_txn_first_offset == 2
    b = producer(reopened, 20)
    b.sequence = 1
    b.send(1)
    b.end(commit=False)
    assert read_transaction_index(reopened.dir / TXN_INDEX) == [AbortedTxn(10, 0, 3, 2), AbortedTxn(20, 2, 5, 6)]


def test_a_crash_rebuilds_the_transaction_index_and_the_open_transactions_from_the_segments(open_log, producer):
    log = open_log(SEGMENT)
    producers = [producer(log, pid) for pid in (10, 20, 30)]
    for round_ in range(12):  # several segments, markers of both kinds, one transaction left open
        for i, producer in enumerate(producers):
            producer.send(1 + (round_ + i) % 3, value_size=40)
        for i, producer in enumerate(producers[:2]):
            producer.end(commit=(round_ + i) % 2 == 0)
    assert len(log.segments) > 3
    indexes = {path.name: path.read_bytes() for path in log.dir.glob("*.txnindex")}
    assert len(indexes) >= 2
    lso, leo = log.last_stable_offset, log.log_end_offset
    for path in log.dir.glob("*.txnindex"):
        path.unlink()
    for path in log.dir.glob("*.snapshot"):
        path.unlink()
    crash(log)

    recovered = open_log(SEGMENT, recovery_point=0, high_watermark=leo)
    assert {path.name: path.read_bytes() for path in recovered.dir.glob("*.txnindex")} == indexes
    assert (recovered.log_end_offset, recovered.last_stable_offset) == (leo, lso)
    assert recovered.producer_state.last_entry(30).current_txn_first_offset == lso


def test_truncation_drops_the_entries_of_truncated_markers_and_reopens_their_transactions(log, producer):
    a = producer(log, 10)
    a.send(1)
    a.end(commit=False)  # 1
    a.send(1)  # 2
    a.end(commit=False)  # 3
    assert len(read_transaction_index(log.dir / TXN_INDEX)) == 2
    log.truncate_to(3)
    assert read_transaction_index(log.dir / TXN_INDEX) == [AbortedTxn(10, 0, 1, 2)]
    assert log.last_stable_offset == 2  # the second transaction is open again
    log.truncate_to(1)
    assert (log.dir / TXN_INDEX).read_bytes() == b""


def test_retention_deletes_a_segments_transaction_index_with_it(open_log, make_batch, clock, producer):
    log = open_log({**SEGMENT, "retention.ms": "1000"})
    a = producer(log, 10)
    a.send(1, timestamp=clock.now)
    a.end(commit=False)
    first = log.dir / TXN_INDEX
    assert first.exists()
    log.roll()
    log.append_as_leader(validated(make_batch(1, timestamp=clock.now + 5000)), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    clock.advance(2000)
    assert log.delete_old_segments() == 1
    assert not first.exists()


TRANSACTIONAL_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from odradek.protocol.records import ControlRecordType, EndTransactionMarker, build_batch, build_end_txn_marker_batch
    from odradek.storage.log import Log
    from odradek.storage.log_config import LogConfig
    from odradek.storage.producer_state import AppendOrigin
    from tests.validated import validated
    log = Log.open(Path(sys.argv[1]), LogConfig.from_props({"segment.bytes": "20000", "flush.messages": "50"}))
    sequences = {}
    i = 0
    while True:
        producer_id = 100 + i % 3
        if i % 5 == 4 and producer_id != 100:  # producer 100 never ends its transaction
            marker = EndTransactionMarker(ControlRecordType.COMMIT if i % 2 == 0 else ControlRecordType.ABORT, 0)
            batch = build_end_txn_marker_batch(marker, producer_id=producer_id, producer_epoch=0)
            log.append_as_leader(validated(batch, AppendOrigin.COORDINATOR), leader_epoch=0)
        else:
            sequence = sequences.get(producer_id, 0)
            count = 1 + i % 4
            batch = build_batch([(b"k", b"v" * (i % 200))] * count, producer_id=producer_id, producer_epoch=0, base_sequence=sequence, is_transactional=True)
            log.append_as_leader(validated(batch), leader_epoch=0)
            sequences[producer_id] = sequence + count
        log.high_watermark = log.log_end_offset
        if i == 50:
            print("ready", flush=True)
        i += 1
    """
)


def test_a_transactional_writer_killed_at_random_recovers_the_index_its_segments_make(tmp_path, open_log):
    """Whatever a SIGKILL cuts, recovery leaves the .txnindex files a follower appending the surviving batches
    writes, and producer 100's transaction open from its first offset; the second time the indexes are
    lost as well (as if they never reached the disk) and recovery writes them again."""
    for attempt in range(2):
        name = f"killed-{attempt}"
        child = subprocess.Popen([sys.executable, "-c", TRANSACTIONAL_WRITER, str(tmp_path / name)], stdout=subprocess.PIPE)
        assert child.stdout.readline().strip() == b"ready"
        time.sleep(0.2 + random.random() * 0.3)
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        if attempt == 1:
            for path in (tmp_path / name).glob("*.txnindex"):
                path.unlink()
        recovered = open_log({"segment.bytes": "20000"}, name=name, recovery_point=0)
        recovered.high_watermark = recovered.log_end_offset
        assert len(recovered.segments) > 1

        replica = open_log({"segment.bytes": "20000"}, name=f"replica-{attempt}")
        for segment in recovered.segments:
            data = segment.log.read(0, segment.size)
            for position, _, size in iter_batch_positions(data):  # one append each, as the writer's
                replica.append_as_follower(data[position : position + size])
            replica.roll()
        replica.high_watermark = replica.log_end_offset
        indexes = {path.name: path.read_bytes() for path in recovered.dir.glob("*.txnindex")}
        assert indexes and indexes == {path.name: path.read_bytes() for path in replica.dir.glob("*.txnindex")}
        assert recovered.last_stable_offset == replica.last_stable_offset == 0  # producer 100's first batch
