"""Which replica answers a client, on two-broker ZooKeeper-mode clusters of each kind: odradek (one process per
broker, and two worker processes per broker with every connection on the front, so the Produce answer is built
from worker 0's ProduceAnswer) and Apache Kafka 3.9.1, with the same requests and the same expectations. Broker
0 is in rack-a, broker 1 in rack-b, both with Kafka's rack-aware replica selector.

KIP-951's leader hints. Broker 0 leads partition 0 of a topic whose replicas are [0, 1]; a second topic lives on
broker 0 alone. Asked of broker 1, a Produce (v10+) of either is refused NOT_LEADER_OR_FOLLOWER, and so is a
Fetch (v16+) of the one broker 1 does not host; the answer says who leads at which epoch (``current_leader``)
and where that leader listens (``node_endpoints``, with its rack). A third topic's leader epoch is raised by a
reassignment: a Fetch with the epoch before it is FENCED_LEADER_EPOCH with the same hints, asked of the leader or
of the follower (Kafka checks the epoch before the leadership). Older versions carry no hints; a partition that
exists nowhere stays UNKNOWN_TOPIC_OR_PARTITION.

KIP-392's fetching from the closest replica. The leader sends a v11+ consumer of rack-b to broker 1
(``preferred_read_replica``, no records) and serves one of its own rack, of no rack or of a rack without a
replica; broker 1 serves a v11+ consumer up to its high watermark and refuses an older one; a consumer of
rack-b reads every record.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import kafka_jvm
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch, iter_records
from tests import polling
from tests.conftest import Wire
from tests.controller.zk_brokers import kafka_brokers, odradek_brokers

RACKS = {0: "rack-a", 1: "rack-b"}
SETTINGS = {
    "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
    # The reassignment below makes broker 1 the preferred leader of its topic: Kafka's controller would hand it
    # the leadership at its first balance check (5 s after it is elected), under the tests' feet.
    "auto.leader.rebalance.enable": "false",
}
KINDS = {
    "odradek": {},
    "odradek-fronts": {"worker.processes": 2, "worker.placement": "fronts"},
    "kafka": None,
}
"""Each cluster's kind, and for odradek the settings its brokers add."""


class Cluster:
    def __init__(self, bootstraps: dict[int, str], topic_ids: dict[str, uuid.UUID]) -> None:
        self.bootstraps = bootstraps
        self.topic_ids = topic_ids

    def address(self, broker_id: int) -> tuple[str, int]:
        host, port = self.bootstraps[broker_id].rsplit(":", 1)
        return host, int(port)


SHARED, ON_ZERO, REASSIGNED, NEARBY = "shared", "on-zero", "reassigned", "nearby"
"""Topics replicated on both brokers (leader 0), one on broker 0 alone, one reassigned from [0, 1] to [1, 0]
(still led by broker 0, at a higher epoch), and one on both brokers holding :data:`VALUES`."""
TOPICS = (SHARED, ON_ZERO, REASSIGNED, NEARBY)
VALUES = [b"v%d" % i for i in range(10)]


@pytest.fixture(scope="module", params=KINDS)
def cluster(request: pytest.FixtureRequest, zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root: Path = tmp_path_factory.mktemp(f"routing-{request.param}")
    connect = f"{zookeeper.connect}/routing-{request.param}-{uuid.uuid4().hex[:6]}"
    extra = KINDS[request.param]
    racks = {b: {"broker.rack": rack} for b, rack in RACKS.items()}
    with contextlib.ExitStack() as stack:
        if extra is None:
            brokers: dict[int, Any] = stack.enter_context(kafka_brokers(connect, lambda b: root / f"kafka-{b}", SETTINGS, ids=(0, 1), per_broker=racks))
            bootstraps = {b: f"127.0.0.1:{broker.port}" for b, broker in brokers.items()}
        else:
            brokers = stack.enter_context(odradek_brokers(connect, lambda b: root / f"odradek-{b}", {**SETTINGS, **extra}, ids=(0, 1), per_broker=racks))
            bootstraps = {b: broker.bootstrap for b, broker in brokers.items()}
        admin = AdminClient({"bootstrap.servers": bootstraps[0], "log_level": 3})
        futures = admin.create_topics([NewTopic(name, 1, replica_assignment=[[0]] if name == ON_ZERO else [[0, 1]]) for name in TOPICS])
        for future in futures.values():
            future.result(60)
        # Both brokers must know the topics, with both replicas in sync, before the requests below.
        polling.wait_for(lambda: all(in_sync_under_zero(bootstraps[b]) for b in (0, 1)), what="the topics led by broker 0 in both brokers' metadata")
        cluster = Cluster(bootstraps, {})
        reassign = {"timeout_ms": 60000, "topics": [{"name": REASSIGNED, "partitions": [{"partition_index": 0, "replicas": [1, 0]}]}]}
        [[moved]] = [t.partitions for t in call(cluster, controller(cluster), ApiKey.AlterPartitionReassignments, 0, reassign).responses]
        assert moved.error_code == ErrorCode.NONE, moved
        polling.wait_for(lambda: all(leader_epoch(cluster, REASSIGNED, b) > 0 for b in (0, 1)), what=f"{REASSIGNED}'s leader epoch raised on both brokers")
        cluster.topic_ids.update({t.name: t.topic_id for t in metadata(cluster, 1, list(TOPICS)).topics})
        [[written]] = [t.partition_responses for t in produce(cluster, 0, 9, NEARBY, acks=-1, values=VALUES).responses]
        assert written.error_code == ErrorCode.NONE, written
        polling.wait_for(lambda: first_partition(fetch(cluster, 1, 11, NEARBY)).high_watermark == len(VALUES), what="the follower's high watermark at the end")
        yield cluster


def in_sync_under_zero(bootstrap: str) -> bool:
    topics = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3}).list_topics(timeout=30).topics
    return all(
        name in topics and 0 in topics[name].partitions and topics[name].partitions[0].leader == 0 and sorted(topics[name].partitions[0].isrs) == sorted(topics[name].partitions[0].replicas)
        for name in TOPICS
    )


def controller(cluster: Cluster) -> int:
    return int(metadata(cluster, 0, []).controller_id)


def metadata(cluster: Cluster, broker_id: int, topics: list[str]) -> Any:
    body = {"topics": [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    return call(cluster, broker_id, ApiKey.Metadata, 12, body)


def call(cluster: Cluster, broker_id: int, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
    return Wire.call_once(cluster.bootstraps[broker_id], api, version, body)


def produce(cluster: Cluster, broker_id: int, version: int, topic: str, partition: int = 0, acks: int = 1, values: tuple[bytes, ...] = (b"hint",)) -> Any:
    records = build_batch([Record(value=v) for v in values])
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    return call(cluster, broker_id, ApiKey.Produce, version, body)


def fetch(cluster: Cluster, broker_id: int, version: int, topic: str, current_leader_epoch: int = -1, partition: int = 0, rack: str = "", offset: int = 0) -> Any:
    wanted = {"partition": partition, "current_leader_epoch": current_leader_epoch, "fetch_offset": offset, "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
    body = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "topic_id": cluster.topic_ids.get(topic, uuid.UUID(int=0)), "partitions": [wanted]}], "forgotten_topics_data": [], "rack_id": rack,
    }
    return call(cluster, broker_id, ApiKey.Fetch, version, body)


def first_partition(answer: Any) -> Any:
    [[entry]] = [t.partitions for t in answer.responses]
    return entry


def values(entry: Any) -> list[bytes | None]:
    """The values of the records a fetched partition carries (one batch: the fixture writes one)."""
    return [r.value for r in iter_records(entry.records)] if entry.records else []


def leader_epoch(cluster: Cluster, topic: str, broker_id: int = 1) -> int:
    """Partition 0's leader epoch in the broker's metadata."""
    [entry] = metadata(cluster, broker_id, [topic]).topics
    return entry.partitions[0].leader_epoch


def hints(cluster: Cluster, answer: Any, entry: Any) -> tuple[tuple[int, int], list[tuple[int, str, int, str | None]]]:
    return (entry.current_leader.leader_id, entry.current_leader.leader_epoch), [(n.node_id, n.host, n.port, n.rack) for n in answer.node_endpoints]


@pytest.mark.parametrize("version", [10, 11])
@pytest.mark.parametrize("topic", [SHARED, ON_ZERO])
def test_a_produce_to_a_broker_that_does_not_lead_names_the_leader(cluster: Cluster, topic: str, version: int) -> None:
    """Broker 1 follows ``shared`` and hosts no replica of ``on-zero``: either way it names broker 0."""
    answer = produce(cluster, 1, version, topic)
    [[entry]] = [t.partition_responses for t in answer.responses]
    assert entry.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    host, port = cluster.address(0)
    assert hints(cluster, answer, entry) == ((0, leader_epoch(cluster, topic)), [(0, host, port, RACKS[0])])


def test_a_fetch_from_a_broker_without_the_partition_names_the_leader(cluster: Cluster) -> None:
    answer = fetch(cluster, 1, 16, ON_ZERO)
    [[entry]] = [t.partitions for t in answer.responses]
    assert entry.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    host, port = cluster.address(0)
    assert hints(cluster, answer, entry) == ((0, leader_epoch(cluster, ON_ZERO)), [(0, host, port, RACKS[0])])


@pytest.mark.parametrize("asked", [0, 1], ids=["leader", "follower"])
def test_a_fetch_with_a_stale_leader_epoch_is_fenced_and_names_the_leader(cluster: Cluster, asked: int) -> None:
    epoch = leader_epoch(cluster, REASSIGNED)
    answer = fetch(cluster, asked, 16, REASSIGNED, current_leader_epoch=epoch - 1)
    [[entry]] = [t.partitions for t in answer.responses]
    assert entry.error_code == ErrorCode.FENCED_LEADER_EPOCH
    host, port = cluster.address(0)
    assert hints(cluster, answer, entry) == ((0, epoch), [(0, host, port, RACKS[0])])


def test_a_negative_leader_epoch_in_a_fetch_is_none(cluster: Cluster) -> None:
    """Kafka's FetchRequest reads any negative epoch as none given: -2 is served, not fenced."""
    answer = fetch(cluster, 0, 16, REASSIGNED, current_leader_epoch=-2)
    [[entry]] = [t.partitions for t in answer.responses]
    assert entry.error_code == ErrorCode.NONE and answer.node_endpoints == []


def test_versions_before_the_hints_carry_none(cluster: Cluster) -> None:
    answer = produce(cluster, 1, 9, SHARED)
    [[entry]] = [t.partition_responses for t in answer.responses]
    assert entry.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    answer = fetch(cluster, 1, 15, ON_ZERO)
    [[entry]] = [t.partitions for t in answer.responses]
    assert entry.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and (entry.current_leader.leader_id, entry.current_leader.leader_epoch) == (-1, -1)


def test_a_partition_that_exists_nowhere_is_unknown_without_hints(cluster: Cluster) -> None:
    answer = produce(cluster, 1, 11, SHARED, partition=5)
    [[entry]] = [t.partition_responses for t in answer.responses]
    assert entry.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (entry.current_leader.leader_id, answer.node_endpoints) == (-1, [])


# -- KIP-392: fetching from the closest replica ---------------------------------------------------------------


@pytest.mark.parametrize("version", [11, 16])
def test_the_leader_sends_a_consumer_of_another_rack_to_the_replica_in_it(cluster: Cluster, version: int) -> None:
    entry = first_partition(fetch(cluster, 0, version, NEARBY, rack=RACKS[1]))
    assert (entry.error_code, entry.preferred_read_replica, values(entry), entry.high_watermark) == (ErrorCode.NONE, 1, [], len(VALUES))


@pytest.mark.parametrize("rack", [RACKS[0], "", "rack-z"], ids=["leaders-rack", "no-rack", "rack-without-replica"])
def test_the_leader_serves_a_consumer_of_its_rack_or_of_none_with_a_replica(cluster: Cluster, rack: str) -> None:
    entry = first_partition(fetch(cluster, 0, 11, NEARBY, rack=rack))
    assert (entry.error_code, entry.preferred_read_replica, values(entry)) == (ErrorCode.NONE, -1, VALUES)


def test_a_follower_serves_a_v11_consumer_up_to_its_high_watermark(cluster: Cluster) -> None:
    entry = first_partition(fetch(cluster, 1, 11, NEARBY, rack=RACKS[1]))
    assert (entry.error_code, entry.preferred_read_replica, values(entry), entry.high_watermark) == (ErrorCode.NONE, -1, VALUES, len(VALUES))
    at_end = first_partition(fetch(cluster, 1, 11, NEARBY, offset=len(VALUES)))
    assert (at_end.error_code, values(at_end)) == (ErrorCode.NONE, [])
    past_end = first_partition(fetch(cluster, 1, 11, NEARBY, offset=len(VALUES) + 1))
    assert past_end.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_follower_refuses_a_consumer_before_v11(cluster: Cluster) -> None:
    assert first_partition(fetch(cluster, 1, 10, NEARBY)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_consumer_in_the_followers_rack_reads_every_record(cluster: Cluster) -> None:
    consumer = Consumer({"bootstrap.servers": ",".join(cluster.bootstraps.values()), "group.id": f"near-{uuid.uuid4().hex[:6]}", "client.rack": RACKS[1], "enable.auto.commit": False, "log_level": 3})
    try:
        consumer.assign([TopicPartition(NEARBY, 0, OFFSET_BEGINNING)])
        got: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while len(got) < len(VALUES) and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(10, 0.5) if m.error() is None]
    finally:
        consumer.close()
    assert got == VALUES
