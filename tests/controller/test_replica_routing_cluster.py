"""KIP-951's leader hints, on two-broker ZooKeeper-mode clusters of each kind: odradek (one process per broker,
and two worker processes per broker with every connection on the front, so the Produce answer is built from
worker 0's ProduceAnswer) and Apache Kafka 3.9.1, with the same requests and the same expectations.

Broker 0 leads partition 0 of a topic whose replicas are [0, 1]; a second topic lives on broker 0 alone. Asked
of broker 1, a Produce (v10+) of either is refused NOT_LEADER_OR_FOLLOWER, and so is a Fetch (v16+) of the
one broker 1 does not host; the answer says who leads at which epoch (``current_leader``) and where that leader
listens (``node_endpoints``, with its rack). A third topic's leader epoch is raised by a reassignment: a Fetch
with the epoch before it is FENCED_LEADER_EPOCH with the same hints, asked of the leader or of the follower
(Kafka checks the epoch before the leadership). Older versions carry no hints; a partition that exists nowhere
stays UNKNOWN_TOPIC_OR_PARTITION.

Not compared: a v11+ consumer's Fetch of a partition broker 1 follows, which Kafka 3.9 serves from the follower
(KIP-392) and odradek refuses (docs/replication.md).
"""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import Any, Iterator

import kafka_jvm
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch
from tests import polling
from tests.conftest import Wire
from tests.controller.zk_brokers import kafka_brokers, odradek_brokers

RACK = "rack-h"
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


SHARED, ON_ZERO, REASSIGNED = "shared", "on-zero", "reassigned"
"""Topics replicated on both brokers (leader 0), one on broker 0 alone, and one reassigned from [0, 1] to [1, 0]
(still led by broker 0, at a higher epoch)."""


@pytest.fixture(scope="module", params=KINDS)
def cluster(request: pytest.FixtureRequest, zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root: Path = tmp_path_factory.mktemp(f"hints-{request.param}")
    connect = f"{zookeeper.connect}/hints-{request.param}-{uuid.uuid4().hex[:6]}"
    extra = KINDS[request.param]
    with contextlib.ExitStack() as stack:
        if extra is None:
            brokers: dict[int, Any] = stack.enter_context(kafka_brokers(connect, lambda b: root / f"kafka-{b}", {"broker.rack": RACK}, ids=(0, 1)))
            bootstraps = {b: f"127.0.0.1:{broker.port}" for b, broker in brokers.items()}
        else:
            brokers = stack.enter_context(odradek_brokers(connect, lambda b: root / f"odradek-{b}", {"broker.rack": RACK, **extra}, ids=(0, 1)))
            bootstraps = {b: broker.bootstrap for b, broker in brokers.items()}
        admin = AdminClient({"bootstrap.servers": bootstraps[0], "log_level": 3})
        futures = admin.create_topics([NewTopic(name, 1, replica_assignment=[[0]] if name == ON_ZERO else [[0, 1]]) for name in (SHARED, ON_ZERO, REASSIGNED)])
        for future in futures.values():
            future.result(60)
        # Both brokers must know the topics, with both replicas in sync, before the requests below.
        polling.wait_for(lambda: all(in_sync_under_zero(bootstraps[b]) for b in (0, 1)), what="the topics led by broker 0 in both brokers' metadata")
        cluster = Cluster(bootstraps, {})
        reassign = {"timeout_ms": 60000, "topics": [{"name": REASSIGNED, "partitions": [{"partition_index": 0, "replicas": [1, 0]}]}]}
        [[moved]] = [t.partitions for t in call(cluster, controller(cluster), ApiKey.AlterPartitionReassignments, 0, reassign).responses]
        assert moved.error_code == ErrorCode.NONE, moved
        polling.wait_for(lambda: all(leader_epoch(cluster, REASSIGNED, b) > 0 for b in (0, 1)), what=f"{REASSIGNED}'s leader epoch raised on both brokers")
        cluster.topic_ids.update({t.name: t.topic_id for t in metadata(cluster, 1, [SHARED, ON_ZERO, REASSIGNED]).topics})
        yield cluster


def in_sync_under_zero(bootstrap: str) -> bool:
    topics = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3}).list_topics(timeout=30).topics
    return all(
        name in topics and 0 in topics[name].partitions and topics[name].partitions[0].leader == 0 and sorted(topics[name].partitions[0].isrs) == sorted(topics[name].partitions[0].replicas)
        for name in (SHARED, ON_ZERO, REASSIGNED)
    )


def controller(cluster: Cluster) -> int:
    return int(metadata(cluster, 0, []).controller_id)


def metadata(cluster: Cluster, broker_id: int, topics: list[str]) -> Any:
    body = {"topics": [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    return call(cluster, broker_id, ApiKey.Metadata, 12, body)


def call(cluster: Cluster, broker_id: int, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
    return Wire.call_once(cluster.bootstraps[broker_id], api, version, body)


def produce(cluster: Cluster, broker_id: int, version: int, topic: str, partition: int = 0) -> Any:
    records = build_batch([Record(value=b"hint")])
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    return call(cluster, broker_id, ApiKey.Produce, version, body)


def fetch(cluster: Cluster, broker_id: int, version: int, topic: str, current_leader_epoch: int = -1, partition: int = 0) -> Any:
    wanted = {"partition": partition, "current_leader_epoch": current_leader_epoch, "fetch_offset": 0, "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
    body = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "topic_id": cluster.topic_ids.get(topic, uuid.UUID(int=0)), "partitions": [wanted]}], "forgotten_topics_data": [], "rack_id": "",
    }
    return call(cluster, broker_id, ApiKey.Fetch, version, body)


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
    assert hints(cluster, answer, entry) == ((0, leader_epoch(cluster, topic)), [(0, host, port, RACK)])


def test_a_fetch_from_a_broker_without_the_partition_names_the_leader(cluster: Cluster) -> None:
    answer = fetch(cluster, 1, 16, ON_ZERO)
    [[entry]] = [t.partitions for t in answer.responses]
    assert entry.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    host, port = cluster.address(0)
    assert hints(cluster, answer, entry) == ((0, leader_epoch(cluster, ON_ZERO)), [(0, host, port, RACK)])


@pytest.mark.parametrize("asked", [0, 1], ids=["leader", "follower"])
def test_a_fetch_with_a_stale_leader_epoch_is_fenced_and_names_the_leader(cluster: Cluster, asked: int) -> None:
    epoch = leader_epoch(cluster, REASSIGNED)
    answer = fetch(cluster, asked, 16, REASSIGNED, current_leader_epoch=epoch - 1)
    [[entry]] = [t.partitions for t in answer.responses]
    assert entry.error_code == ErrorCode.FENCED_LEADER_EPOCH
    host, port = cluster.address(0)
    assert hints(cluster, answer, entry) == ((0, epoch), [(0, host, port, RACK)])


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
