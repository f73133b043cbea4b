"""Idempotent-producer state per partition (Kafka's ProducerStateManager), and its ``.snapshot`` files.

For each producer id the log remembers the epoch, the sequence range and offsets of its last 5 batches,
and whether it has a transaction open. Produce requests are checked against it *before* anything is
written: a fenced epoch is INVALID_PRODUCER_EPOCH, a gap in sequences OUT_OF_ORDER_SEQUENCE_NUMBER, and a
retry of one of the last 5 batches is recognised as a duplicate and answered with the original offsets.

Transactions: a producer's first transactional batch opens its transaction (its first offset is kept
until a COMMIT or ABORT marker ends it); markers of an older coordinator epoch are fenced
(TRANSACTION_COORDINATOR_FENCED). An ended transaction holds the last stable offset until its marker is
below the high watermark, and an aborted one is written to the transaction index with the last stable
offset it leaves (Kafka's ``lastStableOffset(completedTxn)``).

The state is rebuilt from batch headers (producer id, epoch and sequences live in the header; a marker's
one record is read for its type and coordinator epoch) and saved as ``<offset>.snapshot`` files in Kafka's
binary format (version 1, which keeps each open transaction's first offset), so a restart replays at most
the data after the latest snapshot.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import BatchHeader, crc32c
from odradek.protocol.values import CodeEnum, Fields, FrozenFields
from odradek.storage.checkpoints import fsync_file, write_atomically
from odradek.storage.hash_map_order import HashMapOrder

if TYPE_CHECKING:
    from odradek.storage.transaction_index import TransactionIndex
    from odradek.protocol.records import EndTransactionMarker

log = logging.getLogger("odradek.storage")

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
INT32_MAX = 2**31 - 1

_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc (of everything after it), entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
# producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coordinator_epoch, current_txn_first_offset


class AppendOrigin(CodeEnum):
    """Who is appending: clients get full sequence checks, replication gets none (the leader did them)."""

    CLIENT = 0
    COORDINATOR = 1
    REPLICATION = 2


class CorruptSnapshotError(Exception):
    pass


def read_end_txn_marker(batch: bytes | bytearray | memoryview) -> EndTransactionMarker | None:
    """The COMMIT or ABORT a transactional control batch carries; None for a batch the cleaner emptied. (The
    record codec is imported here, at the first control batch: a log without transactions never needs it.)"""
    from odradek.protocol.records import EndTransactionMarker, iter_records

    for record in iter_records(batch):
        return EndTransactionMarker.from_record(record)
    return None


class CompletedTxn(FrozenFields):
    """A transaction a marker just ended (Kafka's CompletedTxn): its first offset and the marker's offset."""

    __slots__ = _FIELDS = ("producer_id", "first_offset", "last_offset", "is_aborted")
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool

    def __init__(self, producer_id: int, first_offset: int, last_offset: int, is_aborted: bool) -> None:
        self._set(producer_id, first_offset, last_offset, is_aborted)


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Sequences wrap from Int32 max back to 0."""
    return (sequence - decrement) % (INT32_MAX + 1)


class BatchMetadata(Fields):
    """One of the last batches a producer appended: what a retry of it is recognised by and answered with."""

    __slots__ = _FIELDS = ("last_seq", "last_offset", "offset_delta", "timestamp")

    def __init__(self, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.last_seq = last_seq
        self.last_offset = last_offset
        self.offset_delta = offset_delta
        self.timestamp = timestamp

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = -1,
        last_timestamp: int = -1,
        current_txn_first_offset: int | None = None,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def with_no_batches(self) -> ProducerStateEntry:
        """The scratch entry an append validates against: same epoch and transaction, no batches yet."""
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch, self.last_timestamp, self.current_txn_first_offset)

    def maybe_update_producer_epoch(self, epoch: int) -> None:
        if self.producer_epoch != epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, next_entry: ProducerStateEntry) -> None:
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.last_timestamp = next_entry.last_timestamp
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.batches.extend(next_entry.batches)

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        """One of the retained batches with exactly this epoch and sequence range: a producer retry."""
        if header.producer_epoch != self.producer_epoch:
            return None
        last_seq = header.last_sequence
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == last_seq:
                return batch
        return None


class ProducerAppendInfo:
    """The validation and pending update of one producer's batches within one append (Kafka's ProducerAppendInfo)."""

    def __init__(self, producer_id: int, current: ProducerStateEntry, origin: AppendOrigin) -> None:
        self.producer_id = producer_id
        self.current = current
        self.origin = origin
        self.updated = current.with_no_batches()
        self.started_transactions: list[int] = []

    def append(self, header: BatchHeader, marker: EndTransactionMarker | None = None) -> CompletedTxn | None:
        """Validate and record one batch whose offsets are final (raises KafkaError when the producer may not
        write it). A control batch carries ``marker`` (its COMMIT or ABORT; None once the cleaner emptied it,
        which changes nothing) and ends the producer's open transaction, which it returns."""
        if header.is_control:
            return self._append_end_txn_marker(header, marker) if marker is not None else None
        first_offset = header.base_offset
        last_offset = header.base_offset + header.last_offset_delta
        self._check_producer_epoch(header.producer_epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(header.producer_epoch, header.base_sequence, first_offset)
        self.updated.add_batch(header.producer_epoch, header.last_sequence, last_offset, last_offset - first_offset, header.max_timestamp)
        if self.updated.current_txn_first_offset is not None and not header.is_transactional:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"Expected transactional write from producer {self.producer_id} at offset {first_offset}",
            )
        if self.updated.current_txn_first_offset is None and header.is_transactional:
            self.updated.current_txn_first_offset = first_offset
            self.started_transactions.append(first_offset)
        return None

    def _append_end_txn_marker(self, header: BatchHeader, marker: EndTransactionMarker) -> CompletedTxn | None:
        """Kafka's appendEndTxnMarker: only a transaction that wrote data completes (a marker for an empty one
        changes neither the last stable offset nor the transaction index)."""
        self._check_producer_epoch(header.producer_epoch, header.base_offset)
        if self.updated.coordinator_epoch > marker.coordinator_epoch:
            message = (
                f"Invalid coordinator epoch for producerId {self.producer_id} at offset {header.base_offset}: "
                f"{marker.coordinator_epoch} (zombie), {self.updated.coordinator_epoch} (current)"
            )
            if self.origin is not AppendOrigin.REPLICATION:
                raise KafkaError(ErrorCode.TRANSACTION_COORDINATOR_FENCED, message)
            log.info(message)
        first_offset = self.updated.current_txn_first_offset
        completed = None
        if first_offset is not None:
            from odradek.protocol.records import ControlRecordType  # loaded with the marker it read

            completed = CompletedTxn(self.producer_id, first_offset, header.base_offset, marker.control_type is ControlRecordType.ABORT)
        self.updated.maybe_update_producer_epoch(header.producer_epoch)
        self.updated.current_txn_first_offset = None
        self.updated.coordinator_epoch = marker.coordinator_epoch
        self.updated.last_timestamp = header.max_timestamp
        return completed

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch:
            message = (
                f"Epoch of producer {self.producer_id} at offset {offset} is {epoch}, which is smaller than the last "
                f"seen epoch {self.updated.producer_epoch}"
            )
            if self.origin is AppendOrigin.REPLICATION:
                log.warning(message)
            else:
                raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH, message)

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        """Kafka 3.9's ProducerAppendInfo.checkSequence: a bumped epoch must restart at 0; the same epoch must
        continue right after the last sequence (wrapping at Int32 max); an unknown producer may start anywhere
        (its earlier state may have been removed by retention)."""
        if epoch != self.updated.producer_epoch:
            if first_seq != 0 and self.updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at offset {offset}: "
                    f"{epoch} (request epoch), {first_seq} (seq. number), {self.updated.producer_epoch} (current producer epoch)",
                )
            return
        if not self.updated.is_empty:
            current_last_seq = self.updated.last_seq
        elif epoch == self.current.producer_epoch:
            current_last_seq = self.current.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        in_sequence = first_seq == current_last_seq + 1 or (first_seq == 0 and current_last_seq == INT32_MAX)
        if not (self.current.producer_epoch == NO_PRODUCER_EPOCH or in_sequence):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for producer {self.producer_id} at offset {offset}: {first_seq} "
                f"(incoming seq. number), {current_last_seq} (current end sequence number)",
            )


class ProducerStateManager:
    def __init__(self, dir: Path, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.dir = dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        """By producer id, in the order the ids went in; change it only through ``_put``, ``_remove`` and
        ``_clear``, which keep ``_order`` (Kafka's HashMap of them) in step."""
        self._order = HashMapOrder()
        self.ongoing_txns: dict[int, int] = {}
        """First offset of each open transaction -> its producer id (the last stable offset is the smallest)."""
        self.unreplicated_txns: dict[int, int] = {}
        """First offset -> marker offset of each transaction whose marker is not yet below the high watermark:
        it holds the last stable offset back as an open one does (Kafka's unreplicatedTxns)."""
        self.map_end_offset = 0
        self._last_snap_offset = 0
        self._snapshots = sorted(_snapshot_offsets(dir))
        self._unflushed: set[int] = set()

    # -- validation and update ------------------------------------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def active_producers(self) -> list[tuple[int, ProducerStateEntry]]:
        """The producers in the order Kafka's ``activeProducers`` map iterates, which DescribeProducers shows
        and snapshots are written in."""
        return self._order.iteration_order(self.producers.items())

    def _put(self, entry: ProducerStateEntry) -> None:
        new = entry.producer_id not in self.producers
        self.producers[entry.producer_id] = entry
        if new:
            self._order.put(entry.producer_id, self.producers)

    def _remove(self, producer_id: int) -> None:
        del self.producers[producer_id]
        self._order.remove(producer_id)

    def _clear(self) -> None:
        self.producers.clear()
        self._order.clear()

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(producer_id, current, origin)

    def update(self, append_info: ProducerAppendInfo) -> None:
        current = self.producers.get(append_info.producer_id)
        if current is None:
            self._put(append_info.updated)
        else:
            current.update(append_info.updated)
        for first_offset in append_info.started_transactions:
            self.ongoing_txns[first_offset] = append_info.producer_id

    def complete_txn(self, completed: CompletedTxn, txn_index: TransactionIndex | None = None) -> None:
        """End a transaction after its producer's ``update``: an aborted one goes into ``txn_index`` (the
        segment holding its marker) with the last stable offset it leaves, as Kafka's append and recovery do;
        replay passes no index (the segments already hold their entries)."""
        if txn_index is not None and completed.is_aborted:
            from odradek.storage.transaction_index import AbortedTxn  # imported with the index itself

            txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, self.last_stable_offset_after(completed)))
        if self.ongoing_txns.pop(completed.first_offset, None) is None:
            raise ValueError(f"Attempted to complete transaction {completed} on partition {self.dir.name} which was not started")
        self.unreplicated_txns[completed.first_offset] = completed.last_offset

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """Kafka's lastStableOffset(completedTxn): the first offset of the earliest other open transaction, or
        the offset after the marker."""
        others = [first for first, producer_id in self.ongoing_txns.items() if producer_id != completed.producer_id]
        return min(others, default=completed.last_offset + 1)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker is below the high watermark no longer hold the last stable offset."""
        if self.unreplicated_txns:
            self.unreplicated_txns = {first: last for first, last in self.unreplicated_txns.items() if last >= high_watermark}

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open or unreplicated transaction (Kafka's firstUnstableOffset)."""
        if not self.ongoing_txns and not self.unreplicated_txns:
            return None  # the usual case, asked by every fetch: no tuple made
        return min((*self.ongoing_txns, *self.unreplicated_txns), default=None)

    def apply_batch(self, header: BatchHeader, marker: EndTransactionMarker | None = None) -> CompletedTxn | None:
        """Replay one stored batch (log load, recovery): no sequence checks, epochs only warned about. A
        transaction it ends is returned, for the caller to ``complete_txn``."""
        completed = None
        if header.producer_id >= 0:
            info = self.prepare_update(header.producer_id, AppendOrigin.REPLICATION)
            completed = info.append(header, marker)
            self.update(info)
        self.map_end_offset = header.base_offset + header.last_offset_delta + 1
        return completed

    def remove_expired_producers(self, now_ms: int) -> None:
        expired = [
            producer_id
            for producer_id, entry in self.producers.items()
            if entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        ]
        for producer_id in expired:
            self._remove(producer_id)

    # -- snapshots -------------------------------------------------------------------------------------------------

    def reload_snapshots(self) -> None:
        """List the snapshot files again: another manager of the same directory (recovery's) changed them."""
        self._snapshots = sorted(_snapshot_offsets(self.dir))
        self._unflushed &= set(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    def take_snapshot(self, sync: bool = True) -> None:
        """Write ``<map end offset>.snapshot`` unless one at this offset already exists. Without ``sync`` it
        is fsynced by the next ``flush_snapshots`` (with the segment it follows)."""
        if self.map_end_offset > self._last_snap_offset:
            write_snapshot(_snapshot_path(self.dir, self.map_end_offset), [entry for _, entry in self.active_producers()], sync=sync)
            if not sync:
                self._unflushed.add(self.map_end_offset)
            if self.map_end_offset not in self._snapshots:
                self._snapshots.append(self.map_end_offset)
                self._snapshots.sort()
            self._last_snap_offset = self.map_end_offset

    def flush_snapshots(self, up_to: int) -> None:
        for offset in sorted(o for o in self._unflushed if o <= up_to):
            fsync_file(_snapshot_path(self.dir, offset))
            self._unflushed.discard(offset)

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Drop snapshots outside (log start, log end] and, if the state is not at the log end, reload the
        latest remaining snapshot; the caller then replays the log from ``map_end_offset``."""
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self.remove_snapshot(offset)
        if log_end_offset != self.map_end_offset:
            self._clear()
            self.ongoing_txns.clear()
            self.unreplicated_txns.clear()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self._snapshots:
            offset = self._snapshots[-1]
            try:
                entries = read_snapshot(_snapshot_path(self.dir, offset))
            except (CorruptSnapshotError, OSError) as exc:
                log.warning("Failed to load producer snapshot %s: %s", _snapshot_path(self.dir, offset), exc)
                self.remove_snapshot(offset)
                continue
            for entry in entries:
                if entry.current_txn_first_offset is not None or now_ms - entry.last_timestamp < self.producer_id_expiration_ms:
                    self._put(entry)
                    if entry.current_txn_first_offset is not None:
                        self.ongoing_txns[entry.current_txn_first_offset] = entry.producer_id
            self.map_end_offset = self._last_snap_offset = offset
            return
        self.map_end_offset = self._last_snap_offset = log_start_offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self.on_high_watermark_updated(log_start_offset)
        if self.map_end_offset < log_start_offset:
            self.map_end_offset = log_start_offset
        self._last_snap_offset = self._snapshots[-1] if self._snapshots else log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        for snapshot in list(self._snapshots):
            self.remove_snapshot(snapshot)
        self._last_snap_offset = 0
        self.map_end_offset = offset

    def remove_snapshot(self, offset: int) -> None:
        self._unflushed.discard(offset)
        if offset in self._snapshots:
            self._snapshots.remove(offset)
        try:
            _snapshot_path(self.dir, offset).unlink()
        except FileNotFoundError:
            pass


def _snapshot_path(dir: Path, offset: int) -> Path:
    return dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def _snapshot_offsets(dir: Path) -> list[int]:
    offsets: list[int] = []
    try:
        names = os.listdir(dir)
    except FileNotFoundError:
        return offsets
    for name in names:
        stem, dot, suffix = name.partition(".")
        if "." + suffix == SNAPSHOT_SUFFIX and stem.isdigit():
            offsets.append(int(stem))
    return offsets


def write_snapshot(path: Path, entries: object, *, sync: bool = True) -> None:
    body = bytearray()
    count = 0
    for entry in entries:  # type: ignore[attr-defined]
        assert isinstance(entry, ProducerStateEntry)
        body += _SNAPSHOT_ENTRY.pack(
            entry.producer_id,
            entry.producer_epoch,
            entry.last_seq,
            entry.last_data_offset,
            entry.last_offset_delta,
            entry.last_timestamp,
            entry.coordinator_epoch,
            -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
        )
        count += 1
    entries_part = struct.pack(">i", count) + bytes(body)
    write_atomically(path, struct.pack(">hI", SNAPSHOT_VERSION, crc32c(entries_part)) + entries_part, sync=sync)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    data = path.read_bytes()
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"Snapshot {path} is too short")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    if crc32c(memoryview(data)[6:]) != crc:
        raise CorruptSnapshotError("Snapshot is corrupt (CRC is no longer valid)")
    if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"Snapshot {path} has a wrong length for {count} entries")
    entries = []
    for pid, epoch, seq, offset, delta, timestamp, coordinator_epoch, txn_first in _SNAPSHOT_ENTRY.iter_unpack(data[_SNAPSHOT_HEADER.size:]):
        entry = ProducerStateEntry(pid, epoch, coordinator_epoch, timestamp, txn_first if txn_first >= 0 else None)
        if offset >= 0:
            entry.batches.append(BatchMetadata(seq, offset, delta, timestamp))
        entries.append(entry)
    return entries
