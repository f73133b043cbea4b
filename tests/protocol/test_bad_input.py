"""Hostile and broken input: the decoder raises DecodeError (or, for request framing, its subclasses
UnknownApiKey and UnsupportedApiVersion) and nothing else, promptly, without allocating for lengths the input
cannot hold. The broker turns DecodeError into a closed connection; any other exception would be a crash."""

from __future__ import annotations

import os
import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.api import APIS, UnknownApiKey, UnsupportedApiVersion, decode_request, decode_response, encode_request
from odradek.protocol.messages import headers
from odradek.protocol.schema import DecodeError, Message, decode

pytestmark = pytest.mark.timeout(120)

FUZZ = settings(max_examples=int(os.environ.get("ODRADEK_FUZZ_EXAMPLES", "400")), deadline=None, database=None, suppress_health_check=list(HealthCheck))


def request_header(api_key: int, version: int, client_id: bytes = b"\x00\x01c", flexible: bool = False) -> bytes:
    return struct.pack(">hhi", api_key, version, 1) + client_id + (b"\x00" if flexible else b"")


def assert_refused(frame: bytes) -> DecodeError:
    with pytest.raises(DecodeError) as caught:
        decode_request(frame)
    return caught.value


# ----------------------------------------------------------------------------------------------------------
# Valid frames of several APIs and versions, classic and flexible, to truncate and mutate.

TOPIC_ID = uuid.UUID("5e9e2f2c-44c1-4c1e-8f5d-0b0c0d0e0f10")

VALID_REQUESTS: list[tuple[str, int, int, dict[str, Any]]] = [
    ("produce-v3", 0, 3, {"transactional_id": "tx", "acks": -1, "timeout_ms": 30000, "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": b"\x00" * 80}]}]}),
    ("produce-v9", 0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 100, "topic_data": [{"name": "t", "partition_data": [{"index": 3, "records": b"batch" * 20}, {"index": 4, "records": None}]}]}),
    ("fetch-v4", 1, 4, {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 42, "partition_max_bytes": 1 << 20}]}]}),
    ("fetch-v15", 1, 15, {"cluster_id": "c1", "replica_state": {"replica_id": 2, "replica_epoch": 7}, "max_wait_ms": 500, "min_bytes": 1, "topics": [{"topic_id": TOPIC_ID, "partitions": [{"partition": 1, "fetch_offset": 9, "partition_max_bytes": 100}]}], "forgotten_topics_data": [{"topic_id": TOPIC_ID, "partitions": [5, 6]}], "rack_id": "r"}),
    ("metadata-v1", 3, 1, {"topics": [{"name": "a"}, {"name": "bb"}]}),
    ("metadata-v12", 3, 12, {"topics": [{"topic_id": TOPIC_ID, "name": None}, {"name": "x"}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": True}),
    ("api-versions-v3", 18, 3, {"client_software_name": "librdkafka", "client_software_version": "2.5.0"}),
    ("join-group-v9", 11, 9, {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 300000, "member_id": "", "group_instance_id": "i", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"\x00\x01meta"}], "reason": "why"}),
    ("create-topics-v4", 19, 4, {"topics": [{"name": "t", "num_partitions": -1, "replication_factor": -1, "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}], "configs": [{"name": "cleanup.policy", "value": None}]}], "timeout_ms": 1000, "validate_only": True}),
    ("controlled-shutdown-v0", 7, 0, {"broker_id": 1}),
]


def valid_frame(api_key: int, version: int, body: dict[str, Any]) -> bytes:
    return encode_request(api_key, version, 77, body, client_id="client")[4:]


@pytest.mark.parametrize("api_key,version,body", [r[1:] for r in VALID_REQUESTS], ids=[r[0] for r in VALID_REQUESTS])
def test_every_truncation_is_refused(api_key: int, version: int, body: dict[str, Any]) -> None:
    frame = valid_frame(api_key, version, body)
    assert decode_request(frame).header.api_key == api_key  # the whole frame is valid
    for size in range(len(frame)):
        error = assert_refused(frame[:size])
        assert not isinstance(error, (UnknownApiKey, UnsupportedApiVersion)), size


@pytest.mark.parametrize("api_key,version,body", [r[1:] for r in VALID_REQUESTS], ids=[r[0] for r in VALID_REQUESTS])
def test_trailing_bytes_are_ignored_as_kafka_ignores_them(api_key: int, version: int, body: dict[str, Any]) -> None:
    """Kafka's request parsing reads the fields and does not check for a remainder; clients rely on it."""
    frame = valid_frame(api_key, version, body)
    assert decode_request(frame + b"\x01\x00\x00").body == decode_request(frame).body


def test_librdkafka_admin_metadata_v12_with_extra_bytes_decodes() -> None:
    """The exact frame confluent-kafka 2.16's AdminClient.list_topics() sends (captured on the wire)."""
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    request = decode_request(frame)
    assert request.header.client_id == "rdkafka"
    assert request.body.topics is None and request.body.allow_auto_topic_creation is False


@FUZZ
@given(frame=st.binary(max_size=300))
def test_random_frames_decode_or_raise_decode_error(frame: bytes) -> None:
    try:
        decode_request(frame)
    except DecodeError:
        pass


@FUZZ
@given(
    target=st.sampled_from([(key, v) for key, api in APIS.items() for v in api.request.versions()]),
    body=st.binary(max_size=200),
)
def test_random_bodies_behind_a_valid_header_decode_or_raise_decode_error(target: tuple[int, int], body: bytes) -> None:
    api_key, version = target
    flexible = APIS[api_key].request.is_flexible(version)
    frame = request_header(api_key, version, flexible=flexible) if (api_key, version) != (7, 0) else struct.pack(">hhi", 7, 0, 1)
    try:
        decode_request(frame + body)
    except (UnknownApiKey, UnsupportedApiVersion):
        raise AssertionError("a valid header was refused")
    except DecodeError:
        pass


@FUZZ
@given(
    target=st.sampled_from([(key, v) for key, api in APIS.items() for v in api.response.versions()]),
    frame=st.binary(max_size=200),
)
def test_random_responses_decode_or_raise_decode_error(target: tuple[int, int], frame: bytes) -> None:
    try:
        decode_response(*target, frame)
    except DecodeError:
        pass


@FUZZ
@given(
    which=st.sampled_from([r[1:] for r in VALID_REQUESTS]),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255), st.sampled_from(["set", "insert", "delete"])), min_size=1, max_size=4),
)
def test_mutated_frames_decode_or_raise_decode_error(which: tuple[int, int, dict[str, Any]], edits: list[tuple[int, int, str]]) -> None:
    frame = bytearray(valid_frame(*which))
    for position, byte, kind in edits:
        at = position % (len(frame) + 1)
        if kind == "insert":
            frame.insert(at, byte)
        elif at < len(frame):
            if kind == "set":
                frame[at] = byte
            else:
                del frame[at]
    try:
        decode_request(bytes(frame))
    except DecodeError:
        pass


# ----------------------------------------------------------------------------------------------------------
# Specific hostile encodings.

METADATA_V1 = request_header(3, 1)
METADATA_V9 = request_header(3, 9, flexible=True)
PRODUCE_V3_TOPIC = request_header(0, 3) + b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\x00\x00\x00\x01" + b"\x00\x01t"
PRODUCE_V9_TOPIC = request_header(0, 9, flexible=True) + b"\x00" + b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\x02" + b"\x02t"
FETCH_V12_CLUSTER_C = valid_frame(1, 12, {"cluster_id": "c", "max_wait_ms": 1, "min_bytes": 1})
assert FETCH_V12_CLUSTER_C.endswith(b"\x01\x00\x02\x02c")  # tagged section: one field, tag 0, 2 bytes

HOSTILE: list[tuple[str, bytes]] = [
    ("array-count-2^31-1", METADATA_V1 + b"\x7f\xff\xff\xff" + b"\x00\x01a"),
    ("array-count-negative-2", METADATA_V1 + b"\xff\xff\xff\xfe"),
    ("array-count-min-int32", METADATA_V1 + b"\x80\x00\x00\x00"),
    ("non-nullable-array-null", PRODUCE_V3_TOPIC[:-7] + b"\xff\xff\xff\xff"),
    ("compact-array-count-huge", METADATA_V9 + b"\xff\xff\xff\xff\x07" + b"\x02a"),
    ("string-length-32767-few-bytes", METADATA_V1 + b"\x00\x00\x00\x01" + b"\x7f\xffabc"),
    ("string-length-negative-2", METADATA_V1 + b"\x00\x00\x00\x01" + b"\xff\xfe"),
    ("nullable-string-length-negative-2", request_header(0, 3) + b"\xff\xfe" + b"\x00\x01\x00\x00\x03\xe8\x00\x00\x00\x00"),
    ("client-id-length-negative-2", request_header(3, 1, client_id=b"\xff\xfe") + b"\x00\x00\x00\x00"),
    ("client-id-invalid-utf8", request_header(3, 1, client_id=b"\x00\x02\xc3\x28") + b"\x00\x00\x00\x00"),
    ("topic-name-invalid-utf8", METADATA_V1 + b"\x00\x00\x00\x01" + b"\x00\x02\xff\xfe"),
    ("compact-topic-name-invalid-utf8", METADATA_V9 + b"\x02" + b"\x03\xed\xa0\x80" + b"\x00" + b"\x01\x00\x00\x00"),
    ("compact-string-length-huge", METADATA_V9 + b"\x02" + b"\xff\xff\xff\xff\x07abc"),
    ("records-length-2^31-1", PRODUCE_V3_TOPIC + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00" + b"\x7f\xff\xff\xff" + b"abc"),
    ("records-length-negative-2", PRODUCE_V3_TOPIC + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xfe"),
    ("compact-records-length-huge", PRODUCE_V9_TOPIC + b"\x02" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff\x0f" + b"abc"),
    ("bytes-length-2^31-1", request_header(36, 1) + b"\x7f\xff\xff\xff" + b"abc"),
    ("bytes-length-negative-2", request_header(36, 1) + b"\xff\xff\xff\xfe"),
    ("varint-six-bytes", METADATA_V9 + b"\x80\x80\x80\x80\x80\x01"),
    ("varint-unterminated", METADATA_V9 + b"\x80\x80\x80"),
    ("tagged-count-huge", request_header(18, 3, flexible=False) + b"\xff\xff\xff\xff\x07"),
    ("tagged-size-huge", request_header(18, 3, flexible=False) + b"\x01\x00\xff\xff\xff\xff\x07"),
    ("tagged-fields-out-of-order", request_header(18, 3, flexible=False) + b"\x02\x05\x00\x01\x00" + b"\x01\x00\x01\x00\x00"),
    ("tagged-fields-duplicate", request_header(18, 3, flexible=False) + b"\x02\x05\x00\x05\x00" + b"\x01\x00\x01\x00\x00"),
    ("known-tag-with-trailing-bytes", FETCH_V12_CLUSTER_C.removesuffix(b"\x01\x00\x02\x02c") + b"\x01\x00\x03\x02cX"),
    ("shorter-than-a-header", b"\x00\x03\x00\x01\x00\x00\x00"),
    ("empty", b""),
]


@pytest.mark.parametrize("frame", [h[1] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_encodings_are_refused(frame: bytes) -> None:
    error = assert_refused(frame)
    assert not isinstance(error, (UnknownApiKey, UnsupportedApiVersion))


@pytest.mark.parametrize("message", [headers.REQUEST_HEADER, headers.RESPONSE_HEADER], ids=["request", "response"])
@FUZZ
@given(data=st.binary(max_size=40), version=st.integers(0, 1))
def test_random_headers_decode_or_raise_decode_error(message: Message, data: bytes, version: int) -> None:
    try:
        decode(message, version, data, exact=False)
    except DecodeError:
        pass
