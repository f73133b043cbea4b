"""The transaction coordinator, sans-IO, on the coordinator runtime (Kafka's ``TransactionCoordinator``,
``TransactionStateManager`` and ``TransactionMarkerChannelManager``).

Each ``__transaction_state`` partition this broker leads is a :class:`TransactionShard`: the
:class:`~odradek.broker.coordinator.transaction.transaction_metadata.TransactionMetadata` of the transactional ids that hash to
it, its pending markers and its timers. :class:`TransactionCoordinator` answers InitProducerId,
AddPartitionsToTxn (also verify-only, KIP-890), AddOffsetsToTxn, EndTxn, DescribeTransactions and
ListTransactions as Kafka 3.9 does. Every state change is written to the transaction log first (the
shard's ``write`` on the runtime) and becomes current once the write is committed; EndTxn then writes
PrepareCommit/PrepareAbort, hands the COMMIT/ABORT markers to the :class:`MarkerSender` (WriteTxnMarkers
to the partitions' leaders) and, once every partition has its marker, writes CompleteCommit/CompleteAbort.

What Kafka checks with the coordinator epoch ("is this still the partition's coordinator that began the
change?") is here whether the shard that began it is still the one serving: a shard is dropped when its
partition moves and a new one loaded when it comes back. The shard's ``coordinator_epoch`` (the
partition's leader epoch) goes into the markers, so leaders can fence a deposed coordinator.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol

from odradek.broker.coordinator.runtime import (
    AppendResult,
    CoordinatorResult,
    CoordinatorRuntime,
    CoordinatorShard,
    CoordinatorTopic,
    LoadedBatch,
    PartitionWriter,
    Producer,
    ShardContext,
)
from odradek.broker.coordinator.coordinators import TRANSACTION_STATE_TOPIC as TRANSACTION_STATE_TOPIC  # re-exported
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.transaction.transaction_log import UnknownKey, key_bytes, read_key, read_value, value_bytes
from odradek.broker.coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TV_2,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.broker.config import BrokerConfig
    from odradek.protocol.message_types.describe_transactions import TransactionStateDict
    from odradek.protocol.message_types.list_transactions import ListTransactionsResponseDict, TransactionStateDict as ListedTransactionDict

log = logging.getLogger("odradek.transaction_coordinator")

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
class EndTxnResult:
    """EndTxn's answer: v5 (transactions v2) also carries the producer id and epoch the client goes on with."""

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


class MarkerSender(Protocol):
    def send(self, entry: TxnMarkerEntry) -> Deferred[MarkerResult]:
        """Write the markers through the partitions' leaders (WriteTxnMarkers)."""


@dataclass(eq=False)
class _PendingComplete:
    shard: "TransactionShard"
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
    ErrorCode.NETWORK_EXCEPTION,  # the leader did not answer: Kafka re-queues the markers
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.KAFKA_STORAGE_ERROR,
}


class TransactionShard(CoordinatorShard):
    """The transactions of one ``__transaction_state`` partition."""

    def __init__(self, context: ShardContext, coordinator: "TransactionCoordinator", coordinator_epoch: int) -> None:
        self.context = context
        self.coordinator = coordinator
        self.coordinator_epoch = coordinator_epoch
        self.transactions: dict[str, TransactionMetadata] = {}
        self.pending_markers: dict[str, _PendingComplete] = {}

    def replay(self, offset: int, producer: Producer | None, key: bytes, value: bytes | None) -> None:
        """The last record of an id wins; a tombstone removes it."""
        transactional_id = read_key(key)
        if isinstance(transactional_id, UnknownKey):
            log.warning("Unknown message key with version %d while loading transaction state from %s-%d. Ignoring it.", transactional_id.version, TRANSACTION_STATE_TOPIC, self.context.partition)
            return
        metadata = read_value(transactional_id, value)
        if metadata is None:
            self.transactions.pop(transactional_id, None)
        else:
            self.transactions[transactional_id] = metadata

    def on_loaded(self) -> None:
        """Serve: start the periodic checks, finish what a previous coordinator left prepared, and abort at
        once what timed out meanwhile.

        The reloaded transactions keep their start timestamps (from ``__transaction_state``), so a
        transaction left Ongoing by a coordinator that stopped (a crash, a move) times out on its own age,
        not from its reload. Kafka checks on one schedule from its coordinator's start, which a load comes
        seconds after (ZooKeeper, the controller), so its first check follows the load well within an
        interval; checking at the load, before any EndTxn can reach the shard, means a transaction that
        expired while no coordinator served it is never committed (its producer is fenced, as on Kafka)."""
        log.info("Finished loading %d transaction metadata from %s-%d", len(self.transactions), TRANSACTION_STATE_TOPIC, self.context.partition)
        config = self.coordinator.config
        self._every("abort-timed-out", config.abort_timed_out_interval_ms, self.abort_timed_out_transactions)
        self._every("remove-expired", config.remove_expired_interval_ms, self.remove_expired_transactional_ids)
        for metadata in list(self.transactions.values()):
            if metadata.state.is_prepare:
                commit = metadata.state == _S.PREPARE_COMMIT
                self.coordinator.add_markers_to_send(self, commit, metadata, metadata.prepare_complete(self.context.clock()))
        self.abort_timed_out_transactions()

    def on_unloaded(self) -> None:
        self.pending_markers.clear()

    def _every(self, key: str, interval_ms: int, action: Callable[[], None]) -> None:
        def run() -> None:
            self.context.timers.schedule(key, interval_ms, run)
            action()

        self.context.timers.schedule(key, interval_ms, run)

    def abort_timed_out_transactions(self) -> None:
        """Abort (fencing the producer's epoch) every Ongoing transaction open longer than its timeout."""
        now = self.context.clock()
        for metadata in list(self.transactions.values()):
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

            self.coordinator.end_transaction_internal(transactional_id, target.producer_id, target.producer_epoch, False, from_client=False).then(_error).add_callback(done)

    def remove_expired_transactional_ids(self) -> None:
        """Tombstone the ids idle for ``transactional.id.expiration.ms`` in a finished state, then forget them."""
        now = self.context.clock()
        expiration_ms = self.coordinator.config.transactional_id_expiration_ms
        for metadata in list(self.transactions.values()):
            if metadata.pending_state is not None or not metadata.state.expiration_allowed:
                continue
            if metadata.txn_last_update_timestamp > now - expiration_ms:
                continue
            target = metadata.prepare_dead()

            def removed(result: AppendResult, metadata: TransactionMetadata = metadata, target: TxnTransitMetadata = target) -> None:
                if result.error == ErrorCode.NONE and self.coordinator.serving(self) and metadata.pending_state == _S.DEAD and metadata.producer_epoch == target.producer_epoch:
                    self.transactions.pop(metadata.transactional_id, None)
                else:
                    log.warning("Failed to remove expired transactionalId: %s from cache. Tombstone append error code: %s", metadata.transactional_id, result.error.name)
                    metadata.pending_state = None

            self.context.write(CoordinatorResult([(key_bytes(metadata.transactional_id), None)], removed))


class TransactionCoordinator:
    """What the transaction handlers call. A shard's coordinator epoch is its partition's leader epoch when
    it was loaded, which it writes into its markers."""

    def __init__(
        self,
        config: TransactionConfig,
        runtime: CoordinatorRuntime[TransactionShard],
        markers: MarkerSender,
        producer_ids: Callable[[], int],
        transaction_version: Callable[[], int],
    ) -> None:
        """``producer_ids``: the next producer id, or KafkaError COORDINATOR_LOAD_IN_PROGRESS while the broker
        has no block (``ProducerIdManager.generate``), which the request asking for one is answered.
        ``transaction_version``: the cluster's finalized ``transaction.version``, which chooses the version
        of the values written to ``__transaction_state``."""
        self.config = config
        self.runtime = runtime
        self.markers = markers
        self.producer_ids = producer_ids
        self.transaction_version = transaction_version
        self.clock = runtime.clock
        runtime.coordinator = self

    def build_shard(self, context: ShardContext) -> TransactionShard:
        return TransactionShard(context, self, context.leader_epoch)

    # -- the cache ----------------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return self.runtime.partition_for(transactional_id)

    def _state(self, transactional_id: str) -> tuple[ErrorCode, TransactionShard | None, TransactionMetadata | None]:
        """(error, shard, metadata or None): NOT_COORDINATOR unless this broker serves its partition."""
        partition = self.partition_for(transactional_id)
        error = self.runtime.status(partition)
        if error is not None:
            return error, None, None
        shard = self.runtime.shard(partition)
        return ErrorCode.NONE, shard, shard.transactions.get(transactional_id)

    def serving(self, shard: TransactionShard) -> bool:
        """Whether ``shard`` is still the one serving its partition (Kafka: the coordinator epoch is unchanged)."""
        partition = shard.context.partition
        return self.runtime.status(partition) is None and self.runtime.shard(partition) is shard

    def validate_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.transaction_max_timeout_ms

    # -- InitProducerId -----------------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None) -> Deferred[InitProducerIdResult]:
        """``expected`` is the request's (producer id, epoch) when the client passes them (KIP-360)."""
        if transactional_id == "":
            return Deferred.completed(InitProducerIdResult(ErrorCode.INVALID_REQUEST))
        if not self.validate_timeout(timeout_ms):
            return Deferred.completed(InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT))
        error, shard, metadata = self._state(transactional_id)
        if shard is None:
            return Deferred.completed(InitProducerIdResult(error))
        if metadata is None:
            try:
                producer_id = self.producer_ids()
            except KafkaError as exc:  # no producer id block yet (COORDINATOR_LOAD_IN_PROGRESS)
                return Deferred.completed(InitProducerIdResult(exc.code))
            metadata = TransactionMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms, _S.EMPTY, self.clock())
            shard.transactions[transactional_id] = metadata
        prepared = self._prepare_init(metadata, timeout_ms, expected)
        if isinstance(prepared, ErrorCode):
            return Deferred.completed(InitProducerIdResult(prepared))
        if prepared.state == _S.PREPARE_EPOCH_FENCE:
            # Abort the open transaction with the bumped epoch; the client retries and gets the next one.
            def retriable(error: ErrorCode) -> InitProducerIdResult:
                return InitProducerIdResult(error if error != ErrorCode.NONE else ErrorCode.CONCURRENT_TRANSACTIONS)

            return self.end_transaction_internal(transactional_id, prepared.producer_id, prepared.producer_epoch, False, from_client=False).then(_error).then(retriable)

        def answer(error: ErrorCode) -> InitProducerIdResult:
            if error != ErrorCode.NONE:
                return InitProducerIdResult(error)
            log.info("Initialized transactionalId %s with producerId %d and producer epoch %d on partition %s-%d", transactional_id, prepared.producer_id, prepared.producer_epoch, TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))
            return InitProducerIdResult(ErrorCode.NONE, prepared.producer_id, prepared.producer_epoch)

        return self._append(shard, metadata, prepared).then(answer)

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
                try:
                    producer_id = self.producer_ids()
                except KafkaError as exc:
                    return exc.code
                return metadata.prepare_producer_id_rotation(producer_id, timeout_ms, self.clock(), expected is not None)
            return metadata.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1], self.clock())
        if state == _S.ONGOING:
            return metadata.prepare_fence_producer_epoch()
        raise AssertionError(f"Found transactionalId {metadata.transactional_id} with state {state.state_name}")

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------------------

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition], client_transaction_version: int = 0) -> Deferred[ErrorCode]:
        """``client_transaction_version`` 2 for a leader's implicit add of a v2 client's partition (Produce
        v12, TxnOffsetCommit v5, sent as AddPartitionsToTxn v4+): the transaction becomes a v2 one."""
        if not transactional_id:
            return Deferred.completed(ErrorCode.INVALID_REQUEST)
        added = frozenset(partitions)
        error, shard, metadata = self._state(transactional_id)
        if shard is None:
            return Deferred.completed(error)
        if metadata is None or metadata.producer_id != producer_id:
            return Deferred.completed(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if metadata.producer_epoch != producer_epoch:
            return Deferred.completed(ErrorCode.PRODUCER_FENCED)
        if metadata.pending_transition_in_progress or metadata.state.is_prepare:
            return Deferred.completed(ErrorCode.CONCURRENT_TRANSACTIONS)
        if metadata.state == _S.ONGOING and added <= metadata.partitions:
            return Deferred.completed(ErrorCode.NONE)
        return self._append(shard, metadata, metadata.prepare_add_partitions(added, self.clock(), client_transaction_version))

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

    def verify_for_append(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition], *, abortable_known: bool) -> dict[TopicPartition, ErrorCode]:
        """A leader's verification before it appends a transactional write (Kafka's AddPartitionsToTxnManager):
        verify-only, with its error translation: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH, and a
        partition missing from the transaction is INVALID_TXN_STATE for a request too old to know
        TRANSACTION_ABORTABLE (``abortable_known`` false)."""
        errors = self.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        for tp, error in errors.items():
            if error == ErrorCode.PRODUCER_FENCED:
                errors[tp] = ErrorCode.INVALID_PRODUCER_EPOCH
            elif error == ErrorCode.TRANSACTION_ABORTABLE and not abortable_known:
                errors[tp] = ErrorCode.INVALID_TXN_STATE
        return errors

    # -- EndTxn -------------------------------------------------------------------------------------------

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, client_transaction_version: int = 0) -> Deferred[EndTxnResult]:
        """EndTxn; ``client_transaction_version`` 2 for v5 (the epoch is bumped, the answer carries it)."""
        return self.end_transaction_internal(transactional_id, producer_id, producer_epoch, commit, from_client=True, client_transaction_version=client_transaction_version)

    def end_transaction_internal(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, *, from_client: bool, client_transaction_version: int | None = None) -> Deferred[EndTxnResult]:
        """EndTxn, and the coordinator's own aborts (fencing, timeouts), which may carry a bumped epoch.

        The coordinator's own aborts follow the version the transaction's client uses (Kafka 4.4 takes the
        cluster's finalized ``transaction.version`` for them: see docs/transactions.md)."""
        if not transactional_id:
            return Deferred.completed(EndTxnResult(ErrorCode.INVALID_REQUEST))
        error, shard, metadata = self._state(transactional_id)
        if shard is None:
            return Deferred.completed(EndTxnResult(error))
        if metadata is None:
            return Deferred.completed(EndTxnResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
        tv = metadata.client_transaction_version if client_transaction_version is None else client_transaction_version
        prepare = self._prepare_end_v2 if tv >= TV_2 else self._prepare_end_v1
        prepared = prepare(metadata, producer_id, producer_epoch, commit, from_client)
        if isinstance(prepared, EndTxnResult):
            return Deferred.completed(prepared)
        target, is_epoch_fence = prepared

        def written(error: ErrorCode) -> EndTxnResult:
            if error != ErrorCode.NONE:
                if is_epoch_fence and self.serving(shard):
                    metadata.has_failed_epoch_fence = True
                return EndTxnResult(error)
            return self._send_markers_after_prepare(shard, metadata, producer_id, producer_epoch, commit, bumped=tv >= TV_2)

        return self._append(shard, metadata, target).then(written)

    def _prepare_end_v1(self, metadata: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool, from_client: bool) -> tuple[TxnTransitMetadata, bool] | EndTxnResult:
        """Kafka's ``endTransactionWithTV1``: the target to write and whether it fences, or the answer."""
        if metadata.producer_id != producer_id:
            return EndTxnResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if (from_client and producer_epoch != metadata.producer_epoch) or producer_epoch < metadata.producer_epoch:
            return EndTxnResult(ErrorCode.PRODUCER_FENCED)
        if metadata.pending_transition_in_progress and metadata.pending_state != _S.PREPARE_EPOCH_FENCE:
            return EndTxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if metadata.state == _S.ONGOING:
            next_state = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
            is_epoch_fence = next_state == _S.PREPARE_ABORT and metadata.pending_state == _S.PREPARE_EPOCH_FENCE
            if is_epoch_fence:
                _make_way_for_fenced_abort(metadata, producer_epoch)
            return metadata.prepare_abort_or_commit(next_state, self.clock()), is_epoch_fence
        return _end_answer(metadata, commit, retry=True)

    def _prepare_end_v2(self, metadata: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool, from_client: bool) -> tuple[TxnTransitMetadata, bool] | EndTxnResult:
        """Kafka's ``endTransaction`` for transactions v2: a retry is recognised by its epoch (one below the
        bumped one), an abort may come with no partition added, and the prepare bumps the epoch."""
        is_epoch_fence = metadata.pending_state == _S.PREPARE_EPOCH_FENCE
        retry_on_overflow = not is_epoch_fence and metadata.last_producer_id == producer_id and producer_epoch == SHORT_MAX - 1 and metadata.producer_epoch == 0
        retry_on_bump = not is_epoch_fence and metadata.producer_epoch == producer_epoch + 1
        state = metadata.state
        if is_epoch_fence:
            valid = (not from_client or producer_epoch == metadata.producer_epoch) and producer_epoch >= metadata.producer_epoch
        elif state.is_prepare:
            valid = retry_on_bump
        elif state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
            valid = retry_on_bump or retry_on_overflow or producer_epoch == metadata.producer_epoch
        else:
            valid = producer_epoch == metadata.producer_epoch
        if metadata.producer_id != producer_id and not retry_on_overflow:
            return EndTxnResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if not valid:
            return EndTxnResult(ErrorCode.PRODUCER_FENCED)
        if metadata.pending_transition_in_progress and not is_epoch_fence:
            return EndTxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        is_retry = retry_on_bump or retry_on_overflow
        if state == _S.ONGOING:
            next_state, no_partition_added = (_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT), False
        elif not commit and not is_retry and state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
            next_state, no_partition_added = _S.PREPARE_ABORT, True
        else:
            return _end_answer(metadata, commit, retry=is_retry)
        next_producer_id = NO_PRODUCER_ID
        if not is_epoch_fence and metadata.is_producer_epoch_exhausted:
            try:
                next_producer_id = self.producer_ids()
            except KafkaError as exc:
                return EndTxnResult(exc.code)
        if is_epoch_fence and next_state == _S.PREPARE_ABORT:
            _make_way_for_fenced_abort(metadata, producer_epoch)
        return metadata.prepare_abort_or_commit(next_state, self.clock(), TV_2, next_producer_id, no_partition_added, bump=not is_epoch_fence), is_epoch_fence

    def _send_markers_after_prepare(self, shard: TransactionShard, metadata: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool, *, bumped: bool) -> EndTxnResult:
        """The Prepare state is written: answer the client with the producer id and epoch it goes on with
        and send the markers (``bumped``: the prepare raised the epoch by one, transactions v2)."""
        if not self.serving(shard) or shard.transactions.get(metadata.transactional_id) is not metadata:
            return EndTxnResult(ErrorCode.NOT_COORDINATOR)
        if metadata.producer_id != producer_id:
            return EndTxnResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if metadata.producer_epoch != producer_epoch and not (bumped and metadata.producer_epoch == producer_epoch + 1):
            return EndTxnResult(ErrorCode.PRODUCER_FENCED)
        if metadata.pending_transition_in_progress:
            return EndTxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if metadata.state != (_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT):
            return EndTxnResult(ErrorCode.INVALID_TXN_STATE)
        answer = EndTxnResult(ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch)
        self.add_markers_to_send(shard, commit, metadata, metadata.prepare_complete(self.clock()))
        return answer

    # -- markers (TransactionMarkerChannelManager) --------------------------------------------------------

    def add_markers_to_send(self, shard: TransactionShard, commit: bool, metadata: TransactionMetadata, target: TxnTransitMetadata) -> None:
        pending = _PendingComplete(shard, metadata, target)
        shard.pending_markers[metadata.transactional_id] = pending
        self._send(pending, TxnMarkerEntry(metadata.producer_id, metadata.producer_epoch, shard.coordinator_epoch, commit, frozenset(metadata.partitions)))
        self._maybe_write_completion(pending)

    def _send(self, pending: _PendingComplete, entry: TxnMarkerEntry) -> None:
        if entry.partitions:
            self.markers.send(entry).add_callback(lambda result: self._on_markers_written(pending, entry, result))

    def _is_current(self, pending: _PendingComplete) -> bool:
        shard, transactional_id = pending.shard, pending.metadata.transactional_id
        return self.serving(shard) and shard.pending_markers.get(transactional_id) is pending and shard.transactions.get(transactional_id) is pending.metadata

    def _on_markers_written(self, pending: _PendingComplete, entry: TxnMarkerEntry, result: MarkerResult) -> None:
        if not self._is_current(pending):
            return
        metadata, transactional_id = pending.metadata, pending.metadata.transactional_id
        retry: set[TopicPartition] = set()
        for tp in result.no_leader:
            log.info("Couldn't find leader endpoint for partition %s-%d while trying to send transaction markers for %s; it is likely deleted already and is skipped", tp[0], tp[1], transactional_id)
            metadata.remove_partition(tp)
        for tp, error in result.errors.items():
            if error in (ErrorCode.NONE, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION):
                metadata.remove_partition(tp)
            elif error in _RETRIABLE_MARKER_ERRORS:
                retry.add(tp)
            elif error in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED):
                log.info("Sending %s's transaction marker for %s-%d has permanently failed with %s; no more markers are sent", transactional_id, tp[0], tp[1], error.name)
                del pending.shard.pending_markers[transactional_id]
                return
            else:
                log.error("Unexpected error %s while sending txn marker for %s to %s-%d", error.name, transactional_id, tp[0], tp[1])
                retry.add(tp)
        if retry:
            again = TxnMarkerEntry(entry.producer_id, entry.producer_epoch, entry.coordinator_epoch, entry.commit, frozenset(retry))
            pending.shard.context.timers.schedule(("markers", transactional_id), MARKER_RETRY_BACKOFF_MS, lambda: self._resend(pending, again))
        else:
            self._maybe_write_completion(pending)

    def _resend(self, pending: _PendingComplete, entry: TxnMarkerEntry) -> None:
        if self._is_current(pending):
            self._send(pending, entry)

    def _maybe_write_completion(self, pending: _PendingComplete) -> None:
        if pending.metadata.partitions or not self._is_current(pending):
            return
        del pending.shard.pending_markers[pending.metadata.transactional_id]
        self._append_completion(pending)

    def _append_completion(self, pending: _PendingComplete) -> None:
        def done(error: ErrorCode) -> None:
            if error == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                pending.shard.context.timers.schedule(("complete", pending.metadata.transactional_id), MARKER_RETRY_BACKOFF_MS, lambda: self._append_completion(pending))
            elif error not in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                log.error("Unexpected error %s while appending to transaction log for %s", error.name, pending.metadata.transactional_id)

        if self.serving(pending.shard):
            self._append(pending.shard, pending.metadata, pending.target, retry_on=ErrorCode.COORDINATOR_NOT_AVAILABLE).add_callback(done)

    # -- the transaction log ------------------------------------------------------------------------------

    def _append(self, shard: TransactionShard, metadata: TransactionMetadata, target: TxnTransitMetadata, retry_on: ErrorCode | None = None) -> Deferred[ErrorCode]:
        """Write ``target`` and, once it is committed, make it current (Kafka's appendTransactionToLog).
        A failed write clears the pending state, unless it is ``retry_on``, which the caller retries."""
        transactional_id = metadata.transactional_id

        def written(result: AppendResult) -> ErrorCode:
            error = _APPEND_ERRORS.get(result.error, result.error)
            current = self.serving(shard) and shard.transactions.get(transactional_id) is metadata
            if error == ErrorCode.NONE:
                if not current:
                    return ErrorCode.NOT_COORDINATOR
                metadata.complete_transition_to(target)
                return ErrorCode.NONE
            if current and error != retry_on:
                metadata.pending_state = None
            log.info("Appending %s's transition to %s failed: %s", transactional_id, target.state.state_name, error.name)
            return error

        try:
            return shard.context.write(CoordinatorResult([(key_bytes(transactional_id), value_bytes(target, self.transaction_version()))], written))
        except Exception:
            # Never leave the transition pending: every later request would be CONCURRENT_TRANSACTIONS.
            log.exception("Appending %s's transition to %s failed", transactional_id, target.state.state_name)
            metadata.pending_state = None
            return Deferred.completed(ErrorCode.UNKNOWN_SERVER_ERROR)

    # -- DescribeTransactions / ListTransactions ----------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionStateDict:
        # An id without a state is answered with the schema's zeros beside its error code, as Kafka does.
        out: TransactionStateDict = {"transactional_id": transactional_id, "error_code": ErrorCode.NONE, "transaction_state": "", "transaction_timeout_ms": 0, "transaction_start_time_ms": 0, "producer_id": 0, "producer_epoch": 0, "topics": []}
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
                {
                    "transaction_state": metadata.state.state_name,
                    "transaction_timeout_ms": metadata.txn_timeout_ms,
                    "transaction_start_time_ms": metadata.txn_start_timestamp,
                    "producer_id": metadata.producer_id,
                    "producer_epoch": metadata.producer_epoch,
                    "topics": [{"topic": topic, "partitions": indexes} for topic, indexes in by_topic.items()],
                }
            )
        return out

    def list_transactions(self, producer_ids: set[int], state_names: set[str], duration_ms: int = -1) -> ListTransactionsResponseDict:
        if self.runtime.is_loading:
            return {"error_code": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "unknown_state_filters": [], "transaction_states": []}
        states = {s for s in map(TransactionState.from_name, state_names) if s is not None}
        unknown = [name for name in state_names if TransactionState.from_name(name) is None]
        now = self.clock()
        listed: list[ListedTransactionDict] = []
        for shard in self.runtime.shards():
            for metadata in shard.transactions.values():
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


def _error(result: EndTxnResult) -> ErrorCode:
    return result.error


def _make_way_for_fenced_abort(metadata: TransactionMetadata, fenced_epoch: int) -> None:
    """A fence's abort: clear PrepareEpochFence for PrepareAbort, written with the fenced (bumped) epoch."""
    metadata.pending_state = None
    metadata.producer_epoch = fenced_epoch
    metadata.last_producer_epoch = NO_PRODUCER_EPOCH


def _end_answer(metadata: TransactionMetadata, commit: bool, *, retry: bool) -> EndTxnResult:
    """EndTxn against a transaction that is not Ongoing and is not aborted anew: a retry of the transaction's
    own outcome is answered with it (and the producer id and epoch it left), a prepared one is still being
    completed, anything else is refused."""
    state = metadata.state
    if state == (_S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT):
        return EndTxnResult(ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch) if retry else EndTxnResult(ErrorCode.INVALID_TXN_STATE)
    if state == (_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT):
        return EndTxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
    if state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT, _S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        return EndTxnResult(ErrorCode.INVALID_TXN_STATE)
    raise AssertionError(f"Found a transaction in state {state.state_name}")


def transaction_coordinator_runtime(
    config: "BrokerConfig",
    topic: CoordinatorTopic,
    partitions: PartitionWriter,
    load: Callable[[int], Iterable[LoadedBatch]],
    markers: MarkerSender,
    producer_ids: Callable[[], int],
    *,
    broker_id: int,
    metadata: Callable[[], Any],
    create_topic: Callable[[CoordinatorTopic], None],
    transaction_version: Callable[[], int],
) -> CoordinatorRuntime[TransactionShard]:
    """The transaction coordinator on its runtime, its service at ``.coordinator``; ``topic``:
    ``__transaction_state`` (:func:`~odradek.broker.coordinator.coordinators.transaction_state_topic`)."""
    runtime: CoordinatorRuntime[TransactionShard] = CoordinatorRuntime(
        topic, lambda context: coordinator.build_shard(context), partitions,
        broker_id=broker_id, load=load, metadata=metadata, create_topic=create_topic,
    )
    coordinator = TransactionCoordinator(TransactionConfig.from_broker_config(config), runtime, markers, producer_ids, transaction_version)
    return runtime
