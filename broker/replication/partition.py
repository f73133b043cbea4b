"""A partition replica as the broker hosts it: leader epoch, ISR, LEO and high watermark, and the one way
the broker reaches its log (Kafka's ``Partition``).

Even on one node the broker follows Kafka's replication rules: the high watermark is the minimum log end
offset over the ISR (on one node, the leader's own LEO), consumers read below it, acks=all completes
when it passes the batch, and produce with acks=all fails when the ISR is smaller than
``min.insync.replicas``. Followers (cluster mode) report their LEO through fetches.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable

from odradek.controller.metadata_image import PartitionState
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.kafka_uuid import Uuid
from odradek.protocol.values import FrozenFields, plain_init
from odradek.storage.log import AppendInfo, FetchDataInfo, Log, LogOffsetMetadata
from odradek.storage.log_config import LogConfig
from odradek.storage.log_validator import ValidationResult
from odradek.storage.producer_state import ProducerStateEntry
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.storage.transaction_index import AbortedTxn

log = logging.getLogger("odradek.partition")

READ_COMMITTED = 1

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
"""ListOffsets' special timestamps (Kafka's ``ListOffsetsRequest``)."""


class FollowerState:
    """The leader's view of one follower (Kafka's ``ReplicaState``), from the follower's fetches."""

    def __init__(self, log_start_offset: int = -1, log_end_offset: int = -1) -> None:
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self.last_fetch_leader_log_end_offset = 0
        self.last_fetch_time_ms = 0
        self.last_caught_up_time_ms = 0
        """When the follower last had everything the leader had (the ISR's lag is measured from it)."""

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms

    def update_fetch_state(self, fetch_offset: int, start_offset: int, fetch_time_ms: int, leader_end_offset: int) -> None:
        """A fetch at ``fetch_offset`` while the leader's log ended at ``leader_end_offset`` (Kafka's
        ``updateFetchStateOrThrow``): reaching the leader's end, or the end of the follower's previous fetch,
        counts as caught up at that time."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = max(leader_end_offset, self.last_fetch_leader_log_end_offset)
        self.last_fetch_time_ms = fetch_time_ms

    def reset(self, now_ms: int, leader_end_offset: int, is_new_leader: bool, in_sync: bool) -> None:
        """A new leader epoch (Kafka's ``resetReplicaState``): an ISR member counts as caught up now, others
        not at all, so that none holds the high watermark back or joins the ISR before fetching."""
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        if is_new_leader:
            self.log_start_offset = self.log_end_offset = self.last_fetch_leader_log_end_offset = -1
            self.last_fetch_time_ms = 0
        else:
            self.last_fetch_leader_log_end_offset = leader_end_offset
            self.last_fetch_time_ms = now_ms if in_sync else 0


class PendingIsrChange(FrozenFields):
    """An ISR change the leader asked the controller for and awaits (Kafka's PendingExpandIsr /
    PendingShrinkIsr): the ISR it sent, and the maximal ISR meanwhile -- the committed ISR plus a replica
    being added -- over which the high watermark is computed, so no answer can make it go back."""

    __slots__ = _FIELDS = ("isr", "maximal_isr", "leader_epoch", "partition_epoch")
    isr: tuple[int, ...]
    maximal_isr: frozenset[int]
    leader_epoch: int
    partition_epoch: int

    def __init__(self, isr: tuple[int, ...], maximal_isr: frozenset[int], leader_epoch: int, partition_epoch: int) -> None:
        self._set(isr, maximal_isr, leader_epoch, partition_epoch)


class AlterPartitionResult(FrozenFields):
    """The controller's answer for one partition: an error, or the ISR and partition epoch it committed."""

    __slots__ = _FIELDS = ("error", "leader_epoch", "isr", "partition_epoch")
    error: ErrorCode
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int

    def __init__(self, error: ErrorCode, leader_epoch: int = -1, isr: tuple[int, ...] = (), partition_epoch: int = -1) -> None:
        self._set(error, leader_epoch, isr, partition_epoch)


RESET_ON = frozenset({ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA})
"""Answers that say the change was not applied: the committed ISR holds again (Kafka's handleAlterPartitionError)."""
GIVE_UP_ON = RESET_ON | {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.INVALID_REQUEST, ErrorCode.NEW_LEADER_ELECTED}
"""Answers after which the leader waits for LeaderAndIsr instead of asking again."""


@plain_init
class LogReadInfo:
    """A read from the leader's log with the offsets the fetch response reports (Kafka's LogReadInfo)."""

    __slots__ = ("data", "high_watermark", "last_stable_offset", "log_start_offset", "aborted_transactions", "diverging_epoch")

    def __init__(self, data: FetchDataInfo, high_watermark: int, last_stable_offset: int, log_start_offset: int, aborted_transactions: list[AbortedTxn], diverging_epoch: tuple[int, int] | None = None) -> None:
        self.data = data
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.aborted_transactions = aborted_transactions
        self.diverging_epoch = diverging_epoch
        """(epoch, end offset) where the follower's last fetched epoch parts from the leader's log (KIP-595):
        the follower truncates there before reading on."""


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        topic_id: Uuid,
        log: Log,
        state: PartitionState,
        local_broker_id: int,
        on_offsets_moved: Callable[[Partition], None] = lambda p: None,
        *,
        replica_lag_time_max_ms: int = 30000,
        is_alive: Callable[[int], bool] = lambda broker_id: True,
        alter_partition: Callable[[Partition, PendingIsrChange], None] | None = None,
        on_storage_error: Callable[[TopicPartition, str, OSError], None] = lambda tp, message, exc: None,
    ) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.state = state
        self.local_broker_id = local_broker_id
        self.on_offsets_moved = on_offsets_moved
        """Called when the log end offset or the high watermark moves: what waits on the partition checks again."""
        self.followers: dict[int, FollowerState] = {}
        """Every other replica's state as its fetches report it (Kafka's ``remoteReplicasMap``)."""
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.is_alive = is_alive
        """Whether a broker is live in the metadata (ZooKeeper mode's ISR eligibility)."""
        self.leader_epoch_start_offset: int | None = None
        self.alter_partition = alter_partition
        """Sends an ISR change to the controller (AlterPartition); None where no controller takes one (the
        embedded single-node controller: no followers, no ISR changes)."""
        self.pending_isr: PendingIsrChange | None = None
        self.on_storage_error = on_storage_error
        """Told of an I/O error on the log (Kafka's ``LogDirFailureChannel``): in a cluster, the broker's last
        log directory failing halts it."""

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.local_broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def isr(self) -> list[int]:
        return self.state.isr

    @property
    def config(self) -> LogConfig:
        return self.log.config

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    @property
    def size_in_bytes(self) -> int:
        return self.log.size_in_bytes

    @property
    def num_log_segments(self) -> int:
        return len(self.log.segments)

    def become_leader(self, state: PartitionState, is_new: bool, now_ms: int) -> None:
        """LeaderAndIsr made us leader (Kafka's ``makeLeader``): a new leader epoch starts at the LEO in the
        log's epoch cache, and every follower's state starts afresh. A state older than the partition's (a
        lower partition epoch) is ignored."""
        if not is_new and state.partition_epoch < self.state.partition_epoch:
            return
        is_new_leader = is_new or not self.is_leader
        is_new_epoch = is_new or state.leader_epoch > self.state.leader_epoch
        self.state = state
        self.pending_isr = None
        self.followers = {r: self.followers.get(r, FollowerState()) for r in state.replicas if r != self.local_broker_id}
        if is_new_epoch:
            start = self.log.log_end_offset
            self.log.assign_epoch_start_offset(state.leader_epoch, start)
            for replica, follower in self.followers.items():
                follower.reset(now_ms, start, is_new_leader, replica in state.isr)
            self.leader_epoch_start_offset = start
        self.maybe_increment_high_watermark(now_ms)

    def become_follower(self, state: PartitionState, is_new: bool) -> bool:
        """LeaderAndIsr made us a follower (Kafka's ``makeFollower``): the leader's view of the followers goes;
        True when the fetcher must start afresh (a new partition or leader epoch). A state older than the
        partition's (a lower partition epoch) is ignored."""
        if not is_new and state.partition_epoch < self.state.partition_epoch:
            return False
        new_epoch = is_new or state.leader_epoch > self.state.leader_epoch
        self.state = state
        self.pending_isr = None
        self.followers = {r: self.followers.get(r, FollowerState()) for r in state.replicas if r != self.local_broker_id}
        self.leader_epoch_start_offset = None
        return new_epoch

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Kafka's leader checks (``Partition.getLocalLog``), in its order: the requester's view of the epoch
        must not be stale or from the future (:meth:`check_epoch`), then this replica must lead (a follower
        asked with a stale epoch answers FENCED_LEADER_EPOCH). Both read in place when no epoch is given (a
        produce's checks, twice per partition): two Python calls fewer each time."""
        if current_leader_epoch != -1:
            self.check_epoch(current_leader_epoch)
        if self.state.leader != self.local_broker_id:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def check_epoch(self, current_leader_epoch: int = -1) -> None:
        """The requester's leader epoch against this replica's (-1: none given): all a read that any replica
        may serve checks (a v11+ consumer's fetch, KIP-392)."""
        if current_leader_epoch != -1:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    # -- append ---------------------------------------------------------------------------------------------

    def append_records_to_leader(self, validated: ValidationResult, required_acks: int, now_ms: int) -> AppendInfo:
        """Append what the validator passed (``storage.log_validator``) at the LEO; acks=all needs the ISR to
        hold ``min.insync.replicas``. A LogAppendTime topic stamps it with ``now_ms``."""
        self.check_leader()
        log_ = self.log
        if required_acks == -1 and len(self.isr) < self.effective_min_isr:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {set(self.isr)} is insufficient to satisfy the min.isr requirement of {self.effective_min_isr} for partition {self.topic}-{self.index}",
            )
        try:
            info = log_.append_as_leader(validated, self.state.leader_epoch, now_ms if log_.config.log_append_time else None)
        except OSError as exc:
            raise self._storage_failure(exc, "appending records to", "append to") from exc
        if not self.maybe_increment_high_watermark(now_ms) and not info.duplicate:
            self.on_offsets_moved(self)  # the LEO moved alone (followers to catch up): followers' fetches may complete
        return info

    def _storage_failure(self, exc: OSError, doing: str, failed_to: str) -> KafkaError:
        """Kafka answers an I/O failure on the log (a full or failed disk) with KAFKA_STORAGE_ERROR, and tells
        the log directory failure channel, which takes the directory offline."""
        self.on_storage_error((self.topic, self.index), f"Error while {doing} {self.topic}-{self.index} in dir {self.log.dir.parent}", exc)
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Failed to {failed_to} {self.topic}-{self.index}: {exc}")

    # -- follower -------------------------------------------------------------------------------------------

    @property
    def latest_epoch(self) -> int | None:
        """The log's last leader epoch (None for a log without epochs: the old message format)."""
        return self.log.latest_epoch

    def append_records_to_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo | None:
        """Append what the leader fetched, its offsets and epochs kept (Kafka's
        ``appendRecordsToFollowerOrFutureReplica``); None when nothing was whole. A corrupt batch raises
        its KafkaError (the fetcher asks again), an I/O failure KAFKA_STORAGE_ERROR."""
        try:
            info = self.log.append_as_follower(records)
        except OSError as exc:
            raise self._storage_failure(exc, "appending records to", "append to") from exc
        if info is not None:
            self.on_offsets_moved(self)
        return info

    def update_follower_high_watermark(self, leader_high_watermark: int, leader_log_start_offset: int) -> None:
        """Take the leader's high watermark and log start offset (never past the high watermark), as the
        follower's fetch response carries them (Kafka's ``processPartitionData``)."""
        log = self.log
        old = log.high_watermark
        log.high_watermark = leader_high_watermark
        if leader_log_start_offset >= 0:
            try:
                log.maybe_increment_log_start_offset(min(leader_log_start_offset, log.high_watermark))
            except OSError as exc:
                raise self._storage_failure(exc, "moving the log start offset of", "move the log start offset of") from exc
        if log.high_watermark != old:
            self.on_offsets_moved(self)

    def truncate_to(self, offset: int) -> None:
        """Cut the follower's log at ``offset`` (Kafka's ``Partition.truncateTo``), e.g. where its history
        parts from the leader's."""
        try:
            self.log.truncate_to(offset)
        except OSError as exc:
            raise self._storage_failure(exc, "truncating", "truncate") from exc
        self.on_offsets_moved(self)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the follower's log to start at ``offset`` (Kafka's ``truncateFullyAndStartAt``): it is behind
        the leader's log start."""
        try:
            self.log.truncate_fully_and_start_at(offset)
        except OSError as exc:
            raise self._storage_failure(exc, "truncating", "truncate") from exc
        self.on_offsets_moved(self)

    # -- reads ----------------------------------------------------------------------------------------------

    def fetch_upper_bound(self, replica_id: int, isolation: int) -> int:
        """How far a fetch or offset lookup may see: a follower the LEO, READ_COMMITTED the last stable
        offset, any other consumer the high watermark."""
        if replica_id >= 0:
            return self.log.log_end_offset
        if isolation == READ_COMMITTED:
            return self.log.last_stable_offset
        return self.log.high_watermark

    def read_records(self, fetch_offset: int, max_bytes: int, replica_id: int, isolation: int, min_one_message: bool, last_fetched_epoch: int = -1, follower_log_start_offset: int = -1, now_ms: int = 0, update_fetch_state: bool = True) -> LogReadInfo:
        """A fetch's read (Kafka's ``Partition.fetchRecords``). A fetch whose last fetched epoch parts from
        this log gets no records but the diverging epoch; a follower's fetch then reports its position, as
        of the log end before the read (appends after it do not keep the follower from catching up), unless
        ``update_fetch_state`` is False (a read again of a fetch that waited: its position was taken)."""
        log = self.log
        follower = self._follower_or_raise(replica_id) if replica_id >= 0 else None
        high_watermark, last_stable, log_start, log_end = log.high_watermark, log.last_stable_offset, log.log_start_offset, log.log_end_offset
        # fetch_upper_bound's answer, from the offsets just read (two Python calls fewer per read)
        upper = log_end if replica_id >= 0 else last_stable if isolation == READ_COMMITTED else high_watermark
        if last_fetched_epoch >= 0:
            epoch, end_offset = log.end_offset_for_epoch(last_fetched_epoch)
            if epoch < 0 or end_offset < 0:
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"Could not determine the end offset of the last fetched epoch {last_fetched_epoch} from the request")
            if fetch_offset < log_start:
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"Received request for offset {fetch_offset} for partition {self.topic}-{self.index}, but we only have log segments starting from offset: {log_start}.")
            if epoch < last_fetched_epoch or end_offset < fetch_offset:
                return LogReadInfo(FetchDataInfo(LogOffsetMetadata(fetch_offset)), high_watermark, last_stable, log_start, [], (epoch, end_offset))
        if max_bytes < 0:
            # Kafka's segment read refuses a negative size (IllegalArgumentException): this partition
            # alone answers UNKNOWN_SERVER_ERROR, the others are served.
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Invalid max size {max_bytes} for log read")
        data = log.read(fetch_offset, max_bytes, upper, min_one_message)
        if follower is not None and update_fetch_state:
            self.update_follower_fetch_state(replica_id, follower, fetch_offset, follower_log_start_offset, now_ms, log_end)
        aborted = []
        if isolation == READ_COMMITTED and replica_id < 0 and data.size > 0:
            aborted = log.aborted_transactions(fetch_offset, data)
        return LogReadInfo(data, high_watermark, last_stable, log_start, aborted)

    # -- a move to another log directory (AlterReplicaLogDirs) -------------------------------------------------

    def copy_to_future(self, future: Log, max_bytes: int) -> int:
        """Bring the future log closer to this partition's log, as a follower its leader (Kafka's
        ``ReplicaAlterLogDirsThread``; on a worker thread): truncated first where the logs part (this log was
        truncated, or its start moved past the copy), then the next chunk appended. Returns the bytes appended."""
        current = self.log
        with current.lock:  # a truncation of the current log does not run in the middle of the read
            start, end = current.log_start_offset, current.log_end_offset
            keep = min(future.log_end_offset, end)
            if future.latest_epoch is not None:  # a follower's truncation: where the copy's last epoch ends here
                epoch_end = current.end_offset_for_epoch(future.latest_epoch)[1]
                keep = min(keep, epoch_end) if epoch_end >= 0 else start
            if keep < start:
                future.truncate_fully_and_start_at(start)
            elif keep < future.log_end_offset:
                future.truncate_to(keep)
            data = current.read(future.log_end_offset, max_bytes).read()
            high_watermark = current.high_watermark
        if data:
            future.append_as_follower(data)
        future.high_watermark = min(high_watermark, future.log_end_offset)
        if future.log_start_offset < start <= future.log_end_offset:
            future.maybe_increment_log_start_offset(start)
        return len(data)

    def maybe_replace_current_with_future(self, future: Log, replace: Callable[[], Log]) -> bool:
        """Kafka's ``maybeReplaceCurrentWithFutureReplica``, called on the event loop where appends happen: once
        the copy has reached this log's end, ``replace`` swaps it in and it becomes this partition's log."""
        if future.log_end_offset != self.log.log_end_offset:
            return False
        self.log = replace()
        log.info("The current replica of %s-%d is successfully replaced with the future replica", self.topic, self.index)
        return True

    def fetch_offset_for_timestamp(self, timestamp: int, isolation: int, replica_id: int) -> tuple[int, int, int]:
        """(timestamp, offset, leader epoch) as Kafka's ``Partition.fetchOffsetForTimestamp`` answers."""
        log = self.log
        fetchable = self.fetch_upper_bound(replica_id, isolation)
        if timestamp == LATEST_TIMESTAMP:
            return -1, fetchable, _known(log.latest_epoch)  # Kafka: the epoch cache's latest epoch
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            offset = log.log_start_offset
            return -1, offset, _known(log.epoch_for_offset(offset))  # Kafka: the log start offset's epoch
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return -1, -1, -1
        if timestamp == MAX_TIMESTAMP:
            found = log.max_timestamp_and_offset()
        else:
            found = log.offset_for_timestamp(timestamp)
        if found is None:
            return -1, -1, -1
        ts, offset, epoch = found
        if offset >= fetchable:
            return -1, -1, -1
        return ts, offset, epoch

    def last_offset_for_leader_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= requested, the offset where it ended); (-1, -1) if unknown."""
        return self.log.end_offset_for_epoch(leader_epoch)

    def active_producers(self) -> list[tuple[int, ProducerStateEntry]]:
        """DescribeProducers: the producers the log keeps state for, in Kafka's order."""
        return self.log.producer_state.active_producers()

    def last_producer_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """What the log last took from the producer (its open transaction, if any)."""
        return self.log.producer_state.last_entry(producer_id)

    # -- delete records -------------------------------------------------------------------------------------

    def delete_records_on_leader(self, offset: int) -> int:
        """The new low watermark after deleting the records below ``offset`` (Kafka's
        ``Partition.deleteRecordsOnLeader``): only where ``cleanup.policy`` includes delete."""
        if not self.log.config.delete:
            raise KafkaError(ErrorCode.POLICY_VIOLATION, f"Records of partition {self.topic}-{self.index} can not be deleted due to the configured policy")
        try:
            return self.log.delete_records_before(offset)
        except OSError as exc:
            # A full or failed disk: the request is answered, and the deletion can be asked again once it is fixed.
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Failed to delete records of {self.topic}-{self.index}: {exc}") from exc

    # -- replication ----------------------------------------------------------------------------------------

    @property
    def effective_min_isr(self) -> int:
        """``min.insync.replicas``, but never more than the replicas there are (Kafka's ``effectiveMinIsr``)."""
        return min(self.log.config.min_insync_replicas, len(self.followers) + 1)

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.effective_min_isr

    def _follower_or_raise(self, replica_id: int) -> FollowerState:
        follower = self.followers.get(replica_id)
        if follower is None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"Received fetch request from unknown replica {replica_id} for partition {self.topic}-{self.index}")
        return follower

    def update_follower_fetch_state(self, replica_id: int, follower: FollowerState, fetch_offset: int, start_offset: int, now_ms: int, leader_end_offset: int) -> None:
        """A follower's fetch tells us its position (Kafka's ``updateFollowerFetchState``); a new LEO may move
        the high watermark."""
        previous_end = follower.log_end_offset
        follower.update_fetch_state(fetch_offset, start_offset, now_ms, leader_end_offset)
        self.maybe_expand_isr(replica_id, follower)
        if follower.log_end_offset != previous_end:
            self.maybe_increment_high_watermark(now_ms)

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.pending_isr.maximal_isr if self.pending_isr is not None else frozenset(self.isr)

    def maybe_expand_isr(self, replica_id: int, follower: FollowerState) -> None:
        """A live follower out of the ISR that has reached the high watermark, in this leader epoch, is asked
        into it (Kafka's ``maybeExpandIsr``); one change at a time."""
        if self.alter_partition is None or self.pending_isr is not None or replica_id in self.isr or not self.is_alive(replica_id):
            return
        if self.leader_epoch_start_offset is None or follower.log_end_offset < max(self.log.high_watermark, self.leader_epoch_start_offset):
            return
        isr = (*self.isr, replica_id)
        self._submit(PendingIsrChange(isr, frozenset(isr), self.leader_epoch, self.state.partition_epoch))

    def out_of_sync_replicas(self, now_ms: int) -> set[int]:
        """ISR followers not caught up within ``replica.lag.time.max.ms`` (Kafka's ``getOutOfSyncReplicas``):
        stuck or too slow; none while a change is pending."""
        if self.pending_isr is not None:
            return set()
        leo = self.log.log_end_offset
        return {
            r for r in self.isr
            if r != self.local_broker_id and (r not in self.followers or not self.followers[r].is_caught_up(leo, now_ms, self.replica_lag_time_max_ms))
        }

    def maybe_shrink_isr(self, now_ms: int) -> None:
        """Ask the controller to drop the out-of-sync followers from the ISR (Kafka's ``maybeShrinkIsr``,
        run every ``replica.lag.time.max.ms`` / 2); the high watermark keeps counting them until it answers."""
        if self.alter_partition is None or not self.is_leader:
            return
        out = self.out_of_sync_replicas(now_ms)
        if out:
            log.info("Shrinking ISR of %s-%d from %s to %s", self.topic, self.index, self.isr, [r for r in self.isr if r not in out])
            self._submit(PendingIsrChange(tuple(r for r in self.isr if r not in out), frozenset(self.isr), self.leader_epoch, self.state.partition_epoch))

    def _submit(self, change: PendingIsrChange) -> None:
        assert self.alter_partition is not None
        self.pending_isr = change
        self.alter_partition(self, change)

    def on_alter_partition(self, change: PendingIsrChange, result: AlterPartitionResult) -> bool:
        """The controller's answer to ``change`` (Kafka's ``handleAlterPartitionUpdate``/``Error``): True to send
        it again. An answer to a change no longer pending, or for an older leader or partition epoch, is
        ignored."""
        if self.pending_isr is not change:
            return False
        if result.error != ErrorCode.NONE:
            if result.error in RESET_ON:
                self.pending_isr = None
            if result.error in GIVE_UP_ON:
                log.info("ISR change of %s-%d to %s failed: %s", self.topic, self.index, change.isr, result.error.name)
                return False
            log.warning("ISR change of %s-%d to %s failed with %s; retrying", self.topic, self.index, change.isr, result.error.name)
            return True
        if result.leader_epoch != self.leader_epoch or result.partition_epoch < self.state.partition_epoch:
            return False
        self.state = PartitionState(self.state.leader, self.state.leader_epoch, list(result.isr), self.state.replicas, result.partition_epoch, self.state.adding_replicas, self.state.removing_replicas)
        self.pending_isr = None
        log.info("ISR of %s-%d updated to %s and version updated to %d", self.topic, self.index, list(result.isr), result.partition_epoch)
        self.maybe_increment_high_watermark()
        return False

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """Whether an acks=all append ending before ``required_offset`` is done, and its outcome (Kafka's
        ``checkEnoughReplicasReachOffset``): once the high watermark passes it, NOT_ENOUGH_REPLICAS_AFTER_APPEND
        if the ISR shrank below ``min.insync.replicas`` meanwhile; NOT_LEADER_OR_FOLLOWER once no longer leader."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return False, ErrorCode.NONE
        pending = self.pending_isr  # the maximal ISR's size, without making it a set per acks=all append
        if len(pending.maximal_isr if pending is not None else self.state.isr) < self.effective_min_isr:
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE

    def maybe_increment_high_watermark(self, now_ms: int | None = None) -> bool:
        """HW = the lowest LEO over the ISR and the followers caught up enough to join it soon (Kafka's
        ``maybeIncrementLeaderHW``); it only moves forward, and not at all while the ISR is below
        ``min.insync.replicas`` (KIP-966's rule, in Kafka 3.9)."""
        leo = self.log.log_end_offset
        new_hw = leo
        if self.followers:
            if self.is_under_min_isr:
                return False
            now_ms = int(time.time() * 1000) if now_ms is None else now_ms
            maximal_isr = self.maximal_isr
            for replica, follower in self.followers.items():
                if follower.log_end_offset < new_hw and (
                    replica in maximal_isr or (follower.is_caught_up(leo, now_ms, self.replica_lag_time_max_ms) and self.is_alive(replica))
                ):
                    new_hw = follower.log_end_offset
        elif not self.state.isr and self.is_leader:
            return False  # a sole replica's effective min ISR is one: under it only with an empty ISR
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            self.on_offsets_moved(self)
            return True
        return False


def _known(epoch: int | None) -> int:
    """Kafka answers -1 where the epoch cache has no entry."""
    return -1 if epoch is None else epoch
