"""``min.insync.replicas`` in a three-broker cluster, as a producer sees it, on each broker kind.

A topic of rf 3 with ``min.insync.replicas`` 3: acks=all writes are acknowledged while the three replicas are
in sync; once a follower is killed and the controller has taken it out of the ISR, acks=all writes fail with
NOT_ENOUGH_REPLICAS while acks=1 writes still go through; once it is back (it catches up and rejoins the
ISR) acks=all works again, and a consumer bootstrapped from each broker alone reads every acknowledged
record, in order.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from harness import Cluster


def produce(cluster: Cluster, topic: str, values: list[bytes], **settings: object) -> list[KafkaError | None]:
    """Each value's delivery outcome (None: acknowledged)."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 20000, "log_level": 0, **settings})
    outcomes: dict[bytes, KafkaError | None] = {}
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda err, msg, v=value: outcomes.__setitem__(v, err))
    producer.flush(60)
    return [outcomes.get(v) for v in values]


def read_acknowledged(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The first ``count`` records other than the refused ones (one that timed out may have been appended)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False, "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(seen) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None and message.value() != b"refused":
                seen.append(message.value())
        return seen
    finally:
        consumer.close()


def test_acks_all_needs_min_insync_replicas(cluster: Cluster) -> None:
    topic = f"min-isr-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "3"})
    first = [b"all-%d" % i for i in range(10)]
    assert produce(cluster, topic, first) == [None] * 10

    state = cluster.leader_and_isr(topic, 0)
    follower = next(r for r in state.isr if r != state.leader)
    cluster.kill(follower)
    try:
        cluster.wait_until(lambda: follower not in cluster.leader_and_isr(topic, 0).isr, f"broker {follower} out of the ISR", 60)

        def refused() -> bool:
            """A write is refused NOT_ENOUGH_REPLICAS (no retries: librdkafka retries that error until the
            message times out). One sent before the leader has heard of the new ISR waits and times out."""
            [outcome] = produce(cluster, topic, [b"refused"], **{"enable.idempotence": False, "retries": 0, "message.timeout.ms": 5000})
            return outcome is not None and outcome.code() == KafkaError.NOT_ENOUGH_REPLICAS

        cluster.wait_until(refused, "acks=all refused NOT_ENOUGH_REPLICAS", 60)
        assert produce(cluster, topic, [b"acks-1"], acks="1", **{"enable.idempotence": False}) == [None]
    finally:
        cluster.restart(follower)
    cluster.wait_fully_replicated(topic, 60)
    assert produce(cluster, topic, [b"again"]) == [None]

    expected = [*first, b"acks-1", b"again"]
    for broker in cluster.brokers.values():
        assert read_acknowledged(broker.bootstrap, topic, len(expected)) == expected, f"read through broker at {broker.bootstrap}"
