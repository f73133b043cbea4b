"""A partition leader's check of a transactional produce against the transaction coordinator (KIP-890 part 1,
Kafka 3.9's ``transaction.partition.verification.enable``).

Before the first transactional batch of a producer's transaction is appended to a partition, the leader
asks the coordinator (AddPartitionsToTxn, verify-only) whether the partition was added to the producer's
transaction. A write that arrives late, after its transaction was aborted, is so refused instead of opening
a transaction nobody will ever end ("hanging"). Once the partition's producer state shows the producer's
transaction open there, its later batches need no check (Kafka's VerificationGuard shortcut).

When this broker coordinates the transactional id, its coordinator answers at once. Otherwise the check
raises :class:`AskCoordinator`: the append waits (holding its turn on the partition) while
:class:`AddPartitionsToTxnVerify` asks the coordinator -- the leader of the id's ``__transaction_state``
partition -- in an AddPartitionsToTxn v4+ request, verify-only, the transactions for one coordinator batched
into one request (Kafka's ``AddPartitionsToTxnManager``), then checks again with the answer.

Answers as Kafka's ReplicaManager gives them to a producer: a partition not in the transaction is
INVALID_TXN_STATE (TRANSACTION_ABORTABLE for Produce v11+, whose clients know it); a coordinator that cannot
answer yet (CONCURRENT_TRANSACTIONS, loading, moved, unreachable) is NOT_ENOUGH_REPLICAS, which producers
retry. A coordinator that does not know AddPartitionsToTxn v4 lets the write through unverified, as Kafka.

Transactions v2 (KIP-890 part 2): a client that sends Produce v12+ or TxnOffsetCommit v5+ never sends
AddPartitionsToTxn (or AddOffsetsToTxn). The leader adds the partition to the transaction itself: the same
request, not verify-only, which makes the transaction a v2 one (Kafka's ``TransactionSupportedOperation``
ADD_PARTITION). That is done whatever ``transaction.partition.verification.enable`` says, as in Kafka:
nothing else would put the partition in the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable


from odradek.broker.coordinator.coordinators import AskCoordinator
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.network.inter_broker_send import InterBrokerSender
from odradek.broker.network.kafka_client import UnsupportedVersionError
from odradek.broker.coordinator.transaction.transaction_coordinator import TRANSACTION_STATE_TOPIC
from odradek.broker.coordinator.transaction.transaction_metadata import TV_2
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import BatchHeader
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.broker.replication.partition import Partition
    from odradek.broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
    from odradek.controller.metadata_image import MetadataImage

ABORTABLE_KNOWN_SINCE_PRODUCE = 11
ADDS_PARTITION_SINCE_PRODUCE = 12
ADDS_PARTITION_SINCE_TXN_OFFSET_COMMIT = 5
VERIFY_SINCE = 4
"""AddPartitionsToTxn carries batches of transactions, and verify-only, from v4."""

_RETRIABLE = {
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
}


@dataclass(frozen=True)
class Verification:
    """One transaction's partitions to verify with its coordinator."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]
    abortable_known: bool
    add: bool = False
    """Add the partitions (a transactions v2 client's first write there) rather than only verify them."""


class AddPartitionsToTxnVerify:
    """The verify-only AddPartitionsToTxn a leader sends to a coordinator, one entry per transaction: the
    partitions of verifications of one producer's transaction go together; verifications of one
    transactional id for another producer id or epoch wait for the next request (the answer is keyed by
    the transactional id)."""

    api_key = ApiKey.AddPartitionsToTxn

    def body(self, items: list[Verification], version: int) -> dict[str, Any]:
        if version < VERIFY_SINCE:
            raise UnsupportedVersionError(f"AddPartitionsToTxn v{version} cannot verify")
        transactions: dict[str, tuple[Verification, set[TopicPartition]]] = {}
        for item in items:
            transactions.setdefault(item.transactional_id, (item, set()))[1].update(item.partitions)
        entries = []
        for item, partitions in transactions.values():
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(partitions):
                by_topic.setdefault(topic, []).append(index)
            entries.append({
                "transactional_id": item.transactional_id, "producer_id": item.producer_id, "producer_epoch": item.producer_epoch,
                "verify_only": not item.add, "topics": [{"name": name, "partitions": indexes} for name, indexes in by_topic.items()],
            })
        return {"transactions": entries}

    def results(self, items: list[Verification], response: Any, version: int) -> list[ErrorCode]:
        if response.error_code != ErrorCode.NONE:
            # A client is never shown CLUSTER_AUTHORIZATION_FAILED: the partition was not verified.
            error = ErrorCode.INVALID_TXN_STATE if response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else ErrorCode.for_code(response.error_code)
            return [error] * len(items)
        by_id = {
            r.transactional_id: {(t.name, p.partition_index): ErrorCode.for_code(p.partition_error_code) for t in r.topic_results for p in t.results_by_partition}
            for r in response.results_by_transaction
        }
        return [self._verdict(item, by_id.get(item.transactional_id)) for item in items]

    @staticmethod
    def _verdict(item: Verification, errors: dict[TopicPartition, ErrorCode] | None) -> ErrorCode:
        """The first error of the item's partitions, as a producer is told it (PRODUCER_FENCED is
        INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE is INVALID_TXN_STATE for a client too old to know it).
        A transaction the answer leaves out was not verified: the producer retries; a partition left out of
        a transaction's answer had no error (Kafka's manager reads only the errors)."""
        if errors is None:
            return ErrorCode.NETWORK_EXCEPTION
        failed = [e for tp, e in sorted(errors.items()) if tp in item.partitions and e != ErrorCode.NONE]
        if not failed:
            return ErrorCode.NONE
        error = failed[0]
        if error == ErrorCode.PRODUCER_FENCED:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if error == ErrorCode.TRANSACTION_ABORTABLE and not item.abortable_known:
            return ErrorCode.INVALID_TXN_STATE
        return error

    def failed(self, item: Verification, reason: Exception) -> ErrorCode:
        if isinstance(reason, UnsupportedVersionError):
            return ErrorCode.NONE  # the coordinator cannot verify: the produce goes on, as Kafka lets it
        return ErrorCode.NETWORK_EXCEPTION

    def conflicts(self, queued: Verification, item: Verification) -> bool:
        return queued.transactional_id == item.transactional_id and (queued.producer_id, queued.producer_epoch, queued.add) != (item.producer_id, item.producer_epoch, item.add)


def _as_producer_error(error: ErrorCode) -> ErrorCode:
    """The coordinator's answer to an add as a producer is told it (Kafka's AddPartitionsToTxnManager)."""
    return ErrorCode.INVALID_PRODUCER_EPOCH if error == ErrorCode.PRODUCER_FENCED else error


@dataclass
class TransactionVerifier:
    coordinator: "TransactionCoordinator"
    metadata: Callable[[], "MetadataImage"]
    remote: InterBrokerSender[Verification, ErrorCode]
    """How another broker's coordinator is asked."""
    verification_enabled: bool = True
    """``transaction.partition.verification.enable``: verify a v1 client's writes (v2's are always added)."""

    def verify(self, transactional_id: str, partition: "Partition", headers: Iterable[tuple[int, BatchHeader]], produce_version: int, verdict: ErrorCode | None = None) -> None:
        """Raise the produce error for ``partition`` unless its transactional batches may be appended;
        :class:`AskCoordinator` when another broker's coordinator must be asked first (then call again with
        its ``verdict``)."""
        producers = {(h.producer_id, h.producer_epoch) for _, h in headers if h.is_transactional and h.producer_id >= 0}
        if not producers:
            return
        if len(producers) > 1:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING, "Transactional records contained more than one producer ID")
        [(producer_id, producer_epoch)] = producers
        add = produce_version >= ADDS_PARTITION_SINCE_PRODUCE
        if not add and not self.verification_enabled:
            return
        error = verdict if verdict is not None else self.error_for(transactional_id, partition, producer_id, producer_epoch, abortable_known=produce_version >= ABORTABLE_KNOWN_SINCE_PRODUCE, add=add)
        if isinstance(error, AskCoordinator):
            raise error
        if error == ErrorCode.INVALID_TXN_STATE:
            raise KafkaError(error, "Partition was not added to the transaction")
        if error in _RETRIABLE:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, f"Unable to verify the partition has been added to the transaction. Underlying error: {error.name}")
        if error != ErrorCode.NONE:
            raise KafkaError(error)

    def error_for(self, transactional_id: str, partition: "Partition", producer_id: int, producer_epoch: int, *, abortable_known: bool, add: bool = False) -> ErrorCode | AskCoordinator:
        """The coordinator's verdict on the producer writing to ``partition`` in its transaction (NONE at once
        when the producer's transaction is already open there), or, when another broker coordinates the
        transactional id or the partition is to be added (``add``, transactions v2: a write to the log),
        how to ask it. TxnOffsetCommit asks it too."""
        entry = partition.last_producer_entry(producer_id)
        if entry is not None and entry.current_txn_first_offset is not None and entry.producer_epoch == producer_epoch:
            return ErrorCode.NONE  # its transaction is open here: verified (or added) when it began
        tp = (partition.topic, partition.index)
        if add:
            if self.coordinator.runtime.status(self.coordinator.partition_for(transactional_id)) is None:
                return AskCoordinator(lambda: self.coordinator.add_partitions(transactional_id, producer_id, producer_epoch, [tp], TV_2).then(_as_producer_error))
        else:
            [error] = self.coordinator.verify_for_append(transactional_id, producer_id, producer_epoch, [tp], abortable_known=abortable_known).values()
            if error != ErrorCode.NOT_COORDINATOR:
                return error
        verification = Verification(transactional_id, producer_id, producer_epoch, frozenset([tp]), abortable_known, add)
        return AskCoordinator(lambda: self._ask(verification))

    def _ask(self, verification: Verification) -> Deferred[ErrorCode]:
        """Send ``verification`` to the leader of the transactional id's ``__transaction_state`` partition
        (COORDINATOR_NOT_AVAILABLE while it has none)."""
        image = self.metadata()
        topic = image.topics.get(TRANSACTION_STATE_TOPIC)
        state = topic.partitions.get(self.coordinator.partition_for(verification.transactional_id)) if topic is not None else None
        if state is None or state.leader not in image.brokers:
            return Deferred.completed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return self.remote.submit(state.leader, verification)
