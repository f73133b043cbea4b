"""A mutation fuzz of the wire: valid requests of every advertised API and version, encoded from the generated
message declarations, then damaged (bytes, size prefixes, versions, lengths and counts) and sent to a real
broker process, while a well-behaved client produces and fetches on its own connection.

What a user would observe is asserted: each damaged request is answered or its connection closed (never a
wedge), the well-behaved client keeps being served promptly, the broker's memory stays bounded, and every
segment it wrote still parses with dump-log afterwards.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek import Broker
from odradek.broker.kafka_apis import HANDLERS
from odradek.protocol.api import ApiKey, decode_request, encode_request
from odradek.protocol.records import Record, build_batch

EXAMPLES = int(os.environ.get("ODRADEK_FUZZ_EXAMPLES", "4000"))
MB = 1024 * 1024
STEADY = "steady"

BODIES: dict[int, dict] = {
    # Richer valid bodies than the all-defaults one, for the APIs whose damage matters most.
    ApiKey.Produce: {"acks": 1, "timeout_ms": 1000, "topic_data": [{"name": "fuzzed", "partition_data": [{"index": 0, "records": build_batch([Record(key=b"k", value=b"fuzz" * 8), Record(value=b"x")])}]}]},
    ApiKey.Fetch: {"replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [{"topic": "fuzzed", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
    ApiKey.Metadata: {"topics": [{"name": "fuzzed"}], "allow_auto_topic_creation": False},
    ApiKey.CreateTopics: {"topics": [{"name": "fuzz-created", "num_partitions": 2, "replication_factor": 1}], "timeout_ms": 1000},
    ApiKey.ListOffsets: {"replica_id": -1, "topics": [{"name": "fuzzed", "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
    ApiKey.OffsetCommit: {"group_id": "fuzz-group", "topics": [{"name": "fuzzed", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]},
    ApiKey.FindCoordinator: {"key": "fuzz-group", "coordinator_keys": ["fuzz-group"]},
}
WAITING_APIS = {ApiKey.Fetch, ApiKey.JoinGroup, ApiKey.SyncGroup}
"""APIs whose answer may legitimately wait (long polls, rebalances), whatever their damaged fields say."""

INT_EDGES = [0, 1, -1, 0x7F, 0x80, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 0x1000000]

ADVERTISED = sorted((key, version) for key, handler in HANDLERS.items() for version in range(handler.min_version, handler.max_version + 1))


def valid_frame(key: int, version: int, correlation_id: int) -> bytes:
    try:
        return encode_request(key, version, correlation_id, BODIES.get(key, {}), client_id="fuzzer")
    except Exception:  # a rich body field that this version lacks or types differently: the defaults then
        return encode_request(key, version, correlation_id, {}, client_id="fuzzer")


@st.composite
def mutation(draw: st.DrawFn, frame: bytes) -> bytes:
    data = bytearray(frame)
    kind = draw(st.sampled_from(["byte", "int", "size", "version", "truncate", "insert"]))
    pos = draw(st.integers(4, max(4, len(data) - 1)))
    if kind == "byte" and len(data) > 4:
        data[pos] = draw(st.integers(0, 255))
    elif kind == "int" and len(data) > 5:
        width = draw(st.sampled_from([1, 2, 4]))
        value = draw(st.sampled_from(INT_EDGES))
        pos = min(pos, len(data) - width)
        data[pos : pos + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "big")
    elif kind == "size":
        size = draw(st.sampled_from([0, 1, 3, -1, -(2**31), 2**31 - 1, 100 * MB, 100 * MB + 1]) | st.integers(len(data) - 8, len(data) + 8))
        data[0:4] = struct.pack(">i", size)
        return bytes(data)
    elif kind == "version":
        data[6:8] = struct.pack(">h", draw(st.sampled_from([-1, 0x7FFF, 0, 99]) | st.integers(0, 20)))
    elif kind == "truncate":
        del data[draw(st.integers(4, len(data))) :]
    elif kind == "insert":
        data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    data[0:4] = struct.pack(">i", len(data) - 4)  # damage inside a consistently sized frame
    return bytes(data)


@st.composite
def damaged_request(draw: st.DrawFn) -> tuple[int, bytes, bool]:
    """(api key, bytes to send, whether the frame is whole: its size prefix counts exactly the bytes after it)."""
    key, version = draw(st.sampled_from(ADVERTISED))
    data = valid_frame(key, version, 7)
    for _ in range(draw(st.integers(1, 3))):
        data = draw(mutation(data))
    (size,) = struct.unpack(">i", data[:4])
    return key, data, size == len(data) - 4


def unanswered_produce(data: bytes) -> bool:
    """Whether the damage made the frame an acks=0 Produce (its api key bytes hit too), which Kafka answers
    with nothing when it succeeds."""
    try:
        request = decode_request(data[4:])
    except Exception:
        return False
    return request.header.api_key == ApiKey.Produce and request.body.acks == 0


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


class SteadyClient(threading.Thread):
    """A well-behaved client: produce one record, fetch it back, again and again, timing each round trip."""

    def __init__(self, bootstrap: str, wire_class) -> None:
        super().__init__(daemon=True)
        self.wire = wire_class(bootstrap, "steady")
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.offset = 0

    def round_trip(self) -> None:
        body = {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": STEADY, "partition_data": [{"index": 0, "records": build_batch([Record(value=b"steady")])}]}]}
        produced = self.wire.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0]
        if produced.error_code or produced.base_offset != self.offset:
            self.failures.append(f"produce: {produced}")
        fetch = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [{"topic": STEADY, "partitions": [{"partition": 0, "fetch_offset": self.offset, "partition_max_bytes": 1 << 20}]}]}
        fetched = self.wire.call(ApiKey.Fetch, 12, fetch).responses[0].partitions[0]
        if fetched.error_code or not fetched.records or fetched.high_watermark != self.offset + 1:
            self.failures.append(f"fetch at {self.offset}: {fetched.error_code} hw {fetched.high_watermark}")
        self.offset += 1

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                self.round_trip()
            except Exception as exc:  # a timeout or a closed connection is what this test is about
                self.failures.append(repr(exc))
                return
            self.latencies.append(time.monotonic() - started)
            time.sleep(0.02)


def outcome(sock: socket.socket, timeout: float) -> str | None:
    """"answered" or "closed" when the broker does either within ``timeout``, else None."""
    sock.settimeout(timeout)
    try:
        return "answered" if sock.recv(1) else "closed"
    except (ConnectionResetError, BrokenPipeError):
        return "closed"
    except TimeoutError:
        return None


def test_damaged_requests_of_every_api_leave_the_broker_serving(tmp_path: Path, connect) -> None:
    config = {"auto.create.topics.enable": "true", "num.partitions": "1"}
    with Broker(log_dir=tmp_path, subprocess=True, config=config) as broker:
        admin = connect(broker.bootstrap)
        for name in (STEADY, "fuzzed"):
            created = admin.call(ApiKey.CreateTopics, 7, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000})
            assert created.topics[0].error_code == 0
        for key, version in ADVERTISED:  # compile every codec first: compiling is not thread-safe
            valid_frame(key, version, 0)
        steady = SteadyClient(broker.bootstrap, type(admin))
        steady.round_trip()  # the first append and fetch open files: the steady state is what is measured
        steady.start()
        before = rss(broker.pid)
        wedged: list[tuple[int, bytes]] = []
        outcomes: dict[str | None, int] = {}
        host, port = broker.bootstrap.rsplit(":", 1)

        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=os.environ.get("ODRADEK_FUZZ_RANDOM") is None, suppress_health_check=list(HealthCheck))
        @given(damaged_request())
        def send_damaged(case: tuple[int, bytes, bool]) -> None:
            key, data, whole = case
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                try:
                    sock.sendall(data)
                except (ConnectionResetError, BrokenPipeError):
                    return  # closed at a bad size prefix before all was sent
                if whole and key not in WAITING_APIS and not unanswered_produce(data):
                    seen = outcome(sock, 5.0)
                    outcomes[seen] = outcomes.get(seen, 0) + 1
                    if seen is None:
                        wedged.append((key, data))

        started = time.monotonic()
        send_damaged()
        fuzz_s = time.monotonic() - started
        steady.stop.set()
        steady.join(10)
        grown = rss(broker.pid) - before
        assert broker._proc.poll() is None, "the broker died:\n" + "\n".join(broker.output)
        assert outcomes.get("answered", 0) > EXAMPLES // 50 and outcomes.get("closed", 0) > EXAMPLES // 50, outcomes  # both kinds exercised
        assert not wedged, f"{len(wedged)} whole requests neither answered nor closed, e.g. {wedged[:3]}"
        assert not steady.failures, steady.failures[:5]
        latencies = sorted(steady.latencies)
        assert len(latencies) > fuzz_s * 5, f"the steady client made {len(latencies)} round trips in {fuzz_s:.0f} s"
        p99, worst = latencies[int(len(latencies) * 0.99)], latencies[-1]
        assert p99 < 1.0 and worst < 2.0, f"steady client latency p99 {p99 * 1000:.0f} ms, max {worst * 1000:.0f} ms"
        assert grown < 100 * MB, f"the broker grew by {grown / MB:.0f} MB"
        assert admin.call(ApiKey.Metadata, 12, {"topics": None}).brokers
    segments = sorted(str(p) for p in tmp_path.rglob("*.log"))
    assert segments
    dumped = subprocess.run([sys.executable, "-m", "odradek", "dump-log", "--deep-iteration", "--files", ",".join(segments)], capture_output=True, text=True, timeout=120)
    assert dumped.returncode == 0, dumped.stderr
    assert "invalid bytes" not in dumped.stdout and "isValid: false" not in dumped.stdout, dumped.stdout[-2000:]
