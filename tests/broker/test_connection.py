"""The sans-IO connection: bytes in, requests with their context out, without a socket."""

from __future__ import annotations

import struct

import pytest

from odradek.broker.network.connection import AnswerReady, ConnectionEnded, ConnectionState, Endpoint, KafkaConnection, RequestReceived
from odradek.broker.kafka_apis import HANDLERS, unsupported_api_versions_response
from odradek.broker.network.memory_pool import MemoryPool
from odradek.broker.network.request_context import ANONYMOUS, ClientInformation, KafkaPrincipal
from odradek.protocol.api import ApiKey, decode_response, encode_request

ENDPOINT = Endpoint("CLIENTS", "PLAINTEXT", "127.0.0.1", 9092, "10.0.0.7", 51234)


def connection(pool: MemoryPool | None = None, max_request_size: int = 1 << 20) -> KafkaConnection:
    return KafkaConnection(
        ENDPOINT, 3, HANDLERS, unsupported_api_versions_response, max_request_size=max_request_size, max_queued=2, pool=pool or MemoryPool(1 << 30)
    )


def api_versions(version: int, correlation_id: int, name: str = "probe", software: str = "1.0") -> bytes:
    body = {"client_software_name": name, "client_software_version": software} if version >= 3 else {}
    return encode_request(ApiKey.ApiVersions, version, correlation_id, body, client_id="probe-client")


def test_pipelined_requests_come_out_in_order_with_their_context_even_byte_by_byte() -> None:
    conn = connection()
    data = api_versions(3, 1) + encode_request(ApiKey.Metadata, 12, 2, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}, client_id="probe-client")
    events = [e for i in range(len(data)) for e in conn.feed(data[i : i + 1])]
    assert [type(e) for e in events] == [RequestReceived, RequestReceived]
    first, second = (e.request for e in events)
    assert [first.header.correlation_id, second.header.correlation_id] == [1, 2]
    context = second.context
    assert context.listener_name == "CLIENTS" and context.security_protocol == "PLAINTEXT"
    assert (context.client_address, context.client_port) == ("10.0.0.7", 51234)
    assert context.connection_id == "127.0.0.1:9092-10.0.0.7:51234-3"
    assert context.principal == ANONYMOUS and str(context.principal) == "User:ANONYMOUS"
    assert second.header.client_id == "probe-client"
    # ApiVersions v3 named the client's software: the requests after it carry it (Kafka's ClientInformation)
    assert context.client_information == ClientInformation("probe", "1.0")
    assert second.client_address == "10.0.0.7"


@pytest.mark.parametrize("name", ["-bad", "probe\n"])  # Kafka matches the whole name: no trailing newline either
def test_an_invalid_software_name_is_not_recorded(name: str) -> None:
    conn = connection()
    conn.feed(api_versions(3, 1, name=name))
    [event] = conn.feed(api_versions(0, 2))
    assert event.request.context.client_information == ClientInformation("unknown", "unknown")


def test_api_versions_at_an_unknown_version_gets_the_kip_511_answer_from_the_connection() -> None:
    conn = connection()
    frame = bytearray(api_versions(0, 9))
    struct.pack_into(">h", frame, 6, 99)  # request_api_version
    [event] = conn.feed(frame)
    assert isinstance(event, AnswerReady)
    correlation_id, body = decode_response(ApiKey.ApiVersions, 0, event.data[4:])
    assert correlation_id == 9 and body.error_code == 35  # UNSUPPORTED_VERSION


def test_a_version_declared_but_not_served_is_refused_as_an_unknown_one() -> None:
    """Kafka 4.4's versions are declared (decodable) but served only when a handler lists them: ApiVersions v5
    gets the KIP-511 answer with our ranges, Produce v13 and the streams-group APIs (KIP-1071, not served) end the connection."""
    conn = connection()
    [event] = conn.feed(encode_request(ApiKey.ApiVersions, 5, 9, {"client_software_name": "probe", "client_software_version": "1"}))
    assert isinstance(event, AnswerReady)
    correlation_id, body = decode_response(ApiKey.ApiVersions, 0, event.data[4:])
    assert correlation_id == 9 and body.error_code == 35  # UNSUPPORTED_VERSION
    assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}[ApiKey.Produce] == (0, 12)
    assert ApiKey.StreamsGroupDescribe not in {k.api_key for k in body.api_keys}
    for api_key, version, request in [
        (ApiKey.Produce, 13, {"acks": 1, "timeout_ms": 100, "topic_data": []}),
        (ApiKey.StreamsGroupDescribe, 0, {"group_ids": ["g"], "include_authorized_operations": False}),
    ]:
        conn = connection()
        [event] = conn.feed(encode_request(api_key, version, 1, request))
        assert isinstance(event, ConnectionEnded) and f"v{version}" in event.reason


def test_an_unknown_api_key_ends_the_connection_and_releases_the_pool() -> None:
    pool = MemoryPool(10_000)
    conn = connection(pool)
    bad = bytearray(api_versions(0, 1))
    struct.pack_into(">h", bad, 4, 9999)
    events = conn.feed(bytes(bad) + api_versions(0, 2))
    assert [type(e) for e in events] == [ConnectionEnded]
    assert "unknown API key" in events[0].reason
    assert conn.state is ConnectionState.CLOSED and conn.feed(api_versions(0, 3)) == []
    assert pool.available == 10_000


def test_a_frame_above_socket_request_max_bytes_ends_the_connection() -> None:
    conn = connection(max_request_size=100)
    [event] = conn.feed(struct.pack(">i", 101) + b"x" * 10)
    assert isinstance(event, ConnectionEnded) and "socket.request.max.bytes=100" in event.reason


def test_requests_stay_charged_to_the_pool_until_released() -> None:
    pool = MemoryPool(1000)
    conn = connection(pool)
    events = conn.feed(api_versions(0, 1) + api_versions(0, 2))
    assert pool.available == 1000 - sum(e.size for e in events)
    for e in events:
        conn.release(e.size)
    assert pool.available == 1000


def test_the_outbox_keeps_request_order_and_reports_full_at_queued_max_requests() -> None:
    conn = connection()
    conn.queue("a", 1)
    assert not conn.outbox_full
    conn.queue("b", 2)
    assert conn.outbox_full
    assert conn.take_answers() == [("a", 1), ("b", 2)] and not conn.outbox


def test_requests_share_their_connections_context_until_the_principal_changes() -> None:
    conn = connection()
    first, second = (e.request for e in conn.feed(api_versions(0, 1) + api_versions(0, 2)))
    assert first.context is second.context  # nothing is built per request
    conn.principal = KafkaPrincipal("User", "CN=app")
    [third] = conn.feed(api_versions(0, 3))
    assert third.request.context.principal == KafkaPrincipal("User", "CN=app") and first.context.principal == ANONYMOUS
