"""Partition reassignment (KIP-455) on a three-broker odradek cluster coordinated by a real ZooKeeper:
Kafka's own ``kafka-reassign-partitions`` tool, the AlterPartitionReassignments / ListPartitionReassignments
requests on the wire, the legacy ``/admin/reassign_partitions`` znode, reassignment while an idempotent
acks=all producer writes, and a controller failover in the middle of one.

The brokers are processes (``Broker(subprocess=True)``); what is checked is what a user sees: the tools'
output, the records, the replicas' files on disk and ZooKeeper's znodes. ``test_reassignment_tool.py``
compares the tool's output and a move waiting for a dead broker with a real Kafka cluster's.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import kafka_jvm
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from tests.polling import wait_for
from tests.controller.zk_brokers import odradek_brokers, zk_session
from odradek import Broker
from odradek.broker.coordinator.runtime import partition_for
from odradek.broker.coordinator.group.group_coordinator import GROUP_METADATA_TOPIC
from odradek.controller import zk_data as zd
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import MAX_ERROR_MESSAGE_CHARS, ErrorCode

CHROOT = "/odradek-reassign"
SESSION_TIMEOUT_MS = 10000
LAG_TIME_MAX_MS = 1500
DELETE_DELAY_MS = 500
"""``log.segment.delete.delay.ms``: how long a deleted replica's renamed directory stays (Kafka's default is a minute)."""


@pytest.fixture(scope="module")
def brokers(zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Broker]]:
    """Brokers 0, 1 and 2 under :data:`CHROOT`, killed after the module."""
    settings = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, "replica.lag.time.max.ms": LAG_TIME_MAX_MS, "log.segment.delete.delay.ms": DELETE_DELAY_MS}
    with odradek_brokers(zookeeper.connect + CHROOT, lambda b: tmp_path_factory.mktemp(f"reassign-{b}"), settings) as started:
        yield started


@pytest.fixture(scope="module")
def zk(zookeeper: kafka_jvm.ZooKeeper, brokers: dict[int, Broker]) -> Iterator[KazooClient]:
    with zk_session(zookeeper.connect + CHROOT) as client:
        yield client


def bootstrap(brokers: dict[int, Broker]) -> str:
    return ",".join(b.bootstrap for b in brokers.values())


def controller_id(zk: KazooClient) -> int:
    return zd.ControllerRegistration.decode(zk.get(zd.CONTROLLER)[0]).broker_id


def other_controller(zk: KazooClient, old: int) -> int | None:
    """The controller's id once another broker than ``old`` holds the role; None meanwhile, also while no one
    does (the znode can go between a check of its existence and its read: the election is under way)."""
    try:
        current = controller_id(zk)
    except NoNodeError:
        return None
    return current if current != old else None


def assignment(zk: KazooClient, topic: str) -> dict[int, zd.ReplicaAssignment]:
    return dict(zd.TopicAssignment.decode(zk.get(zd.topic_path(topic))[0]).partitions)


def state(zk: KazooClient, topic: str, partition: int) -> zd.LeaderIsrAndControllerEpoch:
    found = zd.LeaderIsrAndControllerEpoch.decode(zk.get(zd.partition_state_path(topic, partition))[0])
    assert found is not None
    return found


def create_topic(brokers: dict[int, Broker], zk: KazooClient, topic: str, replicas: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    admin.create_topics([NewTopic(topic, num_partitions=len(replicas), replica_assignment=replicas)])[topic].result(30)
    wait_for(lambda: all(zk.exists(zd.partition_state_path(topic, p)) and len(state(zk, topic, p).isr) == len(r) for p, r in enumerate(replicas)), what=f"{topic} online, every replica in sync")


def reassign_tool(brokers: dict[int, Broker], tmp_path: Path, action: str, moves: dict[tuple[str, int], list[int]] | None = None, *extra: str) -> str:
    """``kafka-reassign-partitions --<action>`` with a reassignment JSON file; its standard output."""
    args = ["--bootstrap-server", bootstrap(brokers), f"--{action}", *extra]
    if moves is not None:
        plan = tmp_path / f"{action}.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for (t, p), r in moves.items()]}))
        args += ["--reassignment-json-file", str(plan)]
    done = kafka_jvm.run_tool("kafka-reassign-partitions", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def settled(zk: KazooClient, topic: str, targets: dict[int, list[int]]) -> bool:
    """Every named partition's assignment is its target alone, and its ISR holds just the target."""
    now = assignment(zk, topic)
    return all(now[p] == zd.ReplicaAssignment(tuple(r)) and sorted(state(zk, topic, p).isr) == sorted(r) for p, r in targets.items())


def segment(broker: Broker, topic: str, partition: int) -> bytes | None:
    path = broker.log_dir / f"{topic}-{partition}" / "00000000000000000000.log"
    return path.read_bytes() if path.exists() else None


def test_reassignment_while_producing_moves_every_replica_and_loses_no_acknowledged_record(brokers: dict[int, Broker], zk: KazooClient, tmp_path: Path) -> None:
    """An idempotent acks=all producer keeps writing while each partition of an rf=2 topic moves its leader
    away to the third broker: every acknowledged record is read back once, the new replicas' segments equal
    the leader's, and the removed replicas' logs are gone from disk. A group's committed offsets stay
    whichever broker coordinates it (each broker loses a replica)."""
    topic = "moving"
    before = [[0, 1], [1, 2], [2, 0]]
    targets = {0: [2, 1], 1: [0, 2], 2: [1, 0]}
    create_topic(brokers, zk, topic, before)
    acked: list[str] = []
    failed: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap(brokers), "acks": "all", "enable.idempotence": True, "linger.ms": 5})

        def delivered(error: Any, message: Any) -> None:
            (failed if error is not None else acked).append(message.value().decode())

        n = 0
        while not stop.is_set():
            producer.produce(topic, str(n).encode(), partition=n % 3, on_delivery=delivered)
            producer.poll(0)
            n += 1
            time.sleep(0.002)
        assert producer.flush(60) == 0

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        wait_for(lambda: len(acked) > 300, what="records acknowledged before the move")
        committed = [TopicPartition(topic, p, 10 + p) for p in targets]
        group = Consumer({"bootstrap.servers": bootstrap(brokers), "group.id": "reassign-offsets", "enable.auto.commit": False})
        try:
            group.commit(offsets=committed, asynchronous=False)
        finally:
            group.close()
        out = reassign_tool(brokers, tmp_path, "execute", {(topic, p): r for p, r in targets.items()})
        assert "Successfully started partition reassignments for moving-0,moving-1,moving-2" in out
        wait_for(lambda: settled(zk, topic, targets), timeout_s=60, what="every partition on its target replicas")
        count = len(acked)
        wait_for(lambda: len(acked) > count + 300, what="records acknowledged after the move")
    finally:
        stop.set()
        writer.join(90)
    assert not failed
    assert {p: state(zk, topic, p).leader for p in targets} == {p: r[0] for p, r in targets.items()}  # the leaders moved away
    verify = reassign_tool(brokers, tmp_path, "verify", {(topic, p): r for p, r in targets.items()})
    assert all(f"Reassignment of partition {topic}-{p} is completed." in verify for p in targets)

    consumer = Consumer({"bootstrap.servers": bootstrap(brokers), "group.id": "reassign-check", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in targets])
        deadline = time.monotonic() + 30
        while not set(acked) <= set(got) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value().decode())
    finally:
        consumer.close()
    assert set(acked) <= set(got)
    assert len(got) == len(set(got))  # no duplicates
    group = Consumer({"bootstrap.servers": bootstrap(brokers), "group.id": "reassign-offsets", "enable.auto.commit": False})
    try:
        assert [(c.partition, c.offset) for c in group.committed([TopicPartition(topic, p) for p in targets], timeout=30)] == [(c.partition, c.offset) for c in committed]
    finally:
        group.close()

    for p, replicas in targets.items():
        leader, follower = (brokers[r] for r in replicas)
        wait_for(lambda: segment(leader, topic, p) is not None and segment(leader, topic, p) == segment(follower, topic, p), what=f"{topic}-{p}'s new replica equal to its leader")
        (removed,) = set(before[p]) - set(replicas)
        wait_for(lambda: not any(d.name.startswith(f"{topic}-{p}") for d in brokers[removed].log_dir.iterdir()), what=f"{topic}-{p}'s removed replica deleted from disk")


def test_a_group_coordinator_partition_moves_away_from_its_leader_with_the_groups_offsets(brokers: dict[int, Broker], zk: KazooClient, tmp_path: Path) -> None:
    """The ``__consumer_offsets`` partition of a group leaves the broker leading it: the new leader loads the
    group, whose committed offsets stay readable, and new commits work."""
    topic, group_id = "offsets-moved", "moved-group"
    create_topic(brokers, zk, topic, [[0], [1], [2]])
    committed = [TopicPartition(topic, p, 100 + p) for p in range(3)]

    def group_consumer() -> Consumer:
        return Consumer({"bootstrap.servers": bootstrap(brokers), "group.id": group_id, "enable.auto.commit": False})

    consumer = group_consumer()
    try:
        consumer.commit(offsets=committed, asynchronous=False)
    finally:
        consumer.close()
    partition = partition_for(group_id, len(assignment(zk, GROUP_METADATA_TOPIC)))
    replicas = assignment(zk, GROUP_METADATA_TOPIC)[partition].replicas
    leader = state(zk, GROUP_METADATA_TOPIC, partition).leader
    target = [r for r in replicas if r != leader] or [next(b for b in brokers if b != leader)]
    reassign_tool(brokers, tmp_path, "execute", {(GROUP_METADATA_TOPIC, partition): target})
    wait_for(lambda: settled(zk, GROUP_METADATA_TOPIC, {partition: target}), what="the group's partition moved")
    assert state(zk, GROUP_METADATA_TOPIC, partition).leader != leader
    consumer = group_consumer()

    def offsets(partitions: list[int]) -> list[tuple[int, int]] | None:
        """The group's committed offsets, or None while a broker still says it is not the coordinator (a
        metadata answer from before the move sends the client to the old leader: retriable, as with Kafka)."""
        try:
            return [(c.partition, c.offset) for c in consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)]
        except KafkaException as exc:
            if exc.args[0].code() not in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS):
                raise
            return None

    try:
        assert wait_for(lambda: offsets([0, 1, 2]), what="the group's offsets from its new coordinator") == [(c.partition, c.offset) for c in committed]
        consumer.commit(offsets=[TopicPartition(topic, 0, 200)], asynchronous=False)
        assert offsets([0]) == [(0, 200)]
    finally:
        consumer.close()


def alter(wire: Any, partitions: list[tuple[str, int, list[int] | None]]) -> dict[tuple[str, int], tuple[int, str | None]]:
    """An AlterPartitionReassignments request on the wire; each partition's error code and message."""
    body = {"timeout_ms": 30000, "topics": [{"name": t, "partitions": [{"partition_index": p, "replicas": r}]} for t, p, r in partitions]}
    answer = wire.call(ApiKey.AlterPartitionReassignments, 0, body)
    assert (answer.error_code, answer.error_message) == (ErrorCode.NONE, "")  # as Kafka: the generated default
    return {(t.name, p.partition_index): (p.error_code, p.error_message) for t in answer.responses for p in t.partitions}


def list_reassignments(wire: Any, topics: list[tuple[str, list[int]]] | None = None) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    body = {"timeout_ms": 30000, "topics": None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics]}
    answer = wire.call(ApiKey.ListPartitionReassignments, 0, body)
    assert (answer.error_code, answer.error_message) == (ErrorCode.NONE, "")  # as Kafka: the generated default
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)) for t in answer.topics for p in t.partitions}


def refusals(wire: Any, topic: str, live: int, dead: int) -> list[dict[tuple[str, int], tuple[int, str | None]]]:
    """Duplicates, a broker that is not live, an unknown partition and topic; cancellations with nothing to
    cancel; a move to where the partition already is (complete at once)."""
    return [
        alter(wire, [(topic, 0, [live, live]), (topic, 1, [dead]), (topic, 9, [live]), ("no-such-topic", 0, [live])]),
        alter(wire, [(topic, 0, None), ("no-such-topic", 0, None)]),
        alter(wire, [(topic, 1, [live])]),
    ]


def test_refusals_are_answered_per_partition_as_kafka_answers_them(brokers: dict[int, Broker], zk: KazooClient, connect: Callable[..., Any], zk_kafka: kafka_jvm.KafkaBroker) -> None:
    """The same refusals from odradek's controller and from a real Kafka 3.9.1 controller (one broker, id 0):
    codes and messages equal but for the live brokers each lists."""
    topic = "refused"
    create_topic(brokers, zk, topic, [[0], [0]])
    kafka_admin = AdminClient({"bootstrap.servers": zk_kafka.bootstrap})
    kafka_admin.create_topics([NewTopic(topic, num_partitions=2, replica_assignment=[[0], [0]])])[topic].result(30)
    wait_for(lambda: len(kafka_admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2, what="the topic on Kafka")
    ours = refusals(connect(brokers[controller_id(zk)].bootstrap), topic, 0, 7)
    theirs = refusals(connect(zk_kafka.bootstrap), topic, 0, 7)
    assert [{k: (code, message.replace("Set(0, 1, 2)", "Set(0)") if message else message) for k, (code, message) in answers.items()} for answers in ours] == theirs
    assert [{k: code for k, (code, _) in answers.items()} for answers in ours] == [
        {(topic, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT, (topic, 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         (topic, 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION},
        {(topic, 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, ("no-such-topic", 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS},
        {(topic, 1): ErrorCode.NONE},
    ]
    # a request naming more replicas than an error message may quote: Kafka's refusal, its message cut
    ((code, message),) = alter(connect(brokers[controller_id(zk)].bootstrap), [(topic, 0, [0] * 20000)]).values()
    assert (code, len(message), message[-3:]) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, MAX_ERROR_MESSAGE_CHARS, "...")
    assert message.startswith("Duplicate replica ids in partition reassignment replica list: ArrayBuffer(0, 0, ")
    # a broker that is not the controller sends the client there
    other = next(b for b in brokers if b != controller_id(zk))
    answer = connect(brokers[other].bootstrap).call(ApiKey.ListPartitionReassignments, 0, {"timeout_ms": 30000, "topics": None})
    assert answer.error_code == ErrorCode.NOT_CONTROLLER


def test_a_broker_without_zookeeper_answers_as_a_one_broker_kafka_cluster(connect: Callable[..., Any], zk_kafka: kafka_jvm.KafkaBroker, tmp_path: Path) -> None:
    """A single-node odradek broker is its own controller: the same answers as the session's one Kafka broker
    (which test_refusals_are_answered_per_partition_as_kafka_answers_them gave the topic), and nothing listed."""
    topic = "refused"
    with Broker(tmp_path / "single", config={"broker.id": 0}) as single:
        admin = AdminClient({"bootstrap.servers": single.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
        kafka_admin = AdminClient({"bootstrap.servers": zk_kafka.bootstrap})
        if topic not in kafka_admin.list_topics(timeout=10).topics:
            kafka_admin.create_topics([NewTopic(topic, num_partitions=2, replica_assignment=[[0], [0]])])[topic].result(30)
        wire = connect(single.bootstrap)
        assert refusals(wire, topic, 0, 7) == refusals(connect(zk_kafka.bootstrap), topic, 0, 7)
        assert list_reassignments(wire) == {}


def test_a_principal_without_alter_or_describe_on_the_cluster_is_refused(connect: Callable[..., Any], tmp_path: Path) -> None:
    """With Kafka's AclAuthorizer and no ACLs, the anonymous principal may neither move nor list: Alter is
    refused at the top and for each partition, List at the top (codes as Kafka's; no message, see
    compat-tests/README.md)."""
    with Broker(tmp_path / "acl", config={"broker.id": 0, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}) as secured:
        wire = connect(secured.bootstrap)
        body = {"timeout_ms": 30000, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [0]}, {"partition_index": 1, "replicas": None}]}]}
        altered = wire.call(ApiKey.AlterPartitionReassignments, 0, body)
        assert (altered.error_code, altered.error_message) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        assert [(t.name, p.partition_index, p.error_code) for t in altered.responses for p in t.partitions] == [("t", 0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED), ("t", 1, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
        listed = wire.call(ApiKey.ListPartitionReassignments, 0, {"timeout_ms": 30000, "topics": None})
        assert (listed.error_code, listed.topics) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])


def test_the_legacy_znode_is_acted_on_and_deleted_when_done(brokers: dict[int, Broker], zk: KazooClient) -> None:
    """What tools before KIP-455 write, ``/admin/reassign_partitions``: the controller moves the partitions,
    drops those it cannot move (a partition that does not exist) and deletes the znode once all are done."""
    topic = "legacy"
    create_topic(brokers, zk, topic, [[0, 1]])
    zk.create(zd.REASSIGN_PARTITIONS, zd.encode_reassignment({(topic, 0): [1, 2], (topic, 5): [0]}))
    wait_for(lambda: settled(zk, topic, {0: [1, 2]}), what="the partition moved")
    wait_for(lambda: not zk.exists(zd.REASSIGN_PARTITIONS), what="the znode deleted")


def test_a_new_controller_resumes_a_reassignment_in_progress(brokers: dict[int, Broker], zk: KazooClient, connect: Callable[..., Any]) -> None:
    """The controller is SIGKILLed while a move waits for its new replica: the next controller reads the
    adding and removing replicas from the topic znode and completes it. (The module's last test: the killed
    broker stays down.)"""
    topic = "resumed"
    controller = controller_id(zk)
    source, target = (b for b in sorted(brokers) if b != controller)
    create_topic(brokers, zk, topic, [[source]])
    os.kill(brokers[target].pid, signal.SIGSTOP)
    try:
        assert alter(connect(brokers[controller].bootstrap), [(topic, 0, [target])]) == {(topic, 0): (ErrorCode.NONE, None)}
        assert assignment(zk, topic)[0] == zd.ReplicaAssignment((target, source), (target,), (source,))
        brokers[controller].kill()
    finally:
        os.kill(brokers[target].pid, signal.SIGCONT)
    wait_for(lambda: other_controller(zk, controller) is not None, what="another controller")
    wait_for(lambda: settled(zk, topic, {0: [target]}), what="the reassignment completed by the new controller")
