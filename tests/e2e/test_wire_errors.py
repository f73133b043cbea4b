"""Bad input on raw sockets: the broker answers or closes as Kafka does, and nothing else is harmed.

After every case the broker must still serve a fresh connection and the topic the bad requests aimed
at must hold exactly what it held before (same log end offset, same records read by a real consumer).
"""

from __future__ import annotations

import random
import socket
import struct

import pytest

from odradek.protocol.api import APIS, ApiKey, decode_response, encode_request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch

TOPIC = "e2e-wire"
BASE_TS = 1_700_000_000_000
ORIGINAL = [(b"k%d" % i, b"v%d" % i, (), BASE_TS + i) for i in range(5)]
REQUEST_MAX_BYTES = 104_857_600  # socket.request.max.bytes default


@pytest.fixture(scope="module")
def wire_topic(bootstrap, make_topic, clients):
    make_topic(TOPIC)
    clients["confluent"].produce(bootstrap, TOPIC, ORIGINAL)
    return TOPIC


@pytest.fixture(autouse=True)
def unharmed(wire_topic, wire, bootstrap, clients):
    """Each test runs its bad input; then a new connection is served and the log is as it was."""
    yield
    check = wire()
    answer = check.call(ApiKey.ListOffsets, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": wire_topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    assert answer.topics[0].partitions[0].offset == len(ORIGINAL), "the log end offset moved"
    received = clients["kafka-python"].consume(bootstrap, wire_topic, len(ORIGINAL), timeout=10)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in received] == [(i, k, v, ts) for i, (k, v, _, ts) in enumerate(ORIGINAL)]


def _header(api_key: int, version: int, correlation_id: int = 7, client_id: bytes = b"e2e-wire") -> bytes:
    """Request header v1 (api key, version, correlation id, nullable string client id)."""
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _produce(correlation_id: int, records: bytes, topic: str = TOPIC) -> bytes:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}
    return encode_request(ApiKey.Produce, 9, correlation_id, body, client_id="e2e-wire")


def _batch(n: int = 3) -> bytearray:
    return bytearray(build_batch([Record(timestamp=BASE_TS, key=b"bad", value=b"value-%d" % i) for i in range(n)]))


def test_wrong_batch_crc_is_corrupt_message(wire):
    conn = wire()
    batch = _batch()
    batch[-1] ^= 0xFF  # a flipped bit in the last record: the stored CRC no longer matches
    conn.send(_produce(11, bytes(batch)))

    correlation_id, body = decode_response(ApiKey.Produce, 9, conn.read_frame())

    assert correlation_id == 11
    partition = body.responses[0].partition_responses[0]
    assert (partition.error_code, partition.base_offset) == (ErrorCode.CORRUPT_MESSAGE, -1)
    # the connection stays open: a corrupt batch is the request's problem, not the connection's
    assert conn.call(ApiKey.ApiVersions, 3, {"client_software_name": "e2e", "client_software_version": "1"}).error_code == 0


def test_batch_with_a_lying_length_is_refused(wire):
    """A batch whose length field points past the records is rejected, not appended."""
    conn = wire()
    batch = _batch()
    struct.pack_into(">i", batch, 8, len(batch) + 100)
    conn.send(_produce(12, bytes(batch)))

    correlation_id, body = decode_response(ApiKey.Produce, 9, conn.read_frame())

    partition = body.responses[0].partition_responses[0]
    assert correlation_id == 12 and partition.base_offset == -1
    assert partition.error_code == ErrorCode.INVALID_RECORD  # Kafka finds no whole batch: validateRecords


GARBAGE = {
    "random bytes": random.Random(4).randbytes(64),
    "empty frame": b"",
    "shorter than a header": b"\x00\x03\x00",
    "header without client id bytes": struct.pack(">hhih", ApiKey.Metadata, 4, 1, 50),
    "metadata with a huge topic count": _header(ApiKey.Metadata, 4) + struct.pack(">i", 0x7FFFFFF0),
    "metadata with a negative topic name length": _header(ApiKey.Metadata, 4) + struct.pack(">ih", 1, -5),
    "produce cut off in its records": _produce(13, bytes(_batch()))[4:-40],
}


@pytest.mark.parametrize("payload", GARBAGE.values(), ids=GARBAGE.keys())
def test_malformed_request_closes_the_connection(wire, payload):
    conn = wire()
    conn.send(_framed(payload))
    assert conn.closed_by_peer(), "Kafka closes a connection whose request it cannot parse"


@pytest.mark.parametrize("size", [REQUEST_MAX_BYTES + 1, 2**31 - 1, -1, -(2**31)], ids=["max+1", "int32 max", "-1", "int32 min"])
def test_bad_frame_size_closes_before_any_body(wire, size):
    conn = wire()
    conn.send(struct.pack(">i", size) + b"\x00" * 16)
    assert conn.closed_by_peer()


def test_unknown_api_key_closes(wire):
    unknown = max(APIS) + 1000
    conn = wire()
    conn.send(_framed(_header(unknown, 0) + b"\x00" * 8))
    assert conn.closed_by_peer()


@pytest.mark.parametrize("api_key, version", [(ApiKey.Metadata, 99), (ApiKey.Produce, 12), (ApiKey.Fetch, -1)])
def test_known_api_at_unsupported_version_closes(wire, api_key, version):
    conn = wire()
    conn.send(_framed(_header(api_key, version) + b"\x00" * 8))
    assert conn.closed_by_peer()


def test_api_versions_from_the_future_gets_a_v0_answer(wire):
    """KIP-511: the broker answers v0 with UNSUPPORTED_VERSION and its ranges, so the client can pick one."""
    conn = wire()
    # What a newer client sends: request header v2 (tagged fields) and a flexible body the broker cannot know.
    payload = _header(ApiKey.ApiVersions, 99, correlation_id=0x5EED) + b"\x00" + b"\x05e2e!\x02x\x00"
    conn.send(_framed(payload))

    frame = conn.read_frame()
    correlation_id, body = decode_response(ApiKey.ApiVersions, 0, frame)  # v0: exact, so no stray bytes

    assert correlation_id == 0x5EED
    assert frame[4:6] == struct.pack(">h", ErrorCode.UNSUPPORTED_VERSION), "response header v0: no tagged fields after the correlation id"
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION == 35
    current = conn.call(ApiKey.ApiVersions, 3, {"client_software_name": "e2e", "client_software_version": "1"})
    ranges = [(k.api_key, k.min_version, k.max_version) for k in body.api_keys]
    assert ranges == [(k.api_key, k.min_version, k.max_version) for k in current.api_keys], "the same API list as a normal answer"
    assert (ApiKey.ApiVersions, 0, 4) in ranges and (ApiKey.Produce, 0, 12) in ranges


@pytest.mark.parametrize("how", ["close", "reset"])
def test_truncated_frame_then_disconnect(wire, broker, how):
    """A client that dies mid-request (FIN or RST) costs the broker that connection only."""
    sock = socket.create_connection((broker.host, broker.port), timeout=5)
    request = _produce(15, bytes(_batch()))
    sock.sendall(request[: len(request) // 2])
    if how == "reset":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    for _ in range(3):  # the broker sees the FIN/RST at its next read; these requests come after it
        assert wire().call(ApiKey.Metadata, 12, {"topics": None}).brokers


def test_truncated_frame_does_not_block_other_connections(wire):
    """Half a frame waiting on one connection; another connection is served meanwhile."""
    stalled = wire()
    request = _produce(16, bytes(_batch()))
    stalled.send(request[:30])
    other = wire()
    assert other.call(ApiKey.Metadata, 12, {"topics": None}).brokers, "a fresh connection is served"
    assert not stalled.closed_by_peer(timeout=0.3), "the stalled connection is waited on, not dropped"


def test_many_requests_pipelined_are_answered_in_order(wire):
    """Not an error case, but the contrast: 50 requests written at once come back in order, one each."""
    conn = wire()
    conn.send(b"".join(encode_request(ApiKey.ApiVersions, v % 4, 1000 + v, {"client_software_name": "e2e", "client_software_version": "1"}) for v in range(50)))
    answers = [decode_response(ApiKey.ApiVersions, v % 4, conn.read_frame()) for v in range(50)]
    assert [cid for cid, _ in answers] == [1000 + v for v in range(50)]
    assert all(body.error_code == 0 for _, body in answers)
