"""The transaction coordinator, sans-IO (Kafka's ``TransactionCoordinator``, ``TransactionStateManager`` and
``TransactionMarkerChannelManager``).

It owns the transactional ids that hash to the ``__transaction_state`` partitions this broker leads, keeps
each one's :class:`~odradek.broker.transaction_metadata.TransactionMetadata`, and answers InitProducerId,
AddPartitionsToTxn (also verify-only, KIP-890), AddOffsetsToTxn, EndTxn, DescribeTransactions and
ListTransactions as Kafka 3.9 does. Every state change is written to the transaction log first
(:class:`TransactionLogWriter`) and becomes current once the write is replicated; EndTxn then writes
PrepareCommit/PrepareAbort, hands the COMMIT/ABORT markers to the :class:`MarkerSender` (one
WriteTxnMarkers per leader), and once every partition has its marker writes CompleteCommit/CompleteAbort.

Everything that needs the outside world comes in through narrow interfaces: the log writer, the marker
sender, a producer id source and a clock; timers (timed-out transactions, expired transactional ids,
marker retries) are run by whoever owns the event loop (``broker/transaction_runtime.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

from odradek.broker.deferred import Deferred
from odradek.broker.group_coordinator import partition_for
from odradek.broker.timers import Timer, Timers
from odradek.broker.transaction_log import UnknownKey, key_bytes, read_key, read_value, value_bytes
from odradek.broker.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.config import BrokerConfig

log = logging.getLogger("odradek.transaction_coordinator")

TRANSACTION_STATE_TOPIC = "__transaction_state"
MARKER_RETRY_BACKOFF_MS = 100

_S = TransactionState


@dataclass(frozen=True)
class TransactionConfig:
    num_partitions: int = 50
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    abort_timed_out_interval_ms: int = 10_000
    remove_expired_interval_ms: int = 3_600_000

    @classmethod
    def from_broker_config(cls, config: "BrokerConfig") -> "TransactionConfig":
        return cls(
            num_partitions=config["transaction.state.log.num.partitions"],
            transaction_max_timeout_ms=config["transaction.max.timeout.ms"],
            transactional_id_expiration_ms=config["transactional.id.expiration.ms"],
            abort_timed_out_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            remove_expired_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"],
        )


@dataclass(frozen=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class TxnMarkerEntry:
    """One WriteTxnMarkers entry: the marker a producer's transaction leaves on some partitions."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass
class MarkerResult:
    """The outcome of sending one entry: an error per partition, and the partitions that have no leader
    (their topic is most likely deleted: Kafka skips them)."""

    errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    no_leader: set[TopicPartition] = field(default_factory=set)


class TransactionLogWriter(Protocol):
    def append(self, partition: int, key: bytes, value: bytes | None) -> Deferred[ErrorCode]:
        """Append one record to the ``__transaction_state`` partition with acks=all; the append's error."""


class MarkerSender(Protocol):
    def send(self, entry: TxnMarkerEntry) -> Deferred[MarkerResult]:
        """Write the markers through the partitions' leaders (WriteTxnMarkers)."""


@dataclass
class _OwnedPartition:
    coordinator_epoch: int
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(eq=False)
class _PendingComplete:
    transactional_id: str
    coordinator_epoch: int
    metadata: TransactionMetadata
    target: TxnTransitMetadata


# Errors of a transaction log append as the coordinator reports them (TransactionStateManager).
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}

_RETRIABLE_MARKER_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.KAFKA_STORAGE_ERROR,
}


class TransactionCoordinator:
    def __init__(
        self,
        config: TransactionConfig,
        log_: TransactionLogWriter,
        markers: MarkerSender,
        producer_ids: Callable[[], int],
        clock: Callable[[], int],
        on_timer: Callable[[int], None] | None = None,
    ) -> None:
        self.config = config
        self.num_partitions = config.num_partitions
        self.log = log_
        self.markers = markers
        self.producer_ids = producer_ids
        self.clock = clock
        self.timers = Timers(clock, on_timer)
        self.owned: dict[int, _OwnedPartition] = {}
        self.loading: set[int] = set()
        self._pending_markers: dict[str, _PendingComplete] = {}
        self.timers.schedule("abort-timed-out", config.abort_timed_out_interval_ms, self._abort_timed_out_periodically)
        self.timers.schedule("remove-expired", config.remove_expired_interval_ms, self._remove_expired_periodically)

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    # -- the cache ----------------------------------------------------------------------------------------

    def _state(self, transactional_id: str) -> tuple[ErrorCode, int, TransactionMetadata | None]:
        """(error, coordinator epoch, metadata or None): NOT_COORDINATOR unless we own its partition."""
        index = self.partition_for(transactional_id)
        if index in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1, None
        owned = self.owned.get(index)
        if owned is None:
            return ErrorCode.NOT_COORDINATOR, -1, None
        return ErrorCode.NONE, owned.coordinator_epoch, owned.transactions.get(transactional_id)

    def validate_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.transaction_max_timeout_ms

    # -- InitProducerId -----------------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None) -> Deferred[InitProducerIdResult]:
        """``expected`` is the request's (producer id, epoch) when the client passes them (KIP-360)."""
        if transactional_id == "":
            return Deferred.completed(InitProducerIdResult(ErrorCode.INVALID_REQUEST))
        if not self.validate_timeout(timeout_ms):
            return Deferred.completed(InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT))
        error, coordinator_epoch, metadata = self._state(transactional_id)
        if error != ErrorCode.NONE:
            return Deferred.completed(InitProducerIdResult(error))
        if metadata is None:
            metadata = TransactionMetadata(transactional_id, self.producer_ids(), NO_PRODUCER_EPOCH, timeout_ms, _S.EMPTY, self.clock())
            self.owned[self.partition_for(transactional_id)].transactions[transactional_id] = metadata
        prepared = self._prepare_init(metadata, timeout_ms, expected)
        if isinstance(prepared, ErrorCode):
            return Deferred.completed(InitProducerIdResult(prepared))
        if prepared.state == _S.PREPARE_EPOCH_FENCE:
            # Abort the open transaction with the bumped epoch; the client retries and gets the next one.
            def retriable(error: ErrorCode) -> InitProducerIdResult:
                return InitProducerIdResult(error if error != ErrorCode.NONE else ErrorCode.CONCURRENT_TRANSACTIONS)

            return self._end_transaction(transactional_id, prepared.producer_id, prepared.producer_epoch, False, from_client=False).then(retriable)

        def answer(error: ErrorCode) -> InitProducerIdResult:
            if error != ErrorCode.NONE:
                return InitProducerIdResult(error)
            log.info("Initialized transactionalId %s with producerId %d and producer epoch %d on partition %s-%d", transactional_id, prepared.producer_id, prepared.producer_epoch, TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))
            return InitProducerIdResult(ErrorCode.NONE, prepared.producer_id, prepared.producer_epoch)

        return self._append(transactional_id, coordinator_epoch, prepared).then(answer)

    def _prepare_init(self, metadata: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None) -> TxnTransitMetadata | ErrorCode:
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None:
            expected_id, expected_epoch = expected
            valid = (
                metadata.producer_epoch == NO_PRODUCER_EPOCH
                or expected_id == metadata.producer_id
                or (expected_id == metadata.last_producer_id and is_epoch_exhausted(expected_epoch))
            )
            if not valid:
                return ErrorCode.PRODUCER_FENCED
        state = metadata.state
        if state.is_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT, _S.EMPTY):
            if metadata.is_producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch):
                return metadata.prepare_producer_id_rotation(self.producer_ids(), timeout_ms, self.clock(), expected is not None)
            return metadata.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1], self.clock())
        if state == _S.ONGOING:
            return metadata.prepare_fence_producer_epoch()
        raise AssertionError(f"Found transactionalId {metadata.transactional_id} with state {state.state_name}")

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------------------

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]) -> Deferred[ErrorCode]:
        if not transactional_id:
            return Deferred.completed(ErrorCode.INVALID_REQUEST)
        added = frozenset(partitions)
        error, coordinator_epoch, metadata = self._state(transactional_id)
        if error != ErrorCode.NONE:
            return Deferred.completed(error)
        if metadata is None or metadata.producer_id != producer_id:
            return Deferred.completed(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if metadata.producer_epoch != producer_epoch:
            return Deferred.completed(ErrorCode.PRODUCER_FENCED)
        if metadata.pending_transition_in_progress or metadata.state.is_prepare:
            return Deferred.completed(ErrorCode.CONCURRENT_TRANSACTIONS)
        if metadata.state == _S.ONGOING and added <= metadata.partitions:
            return Deferred.completed(ErrorCode.NONE)
        return self._append(transactional_id, coordinator_epoch, metadata.prepare_add_partitions(added, self.clock()))

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890: a partition leader asks whether a transactional produce's partition is in the transaction."""
        partitions = list(partitions)
        if not transactional_id:
            return dict.fromkeys(partitions, ErrorCode.INVALID_REQUEST)
        error, _, metadata = self._state(transactional_id)
        if error == ErrorCode.NONE:
            if metadata is None or metadata.producer_id != producer_id:
                error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
            elif metadata.producer_epoch != producer_epoch:
                error = ErrorCode.PRODUCER_FENCED
            elif metadata.state.is_prepare:
                error = ErrorCode.CONCURRENT_TRANSACTIONS
            else:
                return {tp: ErrorCode.NONE if tp in metadata.partitions else ErrorCode.TRANSACTION_ABORTABLE for tp in partitions}
        return dict.fromkeys(partitions, error)

    # -- EndTxn -------------------------------------------------------------------------------------------

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> Deferred[ErrorCode]:
        return self._end_transaction(transactional_id, producer_id, producer_epoch, commit, from_client=True)

    def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, *, from_client: bool) -> Deferred[ErrorCode]:
        if not transactional_id:
            return Deferred.completed(ErrorCode.INVALID_REQUEST)
        error, coordinator_epoch, metadata = self._state(transactional_id)
        if error != ErrorCode.NONE:
            return Deferred.completed(error)
        if metadata is None or metadata.producer_id != producer_id:
            return Deferred.completed(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        # A client must not bump the epoch: strict equality; the coordinator's own abort may carry a bumped one.
        if (from_client and producer_epoch != metadata.producer_epoch) or producer_epoch < metadata.producer_epoch:
            return Deferred.completed(ErrorCode.PRODUCER_FENCED)
        if metadata.pending_transition_in_progress and metadata.pending_state != _S.PREPARE_EPOCH_FENCE:
            return Deferred.completed(ErrorCode.CONCURRENT_TRANSACTIONS)
        state = metadata.state
        is_epoch_fence = False
        if state == _S.ONGOING:
            next_state = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
            if next_state == _S.PREPARE_ABORT and metadata.pending_state == _S.PREPARE_EPOCH_FENCE:
                # Make way for PrepareAbort, and write it with the bumped epoch.
                is_epoch_fence = True
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            target = metadata.prepare_abort_or_commit(next_state, self.clock())
        elif state == _S.COMPLETE_COMMIT:
            return Deferred.completed(ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE)
        elif state == _S.COMPLETE_ABORT:
            return Deferred.completed(ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.NONE)
        elif state == _S.PREPARE_COMMIT:
            return Deferred.completed(ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE)
        elif state == _S.PREPARE_ABORT:
            return Deferred.completed(ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.CONCURRENT_TRANSACTIONS)
        elif state == _S.EMPTY:
            return Deferred.completed(ErrorCode.INVALID_TXN_STATE)
        else:
            raise AssertionError(f"Found transactionalId {transactional_id} with state {state.state_name}")

        def written(error: ErrorCode) -> ErrorCode:
            if error != ErrorCode.NONE:
                if is_epoch_fence:
                    current = self._state(transactional_id)
                    if current[0] == ErrorCode.NONE and current[1] == coordinator_epoch and current[2] is not None:
                        current[2].has_failed_epoch_fence = True
                return error
            return self._send_markers_after_prepare(transactional_id, coordinator_epoch, producer_id, producer_epoch, commit)

        return self._append(transactional_id, coordinator_epoch, target).then(written)

    def _send_markers_after_prepare(self, transactional_id: str, coordinator_epoch: int, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        error, current_epoch, metadata = self._state(transactional_id)
        if error != ErrorCode.NONE:
            return error
        if current_epoch != coordinator_epoch or metadata is None:
            return ErrorCode.NOT_COORDINATOR
        if metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state != (_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT):
            return ErrorCode.INVALID_TXN_STATE
        self.add_markers_to_send(coordinator_epoch, commit, metadata, metadata.prepare_complete(self.clock()))
        return ErrorCode.NONE

    # -- markers (TransactionMarkerChannelManager) --------------------------------------------------------

    def add_markers_to_send(self, coordinator_epoch: int, commit: bool, metadata: TransactionMetadata, target: TxnTransitMetadata) -> None:
        pending = _PendingComplete(metadata.transactional_id, coordinator_epoch, metadata, target)
        self._pending_markers[metadata.transactional_id] = pending
        self._send(pending, TxnMarkerEntry(metadata.producer_id, metadata.producer_epoch, coordinator_epoch, commit, frozenset(metadata.partitions)))
        self._maybe_write_completion(metadata.transactional_id)

    def _send(self, pending: _PendingComplete, entry: TxnMarkerEntry) -> None:
        if entry.partitions:
            self.markers.send(entry).add_callback(lambda result: self._on_markers_written(pending, entry, result))

    def _still_current(self, pending: _PendingComplete) -> TransactionMetadata | None:
        error, epoch, metadata = self._state(pending.transactional_id)
        if error != ErrorCode.NONE or epoch != pending.coordinator_epoch or metadata is not pending.metadata:
            self._remove_markers(pending)
            return None
        return metadata

    def _on_markers_written(self, pending: _PendingComplete, entry: TxnMarkerEntry, result: MarkerResult) -> None:
        metadata = self._still_current(pending)
        if metadata is None:
            return
        retry: set[TopicPartition] = set()
        for tp in result.no_leader:
            log.info("Couldn't find leader endpoint for partition %s-%d while trying to send transaction markers for %s; it is likely deleted already and is skipped", tp[0], tp[1], pending.transactional_id)
            metadata.remove_partition(tp)
        for tp, error in result.errors.items():
            if error in (ErrorCode.NONE, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION):
                metadata.remove_partition(tp)
            elif error in _RETRIABLE_MARKER_ERRORS:
                retry.add(tp)
            elif error in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED):
                log.info("Sending %s's transaction marker for %s-%d has permanently failed with %s; no more markers are sent", pending.transactional_id, tp[0], tp[1], error.name)
                self._remove_markers(pending)
                return
            else:
                log.error("Unexpected error %s while sending txn marker for %s to %s-%d", error.name, pending.transactional_id, tp[0], tp[1])
                retry.add(tp)
        if retry:
            again = TxnMarkerEntry(entry.producer_id, entry.producer_epoch, entry.coordinator_epoch, entry.commit, frozenset(retry))
            self.timers.schedule(("markers", pending.transactional_id), MARKER_RETRY_BACKOFF_MS, lambda: self._resend(pending, again))
        else:
            self._maybe_write_completion(pending.transactional_id)

    def _resend(self, pending: _PendingComplete, entry: TxnMarkerEntry) -> None:
        if self._still_current(pending) is not None and self._pending_markers.get(pending.transactional_id) is pending:
            self._send(pending, entry)

    def _remove_markers(self, pending: _PendingComplete) -> None:
        if self._pending_markers.get(pending.transactional_id) is pending:
            del self._pending_markers[pending.transactional_id]

    def _maybe_write_completion(self, transactional_id: str) -> None:
        pending = self._pending_markers.get(transactional_id)
        if pending is None or pending.metadata.partitions:
            return
        del self._pending_markers[transactional_id]
        error, epoch, metadata = self._state(transactional_id)
        if error != ErrorCode.NONE or epoch != pending.coordinator_epoch or metadata is not pending.metadata:
            log.info("Cancel appending the completion of %s's transaction: no longer its coordinator at epoch %d", transactional_id, pending.coordinator_epoch)
            return
        self._append_completion(pending)

    def _append_completion(self, pending: _PendingComplete) -> None:
        def done(error: ErrorCode) -> None:
            if error == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                self.timers.schedule(("complete", pending.transactional_id), MARKER_RETRY_BACKOFF_MS, lambda: self._append_completion(pending))
            elif error not in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                log.error("Unexpected error %s while appending to transaction log for %s", error.name, pending.transactional_id)

        self._append(pending.transactional_id, pending.coordinator_epoch, pending.target, retry_on=ErrorCode.COORDINATOR_NOT_AVAILABLE).add_callback(done)

    # -- the transaction log ------------------------------------------------------------------------------

    def _append(self, transactional_id: str, coordinator_epoch: int, target: TxnTransitMetadata, retry_on: ErrorCode | None = None) -> Deferred[ErrorCode]:
        """Write ``target`` and, once it is replicated, make it current (Kafka's appendTransactionToLog).
        A failed write clears the pending state, unless it is ``retry_on``, which the caller retries."""
        error, epoch, metadata = self._state(transactional_id)
        if error != ErrorCode.NONE:
            return Deferred.completed(error)
        if metadata is None or epoch != coordinator_epoch:
            return Deferred.completed(ErrorCode.NOT_COORDINATOR)

        def written(append_error: ErrorCode) -> ErrorCode:
            error = _APPEND_ERRORS.get(append_error, append_error)
            current_error, current_epoch, current = self._state(transactional_id)
            if error == ErrorCode.NONE:
                if current_error != ErrorCode.NONE:
                    return current_error
                if current is None or current_epoch != coordinator_epoch:
                    return ErrorCode.NOT_COORDINATOR
                current.complete_transition_to(target)
                return ErrorCode.NONE
            if current_error == ErrorCode.NONE and current is not None and current_epoch == coordinator_epoch and error != retry_on:
                current.pending_state = None
            log.info("Appending %s's transition to %s failed: %s", transactional_id, target.state.state_name, error.name)
            return error

        return self.log.append(self.partition_for(transactional_id), key_bytes(transactional_id), value_bytes(target)).then(written)

    # -- DescribeTransactions / ListTransactions ----------------------------------------------------------

    def describe(self, transactional_id: str) -> dict:
        out: dict = {"transactional_id": transactional_id, "error_code": ErrorCode.NONE, "transaction_state": "", "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1, "topics": []}
        if transactional_id == "":
            out["error_code"] = ErrorCode.INVALID_REQUEST
            return out
        error, _, metadata = self._state(transactional_id)
        if error != ErrorCode.NONE:
            out["error_code"] = error
        elif metadata is None or metadata.state == _S.DEAD:
            out["error_code"] = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        else:
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(metadata.partitions):
                by_topic.setdefault(topic, []).append(index)
            out.update(
                transaction_state=metadata.state.state_name,
                transaction_timeout_ms=metadata.txn_timeout_ms,
                transaction_start_time_ms=metadata.txn_start_timestamp,
                producer_id=metadata.producer_id,
                producer_epoch=metadata.producer_epoch,
                topics=[{"topic": topic, "partitions": indexes} for topic, indexes in by_topic.items()],
            )
        return out

    def list_transactions(self, producer_ids: set[int], state_names: set[str], duration_ms: int = -1) -> dict:
        if self.loading:
            return {"error_code": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "unknown_state_filters": [], "transaction_states": []}
        states = {s for s in map(TransactionState.from_name, state_names) if s is not None}
        unknown = [name for name in state_names if TransactionState.from_name(name) is None]
        now = self.clock()
        listed = []
        for owned in self.owned.values():
            for metadata in owned.transactions.values():
                if metadata.state == _S.DEAD:
                    continue
                if producer_ids and metadata.producer_id not in producer_ids:
                    continue
                if state_names and metadata.state not in states:
                    continue
                if duration_ms >= 0 and now - metadata.txn_start_timestamp <= duration_ms:
                    continue
                listed.append({"transactional_id": metadata.transactional_id, "producer_id": metadata.producer_id, "transaction_state": metadata.state.state_name})
        return {"error_code": ErrorCode.NONE, "unknown_state_filters": unknown, "transaction_states": listed}

    # -- timeouts and expiration --------------------------------------------------------------------------

    def _abort_timed_out_periodically(self) -> None:
        self.timers.schedule("abort-timed-out", self.config.abort_timed_out_interval_ms, self._abort_timed_out_periodically)
        self.abort_timed_out_transactions()

    def abort_timed_out_transactions(self) -> None:
        """Abort (fencing the producer's epoch) every Ongoing transaction open longer than its timeout."""
        now = self.clock()
        for owned in list(self.owned.values()):
            for metadata in list(owned.transactions.values()):
                if metadata.pending_transition_in_progress or metadata.state != _S.ONGOING:
                    continue
                if metadata.txn_start_timestamp + metadata.txn_timeout_ms >= now:
                    continue
                target = metadata.prepare_fence_producer_epoch()
                transactional_id = metadata.transactional_id

                def done(error: ErrorCode, transactional_id: str = transactional_id) -> None:
                    if error == ErrorCode.NONE:
                        log.info("Completed rollback of ongoing transaction for transactionalId %s due to timeout", transactional_id)
                    elif error not in (ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.PRODUCER_FENCED, ErrorCode.CONCURRENT_TRANSACTIONS):
                        log.warning("Rollback of ongoing transaction for transactionalId %s failed due to error %s", transactional_id, error.name)

                self._end_transaction(transactional_id, target.producer_id, target.producer_epoch, False, from_client=False).add_callback(done)

    def _remove_expired_periodically(self) -> None:
        self.timers.schedule("remove-expired", self.config.remove_expired_interval_ms, self._remove_expired_periodically)
        self.remove_expired_transactional_ids()

    def remove_expired_transactional_ids(self) -> None:
        """Tombstone the ids idle for ``transactional.id.expiration.ms`` in a finished state, then forget them."""
        now = self.clock()
        for index, owned in list(self.owned.items()):
            for metadata in list(owned.transactions.values()):
                if metadata.pending_state is not None or not metadata.state.expiration_allowed:
                    continue
                if metadata.txn_last_update_timestamp > now - self.config.transactional_id_expiration_ms:
                    continue
                target = metadata.prepare_dead()

                def removed(error: ErrorCode, metadata: TransactionMetadata = metadata, owned: _OwnedPartition = owned, epoch: int = owned.coordinator_epoch, target: TxnTransitMetadata = target) -> None:
                    if error == ErrorCode.NONE and self.owned.get(index) is owned and owned.coordinator_epoch == epoch and metadata.pending_state == _S.DEAD and metadata.producer_epoch == target.producer_epoch:
                        owned.transactions.pop(metadata.transactional_id, None)
                    else:
                        log.warning("Failed to remove expired transactionalId: %s from cache. Tombstone append error code: %s", metadata.transactional_id, error.name)
                        metadata.pending_state = None

                self.log.append(index, key_bytes(metadata.transactional_id), None).add_callback(removed)

    # -- leadership of __transaction_state partitions -----------------------------------------------------

    def on_election(self, index: int, coordinator_epoch: int, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        """Load the partition's transactions (the last record of an id wins, a tombstone removes it), then
        finish what a previous coordinator left in PrepareCommit/PrepareAbort by sending its markers."""
        self._forget_markers(index)
        self.loading.add(index)
        loaded: dict[str, TransactionMetadata] = {}
        try:
            for key, value in records:
                if key is None:
                    continue
                transactional_id = read_key(key)
                if isinstance(transactional_id, UnknownKey):
                    log.warning("Unknown message key with version %d while loading transaction state from %s-%d. Ignoring it.", transactional_id.version, TRANSACTION_STATE_TOPIC, index)
                    continue
                metadata = read_value(transactional_id, value)
                if metadata is None:
                    loaded.pop(transactional_id, None)
                else:
                    loaded[transactional_id] = metadata
        finally:
            self.loading.discard(index)
        self.owned[index] = _OwnedPartition(coordinator_epoch, loaded)
        log.info("Finished loading %d transaction metadata from %s-%d", len(loaded), TRANSACTION_STATE_TOPIC, index)
        for metadata in loaded.values():
            if metadata.state.is_prepare:
                commit = metadata.state == _S.PREPARE_COMMIT
                self.add_markers_to_send(coordinator_epoch, commit, metadata, metadata.prepare_complete(self.clock()))

    def on_resignation(self, index: int) -> None:
        self.loading.discard(index)
        self.owned.pop(index, None)
        self._forget_markers(index)

    def _forget_markers(self, index: int) -> None:
        for transactional_id in [t for t in self._pending_markers if self.partition_for(t) == index]:
            del self._pending_markers[transactional_id]

    # -- the event loop's side ----------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def run_due_timers(self) -> None:
        self.timers.run_due(self._on_timer_error)

    @staticmethod
    def _on_timer_error(timer: Timer, exc: Exception) -> None:
        log.error("Transaction coordinator timer %s failed", timer.key, exc_info=exc)
