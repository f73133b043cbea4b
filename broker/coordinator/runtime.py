"""A runtime for coordinators whose state lives in an internal topic (Kafka's coordinator-common
``CoordinatorRuntime``, smaller).

A coordinator keeps its state in a compacted topic (``__consumer_offsets`` for groups,
``__transaction_state`` for transactions). Each partition this broker leads has one **shard**: the
coordinator's state for the keys that hash to that partition. The runtime owns the shards and does
everything that is the same for every coordinator:

- maps a key to its partition (Kafka's ``Utils.abs(key.hashCode()) % partitions``) and FindCoordinator
  to that partition's leader, creating the topic on the first lookup;
- loads a shard when this broker becomes the partition's leader (replaying its records on a worker
  thread: ``replay`` per record, ``replay_end_transaction_marker`` per commit/abort marker) and unloads it
  on resignation; callers meanwhile get COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR from
  :meth:`CoordinatorRuntime.status`;
- runs a write operation: the shard decides, returning a :class:`CoordinatorResult` (records and how to
  answer); the runtime appends the records to the shard's partition as one batch and answers once the
  append is committed (acks=all: the high watermark passed it) or failed, so that the shard can revert;
- runs each shard's timers (:class:`~odradek.broker.coordinator.timers.Timers`, dropped with the shard).

It does no I/O of its own and imports no server: it receives a :class:`PartitionWriter` (append a batch,
complete when committed), a loader (the partition's batches), the metadata and a topic creator. The event
loop calls :meth:`CoordinatorRuntime.run` for the timers and awaits answers with :meth:`CoordinatorRuntime.respond`.

How to add a coordinator:

1. Describe its topic with a :class:`CoordinatorTopic`.
2. Write its shard, a :class:`CoordinatorShard` built from the :class:`ShardContext` the runtime gives it
   (its partition, clock, timers, and ``write`` for appends that no request waits for, e.g. expiry
   tombstones from a timer). ``replay`` rebuilds the state from each record of the partition; it runs
   on a worker thread, so it touches nothing but the shard (``on_loaded`` runs on the event loop).
3. Its service (the methods handlers call) checks ``runtime.status(runtime.partition_for(key))`` and maps
   it to its API's errors, then calls ``runtime.write(partition, op)`` (``op(shard)`` returns a
   ``CoordinatorResult``; the Deferred completes with the response) or ``runtime.read(partition, op)``.
4. Wire it in the server: ``CoordinatorRuntime(topic, build_shard, ...)`` with a
   :class:`~odradek.broker.coordinator.partitions.ReplicaManagerPartitions` for writer and loader; forward
   partition changes (``on_partitions_changed``/``on_topic_deleted``), run ``run()`` on the event loop,
   register it in ``KafkaServer.coordinators`` under its FindCoordinator key type.
"""

from __future__ import annotations

import enum
import logging
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Generic, Iterable, Iterator, Protocol, Sequence, TypeVar

import anyio

from odradek.broker.coordinator.coordinators import CoordinatorTopic as CoordinatorTopic  # re-exported: a runtime's topic
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.timers import Timer, Timers
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.java_hash import java_string_hash, kafka_abs
from odradek.protocol.records import Record as LogRecord
from odradek.protocol.records import build_batch
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from odradek.controller.metadata_image import BrokerInfo, TopicInfo

log = logging.getLogger("odradek.coordinator")

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S", bound="CoordinatorShard")

Record = tuple[bytes, bytes | None]
"""A coordinator record: key and value (None: a tombstone)."""

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def partition_for(key: str, num_partitions: int) -> int:
    """The coordinator partition of a group id or transactional id, as every Kafka broker computes it."""
    return kafka_abs(java_string_hash(key)) % num_partitions


@dataclass(frozen=True)
class AppendResult:
    """How an append ended: NONE once committed (``base_offset`` is the batch's), else the append's error
    (REQUEST_TIMED_OUT when the high watermark did not pass it in time)."""

    error: ErrorCode
    base_offset: int = -1


@dataclass(frozen=True)
class Producer:
    """The producer a transactional batch is written for (TxnOffsetCommit): its records count only once
    a commit marker follows them."""

    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class CoordinatorResult(Generic[T]):
    """What a shard's operation decided: the records to append to its partition (one batch, possibly
    none), and ``response``, called with the append's outcome once it is known -- it makes the shard's
    pending state final or reverts it, and returns what the caller gets. With no records it is called at
    once with NONE. ``producer`` makes the batch transactional."""

    records: Sequence[Record]
    response: Callable[[AppendResult], T]
    producer: Producer | None = None

    @classmethod
    def of(cls, value: T) -> "CoordinatorResult[T]":
        """A decision that writes nothing."""
        return cls((), lambda _: value)


@dataclass(frozen=True)
class LoadedBatch:
    """One batch of a coordinator partition, as loading replays it."""

    base_offset: int
    producer_id: int
    producer_epoch: int
    is_transactional: bool
    records: list[Record]
    commit: bool | None = None
    """For a control batch: True for a COMMIT marker, False for ABORT; None for a data batch."""


class PartitionWriter(Protocol):
    """Appends a coordinator's batches to its partitions."""

    def append(self, partition: int, batch: bytearray) -> Deferred[AppendResult]:
        """Append ``batch`` as the partition's leader; complete once committed (acks=all), or with the
        append's error."""
        ...


@dataclass
class ShardContext:
    """What the runtime gives a shard: its partition, the clock, its timers, and writes of its own."""

    partition: int
    clock: Callable[[], int]
    timers: Timers
    write: Callable[[CoordinatorResult[Any]], Deferred[Any]]
    """Append a result's records now (from a timer or a callback); the Deferred completes with its response."""
    leader_epoch: int = 0
    """The partition's leader epoch when this broker became its leader (LeaderAndIsr's): Kafka's coordinator
    epoch, which the transaction coordinator writes into its markers."""


class CoordinatorShard:
    """One partition's coordinator state. Subclasses replay records; the other hooks are optional."""

    def replay(self, offset: int, producer: Producer | None, key: bytes, value: bytes | None) -> None:
        """A record of the partition, in log order, while loading. ``offset`` is its batch's base offset;
        ``producer`` is set for a record of a transactional batch (it counts once a COMMIT follows)."""
        raise NotImplementedError

    def replay_end_transaction_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """A producer's transaction ended in this partition: while loading (a control batch) and when a
        marker is written to a loaded shard (:meth:`CoordinatorRuntime.complete_transaction`)."""

    def on_loaded(self) -> None:
        """Every record is replayed: the shard starts serving (schedule its timers here)."""

    def on_unloaded(self) -> None:
        """Another broker leads the partition now; answer whatever waits on this shard."""

    def on_partitions_deleted(self, partitions: list[TopicPartition]) -> None:
        """Topics were deleted: forget what the shard keeps about their partitions."""

    def on_timer_failed(self, timer: Timer, exc: Exception) -> None:
        """A timer's action raised (it is not retried); contain the damage."""
        log.error("Coordinator timer %s failed", timer.key, exc_info=exc)


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclass
class _Slot(Generic[S]):
    context: ShardContext
    shard: S
    state: ShardState = ShardState.LOADING


class CoordinatorRuntime(Generic[S]):
    def __init__(
        self,
        topic: CoordinatorTopic,
        build_shard: Callable[[ShardContext], S],
        writer: PartitionWriter,
        *,
        broker_id: int,
        clock: Callable[[], int] = now_ms,
        load: Callable[[int], Iterable[LoadedBatch]] | None = None,
        metadata: Callable[[], Any] | None = None,
        create_topic: Callable[[CoordinatorTopic], None] | None = None,
    ) -> None:
        self.topic = topic
        self.num_partitions = topic.num_partitions
        self.build_shard = build_shard
        self.writer = writer
        self.broker_id = broker_id
        self.clock = clock
        self.load_batches = load
        self.metadata = metadata
        self.create_topic = create_topic
        self.coordinator: Any = None
        """The service built on this runtime, which handlers call (it sets itself here)."""
        self._slots: dict[int, _Slot[S]] = {}
        self._pending_loads: deque[tuple[_Slot[S], Iterable[LoadedBatch]]] = deque()
        self._wake: anyio.Event | None = None
        self._sleeping_until: int | None = None

    # -- keys and partitions ------------------------------------------------------------------------------

    def partition_for(self, key: str) -> int:
        """The key's partition, counted over the topic's partitions in the broker's metadata when it knows the
        topic (a LeaderAndIsr names only the partitions that changed), else over the configured count."""
        topic = self.metadata().topics.get(self.topic.name) if self.metadata is not None else None
        return partition_for(key, len(topic.partitions) if topic is not None else self.num_partitions)

    def status(self, partition: int) -> ErrorCode | None:
        """None when the partition's shard serves; else why not, in Kafka's words."""
        slot = self._slots.get(partition)
        if slot is None:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if slot.state is ShardState.LOADING else None

    @property
    def is_loading(self) -> bool:
        return any(slot.state is ShardState.LOADING for slot in self._slots.values())

    def shard(self, partition: int) -> S:
        """The serving shard of ``partition``; KafkaError with :meth:`status` otherwise."""
        return self._serving(partition).shard

    def _serving(self, partition: int) -> _Slot[S]:
        slot = self._slots.get(partition)
        if slot is not None and slot.state is ShardState.ACTIVE:
            return slot
        raise KafkaError(self.status(partition) or ErrorCode.NOT_COORDINATOR)

    def shards(self) -> Iterator[S]:
        """Every serving shard (ListGroups, a deleted topic's offsets, metrics)."""
        return (slot.shard for slot in list(self._slots.values()) if slot.state is ShardState.ACTIVE)

    @property
    def owned_partitions(self) -> set[int]:
        return {p for p, slot in self._slots.items() if slot.state is ShardState.ACTIVE}

    # -- operations -------------------------------------------------------------------------------------

    def read(self, partition: int, op: Callable[[S], T]) -> T:
        return op(self.shard(partition))

    def write(self, partition: int, op: Callable[[S], CoordinatorResult[T]]) -> Deferred[T]:
        """Run ``op`` on the partition's serving shard and append what it decided."""
        slot = self._serving(partition)
        return self._append(slot, op(slot.shard))

    def _append(self, slot: _Slot[S], result: CoordinatorResult[T]) -> Deferred[T]:
        if not result.records:
            return Deferred.completed(result.response(AppendResult(ErrorCode.NONE)))
        producer = result.producer
        batch = bytearray(
            build_batch(
                [LogRecord(timestamp=self.clock(), key=key, value=value) for key, value in result.records],
                compression=self.topic.compression,
                producer_id=NO_PRODUCER_ID if producer is None else producer.producer_id,
                producer_epoch=NO_PRODUCER_EPOCH if producer is None else producer.producer_epoch,
                base_sequence=-1 if producer is None else 0,
                is_transactional=producer is not None,
            )
        )
        return self.writer.append(slot.context.partition, batch).then(result.response)

    def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` is committed in ``partition``: its shard applies or
        drops what the transaction wrote there. Ignored when this broker does not serve the partition
        (its next leader replays the marker when it loads)."""
        slot = self._slots.get(partition)
        if slot is not None and slot.state is ShardState.ACTIVE:
            slot.shard.replay_end_transaction_marker(producer_id, producer_epoch, committed)

    # -- loading ----------------------------------------------------------------------------------------

    def load(self, partition: int, batches: Iterable[LoadedBatch], leader_epoch: int = 0) -> None:
        """Become the partition's coordinator: build its shard from ``batches``, then serve.

        Batches already in memory (a list) replay at once. Any other iterable reads the log: it replays on
        a worker thread once :meth:`run` runs, the partition answering COORDINATOR_LOAD_IN_PROGRESS
        meanwhile -- so a shard's ``replay`` touches nothing but the shard.
        """
        if partition in self._slots:
            return
        context = ShardContext(partition, self.clock, Timers(self.clock, self._on_timer), lambda result: self._append(slot, result), leader_epoch)
        slot = _Slot(context, self.build_shard(context))
        self._slots[partition] = slot
        if isinstance(batches, list):
            try:
                self._replay(slot.shard, batches)
            except BaseException:
                del self._slots[partition]
                raise
            self._activate(slot)
        else:
            self._pending_loads.append((slot, batches))
            self._wake_up()

    @staticmethod
    def _replay(shard: S, batches: Iterable[LoadedBatch]) -> None:
        for batch in batches:
            if batch.commit is not None:
                shard.replay_end_transaction_marker(batch.producer_id, batch.producer_epoch, batch.commit)
                continue
            producer = Producer(batch.producer_id, batch.producer_epoch) if batch.is_transactional else None
            for key, value in batch.records:
                shard.replay(batch.base_offset, producer, key, value)

    def _activate(self, slot: _Slot[S]) -> None:
        slot.state = ShardState.ACTIVE
        slot.shard.on_loaded()

    async def _load_in_background(self, slot: _Slot[S], batches: Iterable[LoadedBatch]) -> None:
        partition = slot.context.partition
        started = time.monotonic()
        try:
            # Abandoned at shutdown: the broker need not finish reading a partition it stops serving.
            await anyio.to_thread.run_sync(self._replay, slot.shard, batches, abandon_on_cancel=True)
        except Exception:
            log.exception("Failed to load %s-%d: this broker does not coordinate it", self.topic.name, partition)
            if self._slots.get(partition) is slot:
                del self._slots[partition]
            return
        if self._slots.get(partition) is slot:  # else resigned meanwhile
            self._activate(slot)
            log.info("Finished loading %s-%d in %.0f ms", self.topic.name, partition, (time.monotonic() - started) * 1000)

    def unload(self, partition: int) -> None:
        """Another broker leads the partition: the shard and its timers go."""
        slot = self._slots.pop(partition, None)
        if slot is not None:
            slot.shard.on_unloaded()

    def on_partitions_changed(self, topic: "TopicInfo", partitions: list[int]) -> None:
        """LeaderAndIsr: load the partitions of our topic this broker now leads, unload those it lost."""
        if topic.name != self.topic.name:
            return
        for index in partitions:
            if topic.partitions[index].leader == self.broker_id:
                if index not in self._slots:
                    assert self.load_batches is not None, "a runtime that follows leadership needs a loader"
                    self.load(index, self.load_batches(index), topic.partitions[index].leader_epoch)
            else:
                self.unload(index)

    def on_topic_deleted(self, topic: "TopicInfo") -> None:
        """Our topic gone: every shard goes. Another topic gone: the shards forget its partitions."""
        if topic.name == self.topic.name:
            for index in list(self._slots):
                self.unload(index)
        else:
            deleted = [(topic.name, p) for p in topic.partitions]
            for shard in self.shards():
                shard.on_partitions_deleted(deleted)

    # -- FindCoordinator ----------------------------------------------------------------------------------

    def locate(self, key: str) -> tuple[ErrorCode, "BrokerInfo | None"]:
        """The leader of the key's partition. The first lookup creates the topic and, as in Kafka, answers
        COORDINATOR_NOT_AVAILABLE: the client asks again."""
        assert self.metadata is not None and self.create_topic is not None
        image = self.metadata()
        topic = image.topics.get(self.topic.name)
        if topic is None:
            try:
                self.create_topic(self.topic)
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    log.error("Could not create %s: %s", self.topic.name, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        state = topic.partitions.get(partition_for(key, len(topic.partitions)))
        broker = image.brokers.get(state.leader) if state is not None else None
        if broker is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return ErrorCode.NONE, broker

    # -- timers and the event loop --------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        deadlines = [d for slot in self._slots.values() if (d := slot.context.timers.next_deadline()) is not None]
        return min(deadlines, default=None)

    def run_due_timers(self) -> int:
        ran = 0
        for slot in list(self._slots.values()):
            ran += slot.context.timers.run_due(slot.shard.on_timer_failed)
        return ran

    def _on_timer(self, deadline_ms: int) -> None:
        if self._sleeping_until is None or deadline_ms < self._sleeping_until:
            self._wake_up()

    def _wake_up(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Load the partitions that became ours and run the shards' timers until cancelled, sleeping until
        the next timer is due (woken early when a sooner one is scheduled or a load is asked for)."""
        async with anyio.create_task_group() as loads:
            task_status.started()
            await self._run(loads)

    async def _run(self, loads: TaskGroup) -> None:
        try:
            while True:
                while self._pending_loads:
                    loads.start_soon(self._load_in_background, *self._pending_loads.popleft())
                self.run_due_timers()
                deadline = self.next_deadline()
                self._sleeping_until = deadline
                self._wake = anyio.Event()
                delay = math.inf if deadline is None else max(0.0, (deadline - self.clock()) / 1000)
                with anyio.move_on_after(delay):
                    await self._wake.wait()
        finally:
            self._wake = None

    @staticmethod
    def respond(deferred: Deferred[T], to_response: Callable[[T], R]) -> R | Awaitable[R]:
        """A handler's answer: at once when the coordinator already decided, else once it does."""
        if deferred.done:
            return to_response(deferred.value)

        async def wait() -> R:
            event = anyio.Event()
            deferred.add_callback(lambda _: event.set())
            await event.wait()
            return to_response(deferred.value)

        return wait()

