"""Produce and consume with the three Python clients against a real broker: what a user of each sees.

Every test crosses clients where it can (one writes, another reads), so a broker that only suits one
client's habits fails here.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from odradek.protocol.errors import ErrorCode

N_LARGE = 100_000
BASE_TS = 1_700_000_000_000
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CLIENT_NAMES = ("confluent", "kafka-python", "aiokafka")


def _next_client(name: str) -> str:
    """The client that reads what ``name`` wrote: each reads another's records."""
    return CLIENT_NAMES[(CLIENT_NAMES.index(name) + 1) % len(CLIENT_NAMES)]


def _records(n: int, tag: str) -> list[tuple]:
    """Keyed records with headers and distinct CreateTime timestamps (older than now, within bounds)."""
    return [(b"key-%d" % i, b"value-%d-%s" % (i, tag.encode()), (("seq", b"%d" % i), ("src", tag.encode())), BASE_TS + i) for i in range(n)]


def _expected(records: list[tuple], first_offset: int = 0) -> list[tuple]:
    """What a consumer must hand back: each record at its offset, timestamps as sent (CreateTime)."""
    return [(first_offset + i, key, value, headers, ts, False) for i, (key, value, headers, ts) in enumerate(records)]


@pytest.mark.parametrize(
    "producer, idempotent, consumer",
    [
        ("confluent", True, "confluent"),
        ("confluent", False, "kafka-python"),
        ("kafka-python", False, "aiokafka"),
        ("aiokafka", False, "confluent"),
    ],
)
def test_hundred_thousand_records_arrive_in_order_once(bootstrap, new_topic, clients, producer, idempotent, consumer):
    topic = new_topic()
    records = _records(N_LARGE, producer)

    acked = clients[producer].produce(bootstrap, topic, records, idempotent=idempotent)
    received = clients[consumer].consume(bootstrap, topic, N_LARGE, timeout=60)  # slack for a crowded CI machine

    assert [a.offset for a in acked] == list(range(N_LARGE))
    assert len(received) == N_LARGE
    assert received == _expected(records)


@pytest.mark.parametrize("compression", CODEC_IDS)
@pytest.mark.parametrize("producer", CLIENT_NAMES)
def test_every_codec_crosses_clients(bootstrap, new_topic, clients, disk_batches, producer, compression):
    topic = new_topic()
    records = _records(1000, f"{producer}-{compression}")

    clients[producer].produce(bootstrap, topic, records, compression=compression)
    received = clients[_next_client(producer)].consume(bootstrap, topic, len(records))

    assert received == _expected(records)
    # The log keeps the producer's codec. librdkafka sends a batch uncompressed when the codec would not
    # shrink it (a lone first record, say), so most records, not all, must sit in batches of the codec.
    batches = disk_batches(topic)
    codec = CODEC_IDS[compression]
    assert {b.compression for b in batches} <= {0, codec}
    assert sum(b.records_count for b in batches if b.compression == codec) >= 0.9 * len(records)


@pytest.mark.parametrize("producer", CLIENT_NAMES)
def test_null_keys_and_null_values(bootstrap, new_topic, clients, producer):
    topic = new_topic()
    # (None, None) is left out: kafka-python refuses to send it.
    records = [(None, b"no key", (), BASE_TS), (b"tombstone", None, (), BASE_TS + 1), (b"", b"", (), BASE_TS + 2), (None, b"", (), BASE_TS + 3)]

    clients[producer].produce(bootstrap, topic, records)
    received = clients[_next_client(producer)].consume(bootstrap, topic, len(records))

    assert [(r.key, r.value) for r in received] == [(None, b"no key"), (b"tombstone", None), (b"", b""), (None, b"")]


@pytest.mark.parametrize("producer", CLIENT_NAMES)
def test_log_append_time_topic_stamps_broker_time(bootstrap, new_topic, clients, disk_batches, producer):
    topic = new_topic(config={"message.timestamp.type": "LogAppendTime"})
    records = _records(200, producer)  # CreateTime of November 2023: the broker must overwrite it

    before = int(time.time() * 1000)
    acked = clients[producer].produce(bootstrap, topic, records)
    after = int(time.time() * 1000)
    received = clients[_next_client(producer)].consume(bootstrap, topic, len(records))

    assert [(r.offset, r.key, r.value, r.headers) for r in received] == [e[:4] for e in _expected(records)]
    assert all(r.log_append_time for r in received), "consumers see timestamp type LogAppendTime"
    assert all(before <= r.timestamp <= after for r in received)
    assert [a.timestamp for a in acked] == [r.timestamp for r in received], "the produce answer carries the append time"
    assert {b.timestamp_type for b in disk_batches(topic)} == {1}


def _too_large_confluent(bootstrap: str, topic: str, value: bytes) -> int:
    from confluent_kafka import Producer

    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.send.max.retries": 0, "log_level": 3})
    producer.produce(topic, value=value, partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(10) == 0
    return errors[0].code()


def _too_large_kafka_python(bootstrap: str, topic: str, value: bytes) -> int:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0)
    try:
        producer.send(topic, value=value, partition=0).get(10)
    except KafkaError as exc:
        return exc.errno
    finally:
        producer.close(5)
    raise AssertionError("kafka-python acknowledged an oversized record")


def _too_large_aiokafka(bootstrap: str, topic: str, value: bytes) -> int:
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def run() -> int:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(topic, value=value, partition=0)
        except KafkaError as exc:
            return exc.errno
        finally:
            await producer.stop()
        raise AssertionError("aiokafka acknowledged an oversized record")

    return asyncio.run(run())


TOO_LARGE = {"confluent": _too_large_confluent, "kafka-python": _too_large_kafka_python, "aiokafka": _too_large_aiokafka}


@pytest.mark.parametrize("producer", CLIENT_NAMES)
def test_batch_over_max_message_bytes_is_refused(bootstrap, new_topic, clients, producer):
    topic = new_topic(config={"max.message.bytes": "2000"})

    code = TOO_LARGE[producer](bootstrap, topic, os.urandom(10_000))  # random bytes: no codec shrinks them

    assert code == ErrorCode.MESSAGE_TOO_LARGE
    acked = clients[producer].produce(bootstrap, topic, [(b"k", b"small", (), BASE_TS)])
    assert [a.offset for a in acked] == [0], "the refused batch left nothing in the log"


@pytest.mark.parametrize("consumer", CLIENT_NAMES)
def test_seek_into_the_middle_of_a_compressed_batch(bootstrap, new_topic, clients, disk_batches, consumer):
    topic = new_topic()
    records = _records(1000, "seek")
    clients["confluent"].produce(bootstrap, topic, records, compression="gzip", **{"linger.ms": 200})
    batches = disk_batches(topic)
    target = 537
    holding = [b for b in batches if b.base_offset <= target <= b.last_offset]
    assert len(holding) == 1 and holding[0].base_offset < target and holding[0].compression == CODEC_IDS["gzip"], (
        "the target offset must sit inside a compressed batch for this test to mean anything"
    )

    received = clients[consumer].consume(bootstrap, topic, 1000 - target, offset=target)

    assert received == _expected(records[target:], target)


def test_confluent_seek_back_and_forth(bootstrap, new_topic, clients):
    """A live consumer's seek (not just its starting offset) lands on the exact record, inside a batch."""
    from confluent_kafka import Consumer, TopicPartition

    topic = new_topic()
    records = _records(1000, "seek")
    clients["confluent"].produce(bootstrap, topic, records, compression="zstd", **{"linger.ms": 200})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{topic}", "enable.auto.commit": False, "log_level": 3})
    try:
        consumer.assign([TopicPartition(topic, 0, 900)])
        first = _consume_until(consumer, 100)
        consumer.seek(TopicPartition(topic, 0, 250))
        second = _consume_until(consumer, 5)
    finally:
        consumer.close()
    assert [m.offset() for m in first] == list(range(900, 1000))
    assert [(m.offset(), m.value()) for m in second] == [(o, records[o][1]) for o in range(250, 255)]


def _consume_until(consumer, count: int, timeout: float = 10.0) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        for msg in consumer.consume(count - len(out), 0.5):
            assert msg.error() is None, msg.error()
            out.append(msg)
    return out


def _produce_later(bootstrap: str, topic: str, delay: float, acked_at: list[float]) -> threading.Thread:
    from confluent_kafka import Producer

    def run() -> None:
        time.sleep(delay)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 3})
        producer.produce(topic, value=b"late", partition=0, on_delivery=lambda err, msg: acked_at.append(time.monotonic()))
        producer.flush(10)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("consumer", ["confluent", "kafka-python"])
def test_long_poll_returns_a_record_produced_while_waiting(bootstrap, new_topic, clients, consumer):
    topic = new_topic()
    config = {"fetch.wait.max.ms": 20_000} if consumer == "confluent" else {"fetch_max_wait_ms": 20_000}
    acked_at: list[float] = []
    producer = _produce_later(bootstrap, topic, 2.0, acked_at)

    received = clients[consumer].consume(bootstrap, topic, 1, timeout=30, **config)
    got_at = time.monotonic()
    producer.join()

    assert [r.value for r in received] == [b"late"]
    assert acked_at and got_at - acked_at[0] < 4, "the waiting fetch must be answered when the record arrives, not at fetch.wait.max.ms"


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy"])
@pytest.mark.parametrize("api_version, has_timestamps", [((0, 10, 1), True), ((0, 9), False)])
def test_old_protocol_clients_read_and_write_current_logs(bootstrap, new_topic, clients, disk_batches, api_version, has_timestamps, compression):
    """kafka-python pinned to 0.9/0.10 speaks Produce v1-v2 and Fetch v1-v3 (magic 0/1 message sets): the
    broker up-converts what it writes and down-converts what it reads, including from inside a batch."""
    topic = new_topic()
    records = [(b"k%d" % i, b"v%d" % i, (), BASE_TS + i) for i in range(500)]
    clients["confluent"].produce(bootstrap, topic, records, compression=compression)

    old_read = clients["kafka-python"].consume(bootstrap, topic, 400, offset=100, api_version=api_version, timeout=10)
    clients["kafka-python"].produce(bootstrap, topic, records[:5], compression=compression, api_version=api_version)
    new_read = clients["confluent"].consume(bootstrap, topic, 5, offset=500)

    assert [(r.offset, r.key, r.value) for r in old_read] == [(100 + i, k, v) for i, (k, v, _, _) in enumerate(records[100:])]
    assert [r.timestamp for r in old_read] == ([ts for *_, ts in records[100:]] if has_timestamps else [None] * 400)
    assert [(r.offset, r.key, r.value) for r in new_read] == [(500 + i, k, v) for i, (k, v, _, _) in enumerate(records[:5])]
    assert all(b.magic == 2 for b in disk_batches(topic)), "old message sets are stored as magic-2 batches"
