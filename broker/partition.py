"""A partition replica as the broker hosts it: leader epoch, ISR, LEO and high watermark, and the one way
the broker reaches its log (Kafka's ``Partition``).

Even on one node the broker follows Kafka's replication rules: the high watermark is the minimum log end
offset over the ISR (on one node, the leader's own LEO), consumers read below it, acks=all completes
when it passes the batch, and produce with acks=all fails when the ISR is smaller than
``min.insync.replicas``. Followers (cluster mode) report their LEO through fetches.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable

from odradek.controller.metadata import PartitionState
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import BatchHeader
from odradek.storage.log import AppendInfo, FetchDataInfo, Log
from odradek.storage.log_config import LogConfig
from odradek.storage.producer_state import AppendOrigin, ProducerStateEntry
from odradek.storage.transaction_index import AbortedTxn

READ_COMMITTED = 1

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
"""ListOffsets' special timestamps (Kafka's ``ListOffsetsRequest``)."""


@dataclass
class FollowerState:
    log_end_offset: int = 0


@dataclass(slots=True)
class LogReadInfo:
    """A read from the leader's log with the offsets the fetch response reports (Kafka's LogReadInfo)."""

    data: FetchDataInfo
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[AbortedTxn]


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: Log
    state: PartitionState
    local_broker_id: int
    on_offsets_moved: Callable[["Partition"], None] = lambda p: None
    """Called when the log end offset or the high watermark moves: what waits on the partition checks again."""
    followers: dict[int, FollowerState] = field(default_factory=dict)

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

    def become_leader(self, state: PartitionState) -> None:
        """LeaderAndIsr made us leader: start a new epoch in the log's epoch cache at the LEO."""
        self.state = state
        self.followers = {r: FollowerState(0) for r in state.replicas if r != self.local_broker_id}
        self.log.assign_epoch_start_offset(state.leader_epoch, self.log.log_end_offset)
        self.maybe_increment_high_watermark()

    def become_follower(self, state: PartitionState, is_new: bool) -> bool:
        """LeaderAndIsr made us a follower (Kafka's ``makeFollower``): the leader's view of the followers goes;
        True when the fetcher must start afresh (a new partition or leader epoch). A state older than the
        partition's (a lower partition epoch) is ignored."""
        if not is_new and state.partition_epoch < self.state.partition_epoch:
            return False
        new_epoch = is_new or state.leader_epoch > self.state.leader_epoch
        self.state = state
        self.followers = {}
        return new_epoch

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Kafka's leader checks: the requester's view of the epoch must not be stale or from the future."""
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if current_leader_epoch != -1:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    # -- append ---------------------------------------------------------------------------------------------

    def append_records_to_leader(self, records: bytearray | memoryview, headers: list[tuple[int, BatchHeader]], required_acks: int, origin: AppendOrigin, now_ms: int) -> AppendInfo:
        """Append validated batches (``storage.log_validator``) at the LEO; acks=all needs the ISR to hold
        ``min.insync.replicas``. A LogAppendTime topic stamps them with ``now_ms``."""
        self.check_leader()
        config = self.log.config
        if required_acks == -1 and len(self.isr) < config.min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {set(self.isr)} is insufficient to satisfy the min.isr requirement of {config.min_insync_replicas} for partition {self.topic}-{self.index}",
            )
        try:
            info = self.log.append_as_leader(records, self.leader_epoch, now_ms if config.log_append_time else None, origin=origin, headers=headers)
        except OSError as exc:
            # Kafka answers an I/O failure on the log (a full or failed disk) with KAFKA_STORAGE_ERROR.
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Failed to append to {self.topic}-{self.index}: {exc}") from exc
        if not self.maybe_increment_high_watermark() and not info.duplicate:
            self.on_offsets_moved(self)  # the LEO moved alone (followers to catch up): followers' fetches may complete
        return info

    # -- reads ----------------------------------------------------------------------------------------------

    def fetch_upper_bound(self, replica_id: int, isolation: int) -> int:
        """How far a fetch or offset lookup may see: a follower the LEO, READ_COMMITTED the last stable
        offset, any other consumer the high watermark."""
        if replica_id >= 0:
            return self.log.log_end_offset
        if isolation == READ_COMMITTED:
            return self.log.last_stable_offset
        return self.log.high_watermark

    def read_records(self, fetch_offset: int, max_bytes: int, replica_id: int, isolation: int, min_one_message: bool) -> LogReadInfo:
        """A fetch's read (Kafka's ``Partition.fetchRecords``): a follower first reports its position."""
        log = self.log
        if replica_id >= 0:
            self.update_follower(replica_id, fetch_offset)
        upper = self.fetch_upper_bound(replica_id, isolation)
        high_watermark, last_stable, log_start = log.high_watermark, log.last_stable_offset, log.log_start_offset
        if max_bytes < 0:
            # Kafka's segment read refuses a negative size (IllegalArgumentException): this partition
            # alone answers UNKNOWN_SERVER_ERROR, the others are served.
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Invalid max size {max_bytes} for log read")
        data = log.read(fetch_offset, max_bytes, upper, min_one_message)
        aborted = []
        if data.size > 0 and isolation == READ_COMMITTED and replica_id < 0:
            aborted = log.aborted_transactions(fetch_offset, data)
        return LogReadInfo(data, high_watermark, last_stable, log_start, aborted)

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
        """DescribeProducers: the producers the log keeps state for, by id."""
        return sorted(self.log.producer_state.producers.items())

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

    def update_follower(self, replica_id: int, fetch_offset: int) -> None:
        """A follower's fetch tells us its LEO; it may move the high watermark."""
        follower = self.followers.setdefault(replica_id, FollowerState())
        follower.log_end_offset = fetch_offset
        self.maybe_increment_high_watermark()

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """Whether an acks=all append ending before ``required_offset`` is done, and its outcome (Kafka's
        ``checkEnoughReplicasReachOffset``): once the high watermark passes it, NOT_ENOUGH_REPLICAS_AFTER_APPEND
        if the ISR shrank below ``min.insync.replicas`` meanwhile; NOT_LEADER_OR_FOLLOWER once no longer leader."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return False, ErrorCode.NONE
        if len(self.isr) < self.log.config.min_insync_replicas:
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE

    def maybe_increment_high_watermark(self) -> bool:
        leo = self.log.log_end_offset
        new_hw = min([leo] + [self.followers[r].log_end_offset for r in self.isr if r != self.local_broker_id and r in self.followers])
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            self.on_offsets_moved(self)
            return True
        return False


def _known(epoch: int | None) -> int:
    """Kafka answers -1 where the epoch cache has no entry."""
    return -1 if epoch is None else epoch
