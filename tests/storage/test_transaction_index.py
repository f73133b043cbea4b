"""Aborted transactions from ``.txnindex`` files, as a READ_COMMITTED read answers them.

These files are written here in Kafka's format, as a Kafka broker leaves them (34-byte entries: version,
producer id, first offset, last offset, last stable offset); tests/storage/test_transactions.py has the log
write them. Which entries a read answers
follows Kafka's LocalLog.addAbortedTransactions; tests/e2e/test_log_dir_interop.py compares the answers
with a real Kafka's on a directory it wrote.
"""

from __future__ import annotations

import struct

import pytest

from odradek.storage.transaction_index import CorruptTransactionIndexError, read_transaction_index
from tests.validated import validated


def txn_index(*entries: tuple[int, int, int, int], version: int = 0) -> bytes:
    return b"".join(struct.pack(">hqqqq", version, *entry) for entry in entries)


@pytest.fixture
def log_of_batches(open_log, make_batch):
    """Batches of 10 records (offsets 0-9, 10-19, ...), each larger than index.interval.bytes, so every batch
    after the first gets an offset index entry: (19, position of batch 10-19), (29, ...), ..."""
    log = open_log({"segment.bytes": "100000", "index.interval.bytes": "300"})
    for _ in range(6):
        log.append_as_leader(validated(make_batch(10, value_size=30)), leader_epoch=1)
    log.high_watermark = log.log_end_offset
    return log


def aborted_in_read(log, offset: int) -> list[tuple[int, int]]:
    """The (producer id, first offset) pairs a READ_COMMITTED read of one batch from ``offset`` answers."""
    info = log.read(offset, 1, log.high_watermark)
    return [(txn.producer_id, txn.first_offset) for txn in log.aborted_transactions(offset, info)]


def test_a_missing_index_holds_no_aborted_transactions(tmp_path):
    assert read_transaction_index(tmp_path / "00000000000000000000.txnindex") == []


def test_an_entry_of_an_unknown_version_is_refused(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(txn_index((5, 0, 1, 2), version=1))
    with pytest.raises(CorruptTransactionIndexError, match="version 1"):
        read_transaction_index(path)


def test_a_read_answers_the_aborted_transactions_overlapping_it_up_to_the_next_index_entry(log_of_batches):
    log = log_of_batches
    (log.dir / "00000000000000000000.txnindex").write_bytes(txn_index((1, 5, 14, 15), (2, 25, 26, 27), (3, 45, 46, 47)))

    # the batch 0-9 ends where the first index entry points: as Kafka's search never compares its first slot,
    # the bound is the second entry's offset (29), so the transaction starting at 25 is answered too
    assert aborted_in_read(log, 0) == [(1, 5), (2, 25)]
    assert aborted_in_read(log, 10) == [(1, 5), (2, 25)]  # bound 29: the entry at the end of batch 10-19
    assert aborted_in_read(log, 20) == [(2, 25)]  # bound 39
    assert aborted_in_read(log, 30) == [(3, 45)]  # bound 49, which the transaction at 45 starts before
    assert aborted_in_read(log, 50) == []  # no entry past the log's end: bound 60, the log end offset
