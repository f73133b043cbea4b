"""A ZooKeeper-mode broker's view of the cluster, fed only by the controller's UpdateMetadata (Kafka 3.9's
``ZkMetadataCache``).

In ZooKeeper mode no broker but the controller reads partition states from ZooKeeper: every other broker
answers Metadata, finds leaders and coordinators from what the controller last told it. The cache keeps that
as the same :class:`MetadataImage` the embedded controller offers the handlers, so a handler cannot tell the
two modes apart. Topic configs are not in UpdateMetadata: the broker hands them in (``topic_configs``), read
from ``/config/topics`` when a topic is first seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from odradek.controller.metadata_image import BrokerInfo, MetadataImage, PartitionState, TopicInfo
from odradek.protocol.kafka_uuid import Uuid, ZERO_UUID

LEADER_DURING_DELETE = -2
"""The leader UpdateMetadata names for a partition whose topic is being deleted: it leaves the cache."""

NO_TOPIC_ID = ZERO_UUID


@dataclass
class ZkMetadataCache:
    """``image`` is replaced wholesale at each update, never changed in place: a handler holding the old one
    (across an await) keeps a consistent view, as Kafka's handlers keep their ``MetadataSnapshot``."""

    image: MetadataImage
    topic_configs: Callable[[str], dict[str, str]]
    """The config overrides of a topic this cache has not seen yet (``/config/topics/<t>``)."""

    def update(self, body: Any) -> list[TopicInfo]:
        """Apply an UpdateMetadata request (any version) and answer the topics it deleted."""
        brokers = {b.id: _broker(b) for b in body.live_brokers}
        topics = {name: TopicInfo(t.name, t.topic_id, dict(t.partitions), t.configs) for name, t in self.image.topics.items()}
        deleted: dict[str, TopicInfo] = {}
        for name, topic_id, state in _partition_states(body):
            topic = topics.get(name)
            if state.leader == LEADER_DURING_DELETE:
                if topic is not None:
                    gone = topic.partitions.pop(state.partition_index, None)
                    if gone is not None:
                        deleted.setdefault(name, TopicInfo(name, topic.topic_id, {}, topic.configs)).partitions[state.partition_index] = gone
                    if not topic.partitions:
                        del topics[name]
                continue
            if topic is None:
                topic = topics[name] = TopicInfo(name, topic_id, {}, self.topic_configs(name))
            elif topic_id != NO_TOPIC_ID and topic.topic_id != topic_id:  # deleted and created again meanwhile
                topic = topics[name] = TopicInfo(name, topic_id, {}, self.topic_configs(name))
            topic.partitions[state.partition_index] = PartitionState(
                state.leader, state.leader_epoch, list(state.isr), list(state.replicas), state.zk_version,
                offline_replicas=list(state.offline_replicas),
            )
        self.image = MetadataImage(
            self.image.cluster_id, body.controller_id, brokers, topics,
            broker_configs=self.image.broker_configs, entity_configs=self.image.entity_configs,
            group_configs=self.image.group_configs, acl_znodes=self.image.acl_znodes,
        )
        return list(deleted.values())


def _partition_states(body: Any) -> list[tuple[str, Uuid, Any]]:
    """(topic, topic id, partition state) of every partition: ungrouped before v5, by topic from v5."""
    ungrouped = [(s.topic_name, NO_TOPIC_ID, s) for s in body.ungrouped_partition_states or ()]
    grouped = [(t.topic_name, t.topic_id or NO_TOPIC_ID, s) for t in body.topic_states or () for s in t.partition_states]
    return ungrouped + grouped


def _broker(b: Any) -> BrokerInfo:
    """A live broker; before v1 it has one PLAINTEXT endpoint, before v3 endpoints are named by protocol."""
    if b.endpoints:
        endpoints = tuple((e.listener or SECURITY_PROTOCOLS.get(e.security_protocol, "PLAINTEXT"), e.host, e.port) for e in b.endpoints)
    else:
        endpoints = (("PLAINTEXT", b.v0_host, b.v0_port),)
    _, host, port = endpoints[0]
    return BrokerInfo(b.id, host, port, b.rack, endpoints)


SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
"""Kafka's ``SecurityProtocol`` ids: the listener name of an UpdateMetadata endpoint before v3."""
