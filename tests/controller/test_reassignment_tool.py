"""Kafka's ``kafka-reassign-partitions`` tool against three ZooKeeper-mode brokers, real Apache Kafka 3.9.1's
and odradek's, in the same scenario: ``--generate``, ``--execute``, ``--verify`` and ``--list`` on a topic
whose every partition moves; a partition moved onto and off a broker of the other kind (odradek in Kafka's
cluster, Kafka in odradek's); then ``--list`` and ``--cancel`` of a move waiting for a broker that died once
it started (Metadata and the topic znode show the full replica set meanwhile). The expected output is what the
real Kafka prints (its run of each test proves it); what is not a contract (the proposed assignment, random in
Kafka) is checked for what it must be.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Iterator

import kafka_jvm
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests import polling
from tests.conftest import Wire
from tests.controller.zk_brokers import kafka_brokers, odradek_brokers, zk_session

from odradek import Broker
from odradek.controller import zk_data as zd
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode

SETTINGS = {"zookeeper.session.timeout.ms": "10000"}
TOPIC = "tool"
BEFORE = {0: [0, 1], 1: [1, 2]}
AFTER = {0: [2, 1], 1: [0, 2]}
CURRENT = ('{"version":1,"partitions":[{"topic":"tool","partition":0,"replicas":[0,1],"log_dirs":["any","any"]},'
           '{"topic":"tool","partition":1,"replicas":[1,2],"log_dirs":["any","any"]}]}\n')
"""The tool's JSON of the topic's assignment before the move."""


wait_for = partial(polling.wait_for, timeout_s=60.0)
"""These waits allow a minute: three Kafka JVMs (re)starting on two cores."""


call = Wire.call_once


@dataclass
class Node:
    bootstrap: str
    pid: Callable[[], int]
    kill: Callable[[], None]


@dataclass
class ZkCluster:
    """Three brokers of one kind on the session's ZooKeeper under a chroot of their own."""

    kind: str
    nodes: dict[int, Node]
    zookeeper_connect: str
    """With the cluster's chroot."""

    def bootstrap(self, without: int | None = None) -> str:
        return ",".join(n.bootstrap for b, n in self.nodes.items() if b != without)

    def controller(self) -> int:
        """The controller, as the first broker that answers says (one may be down)."""
        for node in self.nodes.values():
            with contextlib.suppress(OSError):
                return call(node.bootstrap, ApiKey.Metadata, 12, {"topics": [], "allow_auto_topic_creation": False}).controller_id
        raise AssertionError("no broker answers")

    def replicas(self, broker: int, topic: str) -> dict[int, tuple[list[int], list[int]]]:
        """One broker's Metadata: each partition's replicas and ISR."""
        response = call(self.nodes[broker].bootstrap, ApiKey.Metadata, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": topic}], "allow_auto_topic_creation": False})
        return {p.partition_index: (list(p.replica_nodes), list(p.isr_nodes)) for p in response.topics[0].partitions}

    def topic_znode(self, topic: str) -> bytes:
        with zk_session(self.zookeeper_connect) as zk:
            return zk.get(zd.topic_path(topic))[0]

    def reassigning(self) -> dict[tuple[str, int], list[int]] | None:
        """ListPartitionReassignments from the controller: each partition being moved and its replicas."""
        answer = call(self.nodes[self.controller()].bootstrap, ApiKey.ListPartitionReassignments, 0, {"timeout_ms": 30000, "topics": None})
        if answer.error_code != ErrorCode.NONE:
            return None
        return {(t.name, p.partition_index): list(p.replicas) for t in answer.topics for p in t.partitions}

    def tool(self, tmp_path: Path, action: str, moves: dict[tuple[str, int], list[int]] | None = None, *extra: str, without: int | None = None) -> str:
        """``kafka-reassign-partitions --<action>``: its exit status and standard output."""
        args = ["--bootstrap-server", self.bootstrap(without), f"--{action}", *extra]
        if moves is not None:
            plan = tmp_path / f"{action}.json"
            plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for (t, p), r in moves.items()]}))
            args += ["--reassignment-json-file", str(plan)]
        done = kafka_jvm.run_tool("kafka-reassign-partitions", *args)
        return f"exit {done.returncode}\n{done.stdout}"


@contextlib.contextmanager
def odradek_cluster(zookeeper: kafka_jvm.ZooKeeper, root: Path) -> Iterator[ZkCluster]:
    with odradek_brokers(zookeeper.connect + "/reassign-odradek", lambda b: root / f"odradek-{b}", SETTINGS) as brokers:
        yield ZkCluster("odradek", {b: Node(x.bootstrap, lambda x=x: x.pid, x.kill) for b, x in brokers.items()}, zookeeper.connect + "/reassign-odradek")


@contextlib.contextmanager
def kafka_cluster(zookeeper: kafka_jvm.ZooKeeper, root: Path) -> Iterator[ZkCluster]:
    with kafka_brokers(zookeeper.connect + "/reassign-kafka", lambda b: root / f"kafka-{b}", SETTINGS) as brokers:
        yield ZkCluster("kafka", {b: Node(x.bootstrap, lambda x=x: x.process.pid, x.kill) for b, x in brokers.items()}, zookeeper.connect + "/reassign-kafka")


@pytest.fixture(scope="module", params=["kafka", "odradek"])
def cluster(request: pytest.FixtureRequest, zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZkCluster]:
    starting = kafka_cluster if request.param == "kafka" else odradek_cluster
    with starting(zookeeper, tmp_path_factory.mktemp(f"reassign-{request.param}")) as started:
        yield started


def test_generate_execute_verify_and_list_print_what_kafka_prints(cluster: ZkCluster, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(TOPIC, num_partitions=len(BEFORE), replica_assignment=[BEFORE[p] for p in sorted(BEFORE)])])[TOPIC].result(30)
    # Every broker's: the tool asks whichever it reaches first, and a broker the controller has not updated yet
    # knows no such topic.
    wait_for(lambda: all(len(cluster.replicas(b, TOPIC)) == len(BEFORE) for b in cluster.nodes), what="the topic in every broker's metadata")

    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    generated = cluster.tool(tmp_path, "generate", None, "--topics-to-move-json-file", str(topics), "--broker-list", "0,1,2")
    assert "\n\nProposed partition reassignment configuration\n" in generated, generated
    current, proposed = generated.split("\n\nProposed partition reassignment configuration\n")
    assert current + "\n" == "exit 0\nCurrent partition replica assignment\n" + CURRENT
    proposal = json.loads(proposed)  # Kafka's starts at a random broker: what it must be
    assert proposal["version"] == 1 and [(p["topic"], p["partition"], p["log_dirs"]) for p in proposal["partitions"]] == [(TOPIC, 0, ["any", "any"]), (TOPIC, 1, ["any", "any"])]
    assert all(len(set(p["replicas"])) == 2 and set(p["replicas"]) <= {0, 1, 2} for p in proposal["partitions"])

    executed = cluster.tool(tmp_path, "execute", {(TOPIC, p): r for p, r in AFTER.items()})
    assert executed == f"""exit 0
Current partition replica assignment

{CURRENT}
Save this to use as the --reassignment-json-file option during rollback
Successfully started partition reassignments for tool-0,tool-1
"""
    wait_for(lambda: cluster.reassigning() == {}, what="the reassignment completed")
    verified = cluster.tool(tmp_path, "verify", {(TOPIC, p): r for p, r in AFTER.items()})
    assert verified == """exit 0
Status of partition reassignment:
Reassignment of partition tool-0 is completed.
Reassignment of partition tool-1 is completed.

Clearing broker-level throttles on brokers 0,1,2
Clearing topic-level throttles on topic tool
"""
    assert cluster.tool(tmp_path, "list") == "exit 0\nNo partition reassignments found.\n"
    moved = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    assert {p: m.replicas for p, m in moved.items()} == AFTER


@contextlib.contextmanager
def foreign_broker(cluster: ZkCluster, root: Path) -> Iterator[Node]:
    """Broker 3 of the other kind joins the cluster: odradek in Kafka's, Kafka in odradek's."""
    if cluster.kind == "kafka":
        broker = Broker(root / "odradek-3", config={"zookeeper.connect": cluster.zookeeper_connect, "broker.id": 3, **SETTINGS}, subprocess=True).start()
        kafka_jvm.wait_until_serving(broker.bootstrap, kafka_jvm.STARTUP_TIMEOUT_S)  # as KafkaBroker.start waits
        try:
            yield Node(broker.bootstrap, lambda: broker.pid, broker.kill)
        finally:
            with contextlib.suppress(RuntimeError):
                broker.kill()
    else:
        kafka = kafka_jvm.KafkaBroker(root / "kafka-3", cluster.zookeeper_connect, 3, dict(SETTINGS)).start(heap="384m")
        try:
            yield Node(kafka.bootstrap, lambda: kafka.process.pid, kafka.kill)
        finally:
            kafka.kill()


def test_partitions_move_onto_and_off_a_broker_of_the_other_kind(cluster: ZkCluster, tmp_path: Path) -> None:
    """Kafka's controller moves a partition's leadership onto an odradek broker and its replica away again
    (odradek's controller does the same with a Kafka broker): the records stay readable, and the replica moved
    away is deleted while the broker keeps serving the topic's other partition."""
    topic = "joined"

    def placed(broker: int, partition: int, replicas: list[int]) -> bool:
        """The broker's metadata has the partition on these replicas, all in sync."""
        found = cluster.replicas(broker, topic).get(partition)
        return found is not None and found[0] == replicas and sorted(found[1]) == sorted(replicas)

    with foreign_broker(cluster, tmp_path):
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        wait_for(lambda: 3 in admin.list_topics(timeout=10).brokers, what="broker 3 registered")
        admin.create_topics([NewTopic(topic, num_partitions=2, replica_assignment=[[0, 1], [3, 2]])])[topic].result(30)
        wait_for(lambda: all(placed(b, 0, [0, 1]) and placed(b, 1, [3, 2]) for b in (0, 1, 2)), what="the topic online everywhere")
        producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "enable.idempotence": True})
        for n in range(10):
            producer.produce(topic, str(n).encode(), partition=n % 2)
        assert producer.flush(30) == 0
        controller = cluster.nodes[cluster.controller()].bootstrap

        def move(target: list[int]) -> None:
            body = {"timeout_ms": 30000, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "replicas": target}]}]}
            answer = call(controller, ApiKey.AlterPartitionReassignments, 0, body)
            assert [(p.partition_index, p.error_code) for t in answer.responses for p in t.partitions] == [(0, ErrorCode.NONE)]
            wait_for(lambda: all(placed(b, 0, target) for b in (0, 1, 2)), what=f"{topic}-0 on {target}")

        def records() -> list[str]:
            consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": f"joined-{time.monotonic()}", "enable.auto.commit": False})
            got: list[str] = []
            try:
                consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
                deadline = time.monotonic() + 30
                while len(got) < 10 and time.monotonic() < deadline:
                    message = consumer.poll(0.5)
                    if message is not None and message.error() is None:
                        got.append(message.value().decode())
            finally:
                consumer.close()
            return sorted(got, key=int)

        move([3, 1])  # the foreign broker joins and leads
        assert call(cluster.nodes[0].bootstrap, ApiKey.Metadata, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": topic}], "allow_auto_topic_creation": False}).topics[0].partitions[0].leader_id == 3
        assert records() == [str(n) for n in range(10)]
        move([1, 0])  # and leaves: its replica deleted, not the topic
        assert records() == [str(n) for n in range(10)]
        foreign_dir = tmp_path / ("odradek-3" if cluster.kind == "kafka" else "kafka-3/kafka-logs")
        wait_for(lambda: not (foreign_dir / f"{topic}-0").exists(), what="the moved replica's directory renamed for deletion")
        assert (foreign_dir / f"{topic}-1").exists()


def test_a_move_waiting_for_a_dead_broker_is_listed_and_cancelled(cluster: ZkCluster, tmp_path: Path) -> None:
    """The move starts while its target is registered (SIGSTOPped), which is then SIGKILLed: it waits,
    ``--list`` shows it, ``--cancel`` ends it. (The module's last test: the broker stays down.)"""
    controller = cluster.controller()
    keeper, doomed = (b for b in sorted(cluster.nodes) if b != controller)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic("waiting", num_partitions=1, replica_assignment=[[keeper]])])["waiting"].result(30)
    wait_for(lambda: len(admin.list_topics("waiting", timeout=10).topics["waiting"].partitions) == 1, what="the topic in the metadata")
    os.kill(cluster.nodes[doomed].pid(), signal.SIGSTOP)
    try:
        body = {"timeout_ms": 30000, "topics": [{"name": "waiting", "partitions": [{"partition_index": 0, "replicas": [doomed]}]}]}
        answer = call(cluster.nodes[controller].bootstrap, ApiKey.AlterPartitionReassignments, 0, body)
        assert [(p.partition_index, p.error_code) for t in answer.responses for p in t.partitions] == [(0, ErrorCode.NONE)]
    finally:
        cluster.nodes[doomed].kill()
    assert cluster.reassigning() == {("waiting", 0): [doomed, keeper]}
    # the full replica set, RS = TRS + ORS, in every live broker's metadata and in the topic znode (version 3,
    # byte for byte as Kafka writes it: the encoding re-encodes Kafka's znode to the same bytes)
    wait_for(lambda: all(cluster.replicas(b, "waiting") == {0: ([doomed, keeper], [keeper])} for b in (controller, keeper)), what="the full replica set in the metadata")
    znode = cluster.topic_znode("waiting")
    assert zd.TopicAssignment.decode(znode).partitions == {0: zd.ReplicaAssignment((doomed, keeper), (doomed,), (keeper,))}
    assert zd.TopicAssignment.decode(znode).encode() == znode
    assert cluster.tool(tmp_path, "list", without=doomed) == f"exit 0\nCurrent partition reassignments:\nwaiting-0: replicas: {doomed},{keeper}. adding: {doomed}. removing: {keeper}.\n"
    cancelled = cluster.tool(tmp_path, "cancel", {("waiting", 0): [doomed]}, "--preserve-throttles", without=doomed)  # clearing throttles would ask the dead broker
    assert cancelled == "exit 0\nSuccessfully cancelled partition reassignment for: waiting-0\nNone of the specified partition moves are active."
    assert cluster.reassigning() == {}
    assert cluster.tool(tmp_path, "list", without=doomed) == "exit 0\nNo partition reassignments found.\n"
    assert zd.TopicAssignment.decode(cluster.topic_znode("waiting")).partitions == {0: zd.ReplicaAssignment((keeper,))}
    wait_for(lambda: all(cluster.replicas(b, "waiting") == {0: ([keeper], [keeper])} for b in (controller, keeper)), what="the original replica back in the metadata")
