"""ElectLeaders and Kafka's ``kafka-leader-election`` tool against three ZooKeeper-mode brokers, odradek's and
real Apache Kafka 3.9.1's, in the same scenario: a broker stopped and started again, its leaderships moved
away, and preferred election (the tool, then the controller's own leader balance check) bringing them back.

Both clusters run on the session's ZooKeeper (each under its chroot) with a leader balance check every
:data:`CHECK_INTERVAL_S` and an imbalance allowed up to :data:`IMBALANCE_PERCENTAGE` per broker. Broker 1 is
the preferred leader of one replicated partition (``elect-1``) and of four single-replica ones
(``single``), which come back to it with it: after its restart one in five of its partitions is led
elsewhere, under the allowed imbalance, so only the tool moves ``elect-1`` back. Broker 2 prefers only
``elect-2``: after its restart the balance check moves it back on its own. The expected answers and tool
output are what the real Kafka gives (its run of each test proves them); a single odradek broker and the
session's single Kafka broker are compared the same way.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator

import kafka_jvm
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from tests import polling
from tests.conftest import Wire
from tests.controller.zk_brokers import kafka_brokers, odradek_brokers

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode

CHECK_INTERVAL_S = 2
IMBALANCE_PERCENTAGE = 30
SETTINGS = {
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": str(CHECK_INTERVAL_S),
    "leader.imbalance.per.broker.percentage": str(IMBALANCE_PERCENTAGE),
    "zookeeper.session.timeout.ms": "10000",
    "offsets.topic.replication.factor": "3",
}
ELECT = {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]}
SINGLE = {p: [1] for p in range(4)}
PREFERRED, UNCLEAN = 0, 1


wait_for = partial(polling.wait_for, timeout_s=60.0)
"""These waits allow a minute: three Kafka JVMs (re)starting on two cores."""


call = Wire.call_once


def metadata(bootstrap: str, topics: list[str]) -> tuple[int, dict[tuple[str, int], tuple[int, list[int]]]]:
    """One broker's view: the controller id and each partition's leader and ISR."""
    response = call(bootstrap, ApiKey.Metadata, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": t} for t in topics], "allow_auto_topic_creation": False})
    return response.controller_id, {(t.name, p.partition_index): (p.leader_id, sorted(p.isr_nodes)) for t in response.topics for p in t.partitions}


def elect_leaders(bootstrap: str, election_type: int, partitions: dict[str, list[int]] | None, version: int = 2) -> tuple[int, dict[tuple[str, int], tuple[str, str | None]]]:
    """An ElectLeaders answer: the top-level error and each partition's error name and message."""
    topic_partitions = None if partitions is None else [{"topic": t, "partitions": ps} for t, ps in partitions.items()]
    response = call(bootstrap, ApiKey.ElectLeaders, version, {"election_type": election_type, "topic_partitions": topic_partitions, "timeout_ms": 30000})
    results = {(r.topic, p.partition_id): (ErrorCode(p.error_code).name, p.error_message) for r in response.replica_election_results for p in r.partition_result}
    return getattr(response, "error_code", 0), results


@dataclass
class ZkCluster:
    """Three brokers of one kind on the session's ZooKeeper under a chroot of their own."""

    kind: str
    start: Callable[[int], None]
    stop: Callable[[int], None]
    bootstraps: Callable[[], dict[int, str]]
    live: set[int] = field(default_factory=lambda: {0, 1, 2})

    def view(self) -> tuple[int, dict[tuple[str, int], tuple[int, list[int]]]]:
        return metadata(self.bootstraps()[0], ["elect", "single"])

    def settled(self, leaders: dict[tuple[str, int], int]) -> bool:
        """Every live broker's metadata shows these leaders, and every live replica in sync."""
        for broker in self.live:
            try:
                _, view = metadata(self.bootstraps()[broker], ["elect", "single"])
            except OSError:
                return False
            expected_isr = {**{("elect", p): sorted(set(r) & self.live) for p, r in ELECT.items()}, **{("single", p): [1] for p in SINGLE}}
            if any(view.get(tp, (None,))[0] != leader for tp, leader in leaders.items()):
                return False
            if any(view.get(tp, (None, None))[1] != isr for tp, isr in expected_isr.items() if leaders.get(tp, 0) >= 0):
                return False
        return True

    def controller(self) -> str:
        controller, _ = self.view()
        return self.bootstraps()[controller]

    def stopped(self, broker: int) -> None:
        self.stop(broker)
        self.live.discard(broker)

    def started(self, broker: int) -> None:
        self.start(broker)
        self.live.add(broker)


@contextlib.contextmanager
def odradek_cluster(zookeeper: kafka_jvm.ZooKeeper, root: Path) -> Iterator[ZkCluster]:
    with odradek_brokers(zookeeper.connect + "/elect-odradek", lambda b: root / f"odradek-{b}", SETTINGS) as brokers:
        yield ZkCluster("odradek", lambda b: brokers[b].start() and None, lambda b: brokers[b].stop(), lambda: {b: x.bootstrap for b, x in brokers.items()})


@contextlib.contextmanager
def kafka_cluster(zookeeper: kafka_jvm.ZooKeeper, root: Path) -> Iterator[ZkCluster]:
    with kafka_brokers(zookeeper.connect + "/elect-kafka", lambda b: root / f"kafka-{b}", SETTINGS) as brokers:
        yield ZkCluster("kafka", lambda b: brokers[b].start(heap="384m") and None, lambda b: brokers[b].stop(), lambda: {b: x.bootstrap for b, x in brokers.items()})


@pytest.fixture(scope="module", params=["kafka", "odradek"])
def cluster(request: pytest.FixtureRequest, zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZkCluster]:
    """The three brokers with the topics ``elect`` and ``single``, every partition led by its preferred replica."""
    starting = kafka_cluster if request.param == "kafka" else odradek_cluster
    with starting(zookeeper, tmp_path_factory.mktemp(f"elect-{request.param}")) as started:
        admin = AdminClient({"bootstrap.servers": started.bootstraps()[0]})
        for name, assignment in (("elect", ELECT), ("single", SINGLE)):
            admin.create_topics([NewTopic(name, num_partitions=len(assignment), replica_assignment=[assignment[p] for p in sorted(assignment)])])[name].result(30)
        wait_for(lambda: started.settled(preferred_leaders()), what="every partition led by its preferred replica")
        yield started


def preferred_leaders() -> dict[tuple[str, int], int]:
    return {**{("elect", p): r[0] for p, r in ELECT.items()}, **{("single", p): r[0] for p, r in SINGLE.items()}}


def tool(cluster: ZkCluster, *args: str) -> str:
    """``kafka-leader-election`` through broker 0: its exit status, its output and what it says on error
    (without the stack trace)."""
    done = kafka_jvm.run_tool("kafka-leader-election", "--bootstrap-server", cluster.bootstraps()[0], *args)
    said = [line for line in done.stderr.splitlines() if not line.startswith("\tat ") and "rdkafka" not in line]
    return f"exit {done.returncode}\n{done.stdout}" + "".join(f"{line}\n" for line in said)


def test_a_stopped_brokers_partitions_cannot_be_elected_back_while_it_is_down(cluster: ZkCluster, tmp_path: Path) -> None:
    cluster.stopped(1)
    moved = {**preferred_leaders(), ("elect", 1): 2, **{("single", p): -1 for p in SINGLE}}
    wait_for(lambda: cluster.settled(moved), what="broker 1's leaderships gone")
    controller = cluster.controller()
    assert elect_leaders(controller, PREFERRED, {"single": [0], "elect": [0, 1], "absent": [0]}) == (0, {
        ("single", 0): ("PREFERRED_LEADER_NOT_AVAILABLE", "Failed to elect leader for partition single-0 under strategy PreferredReplicaPartitionLeaderElectionStrategy"),
        ("elect", 0): ("ELECTION_NOT_NEEDED", "Leader election not needed for topic partition."),
        ("elect", 1): ("PREFERRED_LEADER_NOT_AVAILABLE", "Failed to elect leader for partition elect-1 under strategy PreferredReplicaPartitionLeaderElectionStrategy"),
        ("absent", 0): ("UNKNOWN_TOPIC_OR_PARTITION", "The partition does not exist."),
    })
    other = next(b for broker, b in cluster.bootstraps().items() if broker in cluster.live and b != controller)
    assert elect_leaders(other, PREFERRED, {"elect": [1]}) == (0, {("elect", 1): ("NOT_CONTROLLER", None)})
    election = tmp_path / "election.json"
    election.write_text(json.dumps({"partitions": [{"topic": "single", "partition": 0}, {"topic": "elect", "partition": 1}]}))
    assert tool(cluster, "--election-type", "unclean", "--path-to-json-file", str(election)) == (
        "exit 1\n"
        "Valid replica already elected for partitions elect-1\n"
        "Error completing leader election (UNCLEAN) for partition: single-0: "
        "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException: "
        "Failed to elect leader for partition single-0 under strategy OfflinePartitionLeaderElectionStrategy(true)\n"
        "1 replica(s) could not be elected\n"
        "org.apache.kafka.server.common.AdminCommandFailedException: 1 replica(s) could not be elected\n"
        "\tSuppressed: org.apache.kafka.common.errors.EligibleLeadersNotAvailableException: "
        "Failed to elect leader for partition single-0 under strategy OfflinePartitionLeaderElectionStrategy(true)\n"
        "\n"
    )


def test_the_tool_brings_the_leadership_back_after_the_restart(cluster: ZkCluster) -> None:
    cluster.started(1)
    moved = {**preferred_leaders(), ("elect", 1): 2}
    wait_for(lambda: cluster.settled(moved), what="broker 1 back in every ISR, elect-1 still led by broker 2")
    assert tool(cluster, "--election-type", "preferred", "--all-topic-partitions") == "exit 0\nSuccessfully completed leader election (PREFERRED) for partitions elect-1\n"
    controller = cluster.controller()
    assert metadata(controller, ["elect"])[1][("elect", 1)][0] == 1  # the answer came once the controller's metadata showed it
    wait_for(lambda: cluster.settled(preferred_leaders()), what="every broker's metadata showing broker 1 leading elect-1")
    assert elect_leaders(controller, PREFERRED, None) == (0, {})  # none needed, none named
    assert tool(cluster, "--election-type", "preferred", "--topic", "elect", "--partition", "1") == "exit 0\nValid replica already elected for partitions elect-1\n"


def test_the_leader_balance_check_brings_the_leadership_back_after_the_restart(cluster: ZkCluster) -> None:
    cluster.stopped(2)
    wait_for(lambda: cluster.settled({**preferred_leaders(), ("elect", 2): 0}), what="broker 2's leadership gone")
    cluster.started(2)
    wait_for(lambda: cluster.settled(preferred_leaders()), timeout_s=30 + 3 * CHECK_INTERVAL_S, what="elect-2 back with broker 2")


def test_a_created_grown_or_deleted_topic_is_in_the_controllers_metadata_once_answered(cluster: ZkCluster) -> None:
    """The controller's answer waits for its own metadata (Kafka's DelayedCreatePartitions and
    DelayedDeleteTopics), so a client can use what it was told at once."""
    admin = AdminClient({"bootstrap.servers": ",".join(cluster.bootstraps().values())})
    controller = cluster.controller()
    for n in range(3):
        name = f"fresh-{n}"
        admin.create_topics([NewTopic(name, 3, 3)], operation_timeout=30)[name].result(30)
        assert [leader >= 0 for leader, _ in metadata(controller, [name])[1].values()] == [True] * 3
        if n == 0:  # a producer told of the topic by any broker writes to it at once
            delivered: list[Any] = []
            producer = Producer({"bootstrap.servers": ",".join(cluster.bootstraps().values()), "acks": "all"})
            for partition in range(3):
                producer.produce(name, b"at once", partition=partition, on_delivery=lambda err, msg: delivered.append(err))
            assert producer.flush(30) == 0 and delivered == [None] * 3
        admin.create_partitions([NewPartitions(name, 5)], operation_timeout=30)[name].result(30)
        assert [leader >= 0 for leader, _ in metadata(controller, [name])[1].values()] == [True] * 5
        admin.delete_topics([name], operation_timeout=30)[name].result(30)
        assert metadata(controller, [name])[1] == {}


def test_the_controllers_topic_answers_are_kafkas(cluster: ZkCluster) -> None:
    """CreateTopics, CreatePartitions and DeleteTopics at the controller, waiting (30 s) or not (0)."""
    controller = cluster.controller()

    def create(name: str, timeout_ms: int) -> list[tuple]:
        body = {"topics": [{"name": name, "num_partitions": 2, "replication_factor": 3, "assignments": [], "configs": []}], "timeout_ms": timeout_ms, "validate_only": False}
        return [
            (t.name, ErrorCode(t.error_code).name, t.error_message, t.num_partitions, t.replication_factor, ErrorCode(t.topic_config_error_code).name, t.topic_id.int != 0, len(t.configs or ()) > 0)
            for t in call(controller, ApiKey.CreateTopics, 7, body).topics
        ]

    def grow(name: str, timeout_ms: int) -> list[tuple]:
        body = {"topics": [{"name": name, "count": 3, "assignments": None}], "timeout_ms": timeout_ms, "validate_only": False}
        return [(r.name, ErrorCode(r.error_code).name, r.error_message) for r in call(controller, ApiKey.CreatePartitions, 3, body).results]

    def delete(name: str, timeout_ms: int) -> list[tuple]:
        body = {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}], "timeout_ms": timeout_ms}
        return [(r.name, ErrorCode(r.error_code).name, r.error_message) for r in call(controller, ApiKey.DeleteTopics, 6, body).responses]

    assert create("wired", 30000) == [("wired", "NONE", None, 2, 3, "NONE", True, True)]
    assert create("wired", 30000) == [("wired", "TOPIC_ALREADY_EXISTS", "Topic 'wired' already exists.", -1, -1, "NONE", False, False)]
    assert grow("wired", 30000) == [("wired", "NONE", None)]
    assert delete("wired", 30000) == [("wired", "NONE", None)]
    assert create("unwaited", 0) == [("unwaited", "REQUEST_TIMED_OUT", None, -1, -1, "NONE", True, False)]
    wait_for(lambda: len(metadata(controller, ["unwaited"])[1]) == 2, what="the topic created without waiting online")
    assert grow("unwaited", 0) == [("unwaited", "REQUEST_TIMED_OUT", None)]
    assert delete("unwaited", 0) == [("unwaited", "REQUEST_TIMED_OUT", None)]


def test_only_the_controller_creates_grows_or_deletes_topics(cluster: ZkCluster) -> None:
    other = next(b for broker, b in cluster.bootstraps().items() if b != cluster.controller())
    created = call(other, ApiKey.CreateTopics, 7, {"topics": [{"name": "elsewhere", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 5000, "validate_only": False})
    assert [(t.name, ErrorCode(t.error_code).name, t.error_message, t.num_partitions, t.replication_factor) for t in created.topics] == [("elsewhere", "NOT_CONTROLLER", "", -1, -1)]
    grown = call(other, ApiKey.CreatePartitions, 3, {"topics": [{"name": "elect", "count": 4, "assignments": None}], "timeout_ms": 5000, "validate_only": False})
    assert [(r.name, ErrorCode(r.error_code).name, r.error_message) for r in grown.results] == [("elect", "NOT_CONTROLLER", None)]
    deleted = call(other, ApiKey.DeleteTopics, 6, {"topics": [{"name": "elect", "topic_id": uuid.UUID(int=0)}], "timeout_ms": 5000})
    assert [(r.name, ErrorCode(r.error_code).name, r.error_message) for r in deleted.responses] == [("elect", "NOT_CONTROLLER", None)]
    assert metadata(other, ["elsewhere"])[1] == {} and len(metadata(other, ["elect"])[1]) == 3


def test_a_topic_auto_created_by_a_broker_comes_online_everywhere(cluster: ZkCluster) -> None:
    """Metadata naming an unknown topic creates it (written to ZooKeeper by that broker, off its event loop
    in odradek) and answers LEADER_NOT_AVAILABLE; the controller then brings it online on every broker."""
    other = next(b for broker, b in cluster.bootstraps().items() if b != cluster.controller())
    request = {"topics": [{"topic_id": uuid.UUID(int=0), "name": "auto-made"}], "allow_auto_topic_creation": True}
    (first,) = call(other, ApiKey.Metadata, 12, request).topics
    assert (first.name, ErrorCode(first.error_code).name, list(first.partitions)) == ("auto-made", "LEADER_NOT_AVAILABLE", [])
    wait_for(lambda: all(
        [leader >= 0 for leader, _ in metadata(b, ["auto-made"])[1].values()] == [True] for b in cluster.bootstraps().values()
    ), what="the auto-created topic led, on every broker")


def test_a_topic_config_altered_through_a_broker_is_described_by_it_at_once(cluster: ZkCluster) -> None:
    """Kafka's broker describes a topic's configs from ZooKeeper; odradek's applies what it wrote before it
    answers (the write off its event loop)."""
    for n, bootstrap in enumerate(cluster.bootstraps().values()):
        retention = str(3600000 + n)
        alter = {"resources": [{"resource_type": 2, "resource_name": "elect", "configs": [{"name": "retention.ms", "config_operation": 0, "value": retention}]}], "validate_only": False}
        (altered,) = call(bootstrap, ApiKey.IncrementalAlterConfigs, 1, alter).responses
        assert (ErrorCode(altered.error_code).name, altered.error_message) == ("NONE", None)
        describe = {"resources": [{"resource_type": 2, "resource_name": "elect", "configuration_keys": ["retention.ms"]}], "include_synonyms": False, "include_documentation": False}
        (described,) = call(bootstrap, ApiKey.DescribeConfigs, 4, describe).results
        assert [(c.name, c.value) for c in described.configs] == [("retention.ms", retention)]


@pytest.fixture(scope="module")
def single_broker() -> Iterator[Broker]:
    with Broker(subprocess=True) as broker:
        yield broker


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_single_broker_answers_as_kafkas_single_broker(single_broker: Broker, real_kafka: kafka_jvm.RealKafka, version: int) -> None:
    """Both are their own controller: a partition led by its only replica needs no election of either type."""
    answers = []
    for bootstrap in (real_kafka.bootstrap, single_broker.bootstrap):
        topic = f"elect-single-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        wait_for(lambda: all(leader >= 0 for leader, _ in metadata(bootstrap, [topic])[1].values()), what="the topic led")
        rename = lambda got: (got[0], {("topic" if t == topic else t, p): e for (t, p), e in got[1].items()})  # noqa: E731
        answers.append([
            rename(elect_leaders(bootstrap, election_type, {topic: [0, 1, 7], "elect-absent": [0]}, version))
            for election_type in ((PREFERRED,) if version == 0 else (PREFERRED, UNCLEAN))
        ] + [  # all partitions (other tests' too, on the shared Kafka): those needing no election left out
            [tp for tp in elect_leaders(bootstrap, UNCLEAN, None, version)[1] if tp[0] == topic] if version else None,
            rename(elect_leaders(bootstrap, 7, {topic: [0]}, version)) if version else None,
        ])
    kafka, odradek = answers
    assert odradek == kafka
    if version:
        assert kafka[-2] == []
        assert kafka[-1] == (ErrorCode.UNKNOWN_SERVER_ERROR, {("topic", 0): ("UNKNOWN_SERVER_ERROR", None)})  # an unknown election type
    assert kafka[0] == (0, {
        ("topic", 0): ("ELECTION_NOT_NEEDED", "Leader election not needed for topic partition."),
        ("topic", 1): ("ELECTION_NOT_NEEDED", "Leader election not needed for topic partition."),
        ("topic", 7): ("UNKNOWN_TOPIC_OR_PARTITION", "The partition does not exist."),
        ("elect-absent", 0): ("UNKNOWN_TOPIC_OR_PARTITION", "The partition does not exist."),
    })


def test_without_alter_on_the_cluster_nothing_is_elected() -> None:
    """Kafka's handleElectLeaders: CLUSTER_AUTHORIZATION_FAILED at the top and for each named partition."""
    with Broker(config={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, subprocess=True) as broker:
        denied = ("CLUSTER_AUTHORIZATION_FAILED", None)
        assert elect_leaders(broker.bootstrap, PREFERRED, {"t": [0, 1]}) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, {("t", 0): denied, ("t", 1): denied})
        assert elect_leaders(broker.bootstrap, UNCLEAN, None) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, {})
