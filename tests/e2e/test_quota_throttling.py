"""A producer over its ``producer_byte_rate``, and a consumer over its ``consumer_byte_rate``, are throttled
to about that rate (measured over a few seconds) and told so: confluent-kafka's statistics show the broker's
throttle times (KIP-219)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer

from odradek import Broker
from odradek.protocol.api import ApiKey, decode_response, encode_request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch

RATE = 200_000
"""producer_byte_rate of the throttled client id, bytes per second."""
WINDOWS = {"quota.window.num": "3", "quota.window.size.seconds": "1", "group.initial.rebalance.delay.ms": "0"}
"""Three one-second samples: a fresh client's first two seconds of quota are spent at once."""


def test_a_producer_over_its_byte_rate_is_throttled_to_it(tmp_path: Path, connect) -> None:
    with Broker(log_dir=tmp_path, config=WINDOWS) as broker:
        wire = connect(broker.bootstrap)
        entry = {"entity": [{"entity_type": "client-id", "entity_name": "throttled"}], "ops": [{"key": "producer_byte_rate", "value": float(RATE), "remove": False}]}
        assert wire.call(ApiKey.AlterClientQuotas, 1, {"entries": [entry], "validate_only": False}).entries[0].error_code == ErrorCode.NONE

        throttles: list[int] = []

        def stats(text: str) -> None:
            for b in json.loads(text)["brokers"].values():
                if b["nodeid"] >= 0 and b["throttle"]["cnt"]:
                    throttles.append(b["throttle"]["max"])

        producer = Producer({
            "bootstrap.servers": broker.bootstrap, "client.id": "throttled", "linger.ms": 5, "batch.size": 65536,
            "compression.type": "none", "statistics.interval.ms": 500, "stats_cb": stats,
            "queue.buffering.max.kbytes": 512,  # what is queued is still sent at the rate by flush()
        })
        payload = b"x" * 10_000
        delivered = [0]

        def on_delivery(err, msg) -> None:
            if err is None:
                delivered[0] += len(msg.value())

        start = time.monotonic()
        while time.monotonic() - start < 6:
            try:
                producer.produce("quota-topic", payload, on_delivery=on_delivery)
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
        producer.flush(30)
        elapsed = time.monotonic() - start
        print(f"delivered {delivered[0]} bytes in {elapsed:.1f} s: {delivered[0] / elapsed:.0f} B/s against {RATE}; throttle times {throttles}")
        # Unthrottled this loop writes tens of MB/s here; the burst allowance is two seconds of quota.
        assert delivered[0] <= RATE * (elapsed + 2) * 1.3, (delivered[0], elapsed)
        assert delivered[0] >= RATE * elapsed * 0.6, (delivered[0], elapsed)
        assert throttles and max(throttles) > 0


def test_a_consumer_over_its_byte_rate_is_throttled_to_it(tmp_path: Path, connect) -> None:
    with Broker(log_dir=tmp_path, config=WINDOWS) as broker:
        # Batches of one record: a batch larger than the quota window's bytes would be throttled forever (as on Kafka).
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 16384, "compression.type": "none"})
        for _ in range(500):  # 5 MB: unthrottled, read in well under a second
            producer.produce("quota-reads", b"y" * 10_000)
        producer.flush(30)
        wire = connect(broker.bootstrap)
        entry = {"entity": [{"entity_type": "client-id", "entity_name": "slow-reader"}], "ops": [{"key": "consumer_byte_rate", "value": float(RATE), "remove": False}]}
        assert wire.call(ApiKey.AlterClientQuotas, 1, {"entries": [entry], "validate_only": False}).entries[0].error_code == ErrorCode.NONE

        throttles: list[int] = []

        def stats(text: str) -> None:
            for b in json.loads(text)["brokers"].values():
                if b["nodeid"] >= 0 and b["throttle"]["cnt"]:
                    throttles.append(b["throttle"]["max"])

        consumer = Consumer({
            "bootstrap.servers": broker.bootstrap, "client.id": "slow-reader", "group.id": "slow-readers", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "statistics.interval.ms": 500, "stats_cb": stats,
            "fetch.max.bytes": 100_000, "max.partition.fetch.bytes": 100_000, "message.max.bytes": 100_000,  # half a second of quota per fetch
        })
        consumer.subscribe(["quota-reads"])
        received = 0
        start = time.monotonic()
        while time.monotonic() - start < 6:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                received += len(message.value())
        elapsed = time.monotonic() - start
        consumer.close()
        print(f"received {received} bytes in {elapsed:.1f} s: {received / elapsed:.0f} B/s against {RATE}; throttle times {throttles}")
        assert received <= RATE * (elapsed + 2) * 1.3, (received, elapsed)
        assert received >= RATE * elapsed * 0.4, (received, elapsed)
        assert throttles and max(throttles) > 0


def test_requests_pipelined_behind_a_throttled_produce_wait_its_throttle_time(tmp_path: Path, connect) -> None:
    """Kafka handles one request of a connection at a time and mutes the connection for a throttled answer's
    throttle time (KIP-219), so a request the client had already sent behind it waits too: the second of two
    small pipelined produces (read from the socket together), each over the quota, is answered only after
    the first answer's throttle time."""
    rate = 1000
    with Broker(log_dir=tmp_path, config=WINDOWS) as broker:
        wire = connect(broker.bootstrap, client_id="throttled")
        entry = {"entity": [{"entity_type": "client-id", "entity_name": "throttled"}], "ops": [{"key": "producer_byte_rate", "value": float(rate), "remove": False}]}
        assert wire.call(ApiKey.AlterClientQuotas, 1, {"entries": [entry], "validate_only": False}).entries[0].error_code == ErrorCode.NONE
        topic = {"name": "pipelined", "num_partitions": 1, "replication_factor": 1}
        assert wire.call(ApiKey.CreateTopics, 7, {"topics": [topic], "timeout_ms": 5000}).topics[0].error_code == ErrorCode.NONE
        # Each request is three seconds of quota: the first alone is over the bound (a first window counts as two).
        body = {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": "pipelined", "partition_data": [{"index": 0, "records": build_batch([Record(value=b"x" * (3 * rate))])}]}]}
        wire.send(b"".join(encode_request(ApiKey.Produce, 9, correlation_id, body, client_id="throttled") for correlation_id in (1, 2)))
        first = decode_response(ApiKey.Produce, 9, wire.read_frame())[1]
        answered = time.monotonic()
        second = decode_response(ApiKey.Produce, 9, wire.read_frame())[1]
        waited_ms = (time.monotonic() - answered) * 1000
        assert first.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        assert first.throttle_time_ms > 0
        assert second.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        assert waited_ms >= first.throttle_time_ms * 0.9, (waited_ms, first.throttle_time_ms)
