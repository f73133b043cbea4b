"""A broker killed (SIGKILL) with a transaction open recovers it from its segments, as Kafka does.

The open transaction's records were never in a producer snapshot (the broker dies before any roll or
shutdown writes one): recovery rebuilds the producer state from the batches, so after the restart the
last stable offset still stops READ_COMMITTED readers at the transaction's first record, while
READ_UNCOMMITTED readers see its records.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import Broker
from odradek.protocol.api import ApiKey

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
QUIET = {"log_level": 0, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 300}


def offsets(wire: Any, topic: str) -> tuple[int, int]:
    """(log end offset, last stable offset): ListOffsets LATEST with each isolation level."""
    found = []
    for isolation_level in (READ_UNCOMMITTED, READ_COMMITTED):
        body = {"replica_id": -1, "isolation_level": isolation_level, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
        (partition,) = wire.call(ApiKey.ListOffsets, 5, body).topics[0].partitions
        assert partition.error_code == 0
        found.append(partition.offset)
    return found[0], found[1]


def wait_for_offsets(wire: Any, topic: str, expected: tuple[int, int]) -> None:
    """Markers are written after EndTxn is answered: wait for the offsets expected."""
    deadline = time.monotonic() + 30
    while (found := offsets(wire, topic)) != expected:
        assert time.monotonic() < deadline, f"(log end, last stable offset) is {found}, not {expected}"
        time.sleep(0.05)


def values(bootstrap: str, topic: str, isolation: str, end: int) -> list[bytes]:
    """Every value a consumer with ``isolation`` reads before it reaches the end of the partition at ``end``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}", "isolation.level": isolation, "enable.partition.eof": True, **QUIET})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        found: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None:
                    found.append(msg.value())
                elif msg.error().code() == -191 and msg.offset() >= end:  # _PARTITION_EOF
                    return found
        raise AssertionError(f"did not reach offset {end}; read {found}")
    finally:
        consumer.close()


def test_an_open_transaction_survives_a_kill_of_the_broker(tmp_path, connect) -> None:
    topic = "killed-mid-transaction"
    with Broker(log_dir=tmp_path / "logs", subprocess=True) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"killed-{uuid.uuid4().hex[:8]}", "linger.ms": 0, **QUIET})
        producer.init_transactions(30)
        producer.begin_transaction()
        for value in (b"committed-1", b"committed-2"):
            producer.produce(topic, value=value, partition=0)
        producer.commit_transaction(30)  # offsets 0-1, COMMIT at 2
        producer.begin_transaction()
        for value in (b"open-1", b"open-2"):
            producer.produce(topic, value=value, partition=0)
            producer.flush(30)  # offsets 3, 4: one batch each
        wait_for_offsets(connect(broker.bootstrap), topic, (5, 3))

        broker.kill()
        broker.restart()
        wait_for_offsets(connect(broker.bootstrap), topic, (5, 3))
        assert values(broker.bootstrap, topic, "read_committed", 3) == [b"committed-1", b"committed-2"]
        assert values(broker.bootstrap, topic, "read_uncommitted", 5) == [b"committed-1", b"committed-2", b"open-1", b"open-2"]
        producer.purge()
        del producer
