"""The schema machine (protocol/_codec.c) against the generated Python codec, its reference: for every version of
every message, values generated from its declaration encode to the same bytes, decode to the same values (the
same container classes, keys in the same order, the same types), and every truncation and many corruptions of
the encoding are refused by both or decoded alike. The machine is called directly here, not through
``decode_frame``/``encode_frame``, which run the Python codec after any refusal of the machine's and so would
hide a difference."""

from __future__ import annotations

import math
import os
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol import schema
from odradek.protocol.api import APIS, decode_request, encode_response
from odradek.protocol.messages import fetch, headers, produce
from odradek.protocol.schema import Array, F, Message, S, Splice
from tests.protocol.test_roundtrip import cases, struct_strategy

EXAMPLES = int(os.environ.get("ODRADEK_MACHINE_EXAMPLES", "8"))

machine = schema._codec
pytestmark = pytest.mark.skipif(machine is None, reason="protocol/_codec.c not built")  # `make install` builds it


def same(a: Any, b: Any, path: str = "") -> None:
    """``a`` and ``b`` alike in value, type and (for structs) key order."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        assert list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for key in a:
            same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, memoryview):
        assert (a.tobytes(), a.readonly) == (b.tobytes(), b.readonly), path
    elif isinstance(a, float):
        assert a == b or (math.isnan(a) and math.isnan(b)), path
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def python_decode(message: Message, version: int, data: bytes | bytearray) -> Any:
    try:
        (value,), end = schema._decode_frame_python(data, memoryview(data), ((message, version),), 0)
    except schema.DecodeError:
        return None
    return value, end


def machine_decode(message: Message, version: int, data: bytes | bytearray) -> Any:
    program = message.codec(version).program
    try:
        (value,), end = machine.decode((program,), memoryview(data), 0)
    except (schema.DecodeError, UnicodeDecodeError):
        return None
    return value, end


def assert_decodes_alike(message: Message, version: int, data: bytes | bytearray) -> None:
    want, got = python_decode(message, version, data), machine_decode(message, version, data)
    assert (want is None) == (got is None), f"{message.name} v{version}: reference {'refused' if want is None else 'decoded'} {bytes(data)!r}"
    if want is not None:
        same(want, got, message.name)


def assert_machine_agrees(message: Message, version: int, program: Any, value: dict[str, Any], edits: list[tuple[int, int]]) -> None:
    data, splices = schema._encode_parts_python(message, version, value)
    assert machine.encode((program,), ((message, version, value),), False) == (data, splices)
    assert_decodes_alike(message, version, data)
    decoded = machine_decode(message, version, data)[0]
    assert machine.encode((program,), ((message, version, decoded),), False) == (data, [])
    for end in range(len(data)):
        assert_decodes_alike(message, version, data[:end])
    if data:
        damaged = bytearray(data)
        for position, byte in edits:
            damaged[position % len(damaged)] = byte
        assert_decodes_alike(message, version, damaged)


SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("message,version,api_key,kind", cases())
def test_machine_encodes_and_decodes_as_the_reference(message: Message, version: int, api_key: int | None, kind: str | None) -> None:
    # The body is a module-level function, as in test_roundtrip: Hypothesis tokenizes the given function's source.
    program = message.codec(version).program
    assert program is not None, f"{message.name} v{version} is left to the Python codec"
    flexible = message.is_flexible(version)

    @SETTINGS
    @given(value=struct_strategy(message.struct, version, flexible), edits=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=3))
    def check(value: dict[str, Any], edits: list[tuple[int, int]]) -> None:
        assert_machine_agrees(message, version, program, value, edits)

    check()


class FileSlice:
    """Record data sent beside the frame: only its length is encoded."""

    def __init__(self, length: int) -> None:
        self.length = length


def test_spliced_records_are_placed_as_the_reference_places_them() -> None:
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": i, "records": FileSlice(10 * i + 1)} for i in range(3)]}]}
    parts = ((headers.RESPONSE_HEADER, 1, {"correlation_id": 7}), (fetch.RESPONSE, 12, body))
    want_frame, want_splices = schema._encode_frame_python(*parts)
    got_frame, got_splices = machine.encode(tuple(m.codec(v).program for m, v, _ in parts), parts, True)
    assert got_frame == want_frame
    assert [(s.position, s.value) for s in got_splices] == [(s.position, s.value) for s in want_splices]
    assert all(type(s) is Splice for s in got_splices)
    assert int.from_bytes(got_frame[:4], "big") == len(got_frame) - 4 + 1 + 11 + 21


def test_records_of_a_request_are_writable_views_of_its_frame() -> None:
    """The broker patches a produced batch's offsets in place: the records must be a view of the frame itself."""
    body = {"acks": 1, "timeout_ms": 100, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"batch"}]}]}
    frame, _ = schema.encode_frame((headers.REQUEST_HEADER, 2, {"request_api_key": 0, "request_api_version": 9, "correlation_id": 1}), (produce.REQUEST, 9, body))
    data = bytearray(frame[4:])
    records = decode_request(data).body.topic_data[0].partition_data[0].records
    records[0:1] = b"B"
    assert b"Batch" in data and b"batch" not in data


def test_values_the_machine_refuses_get_the_references_errors() -> None:
    """A value its field cannot carry is refused by the Python writer, which runs after the machine refused it."""
    with pytest.raises(schema.EncodeError, match="too long"):
        encode_response(18, 3, 1, {"error_code": 0, "api_keys": [], "finalized_features": [{"name": "x" * 40000}]})
    with pytest.raises(schema.EncodeError):
        schema.encode(produce.REQUEST, 9, {"acks": 1 << 20})
    assert all(m.codec(v).program is not None for api in APIS.values() for m in (api.request, api.response) for v in m.versions())


def test_arrays_of_empty_structs_beyond_the_bytes_left_decode_as_the_reference_decodes_them() -> None:
    """The machine makes room for no more elements than bytes remain (a hostile count costs no memory the
    input cannot fill), and still reads elements that take no bytes, as the reference does."""
    message = Message("T", "0", "none", F("Xs", Array(S("X"))), F("Ys", Array("int32")))
    data = struct.pack(">iiii", 5, 2, 7, 8)
    assert_decodes_alike(message, 0, data)
    assert machine_decode(message, 0, data) is not None
    for count in (3, 1 << 20, 0x7FFFFFFF):
        assert_decodes_alike(message, 0, struct.pack(">iii", 0, count, 7))
