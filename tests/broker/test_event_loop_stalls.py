"""Work that takes long runs off the broker's event loop: other clients' round trips stay fast meanwhile.

Kafka decompresses produced batches on its request handler threads and runs retention on its scheduler's,
never on the network threads every client shares; odradek walks a large batch on a worker thread and runs
its periodic storage duties on one. Each test times a second client's small requests while a first keeps
the broker busy, against a broker in its own process (the test's threads do not share its GIL).
"""

from __future__ import annotations

import io
import threading
import time
from typing import Callable

import pytest
import zstandard

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.compression import CompressionType
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import encode_batch
from odradek.protocol.records import Record, build_batch, encode_varint

from tests.conftest import Wire

STALL_BOUND_S = 0.4
"""The slowest small round trip allowed while the broker is busy. Idle, one takes about a millisecond, but on
a loaded machine (2 cores shared with other tests) the slowest of a few thousand takes up to ~0.3 s; with
the work on the event loop a round trip waited for all of it: 0.9 s or more for the produce below, seconds
for the retention pass."""


def zeros_record_zstd(size: int) -> bytes:
    """One record whose value is ``size`` zero bytes, as a zstd frame that does not declare its size (as the
    Java client and librdkafka write them, so the broker must decode to learn it). Built in 1 MiB steps."""
    body_head = b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(1) + b"k" + encode_varint(size)
    body_tail = encode_varint(0)  # no headers
    out = io.BytesIO()
    with zstandard.ZstdCompressor(level=1, write_content_size=False).stream_writer(out, closefd=False) as writer:
        writer.write(encode_varint(len(body_head) + size + len(body_tail)) + body_head)
        zeros = bytes(1 << 20)
        for _ in range(size >> 20):
            writer.write(zeros)
        writer.write(body_tail)
    now = int(time.time() * 1000)
    return encode_batch(out.getvalue(), base_offset=0, attributes=CompressionType.ZSTD, last_offset_delta=0, base_timestamp=now, max_timestamp=now, records_count=1)


def produce(wire: Wire, topic: str, *records: bytes) -> list[int]:
    """Produce ``records[i]`` to partition i, in one request: each partition's error code."""
    partitions = [{"index": i, "records": batch} for i, batch in enumerate(records)]
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [{"name": topic, "partition_data": partitions}]}
    return [p.error_code for p in wire.call(ApiKey.Produce, 9, body).responses[0].partition_responses]


def create_topic(wire: Wire, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    configs_ = [{"name": k, "value": v} for k, v in (configs or {}).items()]
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": configs_}], "timeout_ms": 60000}
    assert wire.call(ApiKey.CreateTopics, 4, body).topics[0].error_code == ErrorCode.NONE


def slowest_round_trip(wire: Wire, request: Callable[[Wire], None], busy: threading.Thread) -> tuple[float, int]:
    """The slowest of ``request``'s round trips while ``busy`` runs, and how many were made."""
    slowest, count = 0.0, 0
    while busy.is_alive():
        started = time.perf_counter()
        request(wire)
        slowest = max(slowest, time.perf_counter() - started)
        count += 1
    return slowest, count


@pytest.fixture(scope="module")
def odradek(tmp_path_factory):
    with Broker(log_dir=tmp_path_factory.mktemp("loop-stalls"), subprocess=True) as broker:
        yield broker


def test_large_compressed_batches_do_not_stall_other_producers(odradek):
    """While one client produces, in one request, four records of 50 MiB of zeros (zstd, a few KiB on the
    wire) and four bombs of 200 MiB, another's one-record produces each answer within the bound."""
    heavy, light = Wire(odradek.bootstrap, "heavy"), Wire(odradek.bootstrap, "light")
    try:
        create_topic(heavy, "zeros", 8)
        create_topic(light, "small")
        large, bomb = zeros_record_zstd(50 << 20), zeros_record_zstd(200 << 20)
        small = build_batch([Record(key=b"k", value=b"v")])
        assert produce(light, "small", small) == [ErrorCode.NONE]
        answers: list[int] = []
        busy = threading.Thread(target=lambda: answers.extend(produce(heavy, "zeros", *[large, bomb] * 4)))
        busy.start()
        slowest, count = slowest_round_trip(light, lambda wire: assert_produced(wire, "small", small), busy)
        busy.join()
        assert answers == [ErrorCode.NONE, ErrorCode.MESSAGE_TOO_LARGE] * 4
        assert count > 20
        assert slowest < STALL_BOUND_S, f"a small produce took {slowest * 1000:.0f} ms while large batches were validated"
    finally:
        heavy.close()
        light.close()


def assert_produced(wire: Wire, topic: str, records: bytes) -> None:
    assert produce(wire, topic, records) == [ErrorCode.NONE]


def test_the_first_retention_pass_after_a_restart_does_not_stall_clients(tmp_path):
    """2,000 partitions, restarted: the first retention pass (1 s after the start here, Kafka's 30 s by
    default) opens every log; another client's metadata requests keep answering within the bound meanwhile.
    The pass ends with the last partition, whose old segment it deletes."""
    with Broker(log_dir=tmp_path, subprocess=True) as broker:
        wire = Wire(broker.bootstrap)
        try:
            for topic in range(4):
                create_topic(wire, f"many-{topic}", 500)
            create_topic(wire, "zz-aged", configs={"segment.bytes": "100", "retention.ms": "1000"})
            for _ in range(2):  # the second batch rolls a new segment: the first may go
                assert produce(wire, "zz-aged", build_batch([Record(key=b"k", value=bytes(100))])) == [ErrorCode.NONE]
        finally:
            wire.close()
        time.sleep(1.0)  # past the aged segment's retention.ms
        broker.props["log.retention.check.interval.ms"] = "1000"
        broker.restart()
        wire = Wire(broker.bootstrap)
        try:
            metadata = {"topics": [{"name": "many-0"}], "allow_auto_topic_creation": False}
            busy = threading.Thread(target=time.sleep, args=(6.0,))  # past the first pass
            busy.start()
            slowest, count = slowest_round_trip(wire, lambda w: w.call(ApiKey.Metadata, 4, metadata), busy)
            assert any("Deleting segment 0 of zz-aged-0" in line for line in broker.output), "the first retention pass did not end in time"
            assert count > 100
            assert slowest < STALL_BOUND_S, f"a metadata request took {slowest * 1000:.0f} ms during the first retention pass"
        finally:
            wire.close()
