"""A topic's compression.type: with a codec named, Kafka stores batches in that codec whatever the producer
used (LogValidator re-encodes them); with "producer", batches are stored as sent."""

from __future__ import annotations

import pytest

CODEC_IDS = {"none": 0, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.mark.parametrize(
    ("topic_codec", "producer_codec"),
    [("gzip", "lz4"), ("uncompressed", "zstd"), ("zstd", "none"), ("snappy", "gzip"), ("producer", "lz4"), ("lz4", "lz4")],
)
def test_batches_are_stored_in_the_topics_codec(bootstrap, new_topic, clients, disk_batches, topic_codec, producer_codec):
    topic = new_topic(config={"compression.type": topic_codec})
    records = [(f"k{i}".encode(), f"value {i}".encode() * 3, (("h", str(i).encode()),), 1_700_000_000_000 + i) for i in range(300)]
    acked = clients["confluent"].produce(bootstrap, topic, records, compression=producer_codec, idempotent=True)
    assert [a.offset for a in acked] == list(range(300))

    batches = disk_batches(topic)
    expected = CODEC_IDS[producer_codec if topic_codec == "producer" else topic_codec]
    assert {b.compression for b in batches} == {expected}
    assert all(b.producer_id >= 0 for b in batches)  # the idempotent producer's fields survive re-encoding
    assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]

    for consumer in ("confluent", "kafka-python"):
        received = clients[consumer].consume(bootstrap, topic, 300)
        assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in received] == [
            (i, k, v, h, ts) for i, (k, v, h, ts) in enumerate(records)
        ]
