"""ListOffsets as clients use it: watermarks, offsets for times, max timestamp, and auto.offset.reset.

One topic holds 100 records in several batches with timestamps ``BASE + 10 * offset``, except offset 42
whose timestamp is the largest by far: so "first offset with a timestamp at or after T" and "offset of
the largest timestamp" differ from "the offset whose timestamp is closest" and "the last offset".
"""

from __future__ import annotations

import asyncio
import time

import pytest

BASE = 1_700_000_000_000
COUNT = 100
OUTLIER = 42
OUTLIER_TS = BASE + 5_000


def _timestamp(offset: int) -> int:
    return OUTLIER_TS if offset == OUTLIER else BASE + 10 * offset


@pytest.fixture(scope="module")
def timed_topic(bootstrap, make_topic, clients):
    topic = make_topic("e2e-list-offsets-timed")
    records = [(b"k%d" % i, b"v%d" % i, (), _timestamp(i)) for i in range(COUNT)]
    for start in range(0, COUNT, 25):  # four produce calls: four batches at least, so lookups cross batches
        clients["confluent"].produce(bootstrap, topic, records[start : start + 25])
    return topic


# target timestamp -> the offset Kafka answers: the first whose timestamp is >= target, -1 when none.
# Past BASE+410 (offset 41) the outlier at 42 is the first such record, however late the target.
BY_TIMESTAMP = {
    BASE - 1_000: 0,  # before everything: the first record
    BASE: 0,
    BASE + 50: 5,  # exact match
    BASE + 55: 6,  # between two records: the later one
    BASE + 410: 41,
    BASE + 411: OUTLIER,  # not 43, whose timestamp is closer: the first offset, not the nearest time
    BASE + 990: OUTLIER,  # not 99, the record with exactly this timestamp
    OUTLIER_TS: OUTLIER,
    OUTLIER_TS + 1: -1,  # nothing that late
}


def _confluent_consumer(bootstrap: str, **config):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-list-offsets", "enable.auto.commit": False, "log_level": 3, **config})


def test_confluent_watermarks(bootstrap, timed_topic, new_topic):
    from confluent_kafka import TopicPartition

    empty = new_topic()
    consumer = _confluent_consumer(bootstrap)
    try:
        assert consumer.get_watermark_offsets(TopicPartition(timed_topic, 0), timeout=10, cached=False) == (0, COUNT)
        assert consumer.get_watermark_offsets(TopicPartition(empty, 0), timeout=10, cached=False) == (0, 0)
    finally:
        consumer.close()


def test_confluent_offsets_for_times(bootstrap, timed_topic):
    from confluent_kafka import TopicPartition

    consumer = _confluent_consumer(bootstrap)
    try:
        answers = {
            target: consumer.offsets_for_times([TopicPartition(timed_topic, 0, target)], timeout=10)[0]
            for target in BY_TIMESTAMP
        }
    finally:
        consumer.close()
    assert {target: tp.offset for target, tp in answers.items()} == BY_TIMESTAMP
    assert all(tp.error is None for tp in answers.values())


def test_confluent_admin_list_offsets_specs(timed_topic, admin):
    """AdminClient.list_offsets sends each spec, including KIP-734's max timestamp."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "max_timestamp": OffsetSpec.max_timestamp(),
        "at BASE+55": OffsetSpec.for_timestamp(BASE + 55),
    }
    answers = {}
    for name, spec in specs.items():
        futures = admin.list_offsets({TopicPartition(timed_topic, 0): spec}, request_timeout=10)
        answers[name] = next(iter(futures.values())).result(10)

    assert {name: info.offset for name, info in answers.items()} == {"earliest": 0, "latest": COUNT, "max_timestamp": OUTLIER, "at BASE+55": 6}
    assert answers["max_timestamp"].timestamp == OUTLIER_TS
    assert answers["at BASE+55"].timestamp == _timestamp(6)


def test_kafka_python_beginning_end_and_offsets_for_times(bootstrap, timed_topic):
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(timed_topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        beginning = consumer.beginning_offsets([tp])
        end = consumer.end_offsets([tp])
        found = {target: consumer.offsets_for_times({tp: target})[tp] for target in BY_TIMESTAMP}
    finally:
        consumer.close()

    assert beginning == {tp: 0} and end == {tp: COUNT}
    assert {t: (a.offset if a is not None else -1) for t, a in found.items()} == BY_TIMESTAMP
    assert all(a is None or a.timestamp == _timestamp(a.offset) for a in found.values()), "the answer carries the record's timestamp"
    assert found[OUTLIER_TS + 1] is None


def _confluent_starting_position(bootstrap: str, topic: str, offset: int, reset: str) -> list[int]:
    """Assign at ``offset`` with ``auto.offset.reset``; read to the end of the partition; produce 3 more;
    return the offsets read."""
    from confluent_kafka import KafkaError, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"e2e-reset-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": reset,
            "enable.partition.eof": True,  # tells when the consumer has a position and nothing more to read
            "log_level": 3,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        read: list[int] = []
        deadline = time.monotonic() + 15
        at_end = False
        while not at_end and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    read.append(m.offset())
                at_end = at_end or (m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF)
        assert at_end, "the consumer never reached the end of the partition"
        _produce_three(bootstrap, topic)
        while time.monotonic() < deadline and (not read or read[-1] < COUNT + 2):
            read += [m.offset() for m in consumer.consume(1000, 0.5) if m.error() is None]
        return read
    finally:
        consumer.close()


def _produce_three(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    for i in range(3):
        producer.produce(topic, value=b"new-%d" % i, partition=0)
    assert producer.flush(10) == 0


@pytest.fixture
def filled_topic(bootstrap, new_topic, clients):
    """A fresh topic with COUNT records, for tests that append to it."""
    topic = new_topic()
    clients["confluent"].produce(bootstrap, topic, [(None, b"old-%d" % i, (), None) for i in range(COUNT)])
    return topic


@pytest.mark.parametrize("reset, expected", [("latest", [COUNT, COUNT + 1, COUNT + 2]), ("earliest", list(range(COUNT + 3)))])
def test_confluent_out_of_range_position_resets(bootstrap, filled_topic, reset, expected):
    """A position past the log end gets OFFSET_OUT_OF_RANGE; the consumer resets by auto.offset.reset."""
    assert _confluent_starting_position(bootstrap, filled_topic, 1_000_000, reset) == expected


def test_confluent_without_committed_offset_starts_at_latest(bootstrap, filled_topic):
    """Assigned with no position, the consumer asks for its committed offset, finds none and uses latest."""
    from confluent_kafka import OFFSET_STORED

    assert _confluent_starting_position(bootstrap, filled_topic, OFFSET_STORED, "latest") == [COUNT, COUNT + 1, COUNT + 2]


def test_kafka_python_auto_offset_reset_latest(bootstrap, filled_topic):
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(filled_topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="latest", fetch_max_wait_ms=100)
    try:
        consumer.assign([tp])
        position = consumer.position(tp)  # resolves the reset: ListOffsets for the latest offset
        _produce_three(bootstrap, filled_topic)
        read: list[int] = []
        deadline = time.monotonic() + 15
        while len(read) < 3 and time.monotonic() < deadline:
            read += [r.offset for batch in consumer.poll(500).values() for r in batch]
    finally:
        consumer.close()
    assert position == COUNT
    assert read == [COUNT, COUNT + 1, COUNT + 2]


def test_aiokafka_auto_offset_reset_latest(bootstrap, filled_topic):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> tuple[int, list[int]]:
        tp = TopicPartition(filled_topic, 0)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="latest", fetch_max_wait_ms=100)
        await consumer.start()
        try:
            consumer.assign([tp])
            position = await consumer.position(tp)
            await asyncio.to_thread(_produce_three, bootstrap, filled_topic)
            read: list[int] = []
            deadline = time.monotonic() + 15
            while len(read) < 3 and time.monotonic() < deadline:
                read += [r.offset for batch in (await consumer.getmany(timeout_ms=500)).values() for r in batch]
            return position, read
        finally:
            await consumer.stop()

    position, read = asyncio.run(run())
    assert position == COUNT
    assert read == [COUNT, COUNT + 1, COUNT + 2]
