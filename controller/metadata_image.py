"""Cluster metadata as the controller publishes it to brokers.

In Kafka's ZooKeeper mode the controller owns topics, assignments, leaders, leader epochs and ISRs, and
pushes them to brokers with LeaderAndIsr and UpdateMetadata. odradek keeps the same flow on one node:
the embedded controller produces a :class:`MetadataImage` and every change reaches the broker through
:class:`MetadataListener`, so a partition's leader epoch and ISR come from the controller, never from the
broker itself.
"""

from __future__ import annotations

import string
from typing import TYPE_CHECKING, Protocol

from odradek.protocol.kafka_uuid import Uuid
from odradek.protocol.values import Fields, TupleFields

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_CHARS = frozenset(string.ascii_letters + string.digits + "._-")
"""Kafka's ``Topic.containsValidPattern``, a test of each character (no regular expression to compile at start)."""


def topic_name_error(name: str) -> str | None:
    """Kafka 3.9's ``Topic.validate``: None if legal, else the reason (answered with INVALID_TOPIC_EXCEPTION)."""
    reason = None
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
    elif not _LEGAL_TOPIC_CHARS.issuperset(name):
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None if reason is None else f"Topic name is invalid: {reason}"


def unify_collision_chars(name: str) -> str:
    """Kafka warns that ``.`` and ``_`` collide in metric names; topics equal under this map conflict."""
    return name.replace(".", "_")


class BrokerInfo(TupleFields):
    node_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[tuple[str, str, int], ...] = ()
    """(listener name, host, port) of each advertised listener, as ZooKeeper's broker registration lists them;
    ``host``/``port`` are the first's."""

    def endpoint(self, listener: str | None) -> tuple[str, int] | None:
        """Where a client of ``listener`` reaches this broker (Kafka answers each client with the endpoints of
        the listener it came through), None if the broker has no such listener; without a listener (a request
        from outside the network layer) or listeners, ``host``/``port``."""
        if listener is None or not self.endpoints:
            return self.host, self.port
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None


class PartitionState(Fields):
    """What LeaderAndIsr carries for one partition."""

    _FIELDS = ("leader", "leader_epoch", "isr", "replicas", "partition_epoch", "adding_replicas", "removing_replicas", "offline_replicas")

    def __init__(
        self,
        leader: int,
        leader_epoch: int,
        isr: list[int],
        replicas: list[int],
        partition_epoch: int = 0,
        adding_replicas: list[int] | None = None,
        removing_replicas: list[int] | None = None,
        offline_replicas: list[int] | None = None,
    ) -> None:
        """Its attributes are its fields, in order: the embedded controller writes them to its state file
        with ``vars()``."""
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.isr = isr
        self.replicas = replicas
        self.partition_epoch = partition_epoch
        self.adding_replicas: list[int] = [] if adding_replicas is None else adding_replicas
        self.removing_replicas: list[int] = [] if removing_replicas is None else removing_replicas
        self.offline_replicas: list[int] = [] if offline_replicas is None else offline_replicas
        """Replicas on brokers the ZooKeeper controller knows to be down (UpdateMetadata's OfflineReplicas)."""


class TopicInfo(Fields):
    _FIELDS = ("name", "topic_id", "partitions", "configs")

    def __init__(self, name: str, topic_id: Uuid, partitions: dict[int, PartitionState], configs: dict[str, str] | None = None) -> None:
        self.name = name
        self.topic_id = topic_id
        self.partitions = partitions
        self.configs: dict[str, str] = {} if configs is None else configs

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class MetadataImage:
    def __init__(
        self,
        cluster_id: str,
        controller_id: int,
        brokers: dict[int, BrokerInfo],
        topics: dict[str, TopicInfo] | None = None,
        broker_configs: dict[str, dict[str, str]] | None = None,
        entity_configs: dict[str, dict[str, str]] | None = None,
        group_configs: dict[str, dict[str, str]] | None = None,
        acl_znodes: dict[str, dict] | None = None,
    ) -> None:
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.brokers = brokers
        self.topics = topics if topics is not None else {}
        self.broker_configs = broker_configs if broker_configs is not None else {}
        """Dynamic broker configs by entity: a broker id, or ``<default>`` for the cluster-wide defaults (ZooKeeper's
        ``/config/brokers/<entity>``)."""
        self.entity_configs = entity_configs if entity_configs is not None else {}
        """Client quota configs by ZooKeeper's path below ``/config``: ``users/<u>``, ``users/<u>/clients/<c>``,
        ``clients/<c>``, ``ips/<ip>`` (names sanitized, ``<default>`` for the default entity)."""
        self.group_configs = group_configs if group_configs is not None else {}
        """Group configs (KIP-848, KIP-932) by group id: ZooKeeper's ``/config/groups/<group>``, the embedded
        controller's metadata file (Kafka 4.4 keeps them in its metadata log)."""
        self.acl_znodes = acl_znodes if acl_znodes is not None else {}
        """The authorizer's ACLs by znode path, with the JSON ZooKeeper would hold there (``/kafka-acl/Topic/t`` ->
        ``{"version": 1, "acls": [...]}``)."""

    def topic_by_id(self, topic_id: Uuid) -> TopicInfo | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None


if TYPE_CHECKING:  # a type for the checker only: creating a Protocol class costs ~0.13 M instructions a start
    class MetadataListener(Protocol):
        """The broker side of LeaderAndIsr / UpdateMetadata / StopReplica."""

        def on_partitions_changed(self, topic: TopicInfo, partitions: list[int]) -> None:
            """Become leader or follower of these partitions with the given state (LeaderAndIsr)."""

        def on_topic_deleted(self, topic: TopicInfo) -> None:
            """Stop serving and delete the replicas of a deleted topic (StopReplica with deletePartitions)."""

        def on_replicas_stopped(self, topic: TopicInfo, delete: bool) -> None:
            """Stop serving (and, with ``delete``, delete) replicas of a topic that stays: a reassignment moved
            them away, or the broker is shutting down (StopReplica)."""

        def on_topic_configs_changed(self, topic: TopicInfo) -> None:
            """Topic config overrides changed (ZooKeeper config change notification)."""

        def on_broker_configs_changed(self, entity: str) -> None:
            """Dynamic broker configs of a broker or the cluster default changed (config change notification)."""
