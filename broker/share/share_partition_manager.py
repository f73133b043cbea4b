"""The broker's share partitions and share sessions (Kafka's ``SharePartitionManager``): the I/O shell
around :class:`~odradek.broker.share.share_partition.SharePartition`.

A share partition is created at the first ShareFetch of a group for a partition this broker leads: its
state is read from the share coordinator (``__share_group_state``), or, for a partition the group never
consumed, starts where the group's ``share.auto.offset.reset`` says (``latest``, the default: the high
watermark; ``earliest``: the log start; ``by_duration:<duration>``: the first record that recent) and is
persisted at once. Reads go through the replica manager; every
change of delivery state is written to the share coordinator; acquisition locks expire on a timer.

Share sessions (KIP-932's analogue of fetch sessions) are keyed by group and member: epoch 0 opens one
with the request's partitions, each later request carries the next epoch and only what changed
(partitions added, ``ForgottenTopicsData``), and epoch -1 closes it, releasing the member's records; so
does the close of the connection the session's requests came on.

When this broker does not coordinate a share partition's key (another broker leads its
``__share_group_state`` partition), the state is kept in memory only: the persister's inter-broker RPCs
(Read/WriteShareGroupState) are not served yet -- see docs/protocol.md.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import anyio

from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.share.share_records import SharePartitionKey
from odradek.broker.coordinator.timers import Timer, Timers
from odradek.broker.group_config import auto_offset_reset_duration_ms
from odradek.broker.replication.fetch_session import FetchPartition
from odradek.broker.replication.replica_manager import FetchParams
from odradek.broker.share.share_partition import Acknowledgement, AcquiredRecords, SharePartition, StateUpdate
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import iter_batch_positions, parse_header

if TYPE_CHECKING:
    from odradek.broker.coordinator.share.share_coordinator import ShareCoordinator
    from odradek.broker.replication.replica_manager import ReplicaManager

log = logging.getLogger("odradek.share")

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
UNINITIALIZED = -1
"""A share partition's start offset before any consumer of the group initialized it (AlterShareGroupOffsets
with a negative offset): it starts where ``share.auto.offset.reset`` says."""
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

PartitionId = tuple[uuid.UUID, int]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class ShareConfig:
    """A share group's settings: the broker's ``group.share.*``, overridden by the group's configs."""

    lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_in_flight: int = 2000
    auto_offset_reset: str = "latest"
    isolation_level: int = READ_UNCOMMITTED


@dataclass
class ShareSession:
    group: str
    member: str
    epoch: int
    """The epoch the member's next request must carry."""
    partitions: dict[PartitionId, None] = field(default_factory=dict)
    connection_id: str | None = None
    """The connection of its latest request: when that connection closes, the session goes (as Kafka's)."""


@dataclass
class PartitionAnswer:
    """One partition of a ShareFetch/ShareAcknowledge response."""

    topic_id: uuid.UUID
    partition: int
    error: ErrorCode = ErrorCode.NONE
    acknowledge_error: ErrorCode = ErrorCode.NONE
    acknowledged: bool = False
    records: bytes | None = None
    acquired: list[AcquiredRecords] = field(default_factory=list)


class SharePartitionManager:
    def __init__(
        self,
        replica_manager: "ReplicaManager",
        coordinator: "ShareCoordinator | None",
        group_config: Callable[[str], ShareConfig],
        *,
        max_sessions: int = 2000,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.replica_manager = replica_manager
        self.coordinator = coordinator
        self.group_config = group_config
        self.max_sessions = max_sessions
        self.clock = clock
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.timers = Timers(clock, self._on_schedule)
        self._wake: anyio.Event | None = None
        self._sleeping_until: int | None = None

    # -- sessions -----------------------------------------------------------------------------------------

    def open_session(self, group: str, member: str, epoch: int, added: list[PartitionId], forgotten: list[PartitionId]) -> tuple[ErrorCode, ShareSession | None]:
        """The session a request runs in, after applying its partition changes; an error for a request whose
        epoch does not follow the session's."""
        key = (group, member)
        session = self.sessions.get(key)
        if epoch == INITIAL_EPOCH:
            if session is None and len(self.sessions) >= self.max_sessions:
                return ErrorCode.SHARE_SESSION_LIMIT_REACHED, None
            session = self.sessions[key] = ShareSession(group, member, 1)
        elif session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        elif epoch == FINAL_EPOCH:
            return ErrorCode.NONE, session
        elif epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        else:
            session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp in added:
            session.partitions[tp] = None
        return ErrorCode.NONE, session

    def connection_closed(self, connection_id: str) -> None:
        """A client's connection closed (its consumer closed or died): its share sessions end and the records
        their members hold go back to the others at once, without waiting for their locks to expire."""
        for session in [s for s in self.sessions.values() if s.connection_id == connection_id]:
            self.close_session(session)

    def delete_group(self, group: str) -> None:
        """The share group was deleted: its share partitions go, and their persisted state (tombstones)."""
        for session in [s for s in self.sessions.values() if s.group == group]:
            del self.sessions[(session.group, session.member)]
        self.delete_state(group)

    def delete_state(self, group: str, topic_id: uuid.UUID | None = None) -> list[Deferred[ErrorCode]]:
        """The group's share partitions (of one topic, or all) go, with their persisted state (tombstones):
        the next consumer starts where ``share.auto.offset.reset`` says (DeleteShareGroupOffsets)."""
        def chosen(key: SharePartitionKey) -> bool:
            return key.group == group and (topic_id is None or key.topic_id == topic_id)

        self._forget(chosen)
        if self.coordinator is None:
            return []
        return [self.coordinator.delete_state(key) for key in self.coordinator.group_partitions(group) if chosen(key)]

    def reset_start_offset(self, group: str, topic_id: uuid.UUID, partition: int, start_offset: int) -> Deferred[ErrorCode]:
        """AlterShareGroupOffsets: the share partition starts again at ``start_offset`` with nothing in flight
        (a negative offset: as if never consumed, Kafka's uninitialized -1)."""
        key = SharePartitionKey(group, topic_id, partition)
        self._forget(lambda k: k == key)
        coordinator = self._local_coordinator(key)
        if coordinator is None:
            return Deferred.completed(ErrorCode.NONE)  # kept by another broker (see the module's docstring)
        return coordinator.initialize_state(key, max(start_offset, UNINITIALIZED))

    def _forget(self, chosen: Callable[[SharePartitionKey], bool]) -> None:
        for key in [k for k in self.partitions if chosen(k)]:
            del self.partitions[key]
            self.timers.cancel(key)

    def close_session(self, session: ShareSession) -> None:
        """Epoch -1 (or the member left): the member's records go back to the others."""
        self.sessions.pop((session.group, session.member), None)
        self.release_member(session.group, session.member)

    def release_member(self, group: str, member: str) -> None:
        self.sessions.pop((group, member), None)
        for key, sp in list(self.partitions.items()):
            if key.group == group:
                self._changed(key, sp.release(member), available=True)

    # -- acknowledgements -----------------------------------------------------------------------------------

    def acknowledge(self, group: str, member: str, tp: PartitionId, batches: list[Acknowledgement]) -> Deferred[ErrorCode]:
        key = SharePartitionKey(group, *tp)
        sp = self.partitions.get(key)
        if sp is None:
            return Deferred.completed(ErrorCode.INVALID_RECORD_STATE)
        error, update = sp.acknowledge(member, batches, self.clock())
        if error != ErrorCode.NONE:
            return Deferred.completed(error)
        self._schedule_expiry(key, sp)
        return self._changed(key, update, available=True)

    # -- fetching ---------------------------------------------------------------------------------------------

    def fetch(self, group: str, member: str, partitions: list[PartitionId], max_bytes: int, max_records: int, strict: bool) -> list[PartitionAnswer]:
        """Acquire for ``member`` what each partition has available now (``max_records`` across them, whole
        batches unless ``strict``: the record-limit acquire mode)."""
        answers = []
        budget = max_bytes
        left = max_records
        for tp in partitions:
            answer = PartitionAnswer(*tp)
            answers.append(answer)
            if left <= 0 or budget <= 0:
                continue
            error, sp, topic = self._share_partition(group, tp)
            if sp is None:
                answer.error = error
                continue
            if not sp.can_acquire():
                continue
            config = self.group_config(group)
            read = self._read(topic, tp, sp.next_fetch_offset(), budget, config.isolation_level)
            if read.error == ErrorCode.OFFSET_OUT_OF_RANGE and read.log_start_offset > sp.start_offset:
                self._changed(SharePartitionKey(group, *tp), sp.move_start_to(read.log_start_offset))
                read = self._read(topic, tp, sp.next_fetch_offset(), budget, config.isolation_level)
            if read.error:
                answer.error = ErrorCode(read.error)
                continue
            if read.log_start_offset > sp.start_offset:
                self._changed(SharePartitionKey(group, *tp), sp.move_start_to(read.log_start_offset))
            if read.records is None:
                continue
            data = b"".join(s.read() for s in read.records.slices)
            batches = [(pos, size, parse_header(data, pos).last_offset, base) for pos, base, size in iter_batch_positions(data)]
            acquired = sp.acquire(member, [(base, last) for _, _, last, base in batches], left, self.clock(), strict)
            if not acquired:
                continue
            self._schedule_expiry(SharePartitionKey(group, *tp), sp)
            answer.acquired = acquired
            answer.records = b"".join(
                data[pos : pos + size] for pos, size, last, base in batches if any(a.first <= last and base <= a.last for a in acquired)
            )
            budget -= len(answer.records)
            left -= sum(a.last - a.first + 1 for a in acquired)
        return answers

    async def wait_for_records(self, partitions: list[PartitionId], timeout_s: float) -> None:
        """A share fetch that acquired nothing waits: woken by an append to one of its partitions or by
        records becoming available again (RELEASE, an expired lock, a member leaving)."""
        keys = [(name, index) for topic_id, index in partitions if (name := self.replica_manager.by_topic_id.get(topic_id)) is not None]
        if not keys or timeout_s <= 0:
            await anyio.sleep(max(0.0, timeout_s))
            return
        await self.replica_manager.purgatory.wait(keys, timeout_s)

    # -- internals ------------------------------------------------------------------------------------------

    def _read(self, topic: str, tp: PartitionId, offset: int, max_bytes: int, isolation: int) -> Any:
        params = FetchParams(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation=isolation, hard_limit=False, magic=None)
        (read,) = self.replica_manager.fetch_messages(params, [FetchPartition((topic, tp[1]), topic, tp[0], tp[1], offset, max_bytes)])
        return read

    def _share_partition(self, group: str, tp: PartitionId) -> tuple[ErrorCode, SharePartition | None, str]:
        topic = self.replica_manager.by_topic_id.get(tp[0])
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, ""
        key = SharePartitionKey(group, *tp)
        sp = self.partitions.get(key)
        if sp is not None:
            return ErrorCode.NONE, sp, topic
        try:
            partition = self.replica_manager.leader_partition(topic, tp[1])
        except Exception as exc:  # KafkaError: not the leader, unknown partition, offline
            return getattr(exc, "code", ErrorCode.NOT_LEADER_OR_FOLLOWER), None, topic
        config = self.group_config(group)
        state = None
        if self.coordinator is not None:
            error, coordinator = self.coordinator.locate(key)
            if error != ErrorCode.NONE:  # the first share group creates __share_group_state: ask again
                return error, None, topic
            if coordinator == self.coordinator.runtime.broker_id:
                error, state = self.coordinator.read_state(key)
                if error != ErrorCode.NONE:
                    return error, None, topic
        if state is not None and state.start_offset != UNINITIALIZED:
            sp = SharePartition(state.start_offset, state.batches, delivery_count_limit=config.delivery_count_limit, lock_duration_ms=config.lock_duration_ms, max_in_flight=config.max_in_flight)
        else:
            start = self._start_offset(partition, config.auto_offset_reset)
            sp = SharePartition(start, delivery_count_limit=config.delivery_count_limit, lock_duration_ms=config.lock_duration_ms, max_in_flight=config.max_in_flight)
            self._persist(key, StateUpdate(start, []))
        self.partitions[key] = sp
        return ErrorCode.NONE, sp, topic

    def _start_offset(self, partition: Any, auto_offset_reset: str) -> int:
        """Where a share partition the group never consumed starts: the log start (``earliest``), the high
        watermark (``latest``), or the first record of the last ``by_duration`` (the high watermark when
        every record is older), as Kafka's ``SharePartition`` initializes it."""
        if auto_offset_reset == "earliest":
            return int(partition.log_start_offset)
        duration = auto_offset_reset_duration_ms(auto_offset_reset)
        if duration is None:
            return int(partition.high_watermark)
        _, offset, _ = partition.fetch_offset_for_timestamp(self.clock() - duration, READ_UNCOMMITTED, -1)
        return int(offset) if offset >= 0 else int(partition.high_watermark)

    def _changed(self, key: SharePartitionKey, update: StateUpdate | None, available: bool = False) -> Deferred[ErrorCode]:
        """Persist a change of delivery state; wake the fetches waiting on the partition when records became
        available again."""
        if update is None:
            return Deferred.completed(ErrorCode.NONE)
        if available:
            name = self.replica_manager.by_topic_id.get(key.topic_id)
            if name is not None:
                self.replica_manager.purgatory.check_and_complete((name, key.partition))
        sp = self.partitions.get(key)
        if sp is not None:
            self._schedule_expiry(key, sp)
        return self._persist(key, update)

    def _persist(self, key: SharePartitionKey, update: StateUpdate) -> Deferred[ErrorCode]:
        coordinator = self._local_coordinator(key)
        if coordinator is None:
            return Deferred.completed(ErrorCode.NONE)  # kept in memory only (see the module's docstring)
        return coordinator.write_state(key, update.start_offset, update.batches)

    def _local_coordinator(self, key: SharePartitionKey) -> "ShareCoordinator | None":
        """The share coordinator if this broker keeps the key's state, else None."""
        coordinator = self.coordinator
        if coordinator is None or coordinator.locate(key) != (ErrorCode.NONE, coordinator.runtime.broker_id):
            return None
        return coordinator

    def _schedule_expiry(self, key: SharePartitionKey, sp: SharePartition) -> None:
        deadline = sp.next_deadline()
        if deadline is None:
            self.timers.cancel(key)
            return
        current = self.timers.get(key)
        if current is None or current.deadline_ms != deadline:
            self.timers.schedule(key, deadline - self.clock(), lambda: self._expire(key))

    def _expire(self, key: SharePartitionKey) -> None:
        sp = self.partitions.get(key)
        if sp is None:
            return
        self._changed(key, sp.expire_locks(self.clock()), available=True)
        self._schedule_expiry(key, sp)

    def on_partitions_changed(self, topic: str, partitions: list[int], is_leader: Callable[[int], bool]) -> None:
        """Leadership moved: share partitions this broker no longer leads are dropped (their next leader
        reads the persisted state)."""
        for key in [k for k in self.partitions if self.replica_manager.by_topic_id.get(k.topic_id) == topic and k.partition in partitions and not is_leader(k.partition)]:
            del self.partitions[key]
            self.timers.cancel(key)

    # -- the event loop -----------------------------------------------------------------------------------

    def _on_schedule(self, deadline_ms: int) -> None:
        if self._wake is not None and (self._sleeping_until is None or deadline_ms < self._sleeping_until):
            self._wake.set()

    def _on_timer_failed(self, timer: Timer, exc: Exception) -> None:
        log.error("Share partition timer %s failed", timer.key, exc_info=exc)

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Expire acquisition locks when due, until cancelled."""
        task_status.started()
        while True:
            self.timers.run_due(self._on_timer_failed)
            deadline = self.timers.next_deadline()
            self._sleeping_until = deadline
            self._wake = anyio.Event()
            with anyio.move_on_after(math.inf if deadline is None else max(0.0, (deadline - self.clock()) / 1000)):
                await self._wake.wait()

