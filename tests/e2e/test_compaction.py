"""Compacted topics through a real broker: what clients see once the log cleaner ran.

Each test starts its own broker with a short log.cleaner.backoff.ms, so the cleaner runs within a second
of the log becoming dirty enough, and reads what it left through real consumers.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from odradek import Broker

CLEANER = {"log.cleaner.backoff.ms": 100}


def _create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)], operation_timeout=10)[topic].result(10)


def _read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from the beginning to the high watermark, as a confluent-kafka consumer hands them over."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}", "enable.auto.commit": False, "fetch.wait.max.ms": 100, "log_level": 3})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 10
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.2):
                assert msg.error() is None, msg.error()
                out.append((msg.offset(), msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


def _wait_until_clean(broker: Broker, topic: str, timeout: float = 8.0) -> int:
    """Wait until the cleaner's checkpoint reached the active segment; returns the active segment's base offset."""
    log = broker.server.log_manager.get_log(topic, 0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        active_base = log.active_segment.base_offset
        if broker.server.log_manager.cleaner.checkpoints().get((topic, 0)) == active_base:
            return active_base
        time.sleep(0.1)
    raise AssertionError(f"the cleaner did not reach offset {log.active_segment.base_offset} of {topic}")


def _latest(records: list[tuple[int, Any, Any]]) -> list[tuple[int, Any, Any]]:
    return sorted({key: (offset, key, value) for offset, key, value in records}.values())


def test_a_compacted_topic_reads_back_the_latest_value_of_every_key(tmp_path, clients):
    with Broker(log_dir=tmp_path, config=CLEANER) as broker:
        topic = "compacted"
        _create(broker.bootstrap, topic, {"cleanup.policy": "compact", "segment.bytes": "8192", "delete.retention.ms": "0"})
        updates = [(b"key-%d" % (i % 10), b"value-%d" % i) for i in range(2000)]
        clients["confluent"].produce(broker.bootstrap, topic, updates, **{"batch.size": 1000})

        active_base = _wait_until_clean(broker, topic)
        written = [(offset, key, value) for offset, (key, value) in enumerate(updates)]
        expected = _latest([r for r in written if r[0] < active_base]) + [r for r in written if r[0] >= active_base]
        assert _read_all(broker.bootstrap, topic) == expected
        assert len(expected) < len(written) / 5

        # Tombstones for half the keys. A cleaning removes the values they delete and gives them a delete
        # horizon (now + delete.retention.ms, 0 here); a later cleaning, once more updates made the log dirty
        # again, removes the tombstones too.
        clients["confluent"].produce(broker.bootstrap, topic, [(b"key-%d" % k, None) for k in range(5)])
        for round_ in range(5):
            more = [(b"key-%d" % (5 + i % 5), b"after-%d-%d" % (round_, i)) for i in range(1000)]
            clients["kafka-python"].produce(broker.bootstrap, topic, more, batch_size=1000)
            active_base = _wait_until_clean(broker, topic)
            read = _read_all(broker.bootstrap, topic)
            if not [key for offset, key, _ in read if offset < active_base and int(key[4:]) < 5]:
                break
        cleaned = [r for r in read if r[0] < active_base]
        assert {key for _, key, _ in cleaned} <= {b"key-%d" % k for k in range(5, 10)}
        assert all(value is not None and value.startswith(b"after-") for _, _, value in cleaned)
        assert len({key for _, key, _ in cleaned}) == len(cleaned)


def _refused_by_kafka_python(bootstrap: str, topic: str) -> Exception:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0)
    try:
        producer.send(topic, value=b"no key", partition=0).get(10)
    except KafkaError as exc:
        return exc
    finally:
        producer.close(5)
    raise AssertionError("kafka-python's record without a key was acknowledged")


def test_a_compacted_topic_refuses_records_without_a_key(tmp_path, clients):
    from confluent_kafka import KafkaError
    from kafka.errors import InvalidRecordError

    with Broker(log_dir=tmp_path, config=CLEANER) as broker:
        topic = "keys-required"
        _create(broker.bootstrap, topic, {"cleanup.policy": "compact"})
        with pytest.raises(AssertionError) as refused:  # the e2e clients' ProduceFailed
            clients["confluent"].produce(broker.bootstrap, topic, [(None, b"no key")], **{"retries": 0})
        assert refused.value.error.code() == KafkaError.INVALID_RECORD  # type: ignore[attr-defined]
        assert isinstance(_refused_by_kafka_python(broker.bootstrap, topic), InvalidRecordError)
        clients["aiokafka"].produce(broker.bootstrap, topic, [(b"k", b"keyed")])
        assert _read_all(broker.bootstrap, topic) == [(0, b"k", b"keyed")]  # the refused records left nothing


def test_consumer_offsets_is_compacted_and_committed_offsets_survive_a_restart(tmp_path):
    from confluent_kafka import Consumer, TopicPartition

    config = {**CLEANER, "offsets.topic.num.partitions": 1, "offsets.topic.segment.bytes": 4096}
    with Broker(log_dir=tmp_path, config=config) as broker:
        _create(broker.bootstrap, "data", {})
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "committer", "enable.auto.commit": False, "log_level": 3})
        try:
            for offset in range(1, 401):
                consumer.commit(offsets=[TopicPartition("data", 0, offset)], asynchronous=False)
        finally:
            consumer.close()
        offsets_log = broker.server.log_manager.get_log("__consumer_offsets", 0)
        assert offsets_log.config.compact
        assert offsets_log.log_end_offset >= 400
        _wait_until_clean(broker, "__consumer_offsets")
        kept = sum(header.records_count for segment in offsets_log.segments for _, header in segment.log.batch_headers())
        assert kept < 400 / 4  # the commits of the cleaned segments collapsed into the last one

    with Broker(log_dir=tmp_path, config=config) as broker:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "committer", "enable.auto.commit": False, "log_level": 3})
        try:
            assert consumer.committed([TopicPartition("data", 0)], timeout=10)[0].offset == 400
        finally:
            consumer.close()


def test_every_client_reads_a_compacted_log_with_gaps_empty_batches_and_tombstones(tmp_path, clients):
    with Broker(log_dir=tmp_path, config=CLEANER) as broker:
        topic = "read-compacted"
        _create(broker.bootstrap, topic, {"cleanup.policy": "compact", "segment.bytes": "4096", "delete.retention.ms": "3600000"})
        # An idempotent producer's records, all superseded later: its last batch stays, emptied, for its sequence.
        clients["confluent"].produce(broker.bootstrap, topic, [(b"key-%d" % (i % 5), b"idempotent-%d" % i) for i in range(200)], idempotent=True, **{"batch.size": 1000})
        plain = [(b"key-%d" % (i % 5), b"plain-%d" % i) for i in range(300)] + [(b"key-0", None)]
        plain += [(b"other-%d" % (i % 5), b"more-%d" % i) for i in range(300)]
        clients["kafka-python"].produce(broker.bootstrap, topic, plain, batch_size=1000)
        active_base = _wait_until_clean(broker, topic)

        expected = _read_all(broker.bootstrap, topic)
        tombstones = [r for r in expected if r[2] is None]
        assert tombstones and tombstones[0][0] < active_base  # kept for delete.retention.ms after the cleaning
        assert not [r for r in expected if (r[2] or b"").startswith(b"idempotent")]
        on_disk = [header for segment in broker.server.log_manager.get_log(topic, 0).segments for _, header in segment.log.batch_headers()]
        assert [h for h in on_disk if h.records_count == 0 and h.producer_id >= 0]
        assert [h for h in on_disk if h.has_delete_horizon]
        for name in ("kafka-python", "aiokafka"):
            received = clients[name].consume(broker.bootstrap, topic, len(expected), timeout=10)
            assert [(r.offset, r.key, r.value) for r in received] == expected, name
