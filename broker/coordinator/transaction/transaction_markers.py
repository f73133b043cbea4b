"""Transaction markers: written by partition leaders (WriteTxnMarkers), sent by the transaction coordinator.

:class:`MarkerWriter` is the leader's side (Kafka's ``handleWriteTxnMarkersRequest``): for each entry it
appends one COMMIT or ABORT control batch to each partition through the replica manager, with the
COORDINATOR origin and acks=all, and answers an error per partition; a marker that reached
``__consumer_offsets`` then applies or drops the producer's pending transactional offsets there.

:class:`MarkerChannel` is the coordinator's side (Kafka's ``TransactionMarkerChannelManager``): it finds
each partition's leader in the metadata; partitions this broker leads are written through the same
:class:`MarkerWriter` the WriteTxnMarkers handler uses, without a network hop, the others are sent to their
leaders in WriteTxnMarkers over the inter-broker listener, the entries for one broker batched into one
request (``broker/network/inter_broker_send.py``). A partition whose topic is gone is reported as having no leader
(the coordinator skips it, as Kafka does); a partition whose leader is unknown, a leader that answers
NOT_LEADER_OR_FOLLOWER and a request that fails on the way are retried by the coordinator, which finds the
leaders again each time: the markers follow a leadership that moved.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterable

from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.group.group_coordinator import GROUP_METADATA_TOPIC
from odradek.broker.replication.replica_manager import PartitionAppend
from odradek.broker.coordinator.transaction.transaction_coordinator import MarkerResult, TxnMarkerEntry
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import ControlRecordType, EndTransactionMarker, build_end_txn_marker_batch
from odradek.storage.producer_state import AppendOrigin
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.broker.network.inter_broker_send import InterBrokerSender
    from odradek.broker.replication.replica_manager import ReplicaManager
    from odradek.controller.metadata_image import MetadataImage

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


class WriteTxnMarkers:
    """The WriteTxnMarkers request a coordinator sends to a partition leader, one marker entry per
    transaction; two entries of one producer never share a request (the answer is keyed by producer id)."""

    api_key = ApiKey.WriteTxnMarkers

    def body(self, items: list[TxnMarkerEntry], version: int) -> dict[str, Any]:
        markers = []
        for entry in items:
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(entry.partitions):
                by_topic.setdefault(topic, []).append(index)
            markers.append({
                "producer_id": entry.producer_id, "producer_epoch": entry.producer_epoch, "transaction_result": entry.commit,
                "topics": [{"name": name, "partition_indexes": indexes} for name, indexes in by_topic.items()],
                "coordinator_epoch": entry.coordinator_epoch,
            })
        return {"markers": markers}

    def results(self, items: list[TxnMarkerEntry], response: Any, version: int) -> list[dict[TopicPartition, ErrorCode]]:
        by_producer = {m.producer_id: {(t.name, p.partition_index): ErrorCode.for_code(p.error_code) for t in m.topics for p in t.partitions} for m in response.markers}
        # A partition the leader did not answer for is sent again (Kafka's handler fails on it and retries).
        return [{tp: by_producer.get(entry.producer_id, {}).get(tp, ErrorCode.NETWORK_EXCEPTION) for tp in entry.partitions} for entry in items]

    def failed(self, item: TxnMarkerEntry, reason: Exception) -> dict[TopicPartition, ErrorCode]:
        """Kafka re-queues the markers of a request that was not answered, to whichever broker leads then."""
        return dict.fromkeys(item.partitions, ErrorCode.NETWORK_EXCEPTION)

    def conflicts(self, queued: TxnMarkerEntry, item: TxnMarkerEntry) -> bool:
        return queued.producer_id == item.producer_id


class MarkerChannel:
    """Each entry split by its partitions' leaders: this broker's written through the :class:`MarkerWriter`,
    the others' sent in WriteTxnMarkers to their leaders (``remote``), batched per broker."""

    def __init__(self, broker_id: int, metadata: Callable[[], "MetadataImage"], writer: MarkerWriter, spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], Any], remote: "InterBrokerSender[TxnMarkerEntry, dict[TopicPartition, ErrorCode]]") -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.writer = writer
        self.spawn = spawn
        self.remote = remote

    def send(self, entry: TxnMarkerEntry) -> Deferred[MarkerResult]:
        """A partition without a leader now (offline, or its topic being deleted) is NOT_LEADER_OR_FOLLOWER,
        retried by the coordinator; one whose topic is gone is reported in ``no_leader``."""
        out: Deferred[MarkerResult] = Deferred()
        result = MarkerResult()
        by_leader: dict[int, set[TopicPartition]] = {}
        image = self.metadata()
        for tp in entry.partitions:
            topic = image.topics.get(tp[0])
            state = topic.partitions.get(tp[1]) if topic is not None else None
            if state is None:
                result.no_leader.add(tp)
            elif state.leader == self.broker_id or state.leader in image.brokers:
                by_leader.setdefault(state.leader, set()).add(tp)
            else:
                result.errors[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        waiting = len(by_leader)
        if not waiting:
            out.complete(result)
            return out

        def arrived(errors: dict[TopicPartition, ErrorCode]) -> None:
            nonlocal waiting
            result.errors.update(errors)
            waiting -= 1
            if not waiting:
                out.complete(result)

        for leader, partitions in by_leader.items():
            part = replace(entry, partitions=frozenset(partitions))
            if leader == self.broker_id:
                self._write_local(part).add_callback(arrived)
            else:
                self.remote.submit(leader, part).add_callback(arrived)
        return out

    def _write_local(self, entry: TxnMarkerEntry) -> Deferred[dict[TopicPartition, ErrorCode]]:
        out: Deferred[dict[TopicPartition, ErrorCode]] = Deferred()

        async def write() -> None:
            try:
                [errors] = await self.writer.write([entry])
            except Exception:
                log.exception("Writing transaction markers for producer %d failed", entry.producer_id)
                errors = dict.fromkeys(entry.partitions, ErrorCode.UNKNOWN_SERVER_ERROR)
            out.complete(errors)

        self.spawn(write)
        return out
