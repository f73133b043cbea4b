"""A coordinator topic's partitions through the replica manager: what the coordinator runtime writes
with and loads from.

Appends go to the partition as its leader with acks=all semantics: the Deferred completes when the high
watermark passes the batch, or with REQUEST_TIMED_OUT after the commit timeout
(``offsets.commit.timeout.ms``); an append the partition refuses completes with its error. Loading reads
the partition ``load_buffer_size`` bytes at a time (``offsets.load.buffer.size``), batch by batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterable, Iterator

from odradek.broker.coordinator.runtime import AppendResult, LoadedBatch
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.replication.replica_manager import PartitionAppend
from odradek.protocol.record_batch import iter_batch_positions, read_batch_header
from odradek.protocol.records import ControlRecordType, iter_records_unchecked, parse_control_record_type
from odradek.storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from odradek.broker.replication.replica_manager import ReplicaManager
    from odradek.storage.log import Log

Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], None]
"""Starts work no request waits for (the network's task group's ``start_soon``)."""


class ReplicaManagerPartitions:
    def __init__(self, replica_manager: "ReplicaManager", topic: str, *, commit_timeout_ms: int, load_buffer_size: int, spawn: Spawn) -> None:
        self.replica_manager = replica_manager
        self.topic = topic
        self.commit_timeout_ms = commit_timeout_ms
        self.load_buffer_size = load_buffer_size
        self.spawn = spawn
        """Starts the waits for the high watermark on the event loop."""

    def append(self, partition: int, batch: bytearray) -> Deferred[AppendResult]:
        out: Deferred[AppendResult] = Deferred()
        outcome = self.replica_manager.append_records([PartitionAppend(self.topic, partition, batch)], -1, self.commit_timeout_ms, AppendOrigin.COORDINATOR)
        (result,) = outcome.results
        if not outcome.pending:
            out.complete(AppendResult(result.error, result.base_offset))
            return out

        async def await_replicas() -> None:
            await outcome.completion()
            out.complete(AppendResult(result.error, result.base_offset))

        self.spawn(await_replicas)
        return out

    def load(self, partition: int) -> Iterable[LoadedBatch]:
        """Every batch of the partition, from its log start to its end, read as the runtime replays them
        (on a worker thread); an empty partition is an empty list: nothing to read, it serves at once."""
        partition_log = self.replica_manager.get_log(self.topic, partition)
        if partition_log.log_end_offset <= partition_log.log_start_offset:
            return []
        return self._read(partition_log)

    def _read(self, partition_log: "Log") -> Iterator[LoadedBatch]:
        offset = partition_log.log_start_offset
        end = partition_log.log_end_offset
        while offset < end:
            data = partition_log.read(offset, self.load_buffer_size, end, True).read()
            if not data:
                break
            for position, base_offset, _ in iter_batch_positions(data):
                header = read_batch_header(data, position)
                offset = header.last_offset + 1
                records = list(iter_records_unchecked(data, position, header))
                if header.is_control:
                    if not records:
                        continue
                    marker = parse_control_record_type(records[0].key)
                    if marker in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                        yield LoadedBatch(base_offset, header.producer_id, header.producer_epoch, header.is_transactional, [], marker is ControlRecordType.COMMIT)
                    continue
                # A record without a key is no record of the coordinator's: nothing to replay.
                keyed = [(r.key, r.value) for r in records if r.key is not None]
                yield LoadedBatch(base_offset, header.producer_id, header.producer_epoch, header.is_transactional, keyed)
