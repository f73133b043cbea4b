"""Old protocol versions through a real client: kafka-python pinned to an old broker version uses Produce
v0-v2 (magic 0/1 message sets, up-converted on append) and Fetch v0-v3 (down-converted on read)."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.legacy_records import iter_deep, iter_messages


@pytest.fixture(scope="module")
def broker():
    # log.retention.ms=-1: records timestamped in 2023 must outlive the first retention check.
    with Broker(config={"offsets.topic.num.partitions": "1", "log.retention.ms": "-1"}) as b:
        yield b


@pytest.mark.parametrize(("api_version", "compression"), [((0, 9), None), ((0, 9), "gzip"), ((0, 10, 0), None), ((0, 10, 0), "snappy"), ((0, 10, 1), "gzip")])
def test_old_protocol_round_trip(broker, api_version, compression) -> None:
    topic = f"legacy-{'-'.join(map(str, api_version))}-{compression}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api_version, compression_type=compression)
    sent = [(f"k{i}".encode(), f"value {i}".encode()) for i in range(200)]
    futures = [producer.send(topic, key=key, value=value) for key, value in sent]
    producer.flush(10)
    producer.close()
    assert [f.get(timeout=1).offset for f in futures] == list(range(len(sent)))  # every record acknowledged
    # assign(), not subscribe(): kafka-python 3.0.12 sometimes never refreshes metadata for a topic
    # subscribed without a group while it bootstraps (seen here: no request reached the broker for 10 s).
    # The old Fetch and ListOffsets versions under test are the same either way.
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=api_version, consumer_timeout_ms=10000, group_id=None)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    got = []
    for m in consumer:
        got.append((m.offset, m.key, m.value))
        if len(got) == len(sent):
            break
    consumer.close()
    assert got == [(i, k, v) for i, (k, v) in enumerate(sent)]


@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 1), (3, 1)])
def test_fetch_v0_to_v3_answer_in_the_old_message_format(broker, connect, version: int, magic: int) -> None:
    from confluent_kafka import Producer

    topic = f"legacy-fetch-v{version}"
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 50})
    for i in range(10):
        producer.produce(topic, key=b"k", value=f"v{i}".encode(), timestamp=1_700_000_000_000 + i)
    producer.flush(10)
    wire = connect(broker.bootstrap)
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 3, "partition_max_bytes": 1 << 20}]}],
    }
    partition = wire.call(ApiKey.Fetch, version, body).responses[0].partitions[0]
    assert partition.error_code == 0 and partition.high_watermark == 10
    data = bytes(partition.records)
    assert {m.magic for m in iter_messages(data)} == {magic}
    records = list(iter_deep(data))
    assert [(m.offset, m.value) for m in records] == [(i, f"v{i}".encode()) for i in range(3, 10)]
    if magic == 1:
        assert [m.timestamp for m in records] == [1_700_000_000_000 + i for i in range(3, 10)]
