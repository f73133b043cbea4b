"""A share group's state (KIP-932) outlives its share coordinator: three ZooKeeper-mode odradek brokers and a
three-node Apache Kafka 4.4 KRaft cluster (tests/jvm/kafka44_jvm.py), the same scenario on both with two
Kafka 4.4 share consumers (tests/e2e/java44/ShareFailover.java) that ACCEPT every record and commit.

The topic and ``__share_group_state`` are replicated three times, the state topic in three partitions, so a
share partition's state is mostly kept by another broker than the partition's leader: on odradek the
share-state RPCs (Read/WriteShareGroupState) carry it between them. Once the records produced first are
acknowledged, more are produced and, while the consumers take them, the broker that is the share
coordinator of a share partition led elsewhere is killed (SIGKILL). Another broker leads its ``__share_group_state`` partition and loads the state from its records;
the consumers carry on. What Kafka's semantics promise must hold: no record whose acknowledgement the broker
confirmed is delivered again (acquired but unconfirmed ones may be), every record is delivered, and at the
end the group's start offsets are at the end of every partition with no lag.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

import kafka44_jvm
import kafka_jvm
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from group_members import wait_until

from tests.conftest import Wire
from tests.controller.zk_brokers import ThreeBrokers, three_brokers
from odradek.broker.coordinator.runtime import partition_for
from odradek.broker.coordinator.share.share_coordinator import coordinator_key
from odradek.broker.coordinator.share.share_records import SharePartitionKey
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode

PARTITIONS = 6
STATE_PARTITIONS = 3
RECORDS = 300
"""Produced before the kill, and as many around it (half just before it, half after)."""
GROUP_RESOURCE, SET = 32, 0
COMMON = {
    "offsets.topic.num.partitions": "3",
    "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
}


@pytest.fixture(params=["odradek", "kafka44"])
def cluster(request: pytest.FixtureRequest, zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreeBrokers]:
    with three_brokers(request.param, zookeeper.connect + "/share-failover", tmp_path_factory.mktemp(f"share-failover-{request.param}"), COMMON) as started:
        yield started


def ask(bootstrap: str, api: ApiKey, version: int, body: dict, answered: Callable[[Any], bool] = lambda _: True) -> Any:
    """The first live broker's answer that ``answered`` accepts, asking each in turn for up to 90 s."""
    deadline = time.monotonic() + 90
    last: Any = None
    while time.monotonic() < deadline:
        for address in bootstrap.split(","):
            try:
                last = Wire.call_once(address, api, version, body)
            except OSError as exc:  # the killed broker
                last = exc
                continue
            if answered(last):
                return last
        time.sleep(0.3)
    raise AssertionError(f"{api.name}: no broker answered as expected: {last}")


def leaders(bootstrap: str, *topics: str) -> dict[str, tuple[uuid.UUID, dict[int, int]]]:
    """Each topic's id and partitions' leaders, from a broker that knows them all with a leader."""
    answer = ask(
        bootstrap, ApiKey.Metadata, 12, {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False},
        lambda a: all(t.error_code == ErrorCode.NONE and t.partitions and all(p.leader_id >= 0 for p in t.partitions) for t in a.topics),
    )
    return {t.name: (t.topic_id, {p.partition_index: p.leader_id for p in t.partitions}) for t in answer.topics}


def share_coordinator(bootstrap: str, group: str, topic: str, partition: int) -> tuple[int, int]:
    """(the share coordinator of the group's share partition, that partition's leader): the leader of the
    ``__share_group_state`` partition its key hashes to, as both Kafka and odradek place it."""
    found = leaders(bootstrap, topic, "__share_group_state")
    topic_id, data_leaders = found[topic]
    state_leaders = found["__share_group_state"][1]
    key = coordinator_key(SharePartitionKey(group, topic_id, partition))
    return state_leaders[partition_for(key, len(state_leaders))], data_leaders[partition]


def set_earliest(bootstrap: str, group: str) -> None:
    """``share.auto.offset.reset=earliest`` for the group: its consumers start at the records produced first."""
    resources = [{"resource_type": GROUP_RESOURCE, "resource_name": group, "configs": [{"name": "share.auto.offset.reset", "config_operation": SET, "value": "earliest"}]}]
    (answer,) = Wire.call_once(bootstrap.split(",")[0], ApiKey.IncrementalAlterConfigs, 1, {"resources": resources, "validate_only": False}).responses
    assert answer.error_code == ErrorCode.NONE, answer.error_message


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % PARTITIONS)
    assert producer.flush(90) == 0


def offsets(bootstrap: str, group: str, topic: str) -> list[tuple[int, int, int]]:
    """DescribeShareGroupOffsets at the group's coordinator: (partition, start offset, lag) of each partition."""
    body = {"groups": [{"group_id": group, "topics": [{"topic_name": topic, "partitions": list(range(PARTITIONS))}]}]}
    answer = ask(bootstrap, ApiKey.DescribeShareGroupOffsets, 1, body, lambda a: a.groups[0].error_code == ErrorCode.NONE)
    (described,) = answer.groups[0].topics
    return [(p.partition_index, p.start_offset, p.lag) for p in described.partitions]


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks", "log_level": 3})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


class Consumers:
    """ShareFailover's JVM and what it printed so far."""

    def __init__(self, java44: kafka44_jvm.JavaPrograms, bootstrap: str, topic: str, group: str, root: Path) -> None:
        self.stop_file = root / "stop"
        self.out = root / "consumers.jsonl"
        self.err = root / "consumers.err"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(java44.command("ShareFailover", bootstrap, topic, group, "2", str(self.stop_file), "400000"), stdout=out, stderr=err)

    def lines(self) -> list[dict[str, Any]]:
        text = self.out.read_text()
        return [json.loads(line) for line in text.splitlines() if line.startswith("{") and line.endswith("}")]

    def acked(self) -> set[str]:
        return {value for line in self.lines() for value, _ in line.get("acked", [])}

    def delivered(self) -> set[str]:
        return {value for line in self.lines() for value, _, _ in line.get("delivered", [])}

    def status(self) -> str:
        """For a failure's message: what the consumers printed last, and their errors."""
        tail = self.out.read_text().splitlines()[-5:]
        return "\n".join(tail) + "\n" + self.err.read_text()[-3000:]

    def stop(self) -> None:
        self.stop_file.touch()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def test_share_state_survives_the_share_coordinator_being_killed(cluster: ThreeBrokers, java44: kafka44_jvm.JavaPrograms, tmp_path: Path) -> None:
    topic = f"share-failover-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(60)
    set_earliest(cluster.bootstrap, group)
    before, after = [f"a{i}" for i in range(RECORDS)], [f"b{i}" for i in range(RECORDS)]
    produce(cluster.bootstrap, topic, before)
    consumers = Consumers(java44, cluster.bootstrap, topic, group, tmp_path)
    try:
        wait_until(lambda: consumers.acked() >= set(before) or consumers.proc.poll() is not None, 120, lambda: f"the first records acknowledged ({len(consumers.acked())} of {RECORDS}):\n{consumers.status()}\n{cluster.warnings()}")
        placed = {p: share_coordinator(cluster.bootstrap, group, topic, p) for p in range(PARTITIONS)}
        # A share partition whose state another broker keeps (on odradek, carried by the share-state RPCs).
        remote = [p for p, (coordinator, leader) in placed.items() if coordinator != leader]
        victim = placed[remote[0] if remote else 0][0]
        # Killed while the consumers are busy with records just produced: some are acquired, some being acknowledged.
        produce(cluster.bootstrap, topic, after[: RECORDS // 2])
        cluster.kill(victim)
        produce(cluster.bootstrap, topic, after[RECORDS // 2 :])
        everything = set(before + after)

        def done() -> bool:
            if consumers.proc.poll() is not None:
                return True
            if not consumers.delivered() >= everything:
                return False
            return all(lag == 0 for _, _, lag in offsets(cluster.bootstrap, group, topic))

        wait_until(done, 180, lambda: f"every record delivered and acknowledged after broker {victim} was killed ({len(consumers.delivered() & everything)} of {len(everything)} delivered):\n{consumers.status()}\n{cluster.warnings()}")
        assert consumers.proc.poll() is None, "the consumers died: " + consumers.err.read_text()[-3000:]
        lines = consumers.lines()
        confirmed = Counter(value for line in lines for value, _ in line.get("acked", []))
        deliveries = [(value, dc) for line in lines for value, _, dc in line.get("delivered", [])]
        # No acknowledgement the broker confirmed is followed by another delivery of the record (with whatever
        # delivery count: a record acquired but not acknowledged when its leader moves comes back at 1).
        assert [v for v, n in confirmed.items() if n > 1] == [], "a record acknowledged twice"
        acked_by: dict[str, int] = {}
        again = []
        for at, line in enumerate(lines):
            again += [(value, dc) for value, _, dc in line.get("delivered", []) if value in acked_by]
            acked_by.update((value, at) for value, _ in line.get("acked", []))
        assert again == [], f"records delivered again after their acknowledgement was confirmed: {again[:20]}"
        assert {value for value, _ in deliveries} >= everything, "every record delivered"
        described = offsets(cluster.bootstrap, group, topic)
        high = high_watermarks(cluster.bootstrap, topic)
        assert sum(high.values()) == len(everything)
        assert [(p, lag) for p, _, lag in described] == [(p, 0) for p in range(PARTITIONS)], described
        assert all(0 <= start <= high[p] for p, start, _ in described), (described, high)
        redelivered = len(deliveries) - len({value for value, _ in deliveries})
        print(f"{cluster.name}: killed share coordinator {victim} ({'a remote one' if remote else 'the leader'}); {len(deliveries)} deliveries, {redelivered} redeliveries, "
              f"{sum(len(line.get('failed', [])) for line in lines)} unconfirmed acknowledgements")
    finally:
        consumers.stop()
