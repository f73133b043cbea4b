"""The share coordinator (Kafka's ``share-coordinator`` module): keeps each share partition's state --
its start offset and the state batches of its in-flight records -- in ``__share_group_state``.

A share partition's key (``group:topicId:partition``, Kafka's ``SharePartitionKey.asCoordinatorKey``)
hashes to a partition of the topic, whose leader coordinates it. The first write of a key is a
ShareSnapshot; later writes are ShareUpdates carrying only what changed, until
``share.coordinator.snapshot.update.records.per.snapshot`` updates follow the snapshot and the next
write is a new snapshot (its epoch one higher). Loading replays the snapshot and lays the updates over it.

Writes apply to the in-memory state as they are decided: the share partition that asked already holds
that state. If the append fails the caller hears the error and the next write of the key is a snapshot,
so the log catches up with memory (Kafka reverts the in-memory state instead and the share partition
rolls its change back).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable

from odradek.broker.coordinator.coordinators import SHARE_GROUP_STATE_TOPIC
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.runtime import AppendResult, CoordinatorResult, CoordinatorRuntime, CoordinatorShard, CoordinatorTopic, Producer, ShardContext
from odradek.broker.coordinator.share.share_records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    SharePartitionKey,
    ShareState,
    decode_record,
    delivery_complete_count,
    record_key,
    snapshot_value,
    update_value,
)
from odradek.broker.share.state_batches import StateBatch, overlay
from odradek.protocol.errors import ErrorCode
from odradek.protocol.schema import DecodeError
from odradek.storage.checkpoints import topic_id_to_string

if TYPE_CHECKING:
    from odradek.broker.config import BrokerConfig
    from odradek.broker.coordinator.runtime import LoadedBatch, PartitionWriter

log = logging.getLogger("odradek.share_coordinator")

def coordinator_key(key: SharePartitionKey) -> str:
    return f"{key.group}:{topic_id_to_string(key.topic_id)}:{key.partition}"


class ShareCoordinatorShard(CoordinatorShard):
    def __init__(self, context: ShardContext, updates_per_snapshot: int) -> None:
        self.context = context
        self.updates_per_snapshot = updates_per_snapshot
        self.states: dict[SharePartitionKey, ShareState] = {}
        self.updates_since_snapshot: dict[SharePartitionKey, int] = {}
        self.leader_epochs: dict[SharePartitionKey, int] = {}
        """The highest leader epoch of the data partition a share-partition leader read or wrote with (Kafka's
        ``leaderEpochMap``): a request with a lower one comes from a deposed leader (FENCED_LEADER_EPOCH)."""

    # -- loading ------------------------------------------------------------------------------------------

    def replay(self, offset: int, producer: Producer | None, key: bytes, value: bytes | None) -> None:
        try:
            kind, spk, record = decode_record(key, value)
        except DecodeError as exc:
            log.warning("Skipping a record of %s-%d at %d: %s", SHARE_GROUP_STATE_TOPIC, self.context.partition, offset, exc)
            return
        if record is None:
            self.states.pop(spk, None)
            self.updates_since_snapshot.pop(spk, None)
            self.leader_epochs.pop(spk, None)
            return
        batches = [StateBatch.from_wire(b) for b in record.state_batches]  # type: ignore[attr-defined]
        if kind == SHARE_SNAPSHOT:
            r: Any = record
            self.states[spk] = ShareState(r.snapshot_epoch, r.state_epoch, r.leader_epoch, r.start_offset, tuple(overlay((), batches, r.start_offset)), r.create_timestamp, r.write_timestamp)
            self.updates_since_snapshot[spk] = 0
            self.leader_epochs[spk] = r.leader_epoch
            return
        current = self.states.get(spk)
        if current is None:
            return  # an update without its snapshot: nothing to lay it over
        r = record
        start = current.start_offset if r.start_offset == -1 else r.start_offset
        leader_epoch = current.leader_epoch if r.leader_epoch == -1 else r.leader_epoch
        self.states[spk] = replace(current, start_offset=start, leader_epoch=leader_epoch, batches=tuple(overlay(current.batches, batches, start)))
        self.updates_since_snapshot[spk] = self.updates_since_snapshot.get(spk, 0) + 1
        self.leader_epochs[spk] = leader_epoch

    # -- operations ---------------------------------------------------------------------------------------

    def fenced(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int) -> ErrorCode | None:
        """Kafka's epoch checks: a leader epoch below the one seen (a deposed share-partition leader), a
        state epoch below the state's (it was initialized again since); -1 checks nothing."""
        if leader_epoch != -1 and self.leader_epochs.get(key, -1) > leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        current = self.states.get(key)
        if current is not None and state_epoch != -1 and state_epoch < current.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        return None

    def read_state(self, key: SharePartitionKey, leader_epoch: int = -1) -> tuple[ErrorCode, ShareState | None]:
        """ReadShareGroupState: the key's state (None: never written); FENCED_LEADER_EPOCH for a leader
        epoch below one seen, else the epoch is remembered (a share-partition leader reads when it becomes
        leader, so the one before it is fenced from then on)."""
        fenced = self.fenced(key, -1, leader_epoch)
        if fenced is not None:
            return fenced, None
        if leader_epoch != -1:
            self.leader_epochs[key] = leader_epoch
        return ErrorCode.NONE, self.states.get(key)

    def write_state(self, key: SharePartitionKey, start_offset: int, batches: list[StateBatch], state_epoch: int = 0, leader_epoch: int = -1) -> CoordinatorResult[ErrorCode]:
        """WriteShareGroupState for one share partition: a ShareSnapshot for a new key or when enough
        updates followed the last one, else a ShareUpdate. Fenced (as Kafka's ``maybeGetWriteStateError``)
        when the leader epoch is below the one seen or the state epoch below the state's; -1 (either epoch,
        or the start offset) keeps the state's."""
        now = self.context.clock()
        current = self.states.get(key)
        fenced = self.fenced(key, state_epoch, leader_epoch)
        if fenced is not None:
            return CoordinatorResult.of(fenced)
        if leader_epoch == -1:
            leader_epoch = 0 if current is None else current.leader_epoch
        if state_epoch == -1:
            state_epoch = 0 if current is None else current.state_epoch
        self.leader_epochs[key] = leader_epoch
        if current is None or self.updates_since_snapshot.get(key, 0) >= self.updates_per_snapshot:
            start = start_offset if start_offset != -1 or current is None else current.start_offset
            state = ShareState(
                0 if current is None else current.snapshot_epoch + 1,
                state_epoch,
                leader_epoch,
                start,
                tuple(overlay(() if current is None else current.batches, batches, start)),
                now if current is None else current.create_timestamp,
                now,
            )
            self.updates_since_snapshot[key] = 0
            records = [(record_key(SHARE_SNAPSHOT, key), snapshot_value(state))]
        else:
            start = current.start_offset if start_offset == -1 else start_offset
            state = replace(current, start_offset=start, leader_epoch=leader_epoch, batches=tuple(overlay(current.batches, batches, start)))
            self.updates_since_snapshot[key] = self.updates_since_snapshot.get(key, 0) + 1
            records = [(record_key(SHARE_UPDATE, key), update_value(current.snapshot_epoch, leader_epoch, start_offset, batches, delivery_complete_count(state.start_offset, state.batches)))]
        self.states[key] = state

        def response(result: AppendResult) -> ErrorCode:
            if result.error != ErrorCode.NONE:
                self.updates_since_snapshot[key] = self.updates_per_snapshot  # the next write catches the log up
            return result.error

        return CoordinatorResult(records, response)

    def initialize_state(self, key: SharePartitionKey, start_offset: int, state_epoch: int = -1) -> CoordinatorResult[ErrorCode]:
        """InitializeShareGroupState (AlterShareGroupOffsets): a ShareSnapshot of the start offset alone,
        nothing in flight, whatever the key held before (-1: uninitialized), at ``state_epoch``
        (FENCED_STATE_EPOCH below the state's; -1: the state's, which is what odradek's own resets ask --
        docs/protocol.md)."""
        now = self.context.clock()
        current = self.states.get(key)
        fenced = self.fenced(key, state_epoch, -1)
        if fenced is not None:
            return CoordinatorResult.of(fenced)
        if state_epoch == -1:
            state_epoch = 0 if current is None else current.state_epoch
        state = ShareState(
            0 if current is None else current.snapshot_epoch + 1, state_epoch, 0 if current is None else current.leader_epoch,
            start_offset, (), now if current is None else current.create_timestamp, now,
        )
        self.states[key] = state
        self.updates_since_snapshot[key] = 0
        return CoordinatorResult([(record_key(SHARE_SNAPSHOT, key), snapshot_value(state))], lambda result: result.error)

    def delete_state(self, key: SharePartitionKey) -> CoordinatorResult[ErrorCode]:
        """DeleteShareGroupState: tombstones for the key's records."""
        self.leader_epochs.pop(key, None)
        if self.states.pop(key, None) is None:
            return CoordinatorResult.of(ErrorCode.NONE)
        self.updates_since_snapshot.pop(key, None)
        return CoordinatorResult([(record_key(SHARE_SNAPSHOT, key), None), (record_key(SHARE_UPDATE, key), None)], lambda result: result.error)

    def on_partitions_deleted(self, partitions: list[tuple[str, int]]) -> None:
        """Kept: the state is keyed by topic id, and a re-created topic has a new one."""


class ShareCoordinator:
    """What the share partitions call (Kafka's persister, for the partitions this broker coordinates)."""

    def __init__(self, runtime: CoordinatorRuntime[ShareCoordinatorShard]) -> None:
        self.runtime = runtime
        runtime.coordinator = self

    def partition_of(self, key: SharePartitionKey) -> int:
        return self.runtime.partition_for(coordinator_key(key))

    def locate(self, key: SharePartitionKey) -> tuple[ErrorCode, int]:
        """The broker that coordinates the key (FindCoordinator's key type 2); the first lookup creates
        ``__share_group_state`` and answers COORDINATOR_NOT_AVAILABLE."""
        error, broker = self.runtime.locate(coordinator_key(key))
        return error, -1 if broker is None else broker.node_id

    def read_state(self, key: SharePartitionKey, leader_epoch: int = -1) -> tuple[ErrorCode, ShareState | None]:
        """The key's state, if this broker coordinates it (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS);
        ``leader_epoch`` as ReadShareGroupState carries it (-1: a summary, which fences nothing)."""
        partition = self.partition_of(key)
        error = self.runtime.status(partition)
        if error is not None:
            return error, None
        return self.runtime.read(partition, lambda shard: shard.read_state(key, leader_epoch))

    def group_partitions(self, group: str) -> list[SharePartitionKey]:
        """The share partitions of ``group`` with state in the partitions this broker coordinates."""
        return [key for shard in self.runtime.shards() for key in shard.states if key.group == group]

    def write_state(self, key: SharePartitionKey, start_offset: int, batches: list[StateBatch], state_epoch: int = 0, leader_epoch: int = -1) -> Deferred[ErrorCode]:
        return self._write(key, lambda shard: shard.write_state(key, start_offset, batches, state_epoch, leader_epoch))

    def delete_state(self, key: SharePartitionKey) -> Deferred[ErrorCode]:
        return self._write(key, lambda shard: shard.delete_state(key))

    def initialize_state(self, key: SharePartitionKey, start_offset: int, state_epoch: int = -1) -> Deferred[ErrorCode]:
        return self._write(key, lambda shard: shard.initialize_state(key, start_offset, state_epoch))

    def _write(self, key: SharePartitionKey, operation: Callable[[ShareCoordinatorShard], CoordinatorResult[ErrorCode]]) -> Deferred[ErrorCode]:
        partition = self.partition_of(key)
        error = self.runtime.status(partition)
        if error is not None:
            return Deferred.completed(error)
        return self.runtime.write(partition, operation)


def share_coordinator_runtime(
    config: "BrokerConfig",
    topic: CoordinatorTopic,
    writer: "PartitionWriter",
    load: "Callable[[int], Iterable[LoadedBatch]]",
    *,
    broker_id: int,
    metadata: Callable[[], Any],
    create_topic: Callable[[CoordinatorTopic], None],
) -> CoordinatorRuntime[ShareCoordinatorShard]:
    updates_per_snapshot = config["share.coordinator.snapshot.update.records.per.snapshot"]
    runtime: CoordinatorRuntime[ShareCoordinatorShard] = CoordinatorRuntime(
        topic,
        lambda context: ShareCoordinatorShard(context, updates_per_snapshot),
        writer,
        broker_id=broker_id,
        load=load,
        metadata=metadata,
        create_topic=create_topic,
    )
    ShareCoordinator(runtime)
    return runtime

