"""The log's transaction side against a real Kafka 3.9's: the same batches make the same ``.txnindex`` bytes.

Two confluent-kafka transactional producers write interleaved committed and aborted transactions to a
real Kafka, one left open. Kafka's segment is then appended to an odradek log as a follower appends it
(offsets, producer fields and markers as Kafka wrote them); the transaction index odradek writes -- on
append, and again when recovery rebuilds it from the segment -- must equal Kafka's byte for byte, and the
last stable offset and a READ_COMMITTED fetch's aborted transactions must be Kafka's answers.
"""

from __future__ import annotations

import gc
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.api import ApiKey

READ_COMMITTED = 1


def transactional_producer(bootstrap: str, name: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": name, "linger.ms": 0})
    producer.init_transactions(30)
    return producer


def send(producer: Producer, topic: str, count: int) -> None:
    """``count`` records in one batch each, flushed, so that the log's order is the order of the calls."""
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"v" * 20, partition=0)
        producer.flush(30)


def list_offset(wire: Any, topic: str, isolation_level: int) -> int:
    body = {"replica_id": -1, "isolation_level": isolation_level, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
    (partition,) = wire.call(ApiKey.ListOffsets, 5, body).topics[0].partitions
    assert partition.error_code == 0
    return partition.offset


def aborted_in_fetch(wire: Any, topic: str) -> list[tuple[int, int]]:
    body = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": READ_COMMITTED, "session_id": 0,
        "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
        ]}],
    }
    (partition,) = wire.call(ApiKey.Fetch, 11, body).responses[0].partitions
    assert partition.error_code == 0
    return [(txn.producer_id, txn.first_offset) for txn in partition.aborted_transactions or []]


@pytest.fixture(scope="module")
def kafka_partition(real_kafka):
    """Kafka's partition directory after the transactions, with Kafka's own answers about it."""
    assert real_kafka.broker is not None, "this test reads the real Kafka's log directory: it must start its own (unset ODRADEK_COMPAT_KAFKA)"
    topic = f"txn-log-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": real_kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    a = transactional_producer(real_kafka.bootstrap, f"{topic}-a")
    b = transactional_producer(real_kafka.bootstrap, f"{topic}-b")
    a.begin_transaction()
    send(a, topic, 2)
    b.begin_transaction()
    send(b, topic, 1)
    a.abort_transaction(30)
    send(b, topic, 2)
    b.commit_transaction(30)
    a.begin_transaction()
    send(a, topic, 1)
    b.begin_transaction()
    send(b, topic, 1)
    a.commit_transaction(30)
    send(b, topic, 1)
    b.abort_transaction(30)
    a.begin_transaction()
    send(a, topic, 3)
    b.begin_transaction()
    send(b, topic, 1)
    b.abort_transaction(30)  # a's transaction stays open: Kafka's last stable offset is its first offset
    data_batches, markers = 2 + 1 + 2 + 1 + 1 + 1 + 3 + 1, 5

    watcher = Consumer({"bootstrap.servers": real_kafka.bootstrap, "group.id": topic, "isolation.level": "read_uncommitted"})
    try:
        deadline = time.monotonic() + 30
        while watcher.get_watermark_offsets(TopicPartition(topic, 0), 10)[1] < data_batches + markers:
            # markers are written after EndTxn is answered
            assert time.monotonic() < deadline, f"Kafka did not write the transaction markers: {watcher.get_watermark_offsets(TopicPartition(topic, 0), 10)}"
            time.sleep(0.05)
    finally:
        watcher.close()
    directory = real_kafka.broker.log_dir / f"{topic}-0"
    files = {suffix: (directory / f"00000000000000000000{suffix}").read_bytes() for suffix in (".log", ".txnindex")}
    yield files, topic
    a.abort_transaction(30)
    admin.delete_topics([topic])


def kafka_answers(connect: Any, bootstrap: str, topic: str) -> dict[str, Any]:
    wire = connect(bootstrap)
    return {"lso": list_offset(wire, topic, READ_COMMITTED), "aborted": aborted_in_fetch(wire, topic)}


def test_the_same_batches_make_kafkas_transaction_index_and_answers(kafka_partition, open_log, connect, real_kafka):
    files, topic = kafka_partition
    answers = kafka_answers(connect, real_kafka.bootstrap, topic)
    assert answers["lso"] < list_offset(connect(real_kafka.bootstrap), topic, 0)  # a transaction is still open
    assert len(files[".txnindex"]) == 3 * 34  # three aborted transactions that wrote data
    log = open_log()
    log.append_as_follower(files[".log"])
    log.high_watermark = log.log_end_offset
    assert (log.dir / "00000000000000000000.txnindex").read_bytes() == files[".txnindex"]
    assert log.last_stable_offset == answers["lso"]
    info = log.read(0, 1 << 20, log.last_stable_offset)
    assert [(txn.producer_id, txn.first_offset) for txn in log.aborted_transactions(0, info)] == answers["aborted"]


def test_recovery_rebuilds_kafkas_transaction_index_from_its_segment(kafka_partition, open_log, connect, real_kafka):
    files, topic = kafka_partition
    answers = kafka_answers(connect, real_kafka.bootstrap, topic)
    log = open_log()
    log.append_as_follower(files[".log"])
    end, directory = log.log_end_offset, log.dir
    del log
    gc.collect()  # a crash: nothing closed, no snapshot at the log end
    for path in directory.glob("*"):
        if path.suffix in (".txnindex", ".snapshot"):
            path.unlink()
    recovered = open_log(recovery_point=0, high_watermark=end)
    assert (recovered.dir / "00000000000000000000.txnindex").read_bytes() == files[".txnindex"]
    assert recovered.last_stable_offset == answers["lso"]
