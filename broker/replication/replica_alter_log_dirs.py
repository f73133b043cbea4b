"""Moving a replica to another log directory of this broker (AlterReplicaLogDirs; Kafka's
``ReplicaAlterLogDirsManager`` and its thread).

The replica keeps serving from its current log while its records are copied into a *future* log in the
destination directory, as a follower copies its leader: from the future log's end, a chunk at a time, read and
appended off the event loop, the future log truncated first where the current one was truncated or its start
moved past the copy. Once the copy has caught up, the event loop (where appends happen) swaps it in between two
appends: the future log becomes the partition's log and the old directory is deleted as a deleted partition's.
A stop interrupts nothing: the future log is found at the next start and the copy goes on.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from typing import Callable, Mapping

    from anyio.abc import TaskGroup

    from odradek.broker.replication.partition import Partition
    from odradek.storage.log_manager import LogManager

log = logging.getLogger("odradek.replica_alter_log_dirs")

CHUNK_BYTES = 1024 * 1024
"""How much one copy step reads (Kafka's ``replica.fetch.max.bytes`` default)."""
IDLE_S = 0.05
"""The pause between rounds once every moving replica has caught up with its appends."""


class ReplicaAlterLogDirs:
    def __init__(self, log_manager: "LogManager", partitions: "Mapping[TopicPartition, Partition]", task_group: "Callable[[], TaskGroup | None]") -> None:
        """``partitions``: the replica manager's hosted partitions; ``task_group``: where background work runs
        once the broker serves (None before)."""
        self._logs = log_manager
        self._partitions = partitions
        self._task_group = task_group
        self.moving: set[TopicPartition] = set()
        self._running = False

    def add(self, tp: TopicPartition) -> None:
        """Copy ``tp``'s log into its future log until it can replace it (from the broker's serving on)."""
        self.moving.add(tp)
        self.start()

    def start(self) -> None:
        task_group = self._task_group()
        if self.moving and not self._running and task_group is not None:
            self._running = True
            task_group.start_soon(self._run)

    def remove(self, tp: TopicPartition) -> None:
        self.moving.discard(tp)

    async def _run(self) -> None:
        try:
            while self.moving:
                progressed = False
                for tp in sorted(self.moving):
                    try:
                        progressed |= await self._step(tp)
                    except Exception:
                        log.exception("Moving %s-%d to its new log directory failed; trying again", *tp)
                        await anyio.sleep(1)
                if not progressed:
                    await anyio.sleep(IDLE_S)
        finally:
            self._running = False

    async def _step(self, tp: TopicPartition) -> bool:
        """One chunk copied, or the swap; False when there was nothing to copy."""
        partition = self._partitions.get(tp)
        future = self._logs.future_log(*tp)
        if partition is None or future is None:
            self.moving.discard(tp)  # stopped, deleted, or its directory failed
            return False
        copied = await anyio.to_thread.run_sync(partition.copy_to_future, future, CHUNK_BYTES)
        if copied == 0:
            # caught up: the copy made durable off the event loop, so that the swap below flushes at most the
            # appends of the moment between
            await anyio.to_thread.run_sync(future.flush)
        # on the event loop, between two appends (Kafka's maybeReplaceCurrentWithFutureReplica)
        if self._logs.future_log(*tp) is future and partition.maybe_replace_current_with_future(future, lambda: self._logs.replace_current_with_future(*tp)):
            self.moving.discard(tp)
        return copied > 0
