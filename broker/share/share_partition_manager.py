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

The state goes through the :class:`~odradek.broker.share.persister.Persister`: to the share coordinator of
the key, on this broker or, in a cluster, another (the share-state RPCs). A share partition whose state is
read from another broker is answered empty until the answer comes (the fetch waits, woken then). It reads
with the data partition's leader epoch and writes with it and the state epoch it read: a coordinator that
fences it (a newer leader read since, the state was initialized again) makes it drop the share partition,
the next fetch reading again. A write that failed (its coordinator gone past the persister's retries) makes
the next write of the key carry the share partition's whole state, so the coordinator catches up.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import anyio

from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.share.share_records import SharePartitionKey
from odradek.broker.coordinator.timers import Timer, Timers
from odradek.broker.group_config import auto_offset_reset_duration_ms
from odradek.broker.replication.fetch_session import FetchPartition
from odradek.broker.replication.replica_manager import FetchParams, FetchRecords
from odradek.broker.share.share_partition import Acknowledgement, AcquiredRecords, SharePartition, StateUpdate
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid
from odradek.protocol.record_batch import BatchHeader
from odradek.storage.file_records import FileSlice

if TYPE_CHECKING:
    from odradek.broker.coordinator.share.share_coordinator import ShareCoordinator
    from odradek.broker.replication.replica_manager import ReplicaManager
    from odradek.broker.share.persister import Persister, StateAnswer

log = logging.getLogger("odradek.share")

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
UNKNOWN_COMPLETE_COUNT = -1
"""WriteShareGroupState's DeliveryCompleteCount when not sent: the share coordinator counts it itself."""
UNINITIALIZED = -1
"""A share partition's start offset before any consumer of the group initialized it (AlterShareGroupOffsets
with a negative offset): it starts where ``share.auto.offset.reset`` says."""
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

PartitionId = tuple[Uuid, int]


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

    topic_id: Uuid
    partition: int
    error: ErrorCode = ErrorCode.NONE
    acknowledge_error: ErrorCode = ErrorCode.NONE
    acknowledged: bool = False
    records: FetchRecords | None = None
    """Slices of segment files, sent with sendfile as a Fetch answer's are (:func:`sent_batches`)."""
    acquired: list[AcquiredRecords] = field(default_factory=list)


Batch = tuple[FileSlice, int, BatchHeader]
"""A complete batch of a read: the slice it lies in, its position in the segment file, its header."""


def read_batches(records: FetchRecords) -> list[Batch]:
    """The complete batches of a read, from their headers alone (a partial batch at the end, cut by the
    fetch's byte limit, is left out): no record is read or decoded, and nothing is copied."""
    return [(piece, position, header) for piece in records.slices for position, header in piece.file.batch_headers(piece.position, piece.position + piece.length)]


def sent_batches(batches: list[Batch], acquired: list[AcquiredRecords]) -> FetchRecords:
    """What a share fetch sends of a read, as Kafka 4.4's ``ShareFetchUtils.maybeSliceFetchRecords`` does: the
    batches as stored, from the one holding the first acquired offset to the last one starting at or before
    the last acquired offset (batches between them that another member holds go too; the client delivers only
    the acquired offsets), as slices of the segment files for sendfile."""
    first, last = min(a.first for a in acquired), max(a.last for a in acquired)
    start = max((i for i, (_, _, h) in enumerate(batches) if h.base_offset <= first), default=0)
    end = max((i for i, (_, _, h) in enumerate(batches) if h.base_offset <= last), default=start)
    pieces: list[FileSlice] = []
    for piece, position, header in batches[start : end + 1]:
        before = pieces[-1] if pieces else None
        if before is not None and before.file is piece.file and before.position + before.length == position:
            pieces[-1] = FileSlice(piece.file, before.position, before.length + header.size)
        else:
            pieces.append(FileSlice(piece.file, position, header.size))
    return FetchRecords(tuple(pieces), sum(p.length for p in pieces))


class SharePartitionManager:
    def __init__(
        self,
        replica_manager: "ReplicaManager",
        persister: "Persister | None",
        group_config: Callable[[str], ShareConfig],
        *,
        max_sessions: int = 2000,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.replica_manager = replica_manager
        self.persister = persister
        self.coordinator: "ShareCoordinator | None" = None if persister is None else persister.coordinator
        self.group_config = group_config
        self.max_sessions = max_sessions
        self.clock = clock
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.epochs: dict[SharePartitionKey, tuple[int, int]] = {}
        """Each share partition's (state epoch, leader epoch): what it read its state with, and writes with."""
        self._reading: dict[SharePartitionKey, tuple[int, "Deferred[StateAnswer]"]] = {}
        """State reads under way (from another broker, or retried), with the leader epoch they read at."""
        self._unsynced: set[SharePartitionKey] = set()
        """Share partitions a write of failed: their next write carries the whole state."""
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

    def delete_state(self, group: str, topic_id: Uuid | None = None, partitions: int = 0) -> list[Deferred[ErrorCode]]:
        """The group's share partitions (of one topic with ``partitions`` partitions, or all) go, with their
        persisted state (tombstones): the next consumer starts where ``share.auto.offset.reset`` says
        (DeleteShareGroupOffsets). All of a group (DeleteGroups) is what this broker knows of it: the state
        its share coordinator keeps and the share partitions it leads."""
        def chosen(key: SharePartitionKey) -> bool:
            return key.group == group and (topic_id is None or key.topic_id == topic_id)

        keys = {k for k in self.partitions if chosen(k)}
        self._forget(chosen)
        if self.persister is None:
            return []
        keys.update(k for k in self.persister.coordinator.group_partitions(group) if chosen(k))
        if topic_id is not None:  # every partition of the topic, whichever broker keeps its state
            keys.update(SharePartitionKey(group, topic_id, index) for index in range(partitions))
        return [self.persister.delete(key) for key in sorted(keys, key=lambda k: (str(k.topic_id), k.partition))]

    def reset_start_offset(self, group: str, topic_id: Uuid, partition: int, start_offset: int) -> Deferred[ErrorCode]:
        """AlterShareGroupOffsets: the share partition starts again at ``start_offset`` with nothing in flight
        (a negative offset: as if never consumed, Kafka's uninitialized -1)."""
        key = SharePartitionKey(group, topic_id, partition)
        self._forget(lambda k: k == key)
        persister = self.persister
        if persister is None:
            return Deferred.completed(ErrorCode.NONE)
        out: Deferred[ErrorCode] = Deferred()

        def initialize(summary: "StateAnswer") -> None:
            # A state epoch one higher, as Kafka's group coordinator initializes it: the share partition its
            # leader still keeps (on another broker) is fenced at its next write and reads the new state.
            epoch = summary.state_epoch + 1 if summary.error == ErrorCode.NONE else -1
            persister.initialize(key, epoch, max(start_offset, UNINITIALIZED)).add_callback(out.complete)

        persister.read_summary(key).add_callback(initialize)
        return out

    def _forget(self, chosen: Callable[[SharePartitionKey], bool]) -> None:
        for key in [k for k in self.partitions if chosen(k)]:
            del self.partitions[key]
            self.epochs.pop(key, None)
            self._unsynced.discard(key)
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
            batches = read_batches(read.records)
            acquired = sp.acquire(member, [(h.base_offset, h.last_offset) for _, _, h in batches], left, self.clock(), strict)
            if not acquired:
                continue
            self._schedule_expiry(SharePartitionKey(group, *tp), sp)
            answer.acquired = acquired
            answer.records = sent_batches(batches, acquired)
            budget -= answer.records.length
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
        leader_epoch = int(partition.leader_epoch)
        answer = None
        if self.persister is not None:
            reading = self._reading.get(key)
            if reading is None or reading[0] != leader_epoch:  # a new read when leadership moved meanwhile
                reading = self._reading[key] = (leader_epoch, self.persister.read(key, leader_epoch))
                reading[1].add_callback(lambda _: self.replica_manager.purgatory.check_and_complete((topic, key.partition)))
            if not reading[1].done:
                return ErrorCode.NONE, None, topic  # answered empty until the state comes (module docstring)
            del self._reading[key]
            answer = reading[1].value
            if answer.error == ErrorCode.INVALID_REQUEST:  # never initialized (persister.UNINITIALIZED_READ)
                answer = None
            elif answer.error != ErrorCode.NONE:
                return answer.error, None, topic
        self.epochs[key] = (0 if answer is None else answer.state_epoch, leader_epoch)
        if answer is not None and answer.start_offset != UNINITIALIZED:
            start, kept = answer.start_offset, answer.batches
        else:  # never consumed: where the group's auto.offset.reset says, written first thing
            start, kept = self._start_offset(partition, config.auto_offset_reset), None
        sp = SharePartition(start, kept or (), delivery_count_limit=config.delivery_count_limit, lock_duration_ms=config.lock_duration_ms, max_in_flight=config.max_in_flight)
        self.partitions[key] = sp  # before its first write, whose failure is judged against it (_written)
        if kept is None:
            self._persist(key, StateUpdate(start, []))
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
        if self.persister is None:
            return Deferred.completed(ErrorCode.NONE)
        sp = self.partitions.get(key)
        if key in self._unsynced and sp is not None:
            self._unsynced.discard(key)
            update = StateUpdate(sp.start_offset, sp.state_batches())
        state_epoch, leader_epoch = self.epochs.get(key, (0, -1))
        done = self.persister.write(key, state_epoch, leader_epoch, update.start_offset, update.batches, UNKNOWN_COMPLETE_COUNT)
        done.add_callback(lambda error: self._written(key, sp, error))
        return done

    def _written(self, key: SharePartitionKey, sp: SharePartition | None, error: ErrorCode) -> None:
        if error == ErrorCode.NONE or self.partitions.get(key) is not sp:
            return
        if error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH):
            log.info("Share partition %s fenced by its share coordinator (%s): dropped", key, error.name)
            self._forget(lambda k: k == key)
        else:
            log.warning("Share partition %s: writing its state failed (%s); the next write carries all of it", key, error.name)
            self._unsynced.add(key)

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
        moved = {k for k in self.partitions if self.replica_manager.by_topic_id.get(k.topic_id) == topic and k.partition in partitions and not is_leader(k.partition)}
        self._forget(lambda k: k in moved)

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

