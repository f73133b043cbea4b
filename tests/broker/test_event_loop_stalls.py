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
from typing import Any, Callable

import pytest
import zstandard

from odradek import Broker
from odradek.protocol.api import ApiKey, decode_response, encode_request
from odradek.protocol.compression import CompressionType
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import encode_batch
from odradek.protocol.records import Record, build_batch, encode_varint

STALL_BOUND_S = 0.4
"""The slowest small round trip allowed while the broker is busy. Idle, one takes about a millisecond, but on
a loaded machine (2 cores shared with other tests) the slowest of a few thousand takes up to ~0.3 s; with
the work on the event loop a round trip waited for all of it: 0.9 s or more for the produce below, 1.4 s
for the retention pass."""


HEAVY_ANSWER_TIMEOUT_S = 120.0
"""How long the client producing the large batches waits for its one answer (see its test)."""


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


def produce(wire: Any, topic: str, *records: bytes) -> list[int]:
    """Produce ``records[i]`` to partition i, in one request: each partition's error code."""
    partitions = [{"index": i, "records": batch} for i, batch in enumerate(records)]
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [{"name": topic, "partition_data": partitions}]}
    return [p.error_code for p in wire.call(ApiKey.Produce, 9, body).responses[0].partition_responses]


def create_topic(wire: Any, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    configs_ = [{"name": k, "value": v} for k, v in (configs or {}).items()]
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": configs_}], "timeout_ms": 60000}
    assert wire.call(ApiKey.CreateTopics, 4, body).topics[0].error_code == ErrorCode.NONE


def slowest_round_trip(wire: Any, request: Callable[[Any], None], busy: threading.Thread) -> tuple[float, int]:
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


def test_large_compressed_batches_do_not_stall_other_producers(odradek, connect):
    """While one client produces, in one request, four records of 50 MiB of zeros (zstd, a few KiB on the
    wire) and four bombs of 200 MiB, another's one-record produces each answer within the bound."""
    heavy, light = connect(odradek.bootstrap, "heavy"), connect(odradek.bootstrap, "light")
    # The heavy request's answer comes once the broker has walked 1.2 GiB: seconds idle, more than the
    # connection's default 10 s on a loaded machine -- a client waits for it as Kafka's clients wait
    # request.timeout.ms, and only the light client's round trips are bounded.
    heavy.sock.settimeout(HEAVY_ANSWER_TIMEOUT_S)
    create_topic(heavy, "zeros", 8)
    create_topic(light, "small")
    large, bomb = zeros_record_zstd(50 << 20), zeros_record_zstd(200 << 20)
    small = build_batch([Record(key=b"k", value=b"v")])
    assert produce(light, "small", small) == [ErrorCode.NONE]
    answers: list[int] = []
    busy = threading.Thread(target=lambda: answers.extend(produce(heavy, "zeros", *[large, bomb] * 4)))
    started = time.monotonic()
    busy.start()
    slowest, count = slowest_round_trip(light, lambda wire: assert_produced(wire, "small", small), busy)
    busy.join()
    print(f"\nthe large batches took {time.monotonic() - started:.1f} s; {count} small produces meanwhile, the slowest {slowest * 1000:.0f} ms")
    assert answers == [ErrorCode.NONE, ErrorCode.MESSAGE_TOO_LARGE] * 4
    assert count > 20
    assert slowest < STALL_BOUND_S, f"a small produce took {slowest * 1000:.0f} ms while large batches were validated"


def assert_produced(wire: Any, topic: str, records: bytes) -> None:
    assert produce(wire, topic, records) == [ErrorCode.NONE]


def test_a_small_batch_pipelined_behind_a_large_one_is_appended_after_it(odradek, connect):
    """Produces pipelined on one connection to one partition are appended in the order sent, though the
    first is walked on a worker thread: a 50 MiB record, then a small one, get offsets 0 and 1."""
    wire = connect(odradek.bootstrap)
    create_topic(wire, "pipelined")
    bodies = [
        {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [{"name": "pipelined", "partition_data": [{"index": 0, "records": records}]}]}
        for records in (zeros_record_zstd(50 << 20), build_batch([Record(key=b"k", value=b"v")]))
    ]
    wire.send(b"".join(encode_request(ApiKey.Produce, 9, correlation_id, body) for correlation_id, body in enumerate(bodies)))
    answers = [decode_response(ApiKey.Produce, 9, wire.read_frame()) for _ in bodies]
    assert [(correlation_id, r.responses[0].partition_responses[0].base_offset) for correlation_id, r in answers] == [(0, 0), (1, 1)]


PARTITIONS, SEGMENTS = 20, 11


def test_a_retention_pass_deleting_many_segments_does_not_stall_clients(tmp_path, connect):
    """A topic of 20 partitions holding 11 segments each of hour-old records, then given retention.ms of
    an hour: the next retention pass deletes 200 segments (as the first pass after a broker was down a
    while would; on the event loop it held every client for 1.4 s), and another client's metadata requests
    keep answering within the bound meanwhile."""
    with Broker(log_dir=tmp_path, subprocess=True, config={"log.retention.check.interval.ms": 500}) as broker:
        wire, light = connect(broker.bootstrap), connect(broker.bootstrap, "light")
        create_topic(wire, "aged", PARTITIONS, {"segment.bytes": "200", "retention.ms": "-1"})
        hour_ago = int(time.time() * 1000) - 3_600_000
        old = build_batch([Record(timestamp=hour_ago, key=b"k", value=bytes(100))])
        for _ in range(SEGMENTS):  # each batch rolls a new segment
            assert produce(wire, "aged", *[old] * PARTITIONS) == [ErrorCode.NONE] * PARTITIONS
        alter = {"resources": [{"resource_type": 2, "resource_name": "aged", "configs": [{"name": "retention.ms", "config_operation": 0, "value": "3599000"}]}], "validate_only": False}
        assert wire.call(ApiKey.IncrementalAlterConfigs, 0, alter).responses[0].error_code == ErrorCode.NONE
        metadata = {"topics": [{"name": "aged"}], "allow_auto_topic_creation": False}
        last = f"Deleting segment {SEGMENTS - 2} of aged-{PARTITIONS - 1}"
        busy = threading.Thread(target=wait_for_line, args=(broker, last, 30.0))
        busy.start()
        slowest, count = slowest_round_trip(light, lambda w: w.call(ApiKey.Metadata, 4, metadata), busy)
        assert any(last in line for line in broker.output), "the retention pass did not end in time"
        assert count > 20
        assert slowest < STALL_BOUND_S, f"a metadata request took {slowest * 1000:.0f} ms during the retention pass"


def wait_for_line(broker: Broker, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not any(text in line for line in list(broker.output)):
        time.sleep(0.05)
