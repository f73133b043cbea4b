"""Fetch on the wire: details no client library shows."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode


@pytest.fixture(scope="module")
def broker():
    with Broker() as b:
        yield b


@pytest.mark.parametrize(("isolation", "aborted"), [(0, None), (1, [])])
def test_fetch_lists_aborted_transactions_only_for_read_committed(broker, connect, isolation, aborted):
    wire = connect(broker.bootstrap)
    created = wire.call(ApiKey.CreateTopics, 7, {"topics": [{"name": f"isolation-{isolation}", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000})
    assert created.topics[0].error_code == ErrorCode.NONE
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": isolation,
        "topics": [{"topic": f"isolation-{isolation}", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
    }
    partition = wire.call(ApiKey.Fetch, 11, body).responses[0].partitions[0]
    assert partition.error_code == ErrorCode.NONE and partition.aborted_transactions == aborted


def test_zstd_is_refused_below_produce_v7(broker, connect):
    from odradek.protocol.compression import CompressionType
    from odradek.protocol.records import Record, build_batch

    wire = connect(broker.bootstrap)
    wire.call(ApiKey.CreateTopics, 7, {"topics": [{"name": "zstd-versions", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000})
    batch = build_batch([Record(value=b"z" * 50)], compression=CompressionType.ZSTD)
    body = {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": "zstd-versions", "partition_data": [{"index": 0, "records": batch}]}]}
    old = wire.call(ApiKey.Produce, 6, body).responses[0].partition_responses[0]
    assert old.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    new = wire.call(ApiKey.Produce, 7, body).responses[0].partition_responses[0]
    assert new.error_code == ErrorCode.NONE and new.base_offset == 0


def test_legacy_message_sets_are_refused_from_produce_v3(broker, connect):
    from odradek.protocol.legacy_records import build_message_set
    from odradek.protocol.records import Record

    wire = connect(broker.bootstrap)
    wire.call(ApiKey.CreateTopics, 7, {"topics": [{"name": "legacy-v3", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000})
    message_set = build_message_set([Record(0, 1_700_000_000_000, b"k", b"v")], magic=1)
    body = {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": "legacy-v3", "partition_data": [{"index": 0, "records": message_set}]}]}
    assert wire.call(ApiKey.Produce, 2, body).responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert wire.call(ApiKey.Produce, 3, body).responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD


def test_a_duplicate_batch_is_answered_with_its_original_offset_and_time(tmp_path, connect):
    from odradek.protocol.records import Record, build_batch

    with Broker(log_dir=tmp_path) as b:
        wire = connect(b.bootstrap)
        wire.call(ApiKey.CreateTopics, 7, {"topics": [{"name": "dups", "num_partitions": 1, "replication_factor": 1, "configs": [{"name": "message.timestamp.type", "value": "LogAppendTime"}]}], "timeout_ms": 5000})
        pid = wire.call(ApiKey.InitProducerId, 4, {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})
        batch = build_batch([Record(value=b"once")], producer_id=pid.producer_id, producer_epoch=pid.producer_epoch, base_sequence=0)
        body = {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": "dups", "partition_data": [{"index": 0, "records": batch}]}]}
        first = wire.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0]
        time.sleep(0.05)  # the clock moves on: a retry appended again would get a later LogAppendTime
        retry = wire.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0]
    assert first.error_code == retry.error_code == ErrorCode.NONE and first.log_append_time_ms > 0
    assert (retry.base_offset, retry.log_append_time_ms) == (first.base_offset, first.log_append_time_ms)


def test_offset_fetch_v1_puts_a_group_error_on_every_partition(tmp_path, connect):
    with Broker(log_dir=tmp_path) as b:  # no __consumer_offsets yet: this broker coordinates no group
        body = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]}
        response = connect(b.bootstrap).call(ApiKey.OffsetFetch, 1, body)
    partitions = response.topics[0].partitions
    assert [(p.partition_index, p.committed_offset, p.error_code) for p in partitions] == [
        (0, -1, ErrorCode.NOT_COORDINATOR),
        (1, -1, ErrorCode.NOT_COORDINATOR),
    ]


_TWO_PARTITIONS = f"bad-fetch-partitions-{time.time_ns() % 10**9}"
_made_on: set[str] = set()


@pytest.fixture
def two_partitions(broker, real_kafka, connect):
    """A topic with one record in each of two partitions, on odradek and on the real Kafka (made by the first
    test that asks): its name."""
    from odradek.protocol.records import Record, build_batch

    for bootstrap in (broker.bootstrap, real_kafka.bootstrap):
        if bootstrap in _made_on:
            continue
        wire = connect(bootstrap)
        created = wire.call(ApiKey.CreateTopics, 7, {"topics": [{"name": _TWO_PARTITIONS, "num_partitions": 2, "replication_factor": 1}], "timeout_ms": 10000})
        assert created.topics[0].error_code == ErrorCode.NONE
        produce = {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": _TWO_PARTITIONS, "partition_data": [{"index": p, "records": build_batch([Record(value=b"v")])} for p in (0, 1)]}]}
        deadline = time.monotonic() + 15  # Kafka elects the new partitions' leader a moment after CreateTopics
        while {p.error_code for p in wire.call(ApiKey.Produce, 9, produce).responses[0].partition_responses} != {ErrorCode.NONE}:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        _made_on.add(bootstrap)
    return _TWO_PARTITIONS


BAD_PARTITION = {
    # Kafka's segment read refuses a negative size (IllegalArgumentException): UNKNOWN_SERVER_ERROR
    "negative partition_max_bytes": ({"partition_max_bytes": -1}, [(0, ErrorCode.UNKNOWN_SERVER_ERROR, -1, False), (1, ErrorCode.NONE, 1, True)]),
    "negative fetch offset": ({"fetch_offset": -5}, [(0, ErrorCode.OFFSET_OUT_OF_RANGE, -1, False), (1, ErrorCode.NONE, 1, True)]),
    # set aside before reading, so answered after the partitions read
    "unknown partition": ({"partition": 99}, [(1, ErrorCode.NONE, 1, True), (99, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, False)]),
}


@pytest.mark.parametrize("case", list(BAD_PARTITION))
@pytest.mark.parametrize("version", [0, 4, 11])
def test_one_bad_partition_fails_only_itself(broker, real_kafka, connect, two_partitions, version, case):
    """The request as a whole succeeds and the healthy partition is served, on odradek as on Kafka."""
    override, expected = BAD_PARTITION[case]
    partitions = [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20, **override}, {"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "topics": [{"topic": two_partitions, "partitions": partitions}]}
    answers = {}
    for name, bootstrap in (("odradek", broker.bootstrap), ("kafka", real_kafka.bootstrap)):
        response = connect(bootstrap).call(ApiKey.Fetch, version, body)
        answers[name] = (getattr(response, "error_code", ErrorCode.NONE), [(p.partition_index, p.error_code, p.high_watermark, bool(p.records)) for t in response.responses for p in t.partitions])
    assert answers["odradek"] == answers["kafka"] == (ErrorCode.NONE, expected)


def test_a_large_fetch_answer_read_slowly_arrives_whole_and_in_order(broker, connect):
    """A fetch answer of ~6 MiB to a client that reads it 64 KiB at a time: the broker writes it as the
    socket makes room (many waits, the socket corked between the answer's fields and records), and it
    arrives byte for byte as a quick reader gets it, followed by the answer to the request pipelined after
    it; another connection is answered meanwhile."""
    from odradek.protocol.api import decode_response, encode_request
    from odradek.protocol.records import Record, build_batch

    wire = connect(broker.bootstrap)
    wire.call(ApiKey.CreateTopics, 7, {"topics": [{"name": "large-answer", "num_partitions": 2, "replication_factor": 1}], "timeout_ms": 5000})
    for i in range(12):
        batch = build_batch([Record(value=bytes([i]) * 250_000, key=str(n).encode()) for n in range(2)])
        body = {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": "large-answer", "partition_data": [{"index": i % 2, "records": batch}]}]}
        assert wire.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0].error_code == ErrorCode.NONE
    fetch = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 64 << 20, "isolation_level": 0,
        "topics": [{"topic": "large-answer", "partitions": [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 32 << 20} for p in (0, 1)]}],
    }
    quick = wire.call(ApiKey.Fetch, 11, fetch)
    expected = {p.partition_index: bytes(p.records) for p in quick.responses[0].partitions}
    assert all(len(records) > 2_900_000 for records in expected.values())

    slow = connect(broker.bootstrap)
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    slow.send(encode_request(ApiKey.Fetch, 11, 7, fetch) + encode_request(ApiKey.ApiVersions, 3, 8, {"client_software_name": "t", "client_software_version": "1"}))
    time.sleep(0.3)  # the broker has filled the socket and waits for room
    other = connect(broker.bootstrap)
    started = time.monotonic()
    assert other.call(ApiKey.Metadata, 12, {"topics": None, "allow_auto_topic_creation": False}).brokers
    assert time.monotonic() - started < 2

    (size,) = struct.unpack(">i", slow.read_exactly(4))
    frame = bytearray()
    while len(frame) < size:
        frame += slow.sock.recv(min(65536, size - len(frame)))
        time.sleep(0.001)
    correlation, answer = decode_response(ApiKey.Fetch, 11, bytes(frame))
    assert correlation == 7
    assert {p.partition_index: bytes(p.records) for p in answer.responses[0].partitions} == expected
    correlation, versions = decode_response(ApiKey.ApiVersions, 3, slow.read_frame())
    assert correlation == 8 and versions.error_code == ErrorCode.NONE


def test_answers_before_a_long_poll_are_not_held_back_by_it(broker, connect):
    """Requests a client pipelines are read together and their answers sent together (one send for many): but
    the answers before a request that waits (a long poll here) leave before the wait, and those after it in
    order once it is answered; 200 small requests in one write all come back, in order."""
    from odradek.protocol.api import decode_response, encode_request

    wire = connect(broker.bootstrap)
    wire.call(ApiKey.CreateTopics, 7, {"topics": [{"name": "long-poll", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000})
    versions = {"client_software_name": "t", "client_software_version": "1"}
    metadata = {"topics": None, "allow_auto_topic_creation": False}
    long_poll = {
        "replica_id": -1, "max_wait_ms": 1500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "topics": [{"topic": "long-poll", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
    }
    calls = [(ApiKey.ApiVersions, 3, versions), (ApiKey.Metadata, 12, metadata), (ApiKey.Fetch, 11, long_poll), (ApiKey.ApiVersions, 3, versions)]
    started = time.monotonic()
    wire.send(b"".join(encode_request(api, version, i, body) for i, (api, version, body) in enumerate(calls)))
    arrived = []
    for i, (api, version, _) in enumerate(calls):
        correlation, _answer = decode_response(api, version, wire.read_frame())
        arrived.append((correlation, time.monotonic() - started))
    assert [correlation for correlation, _ in arrived] == [0, 1, 2, 3]
    assert arrived[1][1] < 1.0, f"the answers before the long poll waited for it: {arrived}"
    assert arrived[2][1] >= 1.4 and arrived[3][1] >= arrived[2][1]

    many = [(ApiKey.ApiVersions, 3, versions) if i % 2 else (ApiKey.Metadata, 12, metadata) for i in range(200)]
    wire.send(b"".join(encode_request(api, version, 1000 + i, body) for i, (api, version, body) in enumerate(many)))
    assert [decode_response(api, version, wire.read_frame())[0] for api, version, _ in many] == list(range(1000, 1200))


def test_a_long_poll_is_answered_by_the_append_it_waits_for_or_at_its_wait(broker, connect):
    """Kafka's DelayedFetch, watched by a client: a fetch at the log end waits; a produce on another connection
    answers it at once with the record; a fetch asking for more bytes than arrive is answered with what there
    is once ``max_wait_ms`` passes, not before; and the long polls of clients that left are forgotten when their
    wait ends (as in Kafka, a muted connection's close is seen when its answer is sent): the purgatory holds
    nothing for them, so a broker tailed by many short-lived consumers does not grow."""
    from odradek.protocol.api import decode_response, encode_request
    from odradek.protocol.records import Record, build_batch

    topic = "tailed"
    writer = connect(broker.bootstrap)
    writer.call(ApiKey.CreateTopics, 7, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000})

    def long_poll(offset: int, min_bytes: int, max_wait_ms: int) -> dict:
        return {
            "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20, "isolation_level": 0,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}],
        }

    def produce(value: bytes) -> None:
        answer = writer.call(ApiKey.Produce, 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": build_batch([Record(value=value)])}]}]})
        assert answer["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.NONE

    def answered(wire, version: int = 11) -> tuple[dict, float]:
        _, body = decode_response(ApiKey.Fetch, version, wire.read_frame())
        return body["responses"][0]["partitions"][0], time.monotonic()

    reader = connect(broker.bootstrap)
    for offset in range(3):  # each round waits at the new log end
        reader.send(encode_request(ApiKey.Fetch, 11, offset, long_poll(offset, 1, 10_000)))
        time.sleep(0.3)  # parked
        sent = time.monotonic()
        produce(b"tail-%d" % offset)
        partition, at = answered(reader)
        assert partition["error_code"] == ErrorCode.NONE and partition["high_watermark"] == offset + 1
        assert partition["records"], "the long poll was answered without the record that completed it"
        assert at - sent < 1.0, f"the append completed the long poll {at - sent:.2f}s late"

    started = time.monotonic()
    reader.send(encode_request(ApiKey.Fetch, 11, 9, long_poll(3, 100_000, 800)))
    time.sleep(0.2)
    produce(b"too few bytes")
    partition, at = answered(reader)
    assert 0.75 <= at - started < 3.0, f"a fetch short of min_bytes was answered after {at - started:.2f}s (max_wait_ms 800)"
    assert partition["high_watermark"] == 4 and partition["records"]

    for _ in range(20):
        leaving = connect(broker.bootstrap)
        leaving.send(encode_request(ApiKey.Fetch, 11, 1, long_poll(4, 1, 1000)))
        time.sleep(0.05)
        leaving.close()
    purgatory = broker.server.replica_manager.purgatory
    assert purgatory._watchers.get((topic, 0)), "the long polls were not waiting"
    deadline = time.monotonic() + 10
    while purgatory._watchers.get((topic, 0)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not purgatory._watchers.get((topic, 0)), f"{len(purgatory._watchers[(topic, 0)])} long polls of closed connections still watched"
