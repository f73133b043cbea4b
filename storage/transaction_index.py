"""The transaction index (``<base offset>.txnindex``): the aborted transactions whose data a segment holds.

Kafka appends an entry when an abort marker is written: version (int16, 0), producer id (int64), the
transaction's first and last offsets and the log's last stable offset when it ended (int64 each). A
READ_COMMITTED fetch answers the aborted transactions overlapping the fetched range, from which the
consumer drops their records. odradek writes no transactions yet, so it only reads the indexes a Kafka
broker left in the segments (``tools/dump_log.py`` prints the same files): it neither appends to them nor
truncates them with their segment, and its log cleaner does not carry them into cleaned segments.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

ENTRY = struct.Struct(">hqqqq")
CURRENT_VERSION = 0


class CorruptTransactionIndexError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def read_transaction_index(path: Path) -> list[AbortedTxn]:
    """The entries in file order; none when the file does not exist (Kafka creates the index lazily)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    entries = []
    for position in range(0, len(data) - ENTRY.size + 1, ENTRY.size):
        version, producer_id, first_offset, last_offset, last_stable_offset = ENTRY.unpack_from(data, position)
        if version > CURRENT_VERSION:
            raise CorruptTransactionIndexError(f"Unexpected aborted transaction version {version} in transaction index {path}, current version is {CURRENT_VERSION}")
        entries.append(AbortedTxn(producer_id, first_offset, last_offset, last_stable_offset))
    return entries


def collect_aborted_txns(entries: list[AbortedTxn], fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
    """Kafka's TransactionIndex.collectAbortedTxns: the entries overlapping [fetch offset, upper bound), and
    whether the search is complete (an entry ended at or past the bound, so later segments hold none)."""
    found = []
    for txn in entries:
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
            found.append(txn)
        if txn.last_stable_offset >= upper_bound_offset:
            return found, True
    return found, False
