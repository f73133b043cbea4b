"""A partition leader's check of a transactional produce against the transaction coordinator (KIP-890 part 1,
Kafka 3.9's ``transaction.partition.verification.enable``).

Before the first transactional batch of a producer's transaction is appended to a partition, the leader
asks the coordinator (AddPartitionsToTxn, verify-only) whether the partition was added to the producer's
transaction. A write that arrives late, after its transaction was aborted, is so refused instead of opening
a transaction nobody will ever end ("hanging"). Once the partition's producer state shows the producer's
transaction open there, its later batches need no check (Kafka's VerificationGuard shortcut).

Answers as Kafka's ReplicaManager gives them to a producer: a partition not in the transaction is
INVALID_TXN_STATE (TRANSACTION_ABORTABLE for Produce v11+, whose clients know it); a coordinator that cannot
answer yet (CONCURRENT_TRANSACTIONS, loading) is NOT_ENOUGH_REPLICAS, which producers retry. Only a
transactional id this broker coordinates is verified: another broker's coordinator would be asked over the
inter-broker client, which cluster mode has not brought yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import BatchHeader

if TYPE_CHECKING:
    from odradek.broker.partition import Partition
    from odradek.broker.transaction_coordinator import TransactionCoordinator

ABORTABLE_KNOWN_SINCE_PRODUCE = 11

_RETRIABLE = {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


@dataclass
class TransactionVerifier:
    coordinator: "TransactionCoordinator"

    def verify(self, transactional_id: str, partition: "Partition", headers: Iterable[tuple[int, BatchHeader]], produce_version: int) -> None:
        """Raise the produce error for ``partition`` unless its transactional batches may be appended."""
        producers = {(h.producer_id, h.producer_epoch) for _, h in headers if h.is_transactional and h.producer_id >= 0}
        if not producers:
            return
        if len(producers) > 1:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING, "Transactional records contained more than one producer ID")
        [(producer_id, producer_epoch)] = producers
        error = self.error_for(transactional_id, partition, producer_id, producer_epoch, abortable_known=produce_version >= ABORTABLE_KNOWN_SINCE_PRODUCE)
        if error == ErrorCode.INVALID_TXN_STATE:
            raise KafkaError(error, "Partition was not added to the transaction")
        if error in _RETRIABLE:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, f"Unable to verify the partition has been added to the transaction. Underlying error: {error.name}")
        if error != ErrorCode.NONE:
            raise KafkaError(error)

    def error_for(self, transactional_id: str, partition: "Partition", producer_id: int, producer_epoch: int, *, abortable_known: bool) -> ErrorCode:
        """The coordinator's verdict on the producer writing to ``partition`` in its transaction (NONE at once
        when the producer's transaction is already open there); TxnOffsetCommit asks it too."""
        entry = partition.log.producer_state.last_entry(producer_id)
        if entry is not None and entry.current_txn_first_offset is not None:
            return ErrorCode.NONE  # its transaction is open here: verified when it began
        [error] = self.coordinator.verify_for_append(transactional_id, producer_id, producer_epoch, [(partition.topic, partition.index)], abortable_known=abortable_known).values()
        if error == ErrorCode.NOT_COORDINATOR:
            # Another broker coordinates the transactional id; asking it needs the inter-broker client
            # (cluster mode), which is not there yet: the write goes unverified rather than refused forever.
            return ErrorCode.NONE
        return error
