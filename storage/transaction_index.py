"""The transaction index (``<base offset>.txnindex``): the aborted transactions whose abort marker a segment holds.

Kafka's TransactionIndex. An entry is appended when an abort marker is written (or found again by
recovery): version (int16, 0), producer id (int64), the transaction's first offset and last offset (its
marker's), and the log's last stable offset once it ended (int64 each). A READ_COMMITTED fetch answers the
aborted transactions overlapping the fetched range, from which the consumer drops their records. As in
Kafka the file is created by the first append only, so most segments have none.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from odradek.protocol.values import TupleFields
from odradek.storage.indexes import CorruptTransactionIndexError

ENTRY = struct.Struct(">hqqqq")
CURRENT_VERSION = 0


class AbortedTxn(TupleFields):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return ENTRY.pack(CURRENT_VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


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


class TransactionIndex:
    """One segment's ``.txnindex``: its entries are read once, on first use, and kept; appends and truncations
    change the file and the list together (under the log's lock). Readers (fetches, without the lock) see a
    list that is only ever appended to or replaced whole."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None
        self._fd = -1

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = read_transaction_index(self.path)
        return self._entries

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        return collect_aborted_txns(self.entries, fetch_offset, upper_bound_offset)

    def append(self, txn: AbortedTxn) -> None:
        """Kafka refuses an entry whose last offset does not follow the last one's."""
        entries = self.entries
        if entries and entries[-1].last_offset >= txn.last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but {txn.last_offset} is not "
                f"greater than current last offset {entries[-1].last_offset} of index {self.path}"
            )
        data = txn.to_bytes()
        fd = self._open()
        position = len(entries) * ENTRY.size
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], position + written)
        entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of transactions ending at or after ``offset`` (their marker is being truncated)."""
        entries = self.entries
        keep = next((i for i, txn in enumerate(entries) if txn.last_offset >= offset), len(entries))
        if keep < len(entries):
            self._cut(keep)

    def reset(self) -> None:
        """Empty the index (recovery rebuilds it)."""
        self._entries = self._entries if self._entries is not None else []
        if self._entries or self.path.exists():
            self._cut(0)

    def _cut(self, count: int) -> None:
        os.ftruncate(self._open(), count * ENTRY.size)
        self._entries = self.entries[:count]

    def _open(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        return self._fd

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    def rename(self, path: Path) -> None:
        """The file was renamed (a suffix change); an open descriptor keeps working."""
        self.path = path

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()
