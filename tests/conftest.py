"""Shared by every test directory: a bare protocol connection for wire-level tests, the real Kafka, and an
odradek set up as that Kafka."""

from __future__ import annotations

import itertools
import os
import socket
import struct
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

# Before odradek is imported, and inherited by the brokers tests start: every struct encoded under test
# refuses keys its struct never declares (a misspelled field would otherwise encode its default silently).
os.environ["ODRADEK_CHECK_FIELD_NAMES"] = "1"

from odradek import Broker  # noqa: E402
from odradek.protocol.api import ApiKey, decode_response, encode_request  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "jvm"))

import kafka44_jvm  # noqa: E402
import kafka_jvm  # noqa: E402
import tool_runner  # noqa: E402


# Tests `make test` runs on their own after the parallel run, in a process of their own: those whose assertions
# are about time (latency under load, rates), so no other test's load can fail them; and the mixed Kafka/odradek
# clusters (beside another cluster file the Kafka-led one once never refilled its ISRs within the minute its
# steps allow; alone it passes: the cause is not known yet).
SERIAL = (
    "tests/broker/test_event_loop_stalls.py",
    "tests/broker/test_hostile_connections.py",
    "tests/broker/test_request_quota.py",
    "tests/e2e/test_quota_throttling.py",
    "tests/cluster/test_mixed_cluster.py",
)
# Cluster fault tests (fail-over within a ZooKeeper session timeout, under a checked load): each starts
# ZooKeeper and brokers in network namespaces of its own (a harness slot each), so they run between the
# parallel run and the serial one, beside each other only, three clusters at a time (see work_unit); longest
# file first.
CLUSTER_FAULTS = (
    "tests/cluster/test_leader_faults.py",
    "tests/cluster/test_followers_paused.py",
    "tests/cluster/test_transactions_cluster.py",
    "tests/cluster/test_transactions_failover.py",
    "tests/cluster/test_coordinator_failover.py",
    "tests/cluster/test_rolling_restart.py",
    "tests/cluster/test_full_disk.py",
    "tests/cluster/test_log_dir_failure.py",
)
THREAD_TIMEOUT = pytest.mark.timeout(method="thread")
"""The cluster fault tests' timeout (pyproject's seconds): by a thread that prints every thread's stack and ends
the worker. pytest-timeout's default, SIGALRM, raises in the main thread only if the signal reaches it: one such
test once hung in ``Producer.flush``, its main thread waiting in a delivery callback for a lock, while the alarm
went to one of librdkafka's threads. The harness removes what the ended worker's cluster left when its slot is
next taken."""
# The parallel part's longest test files, longest first (the sum of their tests' times in one run of that
# part: its "longest test files" section), which it starts first (see longest_first): files of one or two long
# tests (a cluster's fail-over, a fresh clone's install) belong here, or they come last. A stale entry only
# costs balance, never a test. The Spark files come first: they are one unit of work (SPARK), the longest,
# and the streaming ones lead it, run by a worker that has opened few descriptors yet (py4j's callback server
# for foreachBatch select()s, and fails on a descriptor past 1024).
LONGEST = (
    "tests/spark/test_kafka_streaming.py",
    "tests/spark/test_pipeline.py",
    "tests/spark/test_odradek_log_source.py",
    "tests/spark/test_kafka_source.py",
    "tests/spark/test_odradek_log_broker.py",
    "tests/spark/test_kafka_source_transactions.py",
    "tests/spark/test_kafka_sink.py",
    "tests/e2e/test_share_groups.py",
    "tests/protocol/test_codec_machine.py",
    "tests/e2e/test_consumer_group_protocol.py",
    "tests/tools/test_console.py",
    "compat-tests/test_groups.py",
    "tests/e2e/test_transactions.py",
    "tests/e2e/test_oauthbearer_jwks.py",
    "tests/protocol/test_roundtrip.py",
    "tests/controller/test_share_group_failover_cluster.py",
    "tests/e2e/test_gssapi.py",
    "tests/e2e/test_produce_consume.py",
    "tests/tools/test_admin_commands.py",
    "tests/controller/test_consumer_group_failover_cluster.py",
    "tests/controller/test_secure_cluster.py",
    "tests/e2e/test_groups_clients.py",
    "compat-tests/test_restarts.py",
    "tests/e2e/test_multicore.py",
    "tests/broker/test_startup.py",
    "tests/e2e/test_security.py",
    "tests/controller/test_leader_balance_cluster.py",
    "compat-tests/test_offsets.py",
    "tests/broker/test_fuzz.py",
    "tests/test_packaging.py",
    "tests/e2e/test_log_dir_interop.py",
    "tests/controller/test_leader_election.py",
    "tests/controller/test_reassignment.py",
    "tests/controller/test_transactions_v2_cluster.py",
    "compat-tests/test_produce_consume.py",
    "tests/e2e/test_java_client.py",
    "tests/e2e/test_transactions_v2.py",
    "tests/e2e/test_kafka44_harness.py",
    "tests/controller/test_reassignment_tool.py",
    "tests/cluster/test_min_insync_replicas.py",
    "tests/e2e/test_transactions_tools.py",
    "tests/broker/test_acceptor.py",
    "tests/e2e/test_kafka44_wire_format.py",
    "tests/e2e/test_kafka_tools.py",
    "tests/controller/test_zk_security.py",
    "tests/controller/test_zk_broker_cluster.py",
    "tests/controller/test_zk_cluster_with_kafka.py",
    "tests/protocol/test_codec_threads.py",
    "tests/test_layering.py",
    "tests/broker/test_acls.py",
    "tests/controller/test_alter_partition.py",
    "tests/broker/test_replica_fetcher.py",
    "tests/broker/test_quota_values_wire.py",
    "tests/broker/test_request_limits_wire.py",
    "tests/controller/test_share_group_lag_cluster.py",
)
ROOT = Path(__file__).resolve().parent.parent
assert all((ROOT / path).is_file() for path in SERIAL + CLUSTER_FAULTS + LONGEST), "a SERIAL, CLUSTER_FAULTS or LONGEST entry names no test file"


PARTS = {"serial": SERIAL, "cluster_faults": CLUSTER_FAULTS}
"""The marker expression of each part `make test` runs after the parallel one, and the files it runs."""


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``-m serial`` or ``-m cluster_faults`` alone imports only that part's test files: the others hold no test
    with the marker (only the lists above give it), and importing them costs each process seconds."""
    files = PARTS.get(config.getoption("markexpr", ""))
    if files is None or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    return collection_path.relative_to(ROOT).as_posix() not in files or None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.path.relative_to(ROOT).as_posix()
        if path in SERIAL:
            item.add_marker(pytest.mark.serial)
        elif path in CLUSTER_FAULTS:
            item.add_marker(pytest.mark.cluster_faults)
            item.add_marker(THREAD_TIMEOUT)
    items[:] = longest_first(items)


FILE_SECONDS: dict[str, float] = {}
"""Each test file's seconds in this run (its tests' setup, call and teardown), summed where reports arrive: the
xdist controller, or the one process without xdist."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    FILE_SECONDS[path] = FILE_SECONDS.get(path, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The session's shared JVMs (the real Kafkas, the tool runners) stopped while the run still waits for this
    process: its exit handlers get only 10 s under pytest-xdist (kafka_jvm.stop_shared)."""
    tool_runner.stop_all()
    kafka_jvm.stop_shared()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The longest files of the run, which :data:`LONGEST` should start with (its order is taken from here)."""
    if not FILE_SECONDS:
        return
    terminalreporter.section("longest test files")
    for path, seconds in sorted(FILE_SECONDS.items(), key=lambda entry: -entry[1])[:25]:
        terminalreporter.write_line(f"{seconds:8.1f}s {path}")


def longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The files of :data:`LONGEST` and then :data:`CLUSTER_FAULTS` first, in that order, then the others by their
    number of tests, most first.

    `make test` runs each part with ``--dist loadfile --no-loadscope-reorder``: xdist hands a worker the next
    file in this order whenever it runs short. Left to itself it orders files by their number of tests, which
    put long files of one or two tests (a cluster, a fresh clone's install) last, where one worker ran them
    while the other had nothing left; the longest first leaves the short ones to even out the end."""
    files: dict[Path, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    rank = {ROOT / path: i for i, path in enumerate(LONGEST + CLUSTER_FAULTS)}
    ordered = sorted(files.items(), key=lambda entry: (rank.get(entry[0], len(rank)), -len(entry[1])))
    return [item for _, file_items in ordered for item in file_items]


SPARK = "tests/spark/"
"""The Spark test files' folder: one unit of work for xdist (:func:`work_unit`)."""


def work_unit(nodeid: str) -> str:
    """What xdist hands a worker at once: a test file, except that

    * every Spark file is one unit (:data:`SPARK`): each worker that runs one starts a SparkSession of its
      own (a JVM, ~10 s of CPU and 1 GiB), and one session serves them all;
    * a cluster fault file is one unit per broker kind (the first part of its tests' parameters): its
      module-scoped cluster is started once per kind in any case, so the kinds run on different workers at
      no extra cost, and no file of one worker sets the part's length."""
    path, _, test = nodeid.partition("::")
    if path.startswith(SPARK):
        return SPARK
    if path in CLUSTER_FAULTS and "[" in test:
        return f"{path}[{test.split('[', 1)[1].split('-', 1)[0].rstrip(']')}]"
    return path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` over :func:`work_unit`'s units instead of files."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class WorkUnits(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return WorkUnits(config, log)


class Wire:
    """A bare Kafka protocol connection to a real broker, for what no client library will send."""

    def __init__(self, bootstrap: str, client_id: str = "wire-test") -> None:
        host, port = bootstrap.rsplit(":", 1)
        # Longer than the timeout_ms most requests here carry (5-10 s): a broker that answers a slow CreateTopics
        # at its timeout, as a real Kafka on a loaded machine does, is read rather than cut off at that moment.
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation = itertools.count(1)
        self.client_id = client_id

    def call(self, api: ApiKey, version: int, body: dict) -> Any:
        """Send one request and decode its response body, checking the correlation id comes back."""
        correlation_id = next(self.correlation)
        self.send(encode_request(api, version, correlation_id, body, client_id=self.client_id))
        got, response = decode_response(api, version, self.read_frame())
        assert got == correlation_id
        return response

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        """One size-prefixed response frame (without its size); raises ConnectionError at end of stream."""
        (size,) = struct.unpack(">i", self.read_exactly(4))
        return self.read_exactly(size)

    def read_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the connection (EOF or reset) within ``timeout`` without answering."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()

    @classmethod
    def call_once(cls, bootstrap: str, api: ApiKey, version: int, body: dict) -> Any:
        """One request on a connection of its own, closed after the answer."""
        wire = cls(bootstrap)
        try:
            return wire.call(api, version, body)
        finally:
            wire.close()


@pytest.fixture
def connect() -> Iterator[Callable[..., Wire]]:
    """``connect(bootstrap)`` opens a :class:`Wire`; all are closed after the test."""
    opened: list[Wire] = []

    def open_(bootstrap: str, client_id: str = "wire-test") -> Wire:
        wire = Wire(bootstrap, client_id)
        opened.append(wire)
        return wire

    yield open_
    for wire in opened:
        wire.close()


@pytest.fixture(scope="session")
def real_kafka() -> kafka_jvm.RealKafka:
    """Apache Kafka 3.9.1 in ZooKeeper mode, started once for the whole run (see tests/jvm/kafka_jvm.py).

    A missing jar set fails the test: ``make test`` fetches them, so a skip would hide a broken set-up.
    """
    try:
        return kafka_jvm.shared_kafka()
    except kafka_jvm.JvmUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def real_kafka44() -> kafka44_jvm.RealKafka44:
    """Apache Kafka 4.4.0, one combined KRaft node started once for the whole run (see tests/jvm/kafka44_jvm.py);
    a missing jar set fails the test, as for :func:`real_kafka`."""
    try:
        return kafka44_jvm.shared_kafka44()
    except kafka_jvm.JvmUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def java44() -> kafka44_jvm.JavaPrograms:
    """tests/e2e/java44/*.java compiled once against kafka-clients 4.4.0: ``java44.run("Client44Probe", ...)``."""
    try:
        return kafka44_jvm.java_programs(sorted((ROOT / "tests" / "e2e" / "java44").glob("*.java")))
    except kafka_jvm.JvmUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def odradek_as_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """odradek set up as the real Kafka it is compared with (kafka_jvm): broker id 0, the same
    overrides, its own process. Shared by the modules that run a client or tool against both brokers and
    compare what it shows (they keep apart by topic and group names, as they must on the shared Kafka)."""
    config = {"broker.id": "0", **kafka_jvm.BROKER_SETTINGS}
    with Broker(log_dir=tmp_path_factory.mktemp("odradek-as-kafka"), subprocess=True, config=config) as b:
        yield b
