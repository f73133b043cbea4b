"""A mutation fuzz of the wire: valid requests of every advertised API and version, encoded from the generated
message declarations, then damaged (bytes, size prefixes, versions, lengths and counts) and sent to a real
broker process, one at a time and then from several senders at once (:data:`BURST_S`), while a well-behaved
client produces and fetches on its own connection.

What a user would observe is asserted: each damaged request is answered or its connection closed (never a
wedge), the well-behaved client keeps being served promptly, the broker's memory stays bounded, its log
holds no traceback, and every segment it wrote still parses with dump-log afterwards. What earlier fuzz runs
found is sent first, as fixed regressions (:data:`REGRESSIONS`).
"""

from __future__ import annotations

import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence, TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek import Broker
from odradek.broker.kafka_apis import HANDLERS
from odradek.protocol.api import ApiKey, decode_request, encode_request
from odradek.protocol.records import Record, build_batch
from tests.broker.test_request_limits_wire import describe_groups_v5, legacy_message, wait_for_coordinator, wrapping_batch

EXAMPLES = int(os.environ.get("ODRADEK_FUZZ_EXAMPLES", "4000"))
BURST_S = float(os.environ.get("ODRADEK_FUZZ_BURST_S", "10"))
SENDERS = int(os.environ.get("ODRADEK_FUZZ_SENDERS", "4"))
"""After the examples (one at a time), SENDERS threads send damaged requests at once for BURST_S seconds: the
load under which issue 26's fuzz found a stall, about 1,100 frames a second. At that issue's scale:
ODRADEK_FUZZ_BURST_S=150 ODRADEK_FUZZ_SENDERS=6 (some 170,000 frames)."""
STALL_S = 0.5
"""A steady round trip slower than this is reported with the damaged requests in flight while it waited."""
MB = 1024 * 1024
STEADY = "steady"
RECOMPRESSED = "fuzzed-gzip"
"""A topic whose batches are rebuilt into its codec: the broker decodes and re-encodes their records."""

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


def produce(topic: str, version: int, records: bytes) -> bytes:
    return encode_request(ApiKey.Produce, version, 7, {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}, client_id="fuzzer")


QUOTAS_AT_THE_EDGES = {"producer_byte_rate": float("nan"), "request_percentage": float("nan"), "controller_mutation_rate": 0.0}
"""Quotas no operator would set, which Kafka stores (NaN as 0) and measures in doubles without failing."""


def alter_quotas(remove: bool) -> bytes:
    ops = [{"key": key, "value": value, "remove": remove} for key, value in QUOTAS_AT_THE_EDGES.items()]
    return encode_request(ApiKey.AlterClientQuotas, 1, 7, {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": "fuzz-quota"}], "ops": ops}], "validate_only": False}, client_id="fuzzer")


def create_topic(name: str) -> bytes:
    return encode_request(ApiKey.CreateTopics, 7, 7, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000}, client_id="fuzz-quota")


def acl_filter(**codes: int) -> dict:
    return {"resource_type_filter": 2, "resource_name_filter": "fuzzed", "pattern_type_filter": 3, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1, **codes}


def acl_creation(**codes: int) -> dict:
    return {"resource_type": 2, "resource_name": "fuzzed", "resource_pattern_type": 3, "principal": "User:fuzz", "host": "*", "operation": 3, "permission_type": 3, **codes}


REGRESSIONS: list[tuple[str, bytes, str]] = [
    # (what, frame, "answered" or "closed")
    ("a compact string over 32,767 bytes (DescribeGroups v5)", describe_groups_v5(32768), "closed"),
    ("a member id too long for JoinGroup's answer (a client id of 32,767 bytes)", encode_request(ApiKey.JoinGroup, 5, 7, {"group_id": "fuzz-group", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}, client_id="c" * 32767), "answered"),
    ("OffsetCommit v4 whose retention overflows the expiry", encode_request(ApiKey.OffsetCommit, 4, 7, {"group_id": "fuzz-group", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": 2**63 - 1, "topics": [{"name": "fuzzed", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]}, client_id="fuzzer"), "answered"),
    ("OffsetCommit v2 whose retention overflows the expiry", encode_request(ApiKey.OffsetCommit, 2, 7, {"group_id": "fuzz-group", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -(2**63), "topics": [{"name": "fuzzed", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]}, client_id="fuzzer"), "answered"),
    ("a batch whose record timestamp wraps past Long.MAX_VALUE", produce("fuzzed", 9, wrapping_batch()), "answered"),
    ("Fetch v3 that must down-convert that record", encode_request(ApiKey.Fetch, 3, 7, BODIES[ApiKey.Fetch], client_id="fuzzer"), "answered"),
    ("that batch recompressed into the topic's codec", produce(RECOMPRESSED, 9, wrapping_batch()), "answered"),
    ("a legacy message with a negative timestamp, up-converted", produce("fuzzed", 2, legacy_message(-5)), "answered"),
    ("quotas of NaN and 0", alter_quotas(remove=False), "answered"),
    ("a produce under them", encode_request(ApiKey.Produce, 9, 7, {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": "fuzzed", "partition_data": [{"index": 0, "records": build_batch([Record(value=b"q")])}]}]}, client_id="fuzz-quota"), "answered"),
    *((f"a topic created under them ({n})", create_topic(f"fuzz-quota-{n}"), "answered") for n in (1, 2)),
    ("the quotas removed", alter_quotas(remove=True), "answered"),
    *((f"{api.name} v{version} with undefined ACL codes", encode_request(api, version, 7, body, client_id="fuzzer"), "answered") for version in range(4) for api, body in (
        (ApiKey.CreateAcls, {"creations": [acl_creation(resource_type=-128, resource_pattern_type=67, operation=-1, permission_type=17)]}),
        (ApiKey.DescribeAcls, acl_filter(resource_type_filter=-128, pattern_type_filter=67, operation=-1, permission_type=17)),
        (ApiKey.DeleteAcls, {"filters": [acl_filter(resource_type_filter=-128, pattern_type_filter=67, operation=-1, permission_type=17)]}),
    )),
]
"""What earlier fuzz runs found (issue 26): answers that could not be encoded, numbers that overflowed when
re-packed (a retention, a record timestamp) or were divided by (a quota), and ACL codes outside Kafka's
enums. tests/broker/test_request_limits_wire.py, test_quota_values_wire.py and test_acls.py compare each kind
with the real Kafka; here each must be answered (or closed) with nothing unhandled in the broker's log."""


def valid_frame(key: int, version: int, correlation_id: int) -> bytes:
    try:
        return encode_request(key, version, correlation_id, BODIES.get(key, {}), client_id="fuzzer")
    except Exception:  # a rich body field that this version lacks or types differently: the defaults then
        return encode_request(key, version, correlation_id, {}, client_id="fuzzer")


T = TypeVar("T")


class Pick(Protocol):
    """Where a damage's choices come from: Hypothesis (the examples, shrunk when one fails) or a seeded
    random generator (the burst, too fast for Hypothesis's bookkeeping)."""

    def one_of(self, options: Sequence[T]) -> T: ...

    def between(self, low: int, high: int) -> int: ...

    def blob(self, low: int, high: int) -> bytes: ...


@dataclass
class Drawn:
    draw: st.DrawFn

    def one_of(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(options))

    def between(self, low: int, high: int) -> int:
        return self.draw(st.integers(low, high))

    def blob(self, low: int, high: int) -> bytes:
        return self.draw(st.binary(min_size=low, max_size=high))


class Seeded(random.Random):
    def one_of(self, options: Sequence[T]) -> T:
        return self.choice(options)

    def between(self, low: int, high: int) -> int:
        return self.randint(low, high)

    def blob(self, low: int, high: int) -> bytes:
        return self.randbytes(self.randint(low, high))


def mutate(frame: bytes, pick: Pick) -> bytes:
    data = bytearray(frame)
    kind = pick.one_of(["byte", "int", "size", "version", "truncate", "insert"])
    pos = pick.between(4, max(4, len(data) - 1))
    if kind == "byte" and len(data) > 4:
        data[pos] = pick.between(0, 255)
    elif kind == "int" and len(data) > 5:
        width = pick.one_of([1, 2, 4])
        value = pick.one_of(INT_EDGES)
        pos = min(pos, len(data) - width)
        data[pos : pos + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "big")
    elif kind == "size":
        edge = pick.one_of([True, False])
        size = pick.one_of([0, 1, 3, -1, -(2**31), 2**31 - 1, 100 * MB, 100 * MB + 1]) if edge else pick.between(len(data) - 8, len(data) + 8)
        data[0:4] = struct.pack(">i", size)
        return bytes(data)
    elif kind == "version":
        edge = pick.one_of([True, False])
        data[6:8] = struct.pack(">h", pick.one_of([-1, 0x7FFF, 0, 99]) if edge else pick.between(0, 20))
    elif kind == "truncate":
        del data[pick.between(4, len(data)) :]
    elif kind == "insert":
        data[pos:pos] = pick.blob(1, 16)
    data[0:4] = struct.pack(">i", len(data) - 4)  # damage inside a consistently sized frame
    return bytes(data)


def damage(pick: Pick) -> tuple[int, bytes, bool]:
    """(api key, bytes to send, whether the frame is whole: its size prefix counts exactly the bytes after it)."""
    key, version = pick.one_of(ADVERTISED)
    data = valid_frame(key, version, 7)
    for _ in range(pick.between(1, 3)):
        data = mutate(data, pick)
    (size,) = struct.unpack(">i", data[:4])
    return key, data, size == len(data) - 4


@st.composite
def damaged_request(draw: st.DrawFn) -> tuple[int, bytes, bool]:
    return damage(Drawn(draw))


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
        self.slowest: list[tuple[float, float]] = []
        """(latency, when it started) of the round trips over STALL_S, to find what the fuzz sent meanwhile."""
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.offset = 0

    def round_trip(self) -> None:
        body = {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": STEADY, "partition_data": [{"index": 0, "records": build_batch([Record(value=b"steady")])}]}]}
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
            latency = time.monotonic() - started
            self.latencies.append(latency)
            if latency > STALL_S:
                self.slowest.append((latency, started))
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


def regression_outcome(sock: socket.socket) -> str:
    """"answered" (a whole answer to correlation id 7) or "closed" within 10 s."""
    sock.settimeout(10)
    try:
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        data = sock.recv(size, socket.MSG_WAITALL)
    except (ConnectionResetError, struct.error):
        return "closed"
    return "answered" if len(data) == size and data[:4] == struct.pack(">i", 7) else f"a partial or wrong answer: {data[:16].hex()}"


def in_flight(slowest: list[tuple[float, float]], sent: list[tuple[float, float, str]]) -> str:
    """The damaged requests in flight during the slowest steady round trips (what held the broker, if one did)."""
    report = []
    for latency, started in sorted(slowest, reverse=True)[:3]:
        overlapping = [what for begun, ended, what in sent if begun < started + latency and ended > started]
        report.append(f"{latency * 1000:.0f} ms beside {overlapping[:5]}")
    return "; ".join(report)


def test_damaged_requests_of_every_api_leave_the_broker_serving(tmp_path: Path, connect) -> None:
    config = {"auto.create.topics.enable": "true", "num.partitions": "1"}
    with Broker(log_dir=tmp_path, subprocess=True, config=config) as broker:
        admin = connect(broker.bootstrap)
        for name, configs in ((STEADY, []), ("fuzzed", []), (RECOMPRESSED, [{"name": "compression.type", "value": "gzip"}])):
            created = admin.call(ApiKey.CreateTopics, 7, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "configs": configs}], "timeout_ms": 5000})
            assert created.topics[0].error_code == 0
        for key, version in ADVERTISED:  # compile every codec first: compiling is not thread-safe
            valid_frame(key, version, 0)
        steady = SteadyClient(broker.bootstrap, type(admin))
        steady.round_trip()  # the first append and fetch open files: the steady state is what is measured
        steady.start()
        host, port = broker.bootstrap.rsplit(":", 1)
        wait_for_coordinator(admin, "fuzz-group")  # so that the group requests below reach the coordinator
        for what, frame, expected in REGRESSIONS:
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(frame)
                assert regression_outcome(sock) == expected, what
        before = rss(broker.pid)
        wedged: list[tuple[int, bytes]] = []
        sent: list[tuple[float, float, str]] = []
        outcomes: Counter[str | None] = Counter()
        counting = threading.Lock()

        def send(case: tuple[int, bytes, bool]) -> None:
            key, data, whole = case
            started = time.monotonic()
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                try:
                    sock.sendall(data)
                except (ConnectionResetError, BrokenPipeError):
                    return  # closed at a bad size prefix before all was sent
                if whole and key not in WAITING_APIS and not unanswered_produce(data):
                    seen = outcome(sock, 5.0)
                    with counting:
                        outcomes[seen] += 1
                    if seen is None:
                        wedged.append((key, data))
            sent.append((started, time.monotonic(), f"{ApiKey(key).name} {data[:48].hex()}"))

        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=os.environ.get("ODRADEK_FUZZ_RANDOM") is None, suppress_health_check=list(HealthCheck))
        @given(damaged_request())
        def send_damaged(case: tuple[int, bytes, bool]) -> None:
            send(case)

        burst_errors: list[str] = []

        def burst(seed: int | None, until: float) -> None:
            pick = Seeded(seed)
            while time.monotonic() < until:
                try:
                    send(damage(pick))
                except Exception as exc:  # a refused or timed-out connect: what the assertions below are about
                    burst_errors.append(repr(exc))
                    return

        started = time.monotonic()
        send_damaged()
        until = time.monotonic() + BURST_S
        senders = [threading.Thread(target=burst, args=(None if os.environ.get("ODRADEK_FUZZ_RANDOM") else n, until)) for n in range(SENDERS)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(BURST_S + 30)
        fuzz_s = time.monotonic() - started
        steady.stop.set()
        steady.join(10)
        grown = rss(broker.pid) - before
        assert broker._proc.poll() is None, "the broker died:\n" + "\n".join(broker.output)
        assert outcomes.get("answered", 0) > EXAMPLES // 50 and outcomes.get("closed", 0) > EXAMPLES // 50, outcomes  # both kinds exercised
        assert not wedged, f"{len(wedged)} whole requests neither answered nor closed, e.g. {wedged[:3]}"
        assert not burst_errors, burst_errors[:3]
        assert not steady.failures, steady.failures[:5]
        latencies = sorted(steady.latencies)
        assert len(latencies) > fuzz_s * 5, f"the steady client made {len(latencies)} round trips in {fuzz_s:.0f} s"
        p99, worst = latencies[int(len(latencies) * 0.99)], latencies[-1]
        print(f"fuzz: {len(sent)} frames in {fuzz_s:.0f} s ({dict(outcomes)}); steady round trips p99 {p99 * 1000:.0f} ms, max {worst * 1000:.0f} ms; broker grew {grown / MB:.0f} MB")  # with -s
        assert p99 < 1.0 and worst < 2.0, f"steady client latency p99 {p99 * 1000:.0f} ms, max {worst * 1000:.0f} ms; " + in_flight(steady.slowest, sent)
        assert grown < 100 * MB, f"the broker grew by {grown / MB:.0f} MB"
        assert admin.call(ApiKey.Metadata, 12, {"topics": None}).brokers
        assert not broker.tracebacks, f"{len(broker.tracebacks)} tracebacks in the broker's log, after: {broker.tracebacks[:5]}"
    segments = sorted(str(p) for p in tmp_path.rglob("*.log"))
    assert segments
    dumped = subprocess.run([sys.executable, "-m", "odradek", "dump-log", "--deep-iteration", "--files", ",".join(segments)], capture_output=True, text=True, timeout=120)
    assert dumped.returncode == 0, dumped.stderr
    assert "invalid bytes" not in dumped.stdout and "isValid: false" not in dumped.stdout, dumped.stdout[-2000:]
