"""The schema compiler against hand-written bytes from Kafka's protocol guide (protocol.html, "Protocol Primitive
Types"), plus its two performance promises: records decode without a copy, and encode_parts leaves room for
record data sent separately."""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from odradek.protocol.api import decode_request, encode_request, encode_response
from odradek.protocol.messages import fetch, headers, produce
from odradek.protocol.schema import Array, DecodeError, F, Message, S, decode, encode, encode_frame, encode_parts

CLASSIC = "none"  # message flexible versions: int16/int32 lengths, no tagged fields
FLEXIBLE = "0+"  # compact lengths, a tagged-field section closing every struct


def one_field_message(flexible: str, *fields: F) -> Message:
    return Message("Golden", "0", flexible, *fields)


UUID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
POINT = S("Point", F("X", "int32"))

# (case id, message flexible versions, fields, value, exact bytes on the wire)
GOLDEN: list[tuple[str, str, tuple[F, ...], dict[str, Any], bytes]] = [
    ("bool", CLASSIC, (F("V", "bool"),), {"v": True}, b"\x01"),
    ("int8", CLASSIC, (F("V", "int8"),), {"v": -1}, b"\xff"),
    ("int16", CLASSIC, (F("V", "int16"),), {"v": 0x1234}, b"\x12\x34"),
    ("uint16", CLASSIC, (F("V", "uint16"),), {"v": 65535}, b"\xff\xff"),
    ("int32", CLASSIC, (F("V", "int32"),), {"v": -2}, b"\xff\xff\xff\xfe"),
    ("int64", CLASSIC, (F("V", "int64"),), {"v": 2**40 + 1}, b"\x00\x00\x01\x00\x00\x00\x00\x01"),
    ("float64", CLASSIC, (F("V", "float64"),), {"v": 3.5}, b"\x40\x0c\x00\x00\x00\x00\x00\x00"),
    ("uuid", CLASSIC, (F("V", "uuid"),), {"v": UUID}, bytes.fromhex("00112233445566778899aabbccddeeff")),
    ("string", CLASSIC, (F("V", "string"),), {"v": "abc"}, b"\x00\x03abc"),
    ("string-utf8", CLASSIC, (F("V", "string"),), {"v": "é"}, b"\x00\x02\xc3\xa9"),
    ("nullable-string-null", CLASSIC, (F("V", "string", nullable="0+"),), {"v": None}, b"\xff\xff"),
    ("compact-string", FLEXIBLE, (F("V", "string"),), {"v": "abc"}, b"\x04abc\x00"),
    ("compact-string-empty", FLEXIBLE, (F("V", "string"),), {"v": ""}, b"\x01\x00"),
    ("compact-nullable-string-null", FLEXIBLE, (F("V", "string", nullable="0+"),), {"v": None}, b"\x00\x00"),
    ("bytes", CLASSIC, (F("V", "bytes"),), {"v": b"\x01\x02"}, b"\x00\x00\x00\x02\x01\x02"),
    ("nullable-bytes-null", CLASSIC, (F("V", "bytes", nullable="0+"),), {"v": None}, b"\xff\xff\xff\xff"),
    ("compact-bytes", FLEXIBLE, (F("V", "bytes"),), {"v": b"\x01\x02"}, b"\x03\x01\x02\x00"),
    ("compact-nullable-bytes-null", FLEXIBLE, (F("V", "bytes", nullable="0+"),), {"v": None}, b"\x00\x00"),
    ("array-int32-count", CLASSIC, (F("V", Array("int32")),), {"v": [1, 2]}, b"\x00\x00\x00\x02" + b"\x00\x00\x00\x01\x00\x00\x00\x02"),
    ("array-empty", CLASSIC, (F("V", Array("int32")),), {"v": []}, b"\x00\x00\x00\x00"),
    ("nullable-array-null", CLASSIC, (F("V", Array("int32"), nullable="0+"),), {"v": None}, b"\xff\xff\xff\xff"),
    ("compact-array-count-plus-one", FLEXIBLE, (F("V", Array("int32")),), {"v": [1, 2]}, b"\x03" + b"\x00\x00\x00\x01\x00\x00\x00\x02\x00"),
    ("compact-nullable-array-null", FLEXIBLE, (F("V", Array("int32"), nullable="0+"),), {"v": None}, b"\x00\x00"),
    ("array-of-strings-compact", FLEXIBLE, (F("V", Array("string")),), {"v": ["a"]}, b"\x02\x02a\x00"),
    # Array elements that are structs close with their own tagged-field section in flexible versions.
    ("compact-array-of-structs", FLEXIBLE, (F("V", Array(POINT)),), {"v": [{"x": 1}]}, b"\x02\x00\x00\x00\x01\x00\x00"),
    ("nullable-struct-null", CLASSIC, (F("V", POINT, nullable="0+"),), {"v": None}, b"\xff"),
    ("nullable-struct-present", CLASSIC, (F("V", POINT, nullable="0+"),), {"v": {"x": 7}}, b"\x01\x00\x00\x00\x07"),
    ("struct", CLASSIC, (F("V", POINT),), {"v": {"x": 7}}, b"\x00\x00\x00\x07"),
    ("records", CLASSIC, (F("V", "records", nullable="0+"),), {"v": b"abc"}, b"\x00\x00\x00\x03abc"),
    ("records-null", CLASSIC, (F("V", "records", nullable="0+"),), {"v": None}, b"\xff\xff\xff\xff"),
    ("compact-records", FLEXIBLE, (F("V", "records", nullable="0+"),), {"v": b"abc"}, b"\x04abc\x00"),
    # Tagged fields: count, then (tag, size, value) in ascending tag order; fields at their default are omitted.
    (
        "tagged-section",
        FLEXIBLE,
        (F("A", "int32"), F("T", "string", tag=0, tagged="0+"), F("U", "int32", tag=5, tagged="0+", default=-1)),
        {"a": 1, "t": "hi", "u": 7},
        b"\x00\x00\x00\x01" + b"\x02" + b"\x00\x03\x03hi" + b"\x05\x04\x00\x00\x00\x07",
    ),
    (
        "tagged-at-default-omitted",
        FLEXIBLE,
        (F("A", "int32"), F("T", "string", tag=0, tagged="0+"), F("U", "int32", tag=5, tagged="0+", default=-1)),
        {"a": 1, "t": "", "u": -1},
        b"\x00\x00\x00\x01\x00",
    ),
    # A field-level flexibleVersions of "none" keeps the classic encoding inside a flexible message (RequestHeader).
    ("field-not-flexible", FLEXIBLE, (F("V", "string", flexible="none"),), {"v": "ab"}, b"\x00\x02ab\x00"),
]


@pytest.mark.parametrize("flexible,fields,value,wire", [g[1:] for g in GOLDEN], ids=[g[0] for g in GOLDEN])
def test_golden_bytes(flexible: str, fields: tuple[F, ...], value: dict[str, Any], wire: bytes) -> None:
    message = one_field_message(flexible, *fields)
    assert encode(message, 0, value) == wire
    decoded, end = decode(message, 0, wire)
    assert end == len(wire)
    for key, want in value.items():
        got = decoded[key]
        assert (bytes(got) if isinstance(got, memoryview) else got) == want


# Unsigned varints, written raw as tag numbers: 7 bits per byte, least significant group first.
VARINTS = [(0, b"\x00"), (127, b"\x7f"), (128, b"\x80\x01"), (16383, b"\xff\x7f"), (16384, b"\x80\x80\x01"), (2**31 - 1, b"\xff\xff\xff\xff\x07")]


@pytest.mark.parametrize("tag,varint", VARINTS, ids=[str(v[0]) for v in VARINTS])
def test_unsigned_varint_as_tag_number(tag: int, varint: bytes) -> None:
    message = one_field_message(FLEXIBLE, F("V", "bool", tag=tag, tagged="0+"))
    wire = b"\x01" + varint + b"\x01\x01"  # one tagged field: tag, size 1, true
    assert encode(message, 0, {"v": True}) == wire
    assert decode(message, 0, wire)[0].v is True


@pytest.mark.parametrize("tag,varint", VARINTS, ids=[str(v[0]) for v in VARINTS])
def test_unknown_tagged_fields_are_kept_and_reencoded(tag: int, varint: bytes) -> None:
    message = one_field_message(FLEXIBLE, F("A", "int8"))
    wire = b"\x07" + b"\x01" + varint + b"\x02\xbe\xef"
    decoded, _ = decode(message, 0, wire)
    assert decoded.a == 7
    assert decoded._unknown_tags == {tag: b"\xbe\xef"}
    assert encode(message, 0, decoded) == wire


@pytest.mark.parametrize("length,prefix", [(126, b"\x7f"), (127, b"\x80\x01"), (16382, b"\xff\x7f"), (16383, b"\x80\x80\x01")])
def test_compact_length_varint_edges(length: int, prefix: bytes) -> None:
    message = one_field_message(FLEXIBLE, F("V", "bytes"))
    data = bytes(range(256)) * (length // 256) + bytes(length % 256)
    wire = prefix + data + b"\x00"
    assert encode(message, 0, {"v": data}) == wire
    assert decode(message, 0, wire)[0].v == data


def test_fields_absent_from_a_version_decode_to_their_default() -> None:
    message = Message("Versioned", "0-1", "none", F("A", "int32"), F("B", "int64", "1+", default=-1), F("C", "string", "1+", nullable="1+"))
    decoded, _ = decode(message, 0, b"\x00\x00\x00\x05")
    assert decoded == {"a": 5, "b": -1, "c": ""}
    assert encode(message, 1, {"a": 5}) == b"\x00\x00\x00\x05" + b"\xff" * 8 + b"\x00\x00"


def test_null_in_a_non_nullable_field_is_refused_both_ways() -> None:
    message = one_field_message(CLASSIC, F("V", "string"))
    with pytest.raises(DecodeError):
        decode(message, 0, b"\xff\xff")
    with pytest.raises(ValueError):
        encode(message, 0, {"v": None})


def test_trailing_bytes_are_an_error_unless_asked_for_the_end() -> None:
    message = one_field_message(CLASSIC, F("V", "int16"))
    with pytest.raises(DecodeError):
        decode(message, 0, b"\x00\x01\x02")
    assert decode(message, 0, b"\x00\x01\x02", exact=False) == ({"v": 1}, 2)
    assert decode(message, 0, b"\x09\x00\x01", 1) == ({"v": 1}, 3)


# ----------------------------------------------------------------------------------------------------------
# Zero-copy records.


def produce_v3_body(records: bytes) -> bytes:
    return encode(
        produce.REQUEST,
        3,
        {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]},
    )


def test_records_decode_to_a_view_of_the_input_bytes() -> None:
    records = b"R" * 100
    data = produce_v3_body(records)
    body, _ = decode(produce.REQUEST, 3, data)
    view = body.topic_data[0].partition_data[0].records
    assert isinstance(view, memoryview)
    assert view.obj is data
    assert view == records


def test_records_from_a_bytearray_are_writable_views_of_it() -> None:
    """The broker patches base offsets and leader epochs into produced batches in place, through the view."""
    source = bytearray(produce_v3_body(b"R" * 10))
    body, _ = decode(produce.REQUEST, 3, source)
    view = body.topic_data[0].partition_data[0].records
    assert view.obj is source and not view.readonly
    view[:2] = b"XY"
    assert source[-10:] == b"XYRRRRRRRR"


def test_decode_request_records_view_the_frame() -> None:
    frame = encode_request(0, 3, 1, {"acks": 1, "timeout_ms": 5, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"batch"}]}]})[4:]
    records = decode_request(frame).body.topic_data[0].partition_data[0].records
    assert records.obj is frame and records == b"batch"


# ----------------------------------------------------------------------------------------------------------
# Records placeholders: encode_parts writes the length prefix and leaves the data to be spliced in.


@dataclass
class FileSlice:
    """Stands in for a segment slice the broker would send with sendfile: only its length is encoded."""

    data: bytes

    @property
    def length(self) -> int:
        return len(self.data)


def fetch_response(records: list[Any]) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "responses": [
            {
                "topic": "t",
                "topic_id": UUID,
                "partitions": [{"partition_index": i, "high_watermark": 10, "records": r} for i, r in enumerate(records)],
            }
        ],
    }


def spliced(data: bytes, splices: list[Any]) -> bytes:
    out, last = [], 0
    for s in splices:
        out += [data[last : s.position], s.value.data]
        last = s.position
    return b"".join(out + [data[last:]])


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_encode_parts_splices_record_data_where_inline_bytes_would_go(version: int) -> None:
    payloads = [b"first-batch", b"", b"third" * 50]
    data, splices = encode_parts(fetch.RESPONSE, version, fetch_response([FileSlice(p) for p in payloads]))
    inline = encode(fetch.RESPONSE, version, fetch_response(payloads))
    assert [s.value.data for s in splices] == payloads
    assert [s.position for s in splices] == sorted(s.position for s in splices)
    assert spliced(data, splices) == inline
    assert len(data) + sum(len(p) for p in payloads) == len(inline)


def test_encode_frame_is_size_then_parts_in_order_and_shifts_splice_positions() -> None:
    header = {"correlation_id": 7}
    plain, plain_splices = encode_parts(fetch.RESPONSE, 12, fetch_response([FileSlice(b"xyz")]))
    encoded_header = encode(headers.RESPONSE_HEADER, 1, header)
    frame, splices = encode_frame((headers.RESPONSE_HEADER, 1, header), (fetch.RESPONSE, 12, fetch_response([FileSlice(b"xyz")])))
    assert frame[4:] == encoded_header + plain
    assert struct.unpack(">i", frame[:4])[0] == len(encoded_header) + len(plain) + 3  # spliced data counted
    assert [s.position for s in splices] == [s.position + 4 + len(encoded_header) for s in plain_splices]


@pytest.mark.parametrize("version", [4, 12])
def test_encode_response_size_prefix_counts_spliced_data(version: int) -> None:
    payloads = [b"a" * 1000, b"b" * 24]
    frame, splices = encode_response(1, version, 99, fetch_response([FileSlice(p) for p in payloads]))
    inline_frame, no_splices = encode_response(1, version, 99, fetch_response(payloads))
    assert no_splices == []
    (size,) = struct.unpack(">i", frame[:4])
    assert size == len(frame) - 4 + 1024
    assert spliced(frame, splices) == inline_frame


def test_encode_refuses_placeholders() -> None:
    with pytest.raises(ValueError):
        encode(fetch.RESPONSE, 12, fetch_response([FileSlice(b"x")]))


# ----------------------------------------------------------------------------------------------------------
# Whole requests written byte by byte from the spec, as a client would send them (frames without size).


def test_golden_api_versions_v3_request() -> None:
    frame = (
        b"\x00\x12"  # api key 18
        b"\x00\x03"  # api version 3
        b"\x00\x00\x00\x07"  # correlation id
        b"\x00\x07rdkafka"  # client id: a classic nullable string even in header v2
        b"\x00"  # header tagged fields
        b"\x0blibrdkafka"  # ClientSoftwareName, compact
        b"\x062.5.0"  # ClientSoftwareVersion, compact
        b"\x00"  # body tagged fields
    )
    request = decode_request(frame)
    assert (request.header.api_key, request.header.api_version, request.header.correlation_id) == (18, 3, 7)
    assert request.header.client_id == "rdkafka"
    assert request.header.header_version == 2
    assert request.body.client_software_name == "librdkafka"
    assert request.body.client_software_version == "2.5.0"
    body = {"client_software_name": "librdkafka", "client_software_version": "2.5.0"}
    assert encode_request(18, 3, 7, body, client_id="rdkafka") == len(frame).to_bytes(4, "big") + frame


def test_golden_metadata_v1_request() -> None:
    frame = (
        b"\x00\x03\x00\x01\x00\x00\x00\x2a"  # Metadata v1, correlation id 42
        b"\x00\x01c"  # client id "c"
        b"\x00\x00\x00\x02"  # two topics
        b"\x00\x03foo"
        b"\x00\x03bar"
    )
    request = decode_request(frame)
    assert request.header.correlation_id == 42 and request.header.client_id == "c" and request.header.header_version == 1
    assert [t.name for t in request.body.topics] == ["foo", "bar"]
    assert request.body.allow_auto_topic_creation is True  # v4+ field: Kafka's default
    all_topics = decode_request(b"\x00\x03\x00\x01\x00\x00\x00\x2a\xff\xff\xff\xff\xff\xff")
    assert all_topics.header.client_id is None
    assert all_topics.body.topics is None  # null array in v1+: every topic


def test_golden_produce_v3_request() -> None:
    batch = bytes(range(70))
    frame = (
        b"\x00\x00\x00\x03\x00\x00\x00\x05"  # Produce v3, correlation id 5
        b"\x00\x08producer"  # client id
        b"\xff\xff"  # transactional id: null
        b"\xff\xff"  # acks -1
        b"\x00\x00\x75\x30"  # timeout 30000 ms
        b"\x00\x00\x00\x01"  # one topic
        b"\x00\x06orders"
        b"\x00\x00\x00\x01"  # one partition
        b"\x00\x00\x00\x02"  # partition 2
        b"\x00\x00\x00\x46" + batch  # records: 70 bytes
    )
    request = decode_request(frame)
    assert request.header.client_id == "producer"
    body = request.body
    assert (body.transactional_id, body.acks, body.timeout_ms) == (None, -1, 30000)
    (topic,) = body.topic_data
    (partition,) = topic.partition_data
    assert topic.name == "orders" and partition.index == 2
    assert partition.records == batch and partition.records.obj is frame


def test_a_compact_string_longer_than_kafkas_limit_is_refused() -> None:
    from odradek.protocol.schema import DecodeError, Message, F, decode

    message = Message("T", "0", "0+", F("Name", "string"))
    too_long = 0x7FFF + 1
    data = bytes([((too_long + 1) & 0x7F) | 0x80, ((too_long + 1) >> 7) & 0x7F | 0x80, (too_long + 1) >> 14]) + b"a" * too_long + b"\x00"
    with pytest.raises(DecodeError, match="invalid length"):
        decode(message, 0, data)


def test_a_decoded_structs_fields_are_its_keys_read_set_and_deleted_as_attributes() -> None:
    """A field read as an attribute is its key's value, set and deleted as one the key is; once deleted, reading
    it raises KeyError (the key's lookup) and deleting it again AttributeError, as the Container promises."""
    message = one_field_message(CLASSIC, F("A", "int8"), F("B", "string"))
    decoded, _ = decode(message, 0, b"\x07\x00\x02hi")
    assert (decoded.a, decoded.b) == (7, "hi") == (decoded["a"], decoded["b"])
    decoded.a = 9
    assert decoded["a"] == 9 and decoded.a == 9
    del decoded.b
    assert "b" not in decoded
    with pytest.raises(KeyError):
        decoded.b
    with pytest.raises(AttributeError):
        del decoded.b
    decoded["b"] = "again"
    assert decoded.b == "again"
    assert decoded == {"a": 9, "b": "again"}
