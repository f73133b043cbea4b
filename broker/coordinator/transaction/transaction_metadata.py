"""One transactional id's state as the transaction coordinator keeps it (Kafka's ``TransactionMetadata``).

A change is made in two steps, as in Kafka: ``prepare_*`` checks the transition against the state machine,
sets ``pending_state`` (which blocks any other change meanwhile) and returns the target as a
:class:`TxnTransitMetadata`; the coordinator writes that target to ``__transaction_state`` and, once the
write is replicated, :meth:`TransactionMetadata.complete_transition_to` makes it current. A failed write
clears ``pending_state`` and leaves the state as it was.

The states and their legal predecessors::

    Empty             <- Empty, CompleteCommit, CompleteAbort      (InitProducerId)
    Ongoing           <- Ongoing, Empty, CompleteCommit, CompleteAbort   (AddPartitions/AddOffsets)
    PrepareCommit     <- Ongoing                                   (EndTxn commit)
    PrepareAbort      <- Ongoing, PrepareEpochFence                (EndTxn abort, timeout, fencing)
                         Empty, CompleteCommit, CompleteAbort      (transactions v2: an abort with no partition)
    CompleteCommit    <- PrepareCommit                             (markers written)
    CompleteAbort     <- PrepareAbort
    Dead              <- Empty, CompleteCommit, CompleteAbort      (transactional.id.expiration.ms)
    PrepareEpochFence <- Ongoing                                   (InitProducerId over an open transaction)

Transactions v2 (KIP-890 part 2, a client's EndTxn v5): every EndTxn bumps the producer epoch, written
with the Prepare state (``last_producer_epoch`` keeps the one the client wrote with), so the markers carry
the new epoch and any write of the old one is fenced; the epoch's last value moves the transaction to a
new producer id (``next_producer_id``) when it completes. ``client_transaction_version`` is the version
the transaction's client uses (0 for v1 clients, 2 for v2), as Kafka keeps it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NoReturn

from odradek.protocol.errors import ErrorCode
from odradek.storage.topic_partition import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 2**15 - 1
TV_2 = 2
"""The ``transaction.version`` whose clients bump the epoch on every EndTxn (Kafka's ``supportsEpochBump``)."""


class TransactionState(enum.Enum):
    """Kafka's states; the value is the id stored in TransactionLogValue.TransactionStatus."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """The name DescribeTransactions and ListTransactions report (``"PrepareCommit"``)."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> "TransactionState | None":
        return _BY_NAME.get(name)

    @property
    def expiration_allowed(self) -> bool:
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @property
    def is_prepare(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)


_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

_S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransitionError(Exception):
    """A transition the state machine forbids: a coordinator bug, never a client's error."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Clients never get Short.MAX_VALUE, so the coordinator can always fence the last epoch once more."""
    return epoch >= SHORT_MAX - 1


@dataclass(frozen=True)
class TxnTransitMetadata:
    """The target of a prepared transition: what is written to the log, and becomes current once it is."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0


@dataclass(eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    txn_last_update_timestamp: int
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    pending_state: TransactionState | None = None
    next_producer_id: int = NO_PRODUCER_ID
    """The producer id an epoch-exhausting v2 EndTxn moves the transaction to once it completes."""
    client_transaction_version: int = 0
    has_failed_epoch_fence: bool = False
    """A fence whose write failed already bumped the epoch (never returned to a client): do not bump again."""

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (TransactionState.ONGOING, TransactionState.PREPARE_ABORT, TransactionState.PREPARE_COMMIT)

    def remove_partition(self, partition: TopicPartition) -> None:
        """A marker reached this partition: it no longer waits for one."""
        if not self.state.is_prepare:
            raise IllegalTransitionError(f"{self.transactional_id}: removing a partition whose marker was written in state {self.state.state_name}")
        self.partitions.discard(partition)

    # -- preparing transitions ----------------------------------------------------------------------------

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state as a target, without claiming a transition (markers resent after a load)."""
        return TxnTransitMetadata(
            self.producer_id, self.last_producer_id, self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms,
            self.state, frozenset(self.partitions), self.txn_start_timestamp, self.txn_last_update_timestamp,
            self.next_producer_id, self.client_transaction_version,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransitionError("Cannot fence producer with epoch equal to Short.MaxValue since this would overflow")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            TransactionState.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH, self.txn_timeout_ms,
            frozenset(self.partitions), self.txn_start_timestamp, self.txn_last_update_timestamp,
        )

    def prepare_increment_producer_epoch(self, new_timeout_ms: int, expected_epoch: int | None, now_ms: int) -> TxnTransitMetadata | ErrorCode:
        """InitProducerId: the next epoch, or PRODUCER_FENCED when the caller's epoch is neither the current
        nor the previous one (the previous one is a retry of a bump whose answer was lost)."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(f"Cannot allocate any more producer epochs for producerId {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare(TransactionState.EMPTY, self.producer_id, epoch, last_epoch, new_timeout_ms, frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_timeout_ms: int, now_ms: int, record_last_epoch: bool) -> TxnTransitMetadata:
        if self.has_pending_transaction:
            raise IllegalTransitionError("Cannot rotate producer ids while a transaction is still pending")
        last_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(TransactionState.EMPTY, new_producer_id, 0, last_epoch, new_timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now_ms: int, client_transaction_version: int = 0) -> TxnTransitMetadata:
        starts = self.state in (TransactionState.EMPTY, TransactionState.COMPLETE_ABORT, TransactionState.COMPLETE_COMMIT)
        return self._prepare(
            TransactionState.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms,
            frozenset(self.partitions) | added, now_ms if starts else self.txn_start_timestamp, now_ms,
            client_transaction_version=client_transaction_version,
        )

    def prepare_abort_or_commit(
        self, new_state: TransactionState, now_ms: int, client_transaction_version: int = 0, next_producer_id: int = NO_PRODUCER_ID, no_partition_added: bool = False, *, bump: bool = True,
    ) -> TxnTransitMetadata:
        """v2 bumps the epoch here (the caller made sure it does not overflow: ``next_producer_id`` is set when
        it reaches its last value), except for the abort of a fence, whose epoch the fence already bumped (as
        a Kafka 4.4 coordinator does). An abort with no partition added (v2 only) starts and ends at ``now_ms``."""
        if client_transaction_version >= TV_2 and bump:
            epoch, last_epoch = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        return self._prepare(
            new_state, self.producer_id, epoch, last_epoch, self.txn_timeout_ms,
            frozenset(self.partitions), now_ms if no_partition_added else self.txn_start_timestamp, now_ms,
            next_producer_id=next_producer_id, client_transaction_version=client_transaction_version,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """The last epoch of a producer id moves a v2 transaction to ``next_producer_id`` at epoch 0 (the client
        learnt both from its EndTxn answer); ``last_producer_epoch`` stays the one it last wrote with."""
        new_state = TransactionState.COMPLETE_COMMIT if self.state == TransactionState.PREPARE_COMMIT else TransactionState.COMPLETE_ABORT
        self.has_failed_epoch_fence = False  # the PrepareCommit/Abort it follows was written
        rotate = self.client_transaction_version >= TV_2 and self.next_producer_id != NO_PRODUCER_ID
        return self._prepare(
            new_state, self.next_producer_id if rotate else self.producer_id, 0 if rotate else self.producer_epoch, self.last_producer_epoch,
            self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, now_ms,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(
            TransactionState.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms,
            frozenset(), self.txn_start_timestamp, self.txn_last_update_timestamp,
        )

    def _prepare(
        self, new_state: TransactionState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int, partitions: frozenset[TopicPartition], start: int, now_ms: int,
        *, next_producer_id: int = NO_PRODUCER_ID, client_transaction_version: int | None = None,
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(f"Preparing transaction state transition to {new_state.state_name} while it already a pending state {self.pending_state.state_name}")
        if producer_id < 0:
            raise IllegalTransitionError(f"Illegal new producer id {producer_id}")
        if new_state != TransactionState.DEAD and epoch < 0:
            raise IllegalTransitionError(f"Illegal new producer epoch {epoch}")
        if self.state not in VALID_PREVIOUS_STATES[new_state]:
            raise IllegalTransitionError(
                f"Preparing transaction state transition to {new_state.state_name} failed since the target state "
                f"{new_state.state_name} is not a valid previous state of the current state {self.state.state_name}"
            )
        self.pending_state = new_state
        tv = self.client_transaction_version if client_transaction_version is None else client_transaction_version
        return TxnTransitMetadata(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, new_state, partitions, start, now_ms, next_producer_id, tv)

    # -- completing a transition --------------------------------------------------------------------------

    def complete_transition_to(self, target: TxnTransitMetadata) -> None:
        """The target was written to the log: it becomes the current state (Kafka's sanity checks included)."""
        to = self.pending_state
        if to is None or to != target.state:
            self._fail(target)
        same_producer = target.producer_epoch == self.producer_epoch and target.producer_id == self.producer_id
        v2 = target.client_transaction_version >= TV_2
        if v2 and to.is_prepare and target.producer_epoch == self.producer_epoch + 1:
            same_producer = target.last_producer_epoch == self.producer_epoch and target.producer_id == self.producer_id  # bumped
        elif v2 and to in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT) and target.producer_epoch == 0 and target.producer_id != self.producer_id:
            same_producer = target.last_producer_epoch == self.last_producer_epoch and target.last_producer_id == self.producer_id  # rotated
        if to == TransactionState.EMPTY:
            bump = target.producer_epoch == self.producer_epoch + 1 or (target.producer_epoch == 0 and target.producer_id != self.producer_id)
            if (self.producer_epoch != target.producer_epoch and not bump) or target.partitions or target.txn_start_timestamp != -1:
                self._fail(target)
            self.txn_timeout_ms = target.txn_timeout_ms
            self.producer_epoch = target.producer_epoch
            self.last_producer_epoch = target.last_producer_epoch
            self.producer_id = target.producer_id
            self.last_producer_id = target.last_producer_id
        elif to == TransactionState.ONGOING:
            if not same_producer or not self.partitions <= target.partitions or self.txn_timeout_ms != target.txn_timeout_ms:
                self._fail(target)
            self.txn_start_timestamp = target.txn_start_timestamp
            self.partitions |= target.partitions
        elif to.is_prepare:
            # v2 may abort from Empty or a completed transaction: a start of its own, no partitions.
            empty_abort = v2 and to == TransactionState.PREPARE_ABORT and self.state in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)
            if (
                not same_producer
                or self.partitions != target.partitions
                or self.txn_timeout_ms != target.txn_timeout_ms
                or (self.txn_start_timestamp != target.txn_start_timestamp and not empty_abort)
            ):
                self._fail(target)
            self.txn_start_timestamp = target.txn_start_timestamp
            self.producer_epoch = target.producer_epoch
            self.last_producer_epoch = target.last_producer_epoch
            self.next_producer_id = target.next_producer_id
        elif to in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
            if not same_producer or self.txn_timeout_ms != target.txn_timeout_ms or target.txn_start_timestamp == -1:
                self._fail(target)
            self.txn_start_timestamp = target.txn_start_timestamp
            self.partitions.clear()
            if target.producer_id != self.producer_id:
                self.last_producer_id = target.last_producer_id
            self.producer_id = target.producer_id
            self.producer_epoch = target.producer_epoch
            self.next_producer_id = NO_PRODUCER_ID
        else:
            # PrepareEpochFence is left for PrepareAbort before anything is written; Dead is removed, not kept.
            self._fail(target)
        self.txn_last_update_timestamp = target.txn_last_update_timestamp
        self.client_transaction_version = target.client_transaction_version
        self.pending_state = None
        self.state = to

    def _fail(self, target: TxnTransitMetadata) -> NoReturn:
        raise IllegalTransitionError(f"TransactionalId {self.transactional_id} failed transition to state {target} due to unexpected metadata")
