"""What the log cleaner knows about transactions while it walks a log (Kafka's CleanedTransactionMetadata).

Fed the aborted transactions of the range being cleaned (from the transaction indexes) and then every
batch in offset order, it tells the cleaner which batches it may discard: data of an aborted transaction,
and a marker whose transaction left no data behind (an ABORT once its data is gone, a COMMIT whose data
the walk never met). A retained ABORT marker writes its transaction's entry into the cleaned segment's
transaction index, so READ_COMMITTED fetches keep skipping the aborted records the cleaner had to keep.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from odradek.protocol.record_batch import BatchHeader
from odradek.protocol.records import ControlRecordType, iter_records, parse_control_record_type
from odradek.storage.transaction_index import AbortedTxn, TransactionIndex


@dataclass
class _AbortedTransaction:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None
    """The last batch of the transaction the walk met: its marker must stay while such a batch may."""


@dataclass
class CleanedTransactionMetadata:
    cleaned_index: TransactionIndex | None = None
    """The transaction index of the segment being written, for the aborted transactions whose marker stays."""
    _aborted: list[tuple[int, int, AbortedTxn]] = field(default_factory=list)
    """A heap of (first offset, tie-break, transaction), the aborted transactions not reached yet."""
    _ongoing_aborted: dict[int, _AbortedTransaction] = field(default_factory=dict)
    _ongoing_committed: set[int] = field(default_factory=set)

    def add_aborted_transactions(self, txns: list[AbortedTxn]) -> None:
        for txn in txns:
            heapq.heappush(self._aborted, (txn.first_offset, id(txn), txn))

    def on_control_batch_read(self, header: BatchHeader, batch: bytes | bytearray | memoryview) -> bool:
        """A marker the walk reached; True if it may be discarded (its transaction left nothing to mark)."""
        self._consume_aborted_txns_up_to(header.last_offset)
        record = next(iter_records(batch), None)
        if record is None:
            return True  # an empty control batch was cleaned before
        control_type = parse_control_record_type(record.key)
        if control_type is ControlRecordType.ABORT:
            aborted = self._ongoing_aborted.pop(header.producer_id, None)
            if aborted is not None and aborted.last_observed_batch_offset is not None:
                # Kept until every batch of the transaction is gone: one may be kept as its producer's last.
                if self.cleaned_index is not None:
                    self.cleaned_index.append(aborted.txn)
                return False
            return True
        if control_type is ControlRecordType.COMMIT:
            if header.producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(header.producer_id)
                return False
            return True
        return False

    def on_batch_read(self, header: BatchHeader) -> bool:
        """A data batch the walk reached; True if it belongs to an aborted transaction (it may be discarded)."""
        self._consume_aborted_txns_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(header.producer_id)
        if aborted is not None:
            aborted.last_observed_batch_offset = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def _consume_aborted_txns_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            _, _, txn = heapq.heappop(self._aborted)
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTransaction(txn))
