"""A consumer group of the consumer group protocol (KIP-848) outlives its coordinator: three ZooKeeper-mode
odradek brokers and a three-node Apache Kafka 4.4 KRaft cluster (tests/jvm/kafka44_jvm.py), the same scenario
on both with two Java 4.4 members (tests/e2e/java44/GroupMember.java, ``group.protocol=consumer``).

``__consumer_offsets`` and the topic are replicated three times. Once the members have committed what was
produced first, the broker that coordinates the group is killed (SIGKILL). Another broker leads the group's
``__consumer_offsets`` partition, loads the group from its records (members, epochs, assignments) and its
offsets, and the members carry on there: the records produced after the kill are consumed too, every record
is committed once, and no member dies or starts over.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import kafka44_jvm
import kafka_jvm
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from group_members import Member, wait_until

from tests.conftest import Wire
from tests.controller.zk_brokers import ThreeBrokers, three_brokers
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode

PARTITIONS = 6
RECORDS = 300
"""Produced before the kill, and as many after it."""
COMMON = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0", **kafka44_jvm.CONSUMER_GROUP_SETTINGS}
"""Both clusters: three ``__consumer_offsets`` partitions (Kafka's 50 take long to create), 1 s heartbeats."""


@pytest.fixture(params=["odradek", "kafka44"])
def cluster(request: pytest.FixtureRequest, zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreeBrokers]:
    with three_brokers(request.param, zookeeper.connect + "/group-failover", tmp_path_factory.mktemp(f"group-failover-{request.param}"), COMMON) as started:
        yield started


def coordinator(bootstrap: str, group: str, not_on: int | None = None) -> int:
    """The node id FindCoordinator names for ``group``, asked of each live broker in turn until one names a
    node other than ``not_on``."""
    deadline = time.monotonic() + 90
    last: Any = None
    while time.monotonic() < deadline:
        for address in bootstrap.split(","):
            try:
                answer = Wire.call_once(address, ApiKey.FindCoordinator, 4, {"key_type": 0, "coordinator_keys": [group]})
            except OSError as exc:  # the killed broker
                last = exc
                continue
            (found,) = answer.coordinators
            last = found
            if found.error_code == ErrorCode.NONE and found.node_id != not_on:
                return int(found.node_id)
        time.sleep(0.3)
    raise AssertionError(f"no coordinator for {group} other than {not_on}: {last}")


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def committed(*ms: Member) -> list[str]:
    return [value for m in ms for _, _, value in m.batches()[0]]


def test_the_group_goes_on_at_the_new_coordinator_when_its_broker_is_killed(cluster: ThreeBrokers, java44: kafka44_jvm.JavaPrograms, tmp_path: Path) -> None:
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(60)
    before, after = [f"a{i}" for i in range(RECORDS)], [f"b{i}" for i in range(RECORDS)]
    produce(cluster.bootstrap, topic, before)
    ms = [Member(java44, cluster.bootstrap, topic, group, tmp_path / f"member-{i}.log") for i in range(2)]
    try:
        wait_until(
            lambda: all(m.owned() for m in ms) and len(committed(*ms)) >= RECORDS,
            120,
            lambda: f"two members sharing the partitions ({[m.owned() for m in ms]}) and the first records committed ({len(committed(*ms))})",
        )
        old = coordinator(cluster.bootstrap, group)
        seen = [len(m.snapshot()) for m in ms]
        cluster.kill(old)
        produce(cluster.bootstrap, topic, after)
        new = coordinator(cluster.bootstrap, group, not_on=old)
        wait_until(
            lambda: len(committed(*ms)) >= 2 * RECORDS or any(m.proc.poll() is not None for m in ms),
            120,
            lambda: f"every record committed after the coordinator {old} was killed ({len(committed(*ms))}; members own {[m.owned() for m in ms]})",
        )
        assert [m.proc.poll() for m in ms] == [None, None], "a member died: " + "".join(m.log.read_text()[-2000:] for m in ms)
        got = committed(*ms)
        assert sorted(got) == sorted(before + after), "every record committed exactly once"
        assert new != old and set().union(*(m.owned() for m in ms)) == set(range(PARTITIONS))
        # The members kept their partitions through the move: none was revoked (or lost, which the member
        # reports as revoked) after the kill.
        assert [[e for e in m.snapshot()[n:] if e["event"] == "revoked"] for m, n in zip(ms, seen)] == [[], []]
        for m in ms:
            m.leave()
    finally:
        for m in ms:
            m.stop()
