"""Failovers in the middle of a commit in a three-broker odradek cluster, with confluent-kafka's
transactional producer and read_committed consumers.

Each is set up by cutting the network between the transaction coordinator (the leader of the transactional
id's ``__transaction_state`` partition) and the leader of one data partition, so that the commit is
prepared (PrepareCommit written) but that leader's marker cannot land:

- the coordinator is killed (SIGKILL): the broker elected for its ``__transaction_state`` partition loads
  the PrepareCommit and completes the commit, the producer's commit returns;
- the data partition's leader is killed: the markers go to the new leader, the last stable offset moves.

In both, a read_committed consumer then reads every committed record exactly once and no aborted one.
Only odradek runs them in the suite: on Kafka 3.9.1 they take a minute more (a JVM cluster, restarts), and
they were run there unchanged when written (the same outcome, 15-17 s each against odradek's 16-18 s).
"""

from __future__ import annotations

import threading
from typing import Iterator

import pytest
from confluent_kafka import ElectionType
from harness import Cluster
from test_transactions_cluster import (
    PARTITIONS,
    TRANSACTION_STATE,
    coordinator_of,
    leaders,
    produce_to_every_partition,
    stable_committed_records,
    transaction_state,
    transactional_producer,
)

COMMIT_TIMEOUT_S = 90.0
"""A commit survives a coordinator's or a leader's failover: a ZooKeeper session expiry (6 s), an ISR
shrink (4 s), a load and the markers' retries."""


@pytest.fixture(scope="module", params=["odradek"])
def broker_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def topic(cluster: Cluster) -> str:
    """The topic, and ``__transaction_state`` made by a first transactional producer."""
    name = "transactions"
    cluster.create_topic(name, PARTITIONS)
    transactional_producer(cluster, "first")
    cluster.wait_fully_replicated(TRANSACTION_STATE)
    return name


@pytest.fixture
def all_brokers_back(cluster: Cluster, topic: str) -> Iterator[None]:
    """A test that kills a broker leaves it restarted, every partition fully replicated again and led by its
    preferred replica (ElectLeaders), so that the next test finds leaderships spread over the brokers."""
    yield
    cluster.heal()
    for broker_id, broker in cluster.brokers.items():
        if not broker.running():
            cluster.restart(broker_id)
    for name in (topic, TRANSACTION_STATE):
        cluster.wait_fully_replicated(name, timeout_s=90)

    def preferred_leaders() -> bool:
        cluster.admin().elect_leaders(ElectionType.PREFERRED, None).result(30)
        return all(s.leader == s.replicas[0] for name in (topic, TRANSACTION_STATE) for s in cluster.partitions(name).values())

    cluster.wait_until(preferred_leaders, "every partition led by its preferred replica", 60)


def commit_with_stalled_marker(cluster: Cluster, topic: str, prefix: str, kill: str) -> tuple[list[bytes], list[BaseException]]:
    """Begin a transaction on every partition, cut the coordinator from the leader of a partition it does
    not lead (the ISRs of the partitions each leads shrink, then the commit is prepared), commit (in a
    thread), and once the coordinator shows PrepareCommit kill ``kill`` (the "coordinator" or the "leader")
    and heal the cut. The committed values, and the commit's error if any, once it returned."""
    # A leader that is not the controller (one cut from the controller could not take the other out of the
    # ISR), and a transactional id another broker coordinates (leaderships move as brokers are killed).
    controller = cluster.controller()
    leader = next((b for b in leaders(cluster, topic).values() if b != controller), None)
    assert leader is not None, f"every partition of {topic} is led by the controller"
    transactional_id = next(t for t in (f"{prefix}-{i}" for i in range(100)) if coordinator_of(cluster, TRANSACTION_STATE, t) != leader)
    coordinator = coordinator_of(cluster, TRANSACTION_STATE, transactional_id)
    producer = transactional_producer(cluster, transactional_id)
    producer.begin_transaction()
    values = produce_to_every_partition(producer, topic, transactional_id)
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            producer.commit_transaction(COMMIT_TIMEOUT_S)
        except BaseException as exc:
            errors.append(exc)

    cluster.partition(coordinator, leader)
    committer = threading.Thread(target=commit)
    committer.start()
    try:
        cluster.wait_until(lambda: transaction_state(cluster, coordinator, transactional_id) == "PrepareCommit", f"{transactional_id} in PrepareCommit on broker {coordinator}", 30)
        cluster.kill(coordinator if kill == "coordinator" else leader)
        cluster.heal()
    finally:
        committer.join(COMMIT_TIMEOUT_S + 10)
    assert not committer.is_alive(), "commit_transaction did not return"
    return values, errors


def test_coordinator_failover_mid_commit(cluster: Cluster, topic: str, all_brokers_back: None) -> None:
    before = stable_committed_records(cluster, topic)
    values, errors = commit_with_stalled_marker(cluster, topic, "coordinator-failover", kill="coordinator")
    assert errors == []
    assert sorted(stable_committed_records(cluster, topic)) == sorted(before + values)


def test_leader_failover_between_markers(cluster: Cluster, topic: str, all_brokers_back: None) -> None:
    before = stable_committed_records(cluster, topic)
    values, errors = commit_with_stalled_marker(cluster, topic, "leader-failover", kill="leader")
    assert errors == []
    assert sorted(stable_committed_records(cluster, topic)) == sorted(before + values)
