"""The group coordinator on the event loop: timers, parked requests, and the real ``__consumer_offsets``.

The sans-IO :class:`~odradek.broker.group_coordinator.GroupCoordinator` decides; this shell gives it
what it cannot have itself: a clock, a task that runs its timers when they fall due (woken early when a
sooner one is scheduled), appends to the offsets topic's partitions with acks=all semantics (the append
completes when the high watermark passes it, or fails with REQUEST_TIMED_OUT after
``offsets.commit.timeout.ms``), loading a partition's groups when this broker becomes its leader, and
awaiting the Deferreds that JoinGroup/SyncGroup/OffsetCommit handlers return.
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, TypeVar

import anyio

from odradek.broker.deferred import Deferred
from odradek.broker.group_coordinator import GROUP_METADATA_TOPIC, AppendResult, GroupConfig, GroupCoordinator, Record
from odradek.controller.metadata import BrokerInfo, TopicInfo
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import iter_batch_positions, read_batch_header
from odradek.protocol.records import Record as LogRecord
from odradek.protocol.records import build_batch, iter_records_unchecked

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer

log = logging.getLogger("odradek.group_coordinator")

T = TypeVar("T")
R = TypeVar("R")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class GroupCoordinatorRuntime:
    def __init__(self, server: "KafkaServer") -> None:
        self.server = server
        config = server.config
        self.commit_timeout_s = config["offsets.commit.timeout.ms"] / 1000
        self.load_buffer_size = config["offsets.load.buffer.size"]
        self.compression = config["offsets.topic.compression.codec"]
        self._task_group: anyio.abc.TaskGroup | None = None
        self._wake: anyio.Event | None = None
        self._sleeping_until: int | None = None
        self.coordinator = GroupCoordinator(server.broker_id, GroupConfig.from_broker_config(config), self, now_ms, self._on_timer)

    # -- the offsets topic --------------------------------------------------------------------------------

    def offsets_topic_configs(self) -> dict[str, str]:
        config = self.server.config
        return {"cleanup.policy": "compact", "segment.bytes": str(config["offsets.topic.segment.bytes"]), "compression.type": "producer"}

    def locate(self, key: str) -> tuple[ErrorCode, BrokerInfo | None]:
        """FindCoordinator: the leader of the group's offsets partition. The first lookup creates the
        topic and, as in Kafka, answers COORDINATOR_NOT_AVAILABLE: the client asks again."""
        metadata = self.server.metadata
        topic = metadata.topics.get(GROUP_METADATA_TOPIC)
        if topic is None:
            config = self.server.config
            try:
                self.server.create_topic_in_background(GROUP_METADATA_TOPIC, config["offsets.topic.num.partitions"], config["offsets.topic.replication.factor"], self.offsets_topic_configs())
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    log.error("Could not create %s: %s", GROUP_METADATA_TOPIC, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        state = topic.partitions.get(self.coordinator.partition_for(key))
        broker = metadata.brokers.get(state.leader) if state is not None else None
        if broker is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return ErrorCode.NONE, broker

    def on_partitions_changed(self, topic: TopicInfo, partitions: list[int]) -> None:
        """LeaderAndIsr for the offsets topic: load the partitions we now lead, unload those we lost."""
        if topic.name != GROUP_METADATA_TOPIC:
            return
        self.coordinator.num_partitions = len(topic.partitions)
        for index in partitions:
            leads = topic.partitions[index].leader == self.server.broker_id
            if leads and index not in self.coordinator.owned_partitions:
                started = time.monotonic()
                self.coordinator.on_election(index, self._read_partition(index))
                log.debug("Loaded %s-%d in %.0f ms", GROUP_METADATA_TOPIC, index, (time.monotonic() - started) * 1000)
            elif not leads and index in self.coordinator.owned_partitions:
                self.coordinator.on_resignation(index)

    def on_topic_deleted(self, topic: TopicInfo) -> None:
        if topic.name == GROUP_METADATA_TOPIC:
            for index in list(self.coordinator.owned_partitions):
                self.coordinator.on_resignation(index)
        else:
            self.coordinator.handle_deleted_partitions([(topic.name, p) for p in topic.partitions])

    def _read_partition(self, index: int) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """Every record of the partition as (batch base offset, key, value), reading
        ``offsets.load.buffer.size`` bytes at a time; control batches carry no group data."""
        partition_log = self.server.replica_manager.get_partition(GROUP_METADATA_TOPIC, index).log
        offset = partition_log.log_start_offset
        end = partition_log.log_end_offset
        while offset < end:
            data = partition_log.read(offset, self.load_buffer_size, end, True).read()
            if not data:
                break
            for position, base_offset, _ in iter_batch_positions(data):
                header = read_batch_header(data, position)
                offset = header.last_offset + 1
                if header.is_control:
                    continue
                for record in iter_records_unchecked(data, position, header):
                    yield base_offset, record.key, record.value

    def append(self, partition: int, records: list[Record]) -> Deferred[AppendResult]:
        out: Deferred[AppendResult] = Deferred()
        timestamp = now_ms()
        try:
            target = self.server.replica_manager.leader_partition(GROUP_METADATA_TOPIC, partition)
            batch = bytearray(build_batch([LogRecord(timestamp=timestamp, key=k, value=v) for k, v in records], compression=self.compression))
            info = target.append_as_leader(batch, -1, None, target.log.config.min_insync_replicas)
        except KafkaError as exc:
            out.complete(AppendResult(exc.code))
            return out
        if target.high_watermark > info.last_offset or self._task_group is None:
            out.complete(AppendResult(ErrorCode.NONE, info.first_offset))
            return out

        async def await_replicas() -> None:
            replicated = await self.server.replica_manager.wait_for_high_watermark(target, info.last_offset + 1, self.commit_timeout_s)
            out.complete(AppendResult(ErrorCode.NONE if replicated else ErrorCode.REQUEST_TIMED_OUT, info.first_offset))

        self._task_group.start_soon(await_replicas)
        return out

    # -- the event loop -----------------------------------------------------------------------------------

    def _on_timer(self, deadline_ms: int) -> None:
        if self._wake is not None and (self._sleeping_until is None or deadline_ms < self._sleeping_until):
            self._wake.set()

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Run the coordinator's timers (session, rebalance and sync timeouts, offset expiry) until cancelled."""
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            task_status.started()
            try:
                while True:
                    try:
                        self.coordinator.run_due_timers()
                    except Exception:
                        # Timers are consumed before they run, so a failing one is not retried in a loop.
                        log.exception("A group coordinator timer failed")
                    deadline = self.coordinator.next_deadline()
                    self._sleeping_until = deadline
                    self._wake = anyio.Event()
                    delay = math.inf if deadline is None else max(0.0, (deadline - now_ms()) / 1000)
                    with anyio.move_on_after(delay):
                        await self._wake.wait()
            finally:
                self._task_group = None
                self._wake = None

    def respond(self, deferred: Deferred[T], to_response: Callable[[T], R]) -> R | Awaitable[R]:
        """A handler's answer: at once when the coordinator already decided, else once it does."""
        if deferred.done:
            return to_response(deferred.value)

        async def wait() -> R:
            event = anyio.Event()
            deferred.add_callback(lambda _: event.set())
            await event.wait()
            return to_response(deferred.value)

        return wait()


def group_coordinator(server: "KafkaServer") -> GroupCoordinatorRuntime:
    return server.coordinators["group"]
