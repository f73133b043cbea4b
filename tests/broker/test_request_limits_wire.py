"""Values at the edges of what a request can carry, answered as the real Kafka 3.9.1 answers them, on the wire
against both brokers: strings at Kafka's 32,767-byte limit (compact ones too), an answer that would have to
carry a longer one, numbers whose sum overflows a long (a retention, a record's timestamp), and a topic that
takes longer to create than the request's timeout.

Kafka's generated readers refuse a string over 32,767 bytes, compact or not (``string field X had invalid
length``: the request does not parse and the connection is closed), so no string a request carries is too
long for its answer to echo. An answer can still need a longer one (a member id is the client id plus a
UUID): Kafka's writer refuses it and KafkaApis answers the request's error response, UNKNOWN_SERVER_ERROR.

A record's timestamp is its batch's base timestamp plus its delta in a Java long, which wraps. Kafka appends
such a batch as it came, but its records builder refuses to write a negative timestamp other than -1: where
the broker rebuilds records (a legacy message set up-converted, a batch recompressed into the topic's codec)
the partition is answered UNKNOWN_SERVER_ERROR, and an old fetch (v0-v3) that must down-convert the record
fails as a whole, as KafkaApis answers a request it failed on.
"""

from __future__ import annotations

import struct
import time
import uuid
import zlib

import pytest

from odradek.protocol.api import ApiKey, decode_response, encode_request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, encode_batch
from odradek.protocol.records import Record, encode_record

LONGEST = 32767
LONG_MAX = 2**63 - 1


@pytest.fixture(params=["kafka", "odradek"])
def bootstrap(request, real_kafka, odradek_as_kafka) -> str:
    return real_kafka.bootstrap if request.param == "kafka" else odradek_as_kafka.bootstrap


def describe_groups_v5(group_id_bytes: int) -> bytes:
    """DescribeGroups v5 (flexible: a compact string) naming one group of ``group_id_bytes`` bytes; built by
    hand, as our encoder refuses a string over the limit."""
    frame = bytearray(encode_request(ApiKey.DescribeGroups, 5, 1, {"groups": ["g"]}, client_id="limits"))
    at = frame.index(b"\x02\x02g")  # groups: one element (compact count 2), a 1-byte string (compact length 2)
    length = group_id_bytes + 1
    varint = bytearray()
    while length >= 0x80:
        varint.append(length & 0x7F | 0x80)
        length >>= 7
    varint.append(length)
    frame[at + 1 : at + 3] = bytes(varint) + b"g" * group_id_bytes
    frame[0:4] = struct.pack(">i", len(frame) - 4)
    return bytes(frame)


def test_a_compact_string_over_32767_bytes_is_refused_when_read(bootstrap, connect) -> None:
    wire = connect(bootstrap)
    wire.send(describe_groups_v5(LONGEST + 1))
    assert wire.closed_by_peer(), "a compact string over 32,767 bytes was read"


def test_a_compact_string_of_32767_bytes_is_read_and_echoed(bootstrap, connect) -> None:
    wire = connect(bootstrap)
    wait_for_coordinator(wire, "g" * LONGEST)
    wire.send(describe_groups_v5(LONGEST))
    _, answer = decode_response(ApiKey.DescribeGroups, 5, wire.read_frame())
    assert [(g.error_code, g.group_id, g.group_state) for g in answer.groups] == [(ErrorCode.NONE, "g" * LONGEST, "Dead")]


@pytest.mark.parametrize("version", [0, 4, 9])
def test_a_member_id_too_long_to_write_is_answered_unknown_server_error(bootstrap, connect, version: int) -> None:
    """The client id of 32,767 bytes becomes the member id with "-<uuid>" after it: Kafka cannot write its
    JoinGroup answer, and answers UNKNOWN_SERVER_ERROR with every other field empty. The connection stays."""
    group = f"limits-join-{version}-{uuid.uuid4()}"
    wire = connect(bootstrap, client_id="c" * LONGEST)
    wait_for_coordinator(wire, group)
    join = {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
    answer = wire.call(ApiKey.JoinGroup, version, join)
    assert (answer.error_code, answer.member_id, answer.leader, answer.members) == (ErrorCode.UNKNOWN_SERVER_ERROR, "", "", [])
    assert wire.call(ApiKey.ApiVersions, 0, {}).error_code == ErrorCode.NONE


@pytest.mark.parametrize("retention_ms", [2**63 - 1, -(2**63), 2**62], ids=["long-max", "long-min", "2^62"])
@pytest.mark.parametrize("version", [2, 4])
def test_a_retention_time_whose_expiry_overflows_a_long_is_committed(bootstrap, connect, make_topic_on, version: int, retention_ms: int) -> None:
    """Kafka computes the expiry as now + retention in a Java long, which wraps: the commit succeeds."""
    topic = make_topic_on(bootstrap)
    group = f"limits-commit-{uuid.uuid4()}"
    wire = connect(bootstrap)
    wait_for_coordinator(wire, group)
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": retention_ms, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}]}
    answer = wire.call(ApiKey.OffsetCommit, version, body)
    assert [(p.partition_index, p.error_code) for t in answer.topics for p in t.partitions] == [(0, ErrorCode.NONE)]


def test_a_topic_not_created_within_the_timeout_is_answered_request_timed_out(bootstrap, connect) -> None:
    """Kafka answers REQUEST_TIMED_OUT for a topic not led when the request's timeout ends (its
    DelayedCreatePartitions) and goes on creating it: a retry is TOPIC_ALREADY_EXISTS, and the topic is
    there a moment later. A thousand partitions are not made in a millisecond by either broker."""
    name = f"limits-slow-{uuid.uuid4()}"
    wire = connect(bootstrap)
    wire.sock.settimeout(30)
    create = {"topics": [{"name": name, "num_partitions": 1000, "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 1}
    answered = wire.call(ApiKey.CreateTopics, 5, create).topics[0]
    assert (answered.error_code, answered.error_message, answered.num_partitions) == (ErrorCode.REQUEST_TIMED_OUT, None, -1)
    retried = wire.call(ApiKey.CreateTopics, 5, create).topics[0]
    assert (retried.error_code, retried.error_message) == (ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    deadline = time.monotonic() + 60
    while (topic := wire.call(ApiKey.Metadata, 4, {"topics": [{"name": name}], "allow_auto_topic_creation": False}).topics[0]).error_code != ErrorCode.NONE or len(topic.partitions) < 1000:
        assert time.monotonic() < deadline, f"{name} not created a minute after the request timed out"
        time.sleep(0.5)
    assert wire.call(ApiKey.DeleteTopics, 4, {"topic_names": [name], "timeout_ms": 30000}).responses[0].error_code == ErrorCode.NONE


def wrapping_batch() -> bytes:
    """A magic-2 batch based at Long.MAX_VALUE whose second record's delta of 1 wraps to Long.MIN_VALUE; built
    by hand, as our builder, like Kafka's, refuses to write a negative timestamp."""
    payload = encode_record(Record(key=b"k", value=b"max"), 0, 0) + encode_record(Record(key=b"k", value=b"wrapped"), 1, 1)
    return encode_batch(
        payload, base_offset=0, attributes=0, last_offset_delta=1, base_timestamp=LONG_MAX, max_timestamp=LONG_MAX, records_count=2,
        producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH, base_sequence=NO_SEQUENCE, partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
    )


def legacy_message(timestamp: int) -> bytes:
    """A magic-1 message set of one message at offset 0 with ``timestamp``, built by hand for the same reason."""
    body = bytes((1, 0)) + struct.pack(">qi", timestamp, 1) + b"k" + struct.pack(">i", 1) + b"v"
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def produce(wire, topic: str, version: int, records: bytes) -> tuple:
    body = {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}
    answered = wire.call(ApiKey.Produce, version, body).responses[0].partition_responses[0]
    return answered.error_code, answered.base_offset, answered.error_message


def fetch(wire, topic: str, version: int) -> tuple:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    answered = wire.call(ApiKey.Fetch, version, body).responses[0].partitions[0]
    return answered.error_code, answered.high_watermark, len(answered.records or b"")


def test_a_record_timestamp_that_wraps_is_appended_but_not_down_converted(bootstrap, connect, make_topic_on) -> None:
    topic = make_topic_on(bootstrap)
    wire = connect(bootstrap)
    assert produce(wire, topic, 9, wrapping_batch()) == (ErrorCode.NONE, 0, None)
    error, high_watermark, size = fetch(wire, topic, 12)
    assert (error, high_watermark) == (ErrorCode.NONE, 2) and size > 0
    assert fetch(wire, topic, 3) == (ErrorCode.UNKNOWN_SERVER_ERROR, -1, 0)
    assert wire.call(ApiKey.ApiVersions, 0, {}).error_code == ErrorCode.NONE


def test_a_record_timestamp_that_wraps_is_refused_where_the_batch_is_recompressed(bootstrap, connect, make_topic_on) -> None:
    topic = make_topic_on(bootstrap, configs=[{"name": "compression.type", "value": "gzip"}])
    wire = connect(bootstrap)
    assert produce(wire, topic, 9, wrapping_batch()) == (ErrorCode.UNKNOWN_SERVER_ERROR, -1, None)
    assert fetch(wire, topic, 12)[:2] == (ErrorCode.NONE, 0)


@pytest.mark.parametrize("timestamp,appended", [(-1, True), (-5, False), (-(2**63), False)], ids=["no-timestamp", "-5", "long-min"])
def test_a_legacy_message_with_a_negative_timestamp_is_refused_when_up_converted(bootstrap, connect, make_topic_on, timestamp: int, appended: bool) -> None:
    topic = make_topic_on(bootstrap)
    wire = connect(bootstrap)
    expected = (ErrorCode.NONE, 0, None) if appended else (ErrorCode.UNKNOWN_SERVER_ERROR, -1, None)
    assert produce(wire, topic, 2, legacy_message(timestamp)) == expected


@pytest.fixture
def make_topic_on(connect):
    def make(bootstrap: str, configs: list | None = None) -> str:
        name = f"limits-{uuid.uuid4()}"
        created = connect(bootstrap).call(ApiKey.CreateTopics, 4, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": configs or []}], "timeout_ms": 10000})
        assert created.topics[0].error_code == ErrorCode.NONE
        return name

    return make


def wait_for_coordinator(wire, group: str) -> None:
    """FindCoordinator until the group's coordinator is up (the first one creates the offsets topic)."""
    deadline = time.monotonic() + 30
    while (error := wire.call(ApiKey.FindCoordinator, 1, {"key": group, "key_type": 0}).error_code) != ErrorCode.NONE:
        assert error == ErrorCode.COORDINATOR_NOT_AVAILABLE and time.monotonic() < deadline, error
        time.sleep(0.2)
