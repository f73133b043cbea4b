"""Transactions in a three-broker cluster, with confluent-kafka's transactional producer and read_committed
consumers, on each broker kind (the failovers are test_transactions_failover.py's).

A topic of three partitions led by three different brokers: a transaction spanning them commits and
aborts as a whole (the coordinator sends WriteTxnMarkers to each leader); a read_committed consumer reads
every committed record exactly once and no aborted one. Consume-transform-produce with ``send_offsets_to_transaction`` where the group's coordinator and the
transaction coordinator are different brokers: the output is the input exactly once, and the group's
committed offsets are the input's ends. Last, on the wire (no client lets a test skip AddPartitionsToTxn):
a partition leader verifies a transactional produce to two of its partitions with the coordinator on
another broker (KIP-890).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import anyio
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from harness import CLUSTER_SETTINGS, Cluster

from odradek.broker.coordinator.runtime import partition_for
from odradek.broker.network.kafka_client import CoordinatorType, KafkaClient
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch

PARTITIONS = 3
RECORDS_PER_PARTITION = 5
TRANSACTION_STATE = "__transaction_state"
OFFSETS = "__consumer_offsets"


def transactional_producer(cluster: Cluster, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id, "linger.ms": 5, "log_level": 0})
    producer.init_transactions(60)
    return producer


def produce_to_every_partition(producer: Producer, topic: str, label: str) -> list[bytes]:
    values = [f"{label}-{p}-{i}".encode() for p in range(PARTITIONS) for i in range(RECORDS_PER_PARTITION)]
    for index, value in enumerate(values):
        producer.produce(topic, value=value, partition=index // RECORDS_PER_PARTITION)
    producer.flush(60)
    return values


def leaders(cluster: Cluster, topic: str) -> dict[int, int]:
    """Each partition's leader, from ZooKeeper."""
    return {p: cluster.leader_and_isr(topic, p).leader for p in range(PARTITIONS)}


def coordinator_of(cluster: Cluster, topic: str, key: str) -> int:
    """The broker leading ``key``'s partition of an internal topic (Kafka's partitionFor)."""
    count = int(CLUSTER_SETTINGS[f"{'transaction.state.log' if topic == TRANSACTION_STATE else 'offsets.topic'}.num.partitions"])
    return cluster.leader_and_isr(topic, partition_for(key, count)).leader


def transaction_state(cluster: Cluster, broker_id: int, transactional_id: str) -> str:
    """DescribeTransactions asked of one broker (the coordinator): the transaction's state."""

    async def describe() -> str:
        async with KafkaClient(cluster.brokers[broker_id].bootstrap, request_timeout_s=5) as client:
            response = await client.request(ApiKey.DescribeTransactions, {"transactional_ids": [transactional_id]})
            return response.transaction_states[0].transaction_state

    return anyio.run(describe)


def high_watermarks(cluster: Cluster, topic: str, isolation: str) -> dict[int, int]:
    """Each partition's end as a consumer of ``isolation`` sees it (read_committed: the last stable offset),
    asked by a new consumer (one created before a broker died may keep asking it)."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}", "isolation.level": isolation, "log_level": 0})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5, cached=False)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def stable_committed_records(cluster: Cluster, topic: str, timeout_s: float = 60.0) -> list[bytes]:
    """Every record a read_committed consumer reads from ``topic``, once no transaction is open on it (each
    partition's last stable offset has reached its high watermark)."""
    ends: dict[int, int] = {}

    def stable() -> bool:
        ends.update(high_watermarks(cluster, topic, "read_uncommitted"))
        return high_watermarks(cluster, topic, "read_committed") == ends

    cluster.wait_until(stable, f"the last stable offsets of {topic} at their high watermarks", timeout_s)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}", "isolation.level": "read_committed", "enable.auto.commit": False, "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while any(end > 0 and consumer.position([TopicPartition(topic, p)])[0].offset < end for p, end in ends.items()):
            assert time.monotonic() < deadline, f"read_committed consumer did not reach {ends} of {topic}"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
        return seen
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def topic(cluster: Cluster) -> str:
    """Three partitions led by three different brokers."""
    name = "transactions"
    cluster.create_topic(name, PARTITIONS)
    assert sorted(leaders(cluster, name).values()) == [1, 2, 3]
    return name


def test_a_transaction_spanning_leaders_commits_and_aborts(cluster: Cluster, topic: str) -> None:
    producer = transactional_producer(cluster, "spanning")
    committed: list[bytes] = []
    for n, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        values = produce_to_every_partition(producer, topic, f"spanning-{n}")
        if commit:
            producer.commit_transaction(30)
            committed += values
        else:
            producer.abort_transaction(30)
    assert sorted(stable_committed_records(cluster, topic)) == sorted(committed)


def test_consume_transform_produce_across_coordinators(cluster: Cluster) -> None:
    source, sink, group = "ctp-in", "ctp-out", "ctp"
    cluster.create_topic(source, PARTITIONS)
    cluster.create_topic(sink, PARTITIONS)
    inputs = [f"in-{i}".encode() for i in range(30)]
    plain = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 0})
    for i, value in enumerate(inputs):
        plain.produce(source, value=value, partition=i % PARTITIONS)
    plain.flush(30)

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "isolation.level": "read_committed", "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 0})
    try:
        consumer.subscribe([source])
        pending: list[Any] = []
        cluster.wait_until(lambda: bool(consumer.assignment()) or bool(pending.extend(consumer.consume(10, 0.5))), "the consumer's assignment", 60)
        group_coordinator = coordinator_of(cluster, OFFSETS, group)
        transactional_id = next(t for t in (f"ctp-{i}" for i in range(100)) if coordinator_of(cluster, TRANSACTION_STATE, t) != group_coordinator)
        producer = transactional_producer(cluster, transactional_id)
        transformed = 0
        deadline = time.monotonic() + 60
        while transformed < len(inputs):
            assert time.monotonic() < deadline, f"transformed {transformed} of {len(inputs)} records"
            batch, pending = [m for m in pending + consumer.consume(10, 0.5) if m.error() is None], []
            if not batch:
                continue
            producer.begin_transaction()
            for message in batch:
                producer.produce(sink, value=message.value().replace(b"in-", b"out-"), partition=message.partition())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            transformed += len(batch)
        committed = consumer.committed([TopicPartition(source, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        consumer.close()
    assert sorted(stable_committed_records(cluster, sink)) == sorted(v.replace(b"in-", b"out-") for v in inputs)
    assert {tp.partition: tp.offset for tp in committed} == {p: len(inputs) // PARTITIONS for p in range(PARTITIONS)}



def test_a_leader_asks_the_coordinator_on_another_broker(cluster: Cluster) -> None:
    """KIP-890 part 1 across brokers: a transactional produce to two partitions led by a broker that is not
    the coordinator, before AddPartitionsToTxn, is refused for both (INVALID_TXN_STATE; TRANSACTION_ABORTABLE
    for Produce v11); once they are added, both are appended."""
    topic = "verified"
    cluster.create_topic(topic, 2 * PARTITIONS)  # each broker leads two partitions

    async def scenario() -> tuple[list[list[int]], int]:
        async with KafkaClient(cluster.bootstrap, request_timeout_s=15) as client:
            by_leader: dict[int, list[int]] = {}
            for p in range(2 * PARTITIONS):
                by_leader.setdefault(cluster.leader_and_isr(topic, p).leader, []).append(p)
            transactional_id = next(t for t in (f"verify-{i}" for i in range(100)) if coordinator_of(cluster, TRANSACTION_STATE, t) in by_leader)
            coordinator = (await client.find_coordinator(transactional_id, CoordinatorType.TRANSACTION)).node_id
            leader, partitions = next((b, ps) for b, ps in by_leader.items() if b != coordinator and len(ps) > 1)
            init = {"transactional_id": transactional_id, "transaction_timeout_ms": 60_000, "producer_id": -1, "producer_epoch": -1}
            answer = await client.request(ApiKey.InitProducerId, init, node_id=coordinator)
            assert answer.error_code == ErrorCode.NONE
            producer_id, epoch = answer.producer_id, answer.producer_epoch
            batch = build_batch([Record(value=b"verified")], producer_id=producer_id, producer_epoch=epoch, base_sequence=0, is_transactional=True)
            produce = {"transactional_id": transactional_id, "acks": -1, "timeout_ms": 10_000, "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch} for p in partitions]}]}
            to_leader = await client.connection(leader)

            async def produced(version: int) -> list[int]:
                response = await to_leader.send(ApiKey.Produce, version, produce)
                return [r.error_code for r in response.responses[0].partition_responses]

            errors = [await produced(9), await produced(11)]
            add = {"v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": producer_id, "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": topic, "partitions": partitions}]}
            added = await (await client.connection(coordinator)).send(ApiKey.AddPartitionsToTxn, 3, add)  # v4+ are brokers' requests
            assert [p.partition_error_code for t in added.results_by_topic_v3_and_below for p in t.results_by_partition] == [ErrorCode.NONE] * len(partitions)
            errors.append(await produced(9))
            end = {"transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": epoch, "committed": False}
            return errors, (await client.request(ApiKey.EndTxn, end, node_id=coordinator)).error_code

    errors, aborted = anyio.run(scenario)
    assert errors == [[ErrorCode.INVALID_TXN_STATE] * 2, [ErrorCode.TRANSACTION_ABORTABLE] * 2, [ErrorCode.NONE] * 2]
    assert aborted == ErrorCode.NONE
