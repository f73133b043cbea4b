"""The log's transaction side against a real Kafka 3.9's: the same batches make the same ``.txnindex`` bytes.

Two confluent-kafka transactional producers write interleaved committed and aborted transactions to a
real Kafka, one left open. Kafka's segment is then appended to an odradek log as a follower appends it
(offsets, producer fields and markers as Kafka wrote them); the transaction index odradek writes -- on
append, and again when recovery rebuilds it from the segment -- must equal Kafka's byte for byte, and the
last stable offset and a READ_COMMITTED fetch's aborted transactions must be Kafka's answers. Kafka's
cleaner and odradek's clean the same transactional segments into the same bytes.
"""

from __future__ import annotations

import gc
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from odradek.protocol.api import ApiKey
from odradek.protocol.record_batch import iter_batch_positions
from odradek.storage.log import Log
from odradek.storage.log_cleaner import CleanerConfig, LogCleaner
from odradek.storage.log_config import LogConfig

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


def append_as_kafka_did(log: Any, data: bytes) -> None:
    """Kafka's batches one append each, as its leader appended them: the last stable offset an abort leaves
    is computed per append (in one large append, transactions starting after the marker would count)."""
    for position, _, size in iter_batch_positions(data):
        log.append_as_follower(data[position : position + size])


def kafka_answers(connect: Any, bootstrap: str, topic: str) -> dict[str, Any]:
    wire = connect(bootstrap)
    return {"lso": list_offset(wire, topic, READ_COMMITTED), "aborted": aborted_in_fetch(wire, topic)}


def test_the_same_batches_make_kafkas_transaction_index_and_answers(kafka_partition, open_log, connect, real_kafka):
    files, topic = kafka_partition
    answers = kafka_answers(connect, real_kafka.bootstrap, topic)
    assert answers["lso"] < list_offset(connect(real_kafka.bootstrap), topic, 0)  # a transaction is still open
    assert len(files[".txnindex"]) == 3 * 34  # three aborted transactions that wrote data
    log = open_log()
    append_as_kafka_did(log, files[".log"])
    log.high_watermark = log.log_end_offset
    assert (log.dir / "00000000000000000000.txnindex").read_bytes() == files[".txnindex"]
    assert log.last_stable_offset == answers["lso"]
    info = log.read(0, 1 << 20, log.last_stable_offset)
    assert [(txn.producer_id, txn.first_offset) for txn in log.aborted_transactions(0, info)] == answers["aborted"]


def test_recovery_rebuilds_kafkas_transaction_index_from_its_segment(kafka_partition, open_log, connect, real_kafka):
    files, topic = kafka_partition
    answers = kafka_answers(connect, real_kafka.bootstrap, topic)
    log = open_log()
    append_as_kafka_did(log, files[".log"])
    end, directory = log.log_end_offset, log.dir
    del log
    gc.collect()  # a crash: nothing closed, no snapshot at the log end
    for path in directory.glob("*"):
        if path.suffix in (".txnindex", ".snapshot"):
            path.unlink()
    recovered = open_log(recovery_point=0, high_watermark=end)
    assert (recovered.dir / "00000000000000000000.txnindex").read_bytes() == files[".txnindex"]
    assert recovered.last_stable_offset == answers["lso"]


def kafka_segments(directory: Path) -> dict[str, bytes]:
    """Name -> bytes of every .log and .txnindex file (a missing .txnindex reads as empty, as Kafka's does)."""
    files = {}
    for path in sorted(directory.glob("*.log")):
        files[path.name] = path.read_bytes()
        txn_index = path.with_suffix(".txnindex")
        files[txn_index.name] = txn_index.read_bytes() if txn_index.exists() else b""
    return files


def test_the_cleaner_cleans_kafkas_transactional_segments_into_kafkas_bytes(real_kafka, tmp_path, clock):
    """Kafka's compacted partition with aborted and committed transactions is copied before its cleaner may
    run (min.compaction.lag.ms holds it back), then Kafka cleans it and odradek's cleaner cleans the copy:
    the cleaned segments and transaction indexes are the same bytes."""
    assert real_kafka.broker is not None, "this test reads the real Kafka's log directory: it must start its own (unset ODRADEK_COMPAT_KAFKA)"
    topic = f"txn-clean-{uuid.uuid4().hex[:8]}"
    overrides = {"cleanup.policy": "compact", "segment.bytes": "700", "min.cleanable.dirty.ratio": "0.01"}
    admin = AdminClient({"bootstrap.servers": real_kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={**overrides, "min.compaction.lag.ms": "3600000"})])[topic].result(30)
    txn = transactional_producer(real_kafka.bootstrap, f"{topic}-t")
    plain = Producer({"bootstrap.servers": real_kafka.bootstrap, "linger.ms": 0, "enable.idempotence": False})

    def put(producer: Producer, *pairs: tuple[bytes, bytes]) -> None:
        for key, value in pairs:
            producer.produce(topic, key=key, value=value, partition=0)
            producer.flush(30)

    txn.begin_transaction()
    put(txn, (b"k0", b"aborted"), (b"k1", b"aborted"))
    txn.abort_transaction(30)
    put(plain, *[(b"k%d" % i, b"plain-1") for i in range(4)])
    txn.begin_transaction()
    put(txn, (b"k1", b"committed"), (b"k5", b"committed"))
    txn.commit_transaction(30)
    put(plain, *[(b"k%d" % (i % 3), b"plain-2") for i in range(6)])
    txn.begin_transaction()
    put(txn, (b"k2", b"aborted-last"))
    txn.abort_transaction(30)
    put(plain, *[(b"x%d" % i, b"tail" * 40) for i in range(6)])  # rolls: the transactions are in cleanable segments
    expected_end = 2 + 1 + 4 + 2 + 1 + 6 + 1 + 1 + 6

    directory = real_kafka.broker.log_dir / f"{topic}-0"
    deadline = time.monotonic() + 30
    while sum(1 for _ in directory.glob("*.log")) < 3 or max(int(p.stem) for p in directory.glob("*.log")) < expected_end - 6:
        assert time.monotonic() < deadline, "Kafka did not roll the segments"
        time.sleep(0.05)
    watcher = Consumer({"bootstrap.servers": real_kafka.bootstrap, "group.id": topic, "isolation.level": "read_uncommitted"})
    try:
        while watcher.get_watermark_offsets(TopicPartition(topic, 0), 10)[1] < expected_end:
            assert time.monotonic() < deadline, "Kafka did not write the transaction markers"
            time.sleep(0.05)
    finally:
        watcher.close()
    before = kafka_segments(directory)
    assert sum(len(data) for name, data in before.items() if name.endswith(".txnindex")) == 2 * 34

    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    checkpoint = real_kafka.broker.log_dir / "cleaner-offset-checkpoint"  # written once the cleaning is done
    deadline = time.monotonic() + 60
    while not checkpoint.exists() or f"{topic} 0 " not in checkpoint.read_text():
        assert time.monotonic() < deadline, "Kafka's cleaner did not clean the partition"
        time.sleep(0.1)
    after = kafka_segments(directory)
    assert after != before

    ours = tmp_path / f"{topic}-0"
    ours.mkdir()
    for name, data in before.items():
        if name.endswith(".log"):
            (ours / name).write_bytes(data)
    log = Log.open(ours, LogConfig.from_props(overrides), recovery_point=0, time_ms=clock)
    log.high_watermark = log.log_end_offset
    assert LogCleaner(CleanerConfig(), [tmp_path], time_ms=clock).clean_logs([((topic, 0), log, tmp_path)]) == 1
    assert kafka_segments(ours) == after
    plain.flush(10)
    del txn, plain
    admin.delete_topics([topic])
