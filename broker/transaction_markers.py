"""Transaction markers: written by partition leaders (WriteTxnMarkers), sent by the transaction coordinator.

:class:`MarkerWriter` is the leader's side (Kafka's ``handleWriteTxnMarkersRequest``): for each entry it
appends one COMMIT or ABORT control batch to each partition through the replica manager, with the
COORDINATOR origin and acks=all, and answers an error per partition; a marker that reached
``__consumer_offsets`` then applies or drops the producer's pending transactional offsets there.

:class:`MarkerChannel` is the coordinator's side (Kafka's ``TransactionMarkerChannelManager``): it finds
each partition's leader in the metadata; partitions this broker leads are written through the same
:class:`MarkerWriter` the WriteTxnMarkers handler uses, without a network hop. A partition whose topic is
gone is reported as having no leader (the coordinator skips it, as Kafka does); a partition led by another
broker is answered NOT_LEADER_OR_FOLLOWER, which the coordinator retries: sending WriteTxnMarkers to other
brokers over ``broker/kafka_client.py`` belongs to the cluster mode, and is not done yet.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

from odradek.broker.deferred import Deferred
from odradek.broker.group_coordinator import GROUP_METADATA_TOPIC
from odradek.broker.replica_manager import PartitionAppend
from odradek.broker.transaction_coordinator import MarkerResult, TxnMarkerEntry
from odradek.broker.transaction_metadata import TopicPartition
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import ControlRecordType, EndTransactionMarker, build_end_txn_marker_batch
from odradek.storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from odradek.broker.replica_manager import ReplicaManager
    from odradek.controller.metadata import MetadataImage

log = logging.getLogger("odradek.transaction_markers")

ACKS_ALL = -1

CompleteGroupTransaction = Callable[[int, int, Iterable[int], bool], None]
"""The group coordinator's hook: (producer id, producer epoch, ``__consumer_offsets`` partitions, committed)."""


@dataclass
class MarkerWriter:
    replica_manager: "ReplicaManager"
    complete_group_transaction: CompleteGroupTransaction
    timeout_ms: int

    async def write(self, entries: list[TxnMarkerEntry]) -> list[dict[TopicPartition, ErrorCode]]:
        """Each entry's markers, appended; the error of each of its partitions."""
        return [await self._write_one(entry) for entry in entries]

    async def _write_one(self, entry: TxnMarkerEntry) -> dict[TopicPartition, ErrorCode]:
        partitions = sorted(entry.partitions)
        marker = EndTransactionMarker(ControlRecordType.COMMIT if entry.commit else ControlRecordType.ABORT, entry.coordinator_epoch)
        batch = build_end_txn_marker_batch(marker, producer_id=entry.producer_id, producer_epoch=entry.producer_epoch, timestamp=int(time.time() * 1000))
        appends = [PartitionAppend(topic, index, bytearray(batch)) for topic, index in partitions]
        outcome = self.replica_manager.append_records(appends, ACKS_ALL, self.timeout_ms, AppendOrigin.COORDINATOR, internal_topics_allowed=True)
        if outcome.pending:
            await outcome.completion()
        errors = {tp: ErrorCode(result.error) for tp, result in zip(partitions, outcome.results)}
        offsets_partitions = [index for (topic, index), error in errors.items() if topic == GROUP_METADATA_TOPIC and error == ErrorCode.NONE]
        if offsets_partitions:
            # As soon as the marker is in __consumer_offsets, the transaction's offsets become visible (or go).
            try:
                self.complete_group_transaction(entry.producer_id, entry.producer_epoch, offsets_partitions, entry.commit)
            except Exception:
                log.exception("Received an exception while trying to update the offsets cache on transaction marker append")
                errors.update(((GROUP_METADATA_TOPIC, index), ErrorCode.UNKNOWN_SERVER_ERROR) for index in offsets_partitions)
        return errors


class MarkerChannel:
    def __init__(self, broker_id: int, metadata: Callable[[], "MetadataImage"], writer: MarkerWriter, spawn: Callable[[Callable[[], Awaitable[None]]], Any]) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.writer = writer
        self.spawn = spawn

    def send(self, entry: TxnMarkerEntry) -> Deferred[MarkerResult]:
        out: Deferred[MarkerResult] = Deferred()
        result = MarkerResult()
        local: set[TopicPartition] = set()
        image = self.metadata()
        for tp in entry.partitions:
            topic = image.topics.get(tp[0])
            state = topic.partitions.get(tp[1]) if topic is not None else None
            if state is None:
                result.no_leader.add(tp)
            elif state.leader == self.broker_id:
                local.add(tp)
            else:
                result.errors[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if not local:
            out.complete(result)
            return out

        async def write_local() -> None:
            try:
                [errors] = await self.writer.write([replace(entry, partitions=frozenset(local))])
            except Exception:
                log.exception("Writing transaction markers for producer %d failed", entry.producer_id)
                errors = dict.fromkeys(local, ErrorCode.UNKNOWN_SERVER_ERROR)
            result.errors.update(errors)
            out.complete(result)

        self.spawn(write_local)
        return out
