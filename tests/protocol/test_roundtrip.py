"""Every version of every message survives encode → decode → encode, for values generated from its declaration.

The strategies below read the declarations (F/S/Array) directly, so each of the ~600 message versions gets
values that exercise its own fields: integers across their full width, nullable values only where the
version allows null, arrays, nested and nullable structs, tagged fields (known and unknown) and records.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.api import APIS, decode_request, decode_response, encode_request, encode_response
from odradek.protocol.kafka_uuid import ZERO_UUID, Uuid
from odradek.protocol.messages import coordinator_records, headers
from odradek.protocol.schema import NULL, Array, F, Message, S, decode, encode, snake_case

EXAMPLES = int(os.environ.get("ODRADEK_ROUNDTRIP_EXAMPLES", "12"))

INTEGER_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

PRIMITIVE_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    **{t: st.integers(lo, hi) for t, (lo, hi) in INTEGER_BOUNDS.items()},
    "bool": st.booleans(),
    "float64": st.floats(allow_nan=False),
    "uuid": st.uuids().map(lambda u: Uuid(int=u.int)),
    "string": st.text(max_size=12),
    "bytes": st.binary(max_size=12),
    "records": st.binary(max_size=64),
}

# Zero/empty defaults Kafka gives a field without a declared default, by type.
TYPE_DEFAULTS: dict[str, Any] = {
    **{t: 0 for t in INTEGER_BOUNDS},
    "bool": False,
    "float64": 0.0,
    "uuid": ZERO_UUID,
    "string": "",
    "bytes": b"",
    "records": None,
}


def present(f: F, version: int, flexible: bool) -> bool:
    """Whether the field is on the wire at this version (tagged fields exist only in flexible versions)."""
    return version in f.versions and (f.tag is None or version not in f.tagged or flexible)


def struct_strategy(s: S, version: int, flexible: bool) -> st.SearchStrategy[dict[str, Any]]:
    fields = {snake_case(f.name): field_strategy(f, version, flexible) for f in s.fields if present(f, version, flexible)}
    values = st.fixed_dictionaries(fields)
    if not flexible:
        return values
    known = {f.tag for f in s.fields if f.tag is not None}
    unknown_tags = st.dictionaries(st.integers(0, 40).filter(lambda t: t not in known), st.binary(max_size=6), max_size=2)
    return st.tuples(values, st.none() | unknown_tags).map(lambda pair: pair[0] if not pair[1] else {**pair[0], "_unknown_tags": pair[1]})


def field_strategy(f: F, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    t = f.type
    if isinstance(t, Array):
        element = struct_strategy(t.element, version, flexible) if isinstance(t.element, S) else PRIMITIVE_STRATEGIES[t.element]
        base: st.SearchStrategy[Any] = st.lists(element, max_size=3)
    elif isinstance(t, S):
        base = struct_strategy(t, version, flexible)
    else:
        base = PRIMITIVE_STRATEGIES[t]
    return st.none() | base if version in f.nullable else base


def expected_default(f: F) -> Any:
    if f.default is NULL:
        return None
    if f.default is not None:
        return f.default
    if isinstance(f.type, Array):
        return []
    if isinstance(f.type, S):
        return {snake_case(sub.name): expected_default(sub) for sub in f.type.fields}
    return TYPE_DEFAULTS[f.type]


attribute_name = functools.cache(snake_case)
"""A field's name in decoded structs, looked up for every field of every example (a regular expression each)."""


def assert_decoded(fields: tuple[F, ...], generated: dict[str, Any], decoded: Any, version: int, flexible: bool, path: str) -> None:
    """Present fields hold the generated value; fields absent at this version hold Kafka's default."""
    for f in fields:
        name = attribute_name(f.name)
        where = f"{path}.{name}"
        assert name in decoded, f"{where} missing from the decoded struct"
        if present(f, version, flexible):
            assert_value(f, generated[name], decoded[name], version, flexible, where)
        else:
            assert plain(decoded[name]) == expected_default(f), where
    assert decoded.get("_unknown_tags", {}) == generated.get("_unknown_tags", {}), f"{path}: unknown tagged fields"


def assert_value(f: F, want: Any, got: Any, version: int, flexible: bool, path: str) -> None:
    if want is None:
        assert got is None, path
        return
    t = f.type
    if isinstance(t, Array):
        assert len(got) == len(want), path
        for i, (w, g) in enumerate(zip(want, got)):
            if isinstance(t.element, S):
                assert_decoded(t.element.fields, w, g, version, flexible, f"{path}[{i}]")
            else:
                assert g == w and type(g) is type(w), f"{path}[{i}]"
    elif isinstance(t, S):
        assert_decoded(t.fields, want, got, version, flexible, path)
    elif t == "records":
        assert isinstance(got, memoryview) and bytes(got) == want, path
    else:
        assert got == want and type(got) is type(want), f"{path}: {got!r} != {want!r}"


def plain(value: Any) -> Any:
    """Decoded containers as plain dicts without private keys such as ``_unknown_tags``."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


# ----------------------------------------------------------------------------------------------------------


def cases() -> list[Any]:
    out = []
    for key, api in sorted(APIS.items()):
        for kind, message in (("request", api.request), ("response", api.response)):
            for version in message.versions():
                out.append(pytest.param(message, version, key, kind, id=f"{message.name}-v{version}"))
    standalone = [headers.REQUEST_HEADER, headers.RESPONSE_HEADER]
    standalone += [m for m in vars(coordinator_records).values() if isinstance(m, Message)]
    for message in standalone:
        for version in message.versions():
            out.append(pytest.param(message, version, None, None, id=f"{message.name}-v{version}"))
    return out


def assert_roundtrips(message: Message, version: int, flexible: bool, api_key: int | None, kind: str | None, value: dict[str, Any], correlation_id: int) -> None:
    data = encode(message, version, value)
    decoded, end = decode(message, version, data)
    assert end == len(data)
    assert_decoded(message.fields, value, decoded, version, flexible, message.name)
    assert encode(message, version, decoded) == data
    if kind == "request":
        frame = encode_request(api_key, version, correlation_id, value, client_id="roundtrip")
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        request = decode_request(frame[4:])
        assert (request.header.api_key, request.header.api_version) == (api_key, version)
        assert request.header.correlation_id == correlation_id
        assert encode(message, version, request.body) == data
    elif kind == "response":
        frame, splices = encode_response(api_key, version, correlation_id, value)
        assert splices == []
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        got_id, body = decode_response(api_key, version, frame[4:])
        assert got_id == correlation_id
        assert encode(message, version, body) == data


SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("message,version,api_key,kind", cases())
def test_roundtrip(message: Message, version: int, api_key: int | None, kind: str | None) -> None:
    # The body is a module-level function: Hypothesis digests the source of the function it is given once per
    # test (tokenizing it), and a one-line one costs a fraction of the whole body's ~3 ms, 752 times.
    flexible = message.is_flexible(version)

    @SETTINGS
    @given(value=struct_strategy(message.struct, version, flexible), correlation_id=st.integers(-(2**31), 2**31 - 1))
    def check(value: dict[str, Any], correlation_id: int) -> None:
        assert_roundtrips(message, version, flexible, api_key, kind, value, correlation_id)

    check()
