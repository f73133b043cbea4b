"""Kafka's own Java client (kafka-clients 3.9.1) against odradek: the idempotent producer in every codec, a
two-member consumer group and the AdminClient.

The client is driven by tests/e2e/java/ClientProbe.java, compiled once per run with ``javac`` against the
kafka-clients jars and run as one JVM per scenario; it prints what the client observed as JSON lines and the
tests here judge them. What only the broker can show (that the producer really was idempotent) is read from
the segment files; the AdminClient scenario also runs against the real Kafka, and both must observe the same.

Needs a JDK and ``make jvm-deps``; a missing one fails the tests.
"""

from __future__ import annotations

import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pytest

from odradek import Broker
from odradek.protocol.compression import CompressionType


@pytest.fixture(scope="module")
def broker(odradek_as_kafka: Broker) -> Broker:
    """odradek set up as the real Kafka (e2e's conftest); named ``broker`` so that a failing test shows its log."""
    return odradek_as_kafka


@pytest.fixture(scope="module")
def create_topic(broker: Broker) -> Callable[[int], str]:
    """``create_topic(partitions)``: a new topic on the module's broker (through confluent-kafka's admin)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})

    def create(partitions: int) -> str:
        name = f"java-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)[name].result(10)
        return name

    return create


def step(lines: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["step"] == name]


CODECS = {"none": CompressionType.NONE, "gzip": CompressionType.GZIP, "snappy": CompressionType.SNAPPY, "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}


def test_idempotent_producer_acks_every_record_once(broker, probe, create_topic, disk_batches) -> None:
    topic, per_codec = create_topic(3), 600
    lines = probe("produce", broker.bootstrap, topic, str(per_codec), *CODECS)
    acks = step(lines, "acked")
    (consumed,) = step(lines, "consumed")
    assert [a["compression"] for a in acks] == list(CODECS)
    acked = [record for a in acks for record in a["records"]]

    # Every send acknowledged, and each partition's offsets run 0, 1, 2, ... with no gap or repeat.
    assert [i for i, _, _ in acked] == list(range(per_codec * len(CODECS)))
    by_partition: dict[int, list[int]] = {}
    for _, partition, offset in acked:
        by_partition.setdefault(partition, []).append(offset)
    assert sorted(by_partition) == [0, 1, 2]
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))

    # Read back: exactly the acknowledged records, each once, where the acknowledgement said.
    assert sorted(consumed["records"]) == sorted([p, o, f"key-{i}", f"value-{i}"] for i, p, o in acked)

    # The broker kept what each idempotent producer sent, in its codec: per partition, the batches of one
    # producer id (epoch 0) in one codec, their sequence numbers continuing each other from 0; one producer
    # id per codec, in the order they ran.
    for partition, offsets in by_partition.items():
        batches = disk_batches(topic, partition)
        assert batches[-1].next_offset == len(offsets)
        producers: dict[int, list[Any]] = {}
        for b in batches:
            producers.setdefault(b.producer_id, []).append(b)
        assert len(producers) == len(CODECS) and min(producers) >= 0
        for (producer_id, own), codec in zip(producers.items(), CODECS.values(), strict=True):
            assert {(b.producer_epoch, b.compression) for b in own} == {(0, codec)}
            sequences = [b.base_sequence for b in own]
            assert sequences == [sum(b.records_count for b in own[:k]) for k in range(len(own))], producer_id
        assert len(batches) > len(CODECS)  # several batches per producer: the sequences had something to continue


ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}
"""The Java client's default (range, eager: every member gives up everything at a rebalance) and the
incremental one (KIP-429: only the partitions that move are revoked, over a second rebalance)."""


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_group_of_two_shares_partitions_and_hands_over_on_leave(broker, probe, create_topic, assignor) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic, count = create_topic(4), 200
    group = f"{topic}-group"
    lines = probe("group", broker.bootstrap, topic, group, str(count), ASSIGNORS[assignor])
    everything = [0, 1, 2, 3]

    (joined,) = step(lines, "joined")
    assert joined["a"] and joined["b"] and sorted(joined["a"] + joined["b"]) == everything
    owner = {p: member for member in ("a", "b") for p in joined[member]}

    first, second = (
        {(i, p, o) for i, p, o in produced["records"]} for produced in step(lines, "produced")
    )
    round1, round2 = (consumed["records"] for consumed in step(lines, "consumed"))

    def received(records: list[list[Any]]) -> Counter:
        for member, partition, offset, key, value in records:
            assert value == key.replace("key", "value")
        return Counter((int(key.removeprefix("key-")), partition, offset) for _, partition, offset, key, _ in records)

    # Together the two members read every record once, each from the partitions it was assigned.
    assert received(round1) == Counter(first)
    assert all(owner[partition] == member for member, partition, *_ in round1)
    assert {member for member, *_ in round1} == {"a", "b"}

    # b leaves: its partitions go to a, which resumes from the committed offsets — nothing twice.
    # Eager, a gives up its own partitions and gets all four back; cooperative, it keeps its own and is
    # given b's.
    left_at = lines.index({"step": "left", "member": "b"})
    handover_at = lines.index({"step": "handover", "a": everything})
    assert {"step": "revoked", "member": "b", "partitions": joined["b"]} in lines[:left_at]
    rebalance = [(line["step"], line["partitions"]) for line in lines[left_at:handover_at] if line.get("member") == "a"]
    assert rebalance == {"range": [("revoked", joined["a"]), ("assigned", everything)], "cooperative-sticky": [("assigned", joined["b"])]}[assignor]
    assert received(round2) == Counter(second)
    assert {member for member, *_ in round2} == {"a"}

    # What the group committed is every partition's end.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in everything])
    committed = admin.list_consumer_group_offsets([request])[group].result(10)
    ends = Counter(p for _, p, _ in first | second)
    assert {tp.partition: tp.offset for tp in committed.topic_partitions} == {p: ends[p] for p in everything}


ADMIN_EXPECTED_HIGHLIGHTS = {
    "createTopics again": {"error": "TopicExistsException"},
    "describeCluster": {"nodes": [0], "controller": 0, "clusterIdSet": True},
    "createPartitions fewer": {"error": "InvalidPartitionsException"},
    "describeTopics after createPartitions": {"partitions": 4},
    "incrementalAlterConfigs invalid": {"error": "InvalidConfigurationException"},
    "describeProducers": {"producers": [[True, 0, 4, 4000, -1]]},  # the five records' idempotent producer
    "deleteRecords": {"lowWatermark": 3},
    "deleteRecords beyond the end": {"error": "OffsetOutOfRangeException"},
    "listConsumerGroupOffsets": {"offsets": {"0": [4, "first"], "1": [0, ""]}},
    "listConsumerGroupOffsets again": {"offsets": {"0": [5, "second"], "1": [0, ""]}},
    "listConsumerGroups": {"listed": [[True, "Empty"]]},  # offsets alone make a simple (protocol-less) group
    "describeConsumerGroups": {"state": "EMPTY", "members": 0, "assignor": "", "simple": True, "coordinator": 0},
    "listConsumerGroupOffsets after deleteConsumerGroupOffsets": {"offsets": {"0": [5, "second"]}},
    "listConsumerGroupOffsets after delete": {"offsets": {}},
    "deleteConsumerGroups again": {"error": "GroupIdNotFoundException"},
    "listTopics after delete": {"listed": False},
    "describeTopics after delete": {"error": "UnknownTopicOrPartitionException"},
}
"""A few of the AdminClient's observations spelled out; the test compares all of them with the real Kafka's."""


def test_admin_client_observes_what_it_observes_on_kafka(broker, probe, real_kafka) -> None:
    topic = f"java-admin-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(2) as pool:  # the two JVMs at once
        on_odradek, on_kafka = pool.map(lambda bootstrap: probe("admin", bootstrap, topic), [broker.bootstrap, real_kafka.bootstrap])

    for name, fields in ADMIN_EXPECTED_HIGHLIGHTS.items():
        assert step(on_odradek, name) == [{"step": name, **fields}]
    # Five records one second apart: by timestamp, the first at or after base+1.5 s is offset 2 (at +2 s);
    # after deleteRecords(before 3) the earliest is 3, and a search from the start finds offset 3.
    (offsets,) = step(on_odradek, "listOffsets")
    assert offsets["offsets"] == {
        "earliest": [0, -1, 0], "latest": [5, -1, 0], "maxTimestamp": [4, 4000, 0],
        "forTimestamp base": [0, 0, 0], "forTimestamp base+1500": [2, 2000, 0], "forTimestamp after last": [-1, -1, -1],
    }
    (after,) = step(on_odradek, "listOffsets after deleteRecords")
    assert after["offsets"]["earliest"] == [3, -1, 0] and after["offsets"]["forTimestamp base"] == [3, 3000, 0]

    assert on_odradek == on_kafka


def test_transactional_producer_observes_what_it_observes_on_kafka(broker, probe, real_kafka) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"java-txn-{uuid.uuid4().hex[:8]}"
    for bootstrap in (broker.bootstrap, real_kafka.bootstrap):
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    with ThreadPoolExecutor(2) as pool:  # the two JVMs at once
        on_odradek, on_kafka = pool.map(lambda bootstrap: probe("transactions", bootstrap, topic), [broker.bootstrap, real_kafka.bootstrap])

    assert step(on_odradek, "zombie") == [{"step": "zombie", "fenced": True}]
    committed, uncommitted = step(on_odradek, "read")
    assert committed["isolation"] == "read_committed"
    assert committed["values"] == ["c1", "c2", "c3", "c4", "c5"]
    # read_uncommitted sees the aborted records and the zombie's too; neither sees a control batch.
    assert uncommitted["values"] == ["c1", "c2", "c3", "a1", "a2", "c4", "zombie", "c5"]
    # Offsets count the markers: 8 records and 5 markers (3 commits, 2 aborts); every transaction is decided.
    assert committed["end"] == uncommitted["end"] == 13
    assert on_odradek == on_kafka
