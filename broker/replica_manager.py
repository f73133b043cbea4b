"""The partitions this broker hosts, and the waits on them (Kafka's ReplicaManager and purgatories).

Handlers run on the event loop without awaiting for their synchronous part, so appends happen in the
order requests arrived. What must wait — a fetch for ``min_bytes``, an acks=all produce for the high
watermark — waits on a :class:`Watchers` entry that an append or a high-watermark move wakes.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Iterable

import anyio

from odradek.broker.partition import Partition
from odradek.controller.metadata import PartitionState, TopicInfo
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager

TopicPartition = tuple[str, int]


class Watchers:
    """Events keyed by partition: set when the partition's log end offset or high watermark moves."""

    def __init__(self) -> None:
        self._events: dict[TopicPartition, set[anyio.Event]] = {}

    def register(self, keys: Iterable[TopicPartition]) -> anyio.Event:
        event = anyio.Event()
        for key in keys:
            self._events.setdefault(key, set()).add(event)
        return event

    def unregister(self, keys: Iterable[TopicPartition], event: anyio.Event) -> None:
        for key in keys:
            waiting = self._events.get(key)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._events[key]

    def wake(self, key: TopicPartition) -> None:
        waiting = self._events.pop(key, None)
        if waiting:
            for event in waiting:
                event.set()


@dataclass
class FetchRecords:
    """A records placeholder for a response: the file slices to send with sendfile, and their total length."""

    slices: list = field(default_factory=list)
    length: int = 0


EMPTY_RECORDS = b""


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager, broker_defaults: dict[str, str]) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.broker_defaults = broker_defaults
        self.partitions: dict[TopicPartition, Partition] = {}
        self.by_topic_id: dict[uuid.UUID, str] = {}
        self.watchers = Watchers()

    # -- metadata from the controller ---------------------------------------------------------------------

    def log_config(self, topic: TopicInfo) -> LogConfig:
        return LogConfig.from_props(topic.configs, self.broker_defaults)

    def become_leader_or_follower(self, topic: TopicInfo, partitions: list[int]) -> None:
        config = self.log_config(topic)
        self.by_topic_id[topic.topic_id] = topic.name
        for index in partitions:
            state = topic.partitions[index]
            key = (topic.name, index)
            partition = self.partitions.get(key)
            if partition is None:
                log = self.log_manager.get_or_create_log(topic.name, index, config, topic.topic_id)
                partition = Partition(topic.name, index, topic.topic_id, log, state, self.broker_id, self._on_high_watermark)
                self.partitions[key] = partition
            if state.leader == self.broker_id:
                partition.become_leader(PartitionState(**vars(state)))
            else:
                partition.state = PartitionState(**vars(state))

    def update_configs(self, topic: TopicInfo) -> None:
        """New topic configs reach the open logs and those opened later."""
        self.log_manager.set_topic_config(topic.name, self.log_config(topic))

    def stop_replicas(self, topic: TopicInfo, delete: bool) -> None:
        self.by_topic_id.pop(topic.topic_id, None)
        for index in list(topic.partitions):
            partition = self.partitions.pop((topic.name, index), None)
            if partition is not None:
                self.watchers.wake((topic.name, index))
                if delete:
                    self.log_manager.delete_log(topic.name, index)

    # -- lookups ------------------------------------------------------------------------------------------

    def get_partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return partition

    def leader_partition(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        partition = self.get_partition(topic, index)
        partition.check_leader(current_leader_epoch)
        return partition

    # -- waits --------------------------------------------------------------------------------------------

    def _on_high_watermark(self, partition: Partition) -> None:
        self.watchers.wake((partition.topic, partition.index))

    async def wait_for_change(self, keys: list[TopicPartition], timeout_s: float, event: anyio.Event | None = None) -> None:
        """Wait until any of the partitions changes, or the timeout passes.

        ``event``, from ``watchers.register(keys)``, lets a caller start watching before it yields (a
        handler that has just read, and whose wait begins later): a change in between is not missed.
        """
        if event is None:
            event = self.watchers.register(keys)
        try:
            if timeout_s > 0:
                with anyio.move_on_after(timeout_s):
                    await event.wait()
        finally:
            self.watchers.unregister(keys, event)

    async def wait_for_high_watermark(self, partition: Partition, offset: int, timeout_s: float) -> bool:
        """acks=all: wait until the high watermark passes ``offset``; False on timeout."""
        deadline = time.monotonic() + timeout_s
        key = (partition.topic, partition.index)
        while partition.high_watermark < offset:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.partitions.get(key) is not partition:
                return partition.high_watermark >= offset
            await self.wait_for_change([key], remaining)
        return True
