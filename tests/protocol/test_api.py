"""Request/response framing: header versions, API key and version checks, the frames on the wire."""

from __future__ import annotations

import struct

import pytest

from odradek.protocol.api import (
    APIS,
    ApiKey,
    UnknownApiKey,
    UnsupportedApiVersion,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_header,
    request_header_version,
    response_header_version,
)
from odradek.protocol.schema import DecodeError

# (API, version, request header version, response header version), from Kafka's specs and
# ApiMessageType.requestHeaderVersion/responseHeaderVersion.
HEADER_VERSIONS = [
    (ApiKey.Produce, 8, 1, 0),
    (ApiKey.Produce, 9, 2, 1),
    (ApiKey.Fetch, 11, 1, 0),
    (ApiKey.Fetch, 12, 2, 1),
    (ApiKey.Metadata, 0, 1, 0),
    (ApiKey.Metadata, 8, 1, 0),
    (ApiKey.Metadata, 9, 2, 1),
    (ApiKey.JoinGroup, 5, 1, 0),
    (ApiKey.JoinGroup, 6, 2, 1),
    (ApiKey.SaslHandshake, 1, 1, 0),  # never flexible
    (ApiKey.ApiVersions, 2, 1, 0),
    (ApiKey.ApiVersions, 3, 2, 0),  # the response header stays v0 so any client can read the answer
    (ApiKey.ApiVersions, 4, 2, 0),
    (ApiKey.ControlledShutdown, 0, 0, 0),  # v0 requests carry no client id
    (ApiKey.ControlledShutdown, 1, 1, 0),
    (ApiKey.ControlledShutdown, 3, 2, 1),
]


@pytest.mark.parametrize("api_key,version,request_header,response_header", HEADER_VERSIONS, ids=[f"{k.name}-v{v}" for k, v, _, _ in HEADER_VERSIONS])
def test_header_versions(api_key: int, version: int, request_header: int, response_header: int) -> None:
    assert request_header_version(api_key, version) == request_header
    assert response_header_version(api_key, version) == response_header


def test_header_versions_follow_flexibility_for_every_other_api_version() -> None:
    for key, api in APIS.items():
        for version in api.request.versions():
            flexible = api.request.is_flexible(version)
            if (key, version) != (ApiKey.ControlledShutdown, 0):
                assert request_header_version(key, version) == (2 if flexible else 1), (api.name, version)
            if key != ApiKey.ApiVersions:
                assert response_header_version(key, version) == (1 if api.response.is_flexible(version) else 0), (api.name, version)
            assert api.response.is_flexible(version) == flexible, (api.name, version)


def test_api_keys_are_named_as_kafka_names_them() -> None:
    assert (ApiKey.Produce, ApiKey.Fetch, ApiKey.ApiVersions, ApiKey.DescribeTopicPartitions) == (0, 1, 18, 75)
    assert ApiKey(36).name == "SaslAuthenticate"
    assert {int(k) for k in ApiKey} == set(APIS)
    assert ApiKey(76).name == "ShareGroupHeartbeat" and ApiKey(74).name == "ListConfigResources"


def test_declared_versions_are_kafka_3_9s_and_those_kafka_4_4_adds() -> None:
    """Declared (decodable) is not served: every version 3.9 defines, even those 4.0 dropped, plus 4.4's."""
    assert (APIS[ApiKey.Produce].min_version, APIS[ApiKey.Produce].max_version) == (0, 13)
    assert str(APIS[ApiKey.Produce].kafka_3_9) == "0-11"
    assert (APIS[ApiKey.Fetch].min_version, APIS[ApiKey.Fetch].max_version) == (0, 18)
    assert str(APIS[ApiKey.Fetch].kafka_3_9) == "0-17"
    assert (APIS[ApiKey.EndTxn].max_version, APIS[ApiKey.ShareGroupHeartbeat].min_version) == (5, 1)
    assert str(APIS[ApiKey.ShareGroupHeartbeat].kafka_3_9) == "none"
    assert str(APIS[ApiKey.InitProducerId].request.valid) == "0-5"  # 4.4's v6 is marked unstable


# ----------------------------------------------------------------------------------------------------------
# Response frames on the wire.


def test_api_versions_v3_response_header_has_no_tagged_fields() -> None:
    frame, splices = encode_response(ApiKey.ApiVersions, 3, 0x01020304, {"error_code": 35, "api_keys": [], "throttle_time_ms": 0})
    assert splices == []
    body = b"\x00\x23" + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"  # error 35, no api keys (compact), throttle, no tags
    assert frame == struct.pack(">i", 4 + len(body)) + b"\x01\x02\x03\x04" + body


def test_flexible_response_header_carries_tagged_fields() -> None:
    frame, _ = encode_response(ApiKey.Heartbeat, 4, 7, {"throttle_time_ms": 0, "error_code": 0})
    assert frame == struct.pack(">i", 4 + 1 + 7) + b"\x00\x00\x00\x07" + b"\x00" + b"\x00\x00\x00\x00\x00\x00\x00"


def test_classic_response_header_is_the_correlation_id_alone() -> None:
    frame, _ = encode_response(ApiKey.Heartbeat, 3, 7, {"throttle_time_ms": 5, "error_code": 27})
    assert frame == b"\x00\x00\x00\x0a" + b"\x00\x00\x00\x07" + b"\x00\x00\x00\x05\x00\x1b"


@pytest.mark.parametrize("version", [0, 3, 4])
def test_response_frames_decode_back(version: int) -> None:
    body = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 11}], "throttle_time_ms": 0}
    frame, _ = encode_response(ApiKey.ApiVersions, version, 42, body)
    correlation_id, decoded = decode_response(ApiKey.ApiVersions, version, frame[4:])
    assert correlation_id == 42
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(0, 0, 11)]


# ----------------------------------------------------------------------------------------------------------
# Request frames.


def test_controlled_shutdown_v0_request_has_no_client_id() -> None:
    frame = encode_request(ApiKey.ControlledShutdown, 0, 9, {"broker_id": 3}, client_id="ignored")
    assert frame == b"\x00\x00\x00\x0c" + b"\x00\x07\x00\x00\x00\x00\x00\x09" + b"\x00\x00\x00\x03"
    request = decode_request(frame[4:])
    assert request.header.header_version == 0 and request.body.broker_id == 3


def test_request_header_v2_client_id_is_a_classic_string_then_tags() -> None:
    frame = encode_request(ApiKey.Heartbeat, 4, 1, {"group_id": "g", "generation_id": 1, "member_id": "m"}, client_id="cli")
    assert frame[4:] == (
        b"\x00\x0c\x00\x04\x00\x00\x00\x01"  # Heartbeat v4, correlation id 1
        b"\x00\x03cli"  # client id: int16 length even in header v2
        b"\x00"  # header tagged fields
        b"\x02g\x00\x00\x00\x01\x02m"  # group id, generation id, member id (compact)
        b"\x00"  # group instance id: compact null
        b"\x00"  # body tagged fields
    )


@pytest.mark.parametrize("client_id", [None, "", "kafka-python-2.0.2", "клиент"])
@pytest.mark.parametrize("api_key,version", [(ApiKey.Metadata, 1), (ApiKey.Metadata, 12), (ApiKey.ApiVersions, 3)])
def test_request_header_fields_come_back(client_id: str | None, api_key: int, version: int) -> None:
    frame = encode_request(api_key, version, -5, {}, client_id=client_id)
    request = decode_request(frame[4:])
    assert (request.header.api_key, request.header.api_version, request.header.correlation_id) == (api_key, version, -5)
    assert request.header.client_id == client_id
    assert request.api is APIS[api_key]


def test_peek_header_reads_the_common_prefix() -> None:
    assert peek_header(b"\x00\x03\x00\x0c\xff\xff\xff\xfe" + b"anything") == (3, 12, -2)
    with pytest.raises(DecodeError):
        peek_header(b"\x00\x03\x00\x0c\xff")


# ----------------------------------------------------------------------------------------------------------
# Refusals.


@pytest.mark.parametrize("api_key", [-1, 95, 1000, 32767], ids=lambda k: f"key{k}")
def test_unknown_api_key(api_key: int) -> None:
    """A key neither Kafka 3.9 nor 4.4 defines (94, UnregisterController, is 4.4's last)."""
    with pytest.raises(UnknownApiKey) as caught:
        decode_request(struct.pack(">hhi", api_key, 0, 1) + b"\x00\x00")
    assert isinstance(caught.value, DecodeError)


@pytest.mark.parametrize(
    "api_key,version",
    [(ApiKey.Produce, 14), (ApiKey.Produce, -1), (ApiKey.Fetch, 19), (ApiKey.ApiVersions, 6), (ApiKey.ApiVersions, 32767), (ApiKey.ShareGroupHeartbeat, 0)],
    ids=lambda x: str(int(x)),
)
def test_unsupported_version_carries_the_correlation_id(api_key: int, version: int) -> None:
    """The header of an unknown version cannot be parsed beyond its prefix, yet Kafka still answers it
    (ApiVersions with UNSUPPORTED_VERSION), so the correlation id must come out of the refusal."""
    frame = struct.pack(">hhi", api_key, version, 123456) + b"\x00\x05hello\x00unparseable body"
    with pytest.raises(UnsupportedApiVersion) as caught:
        decode_request(frame)
    error = caught.value
    assert (error.api_key, error.api_version, error.correlation_id) == (api_key, version, 123456)
    assert isinstance(error, DecodeError)
    assert str(version) in str(error)


def test_what_is_declared_of_each_api_is_what_its_module_says() -> None:
    """The generated declarations the broker reads as it starts stand for the API modules, imported only at
    first use: the same name, versions, listeners, 3.9 versions and throttle time."""
    from odradek.protocol.messages import MODULES
    from odradek.protocol.schema import Versions

    assert set(MODULES) == set(APIS)
    for key, module in MODULES.items():
        api = APIS[key]
        assert (api.name, str(api.versions), api.listeners) == (module.NAME, str(module.REQUEST.valid), module.LISTENERS)
        assert str(api.kafka_3_9) == str(Versions.parse(module.KAFKA_3_9_VERSIONS)), api.name
        assert api.throttled == any(f.name == "ThrottleTimeMs" for f in module.RESPONSE.fields), api.name
        assert api.request is module.REQUEST and api.response is module.RESPONSE


def test_an_apis_messages_are_imported_at_its_first_use() -> None:
    """Importing the protocol imports no API's messages; a request decoded imports its API's alone."""
    import ast
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from odradek.protocol.api import ApiKey, decode_request, encode_request\n"
        "def loaded(): return sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('odradek.protocol.messages.'))\n"
        "print(loaded())\n"
        "frame = encode_request(ApiKey.ApiVersions, 3, 1, {'client_software_name': 'a', 'client_software_version': '1'})\n"
        "assert decode_request(frame[4:]).header.api_key == ApiKey.ApiVersions\n"
        "print(loaded())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.splitlines()
    assert [ast.literal_eval(line) for line in out] == [["headers"], ["api_versions", "headers"]]
