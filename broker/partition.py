"""A partition replica as the broker hosts it: leader epoch, ISR, LEO and high watermark.

Even on one node the broker follows Kafka's replication rules: the high watermark is the minimum log end
offset over the ISR (on one node, the leader's own LEO), consumers read below it, acks=all completes
when it passes the batch, and produce with acks=all fails when the ISR is smaller than
``min.insync.replicas``. Followers (cluster mode) report their LEO through fetches and leave the ISR after
``replica.lag.time.max.ms``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

from odradek.controller.metadata import PartitionState
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.log import Log


@dataclass
class FollowerState:
    log_end_offset: int = 0
    last_caught_up_ms: int = 0


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: Log
    state: PartitionState
    local_broker_id: int
    on_high_watermark: Callable[["Partition"], None] = lambda p: None
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
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    def become_leader(self, state: PartitionState) -> None:
        """LeaderAndIsr made us leader: start a new epoch in the log's epoch cache at the LEO."""
        self.state = state
        now = _now_ms()
        self.followers = {r: FollowerState(0, now) for r in state.replicas if r != self.local_broker_id}
        self.log.assign_epoch_start_offset(state.leader_epoch, self.log.log_end_offset)
        self.maybe_increment_high_watermark()

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Kafka's leader checks: the requester's view of the epoch must not be stale or from the future."""
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if current_leader_epoch != -1:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def append_as_leader(self, records: bytearray | memoryview, required_acks: int, log_append_time: int | None, min_insync_replicas: int, headers: list | None = None):
        self.check_leader()
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {set(self.isr)} is insufficient to satisfy the min.isr requirement of {min_insync_replicas} for partition {self.topic}-{self.index}",
            )
        try:
            info = self.log.append_as_leader(records, self.leader_epoch, log_append_time, headers=headers)
        except OSError as exc:
            # Kafka answers an I/O failure on the log (a full or failed disk) with KAFKA_STORAGE_ERROR.
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Failed to append to {self.topic}-{self.index}: {exc}") from exc
        self.maybe_increment_high_watermark()
        return info

    def update_follower(self, replica_id: int, fetch_offset: int) -> None:
        """A follower's fetch tells us its LEO; it may rejoin the ISR and move the high watermark."""
        follower = self.followers.setdefault(replica_id, FollowerState())
        follower.log_end_offset = fetch_offset
        if fetch_offset >= self.log.log_end_offset:
            follower.last_caught_up_ms = _now_ms()
        self.maybe_increment_high_watermark()

    def maybe_increment_high_watermark(self) -> bool:
        leo = self.log.log_end_offset
        new_hw = min([leo] + [self.followers[r].log_end_offset for r in self.isr if r != self.local_broker_id and r in self.followers])
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            self.on_high_watermark(self)
            return True
        return False


def _now_ms() -> int:
    return int(time.time() * 1000)
