"""The controller's leader balance check on two-broker ZooKeeper-mode clusters of odradek and of Apache Kafka
3.9.1, with Kafka's default interval (300 s): a new controller checks 5 s after its election, as Kafka's
``onControllerFailover`` schedules it, so the imbalance it inherits does not wait five minutes.

A reassignment turns a partition's replica order round (its leader stays, now not the preferred one); nothing
moves it back while the controller waits for its next check. ``/controller`` deleted (the operator's way to move
the controller), the controller elected next hands the leadership to the preferred replica within seconds.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import kafka_jvm
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from tests import polling
from tests.conftest import Wire
from tests.controller.zk_brokers import kafka_brokers, odradek_brokers, zk_session

TOPIC = "balanced"


@pytest.fixture(params=["odradek", "kafka"])
def cluster(request: pytest.FixtureRequest, zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[int, str]]]:
    """The chroot'ed ZooKeeper address and the brokers' addresses, once the first controller's own first check
    (5 s after its election) is over."""
    root: Path = tmp_path_factory.mktemp(f"balance-{request.param}")
    connect = f"{zookeeper.connect}/balance-{request.param}-{uuid.uuid4().hex[:6]}"
    settings = {"auto.leader.rebalance.enable": "true", "zookeeper.session.timeout.ms": "6000"}
    with contextlib.ExitStack() as stack:
        if request.param == "kafka":
            brokers: dict[int, Any] = stack.enter_context(kafka_brokers(connect, lambda b: root / f"kafka-{b}", settings, ids=(0, 1)))
            bootstraps = {b: f"127.0.0.1:{broker.port}" for b, broker in brokers.items()}
        else:
            brokers = stack.enter_context(odradek_brokers(connect, lambda b: root / f"odradek-{b}", settings, ids=(0, 1)))
            bootstraps = {b: broker.bootstrap for b, broker in brokers.items()}
        time.sleep(6)
        yield connect, bootstraps


def leader_and_replicas(bootstrap: str) -> tuple[int, list[int]] | None:
    topics = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3}).list_topics(TOPIC, timeout=30).topics
    partitions = topics[TOPIC].partitions if TOPIC in topics else {}
    if 0 not in partitions or sorted(partitions[0].isrs) != [0, 1]:
        return None
    return partitions[0].leader, list(partitions[0].replicas)


def test_a_new_controller_checks_the_leader_balance_five_seconds_after_its_election(cluster: tuple[str, dict[int, str]]) -> None:
    connect, bootstraps = cluster
    admin = AdminClient({"bootstrap.servers": bootstraps[0], "log_level": 3})
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[0, 1]])])[TOPIC].result(60)
    polling.wait_for(lambda: leader_and_replicas(bootstraps[0]) == (0, [0, 1]), what=f"{TOPIC} led by broker 0 with both replicas in sync")
    controller = Wire.call_once(bootstraps[0], ApiKey.Metadata, 1, {"topics": []}).controller_id
    reassign = {"timeout_ms": 60000, "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": [1, 0]}]}]}
    [[moved]] = [t.partitions for t in Wire.call_once(bootstraps[controller], ApiKey.AlterPartitionReassignments, 0, reassign).responses]
    assert moved.error_code == ErrorCode.NONE, moved
    polling.wait_for(lambda: leader_and_replicas(bootstraps[0]) == (0, [1, 0]), what=f"{TOPIC}'s replicas reordered, broker 0 still leading")
    time.sleep(2)
    assert leader_and_replicas(bootstraps[0]) == (0, [1, 0]), "moved before the next check"

    moved_at = time.monotonic()
    with zk_session(connect) as zk:
        zk.delete("/controller")
    polling.wait_for(lambda: leader_and_replicas(bootstraps[0]) == (1, [1, 0]), timeout_s=30, what=f"{TOPIC} led by its preferred replica, broker 1")
    assert time.monotonic() - moved_at < 30
