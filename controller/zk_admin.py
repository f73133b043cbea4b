"""Topic creation and partition addition in ZooKeeper, as Kafka 3.9's ``AdminZkClient`` writes them.

In ZooKeeper mode any broker creates a topic by writing its config and its assignment; the controller
notices the assignment and brings the partitions online. These functions validate as ``AdminZkClient``
does and answer Kafka's errors (as :class:`KafkaError`); the request-level rules (policies, validate-only,
config validation) are the handlers'.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from kazoo.exceptions import NodeExistsError

from odradek.controller import zk_data as zd
from odradek.controller.metadata_image import topic_name_error, unify_collision_chars
from odradek.controller.replica_assignment import BrokerMetadata, assign_replicas_to_brokers
from odradek.controller.zk_client import ZkClient
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.kafka_uuid import Uuid, random_uuid


def broker_metadatas(zk: ZkClient) -> list[BrokerMetadata]:
    """Every registered broker, by id, with its rack (``getBrokerMetadatas``, rack-aware mode Enforced)."""
    brokers = [BrokerMetadata(b, registration.rack) for b, (registration, _) in sorted(zk.broker_registrations().items())]
    with_rack = [b for b in brokers if b.rack is not None]
    if with_rack and len(with_rack) < len(brokers):
        raise KafkaError(  # Kafka's AdminOperationException
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "Not all brokers have rack information. Add --disable-rack-aware in command line to make replica assignment without rack information.",
        )
    return brokers


def validate_topic_create(zk: ZkClient, topic: str, assignment: Mapping[int, Sequence[int]]) -> None:
    """``validateTopicCreate``, but for the topic's configs."""
    if (reason := topic_name_error(topic)) is not None:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
    if zk.kazoo.exists(zd.delete_topic_path(topic)):
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' is marked for deletion.")
    if zk.kazoo.exists(zd.topic_path(topic)):
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
    if "." in topic or "_" in topic:
        existing = zk.topics()
        if topic in existing:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
        colliding = [t for t in existing if unify_collision_chars(t) == unify_collision_chars(topic)]
        if colliding:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{topic}' collides with existing topics: {', '.join(colliding)}")
    if len({len(replicas) for replicas in assignment.values()}) != 1:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas")
    if any(len(replicas) != len(set(replicas)) for replicas in assignment.values()):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate replica assignment found: {_scala_map(assignment)}")
    if sorted(assignment) != list(range(len(assignment))):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence")


def create_topic_with_assignment(zk: ZkClient, topic: str, config: Mapping[str, str], assignment: Mapping[int, Sequence[int]], *, validate: bool = True) -> Uuid:
    """The config first, then the assignment with a new topic id (the controller watches for the latter)."""
    if validate:
        validate_topic_create(zk, topic, assignment)
    topic_id = random_uuid()
    try:
        zk.create_topic(topic, zd.TopicAssignment(topic_id, {p: zd.ReplicaAssignment(tuple(r)) for p, r in assignment.items()}), dict(config))
    except NodeExistsError:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.") from None
    return topic_id


def create_topic(zk: ZkClient, topic: str, partitions: int, replication_factor: int, config: Mapping[str, str]) -> dict[int, list[int]]:
    """``AdminZkClient.createTopic``: Kafka's assignment over the registered brokers; answers it."""
    assignment = assign_replicas_to_brokers(broker_metadatas(zk), partitions, replication_factor)
    create_topic_with_assignment(zk, topic, config, assignment)
    return assignment


def add_partitions(zk: ZkClient, topic: str, count: int, assignment: Mapping[int, Sequence[int]] | None = None) -> dict[int, list[int]]:
    """``addPartitions``: grow ``topic`` to ``count`` partitions (Kafka's placement continues from the broker
    that holds partition 0's first replica), keeping the topic id; answers the new partitions' replicas."""
    found = zk.topic_assignment(topic)
    if found is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
    existing, version = found
    if 0 not in existing.partitions:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is missing.")
    to_add = count - len(existing.partitions)
    if to_add <= 0:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"The number of partitions for a topic can only be increased. Topic {topic} currently has {len(existing.partitions)} partitions, "
            f"{count} would not be an increase.",
        )
    brokers = broker_metadatas(zk)
    replication_factor = len(existing.partitions[0].replicas)
    if assignment is None:
        first = existing.partitions[0].replicas[0]
        start = next((i for i, b in enumerate(brokers) if b.broker_id >= first), -1)
        new = assign_replicas_to_brokers(brokers, to_add, replication_factor, start_index=max(0, start), start_partition_id=len(existing.partitions))
    else:
        _validate_new_replicas(assignment, replication_factor, {b.broker_id for b in brokers})
        new = {p: list(r) for p, r in assignment.items()}
    grown = zd.TopicAssignment(existing.topic_id, {**existing.partitions, **{p: zd.ReplicaAssignment(tuple(r)) for p, r in new.items()}})
    ok, _ = zk.set_topic_assignment(topic, grown, version)
    if not ok:  # Kafka writes unconditionally; a concurrent change here is a lost race, answered as Kafka's AdminOperationException
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"The assignment of topic '{topic}' changed while partitions were added.")
    return new


def _validate_new_replicas(assignment: Mapping[int, Sequence[int]], replication_factor: int, live: set[int]) -> None:
    for partition, replicas in assignment.items():
        if not replicas:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Cannot have replication factor of 0 for partition id {partition}.")
        if len(replicas) != len(set(replicas)):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate brokers not allowed in replica assignment: {', '.join(map(str, replicas))} for partition id {partition}.")
        if not set(replicas) <= live:
            raise KafkaError(
                ErrorCode.BROKER_NOT_AVAILABLE,
                f"Some brokers specified for partition id {partition} are not available. Specified brokers: {', '.join(map(str, replicas))}, "
                f"available brokers: {', '.join(map(str, sorted(live)))}.",
            )
    bad = sorted((p, len(r)) for p, r in assignment.items() if len(r) != replication_factor)
    if bad:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Inconsistent replication factor between partitions, partition 0 has {replication_factor} while partitions "
            f"[{', '.join(str(p) for p, _ in bad)}] have replication factors [{', '.join(str(n) for _, n in bad)}], respectively.",
        )


def _scala_map(assignment: Mapping[int, Sequence[int]]) -> str:
    """The assignment in the form of a Scala ``Map[Int, List[Int]]``'s toString, which Kafka's message prints."""
    return "Map(" + ", ".join(f"{p} -> List({', '.join(map(str, r))})" for p, r in assignment.items()) + ")"
