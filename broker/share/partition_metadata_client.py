"""The latest offsets of partitions wherever they are led (Kafka 4.4's ``PartitionMetadataClient``, KIP-1226):
what DescribeShareGroupOffsets computes a share partition's lag from.

A partition this broker leads is answered from its own high watermark; one led by another broker is asked of
its leader in ListOffsets (timestamp LATEST, as a consumer: its high watermark) over the inter-broker
listener, the partitions of one leader batched into one request. A partition without a live leader, or a
leader that cannot answer, is answered :data:`UNKNOWN_OFFSET` (the lag is then unknown, -1, as Kafka answers
it when its client fails).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from odradek.broker.coordinator.deferred import Deferred
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.network.inter_broker_send import InterBrokerSender
    from odradek.broker.replication.replica_manager import ReplicaManager

TopicPartition = tuple[str, int]
UNKNOWN_OFFSET = -1
LATEST_TIMESTAMP = -1
CONSUMER_REPLICA_ID = -1
"""ListOffsets' replica id of a consumer: the leader answers its high watermark (a follower's id gets the
log end offset)."""
READ_UNCOMMITTED = 0


class LatestOffsets:
    """ListOffsets LATEST for partitions of one leader, each answered its offset or :data:`UNKNOWN_OFFSET`
    (the inter-broker sender's :class:`~odradek.broker.network.inter_broker_send.RequestKind`)."""

    api_key = ApiKey.ListOffsets

    def body(self, items: list[TopicPartition], version: int) -> dict[str, Any]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for name, index in items:
            topics.setdefault(name, []).append({"partition_index": index, "current_leader_epoch": -1, "timestamp": LATEST_TIMESTAMP, "max_num_offsets": 1})
        return {"replica_id": CONSUMER_REPLICA_ID, "isolation_level": READ_UNCOMMITTED, "topics": [{"name": n, "partitions": p} for n, p in topics.items()]}

    def results(self, items: list[TopicPartition], response: Any, version: int) -> list[int]:
        found = {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}
        return [int(p.offset) if p is not None and p.error_code == ErrorCode.NONE else UNKNOWN_OFFSET for p in map(found.get, items)]

    def failed(self, item: TopicPartition, reason: Exception) -> int:
        return UNKNOWN_OFFSET

    def conflicts(self, queued: TopicPartition, item: TopicPartition) -> bool:
        return queued == item


class PartitionMetadataClient:
    def __init__(self, broker_id: int, replica_manager: "ReplicaManager", metadata: Callable[[], Any], sender: Callable[[], "InterBrokerSender[TopicPartition, int]"]) -> None:
        """``metadata``: the broker's metadata image (the partitions' leaders, the live brokers); ``sender``:
        the inter-broker sender, made at the first remote ask."""
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.metadata = metadata
        self._make_sender = sender
        self._sender: "InterBrokerSender[TopicPartition, int] | None" = None

    def latest_offset(self, topic: str, index: int) -> Deferred[int]:
        """The partition's high watermark at its leader."""
        image = self.metadata()
        found = image.topics.get(topic)
        state = found.partitions.get(index) if found is not None else None
        if state is None:
            return Deferred.completed(UNKNOWN_OFFSET)
        if state.leader == self.broker_id:
            try:
                return Deferred.completed(int(self.replica_manager.leader_partition(topic, index).high_watermark))
            except Exception:  # KafkaError: no longer the leader here, or offline
                return Deferred.completed(UNKNOWN_OFFSET)
        if state.leader not in image.brokers:
            return Deferred.completed(UNKNOWN_OFFSET)
        if self._sender is None:
            self._sender = self._make_sender()
        return self._sender.submit(state.leader, (topic, index))
