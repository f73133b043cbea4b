"""Start-up: what a user waits for before a broker accepts connections (issue 21).

* ``Broker()`` in a fresh interpreter, imports included (``from odradek import Broker`` to ``start()``
  returning): the embedded broker tests start per test. Target ≤ 100 ms.
* ``odradek serve``, process start to its first answer (ApiVersions) (the interpreter's own start-up and
  the imports included). Target ≤ 300 ms.
* A restart with 2,000 partitions holding data (20 topics of 100, five records each), in-process and as
  ``odradek serve`` (process start to its first answer): every log is opened and its partition led again.

With valgrind installed, also the instructions ``Broker()``'s start runs beyond the interpreter's own start: a
count that other work on the machine does not change (wall and CPU times on a shared machine vary by tens of
percent), the figure issue 21's rounds compare (docs/performance.md, "Start-up").

* The floor: asyncio, anyio (with ``lowlevel``) and uvloop imported and an empty event loop
  started on its own thread, as ``Broker().start()`` starts its loop, with nothing of odradek's. What
  ``Broker()`` takes beyond it (in instructions, and in wall time best against best) is odradek's own.
* The start and a first test's first requests (:data:`FIRST_REQUESTS`): a cut of the start that only moved
  work to a first request would show here as no gain.

Each figure is the best of ``ODRADEK_BENCH_REPEAT`` runs (default 5) after one warm-up run (which writes the
bytecode caches a first run after an install would write), since interference on a shared machine only ever
slows a run. Python writes no bytecode caches when ``PYTHONDONTWRITEBYTECODE`` is set, and every import then
compiles its source: the children here run without it, as an installed package (whose caches ``pip``
writes) does.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from run import Result

REPEAT = int(os.environ.get("ODRADEK_BENCH_REPEAT", "5"))
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

EMBEDDED = """
import sys, time
started, cpu = time.perf_counter(), time.process_time()
from odradek import Broker
broker = Broker(log_dir=sys.argv[1]).start()
print((time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000, flush=True)
broker.stop()
"""
"""``time.process_time``: the CPU time of every thread of the process (the broker runs on its own), to the
microsecond where ``os.times`` counts clock ticks of 10 ms."""

COUNTED = """
import os, sys
from odradek import Broker
Broker(log_dir=sys.argv[1]).start()
os._exit(0)
"""
"""``Broker()``'s start alone, for valgrind (under which the stop's waits would take seconds)."""
FIRST_REQUESTS = """
import os, socket, struct, sys
from odradek import Broker
broker = Broker(log_dir=sys.argv[1]).start()
host, port = broker.bootstrap.rsplit(":", 1)
with socket.create_connection((host, int(port))) as s:
    for frame in sys.argv[2:]:
        s.sendall(bytes.fromhex(frame))
        s.recv(struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0], socket.MSG_WAITALL)
os._exit(0)
"""
"""``Broker()``'s start and a first test's first requests, each sent when the one before is answered (:func:`first_requests`):
what a test that starts a broker, creates a topic, produces and reads back costs the broker before its own work."""
BARE = "import os; os._exit(0)"
"""The interpreter's own start: what :data:`COUNTED` runs before its first line."""

FLOOR = """
import os, threading, time
started, cpu = time.perf_counter(), time.process_time()
import anyio, anyio.lowlevel

running = threading.Event()


async def main() -> None:
    anyio.lowlevel.current_token()
    running.set()
    await anyio.sleep_forever()


threading.Thread(target=anyio.run, args=(main,), kwargs={"backend": "asyncio", "backend_options": {"use_uvloop": True}}, daemon=True).start()
running.wait()
print((time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000, flush=True)
os._exit(0)
"""
"""What any broker on anyio and uvloop pays before a line of odradek's runs, measured as :data:`EMBEDDED` is:
asyncio (which imports ``ssl``, ``concurrent.futures``, ``inspect``, ``logging``), anyio with
``anyio.lowlevel`` (what ``Broker`` imports of it; ``anyio.from_thread``, 3.7 M instructions, it no longer does), uvloop, and an empty event loop
started on its own thread (anyio imports its asyncio backend then), up to the loop running, as
``Broker().start()`` waits for its loop."""

CREATE_TOPICS = """
import sys
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from odradek import Broker
with Broker(log_dir=sys.argv[1]) as broker:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(f"many-{i}", 100, 1) for i in range(20)], operation_timeout=120).values():
        future.result(180)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "enable.idempotence": True})
    for i in range(20):
        for partition in range(100):
            for _ in range(5):
                producer.produce(f"many-{i}", b"x" * 100, partition=partition)
        producer.poll(0)
    assert producer.flush(300) == 0
"""
"""20 topics of 100 partitions, each partition given five idempotently produced records: every log opened
at the restart has a segment, indexes and a producer-state snapshot to read, as a broker in use has."""


def first_requests() -> list[str]:
    """What a client sends first (ApiVersions v3, Metadata v12 for all topics), then CreateTopics v7 of one
    partition, a Produce v9 (acks=1) of one 100-byte record and a Fetch v12 of it, as hexadecimal frames."""
    from odradek.protocol.api import ApiKey, encode_request
    from odradek.protocol.records import Record, build_batch

    batch = build_batch([Record(timestamp=1_700_000_000_000, value=b"x" * 100)])
    fetched = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
    requests = [
        (ApiKey.ApiVersions, 3, {"client_software_name": "bench", "client_software_version": "1"}),
        (ApiKey.Metadata, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}),
        (ApiKey.CreateTopics, 7, {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 30000, "validate_only": False}),
        (ApiKey.Produce, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}),
        (ApiKey.Fetch, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                            "topics": [{"topic": "t", "partitions": [fetched]}], "forgotten_topics_data": [], "rack_id": ""}),
    ]
    return [encode_request(key, version, correlation, body, client_id="bench").hex() for correlation, (key, version, body) in enumerate(requests)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fresh_ms(script: str, *args: str) -> tuple[float, float]:
    """Wall and CPU milliseconds a script measures of itself in a fresh interpreter (the CPU time, user and
    system, is what a busy machine's other work does not inflate)."""
    done = subprocess.run([sys.executable, "-c", script, *args], env=ENV, capture_output=True, text=True, timeout=300, check=True)
    wall, cpu = done.stdout.split()[:2]
    return float(wall), float(cpu)


def embedded_ms(log_dir: str) -> tuple[float, float]:
    """``from odradek import Broker`` to ``Broker().start()`` returning, in a fresh interpreter."""
    return fresh_ms(EMBEDDED, log_dir)


def floor_ms(_: str) -> tuple[float, float]:
    """The floor (:data:`FLOOR`), in a fresh interpreter."""
    return fresh_ms(FLOOR)


def instructions(args: list[str]) -> int:
    """The instructions a fresh interpreter runs for ``args``: valgrind's cachegrind without its cache
    simulation, hash and address randomisation off (the same count to ~0.02% run to run)."""
    done = subprocess.run(
        ["setarch", "-R", "valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable, *args],
        env=ENV | {"PYTHONHASHSEED": "0"}, capture_output=True, text=True, timeout=600, check=True,
    )
    match = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if match is None:
        raise RuntimeError(f"no instruction count in valgrind's output: {done.stderr[-500:]}")
    return int(match.group(1).replace(",", ""))


def cpu_ms(pid: int) -> float:
    """A process's CPU time so far (user and system), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def answers(port: int) -> bool:
    """Whether the broker answers an ApiVersions request (a listening socket completes a connect before the
    broker accepts it, so only an answer says it serves)."""
    from odradek.protocol.api import ApiKey, encode_request

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(encode_request(ApiKey.ApiVersions, 0, 1, {}, client_id="bench"))
            return len(s.recv(4)) == 4
    except OSError:
        return False


def serve_ms(log_dir: str) -> tuple[float, float]:
    """``odradek serve`` launched to its first answer: wall and CPU milliseconds."""
    port = free_port()
    cmd = [sys.executable, "-m", "odradek", "serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={log_dir}"]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = started + 300
        while time.perf_counter() < deadline:
            if answers(port):
                return (time.perf_counter() - started) * 1000, cpu_ms(proc.pid)
            if proc.poll() is not None:
                raise RuntimeError(f"odradek serve exited with {proc.returncode}")
            time.sleep(0.002)
        raise RuntimeError("odradek serve did not accept connections within 300 s")
    finally:
        proc.terminate()
        proc.wait(60)


def best(measure: Callable[[str], tuple[float, float]], log_dir: str) -> tuple[float, float]:
    """The best wall time and the best CPU time of the runs."""
    measure(log_dir)  # warm-up: bytecode caches, page cache
    runs = [measure(log_dir) for _ in range(REPEAT)]
    return min(wall for wall, _ in runs), min(cpu for _, cpu in runs)


def run() -> list[Result]:
    with tempfile.TemporaryDirectory() as d:
        floor = best(floor_ms, d)
        embedded = best(embedded_ms, str(Path(d) / "embedded"))
        served = best(serve_ms, str(Path(d) / "served"))
        many = str(Path(d) / "many")
        subprocess.run([sys.executable, "-c", CREATE_TOPICS, many], env=ENV, check=True, timeout=600, capture_output=True)
        many_embedded = best(embedded_ms, many)
        many_served = best(serve_ms, many)
        counted = None
        if shutil.which("valgrind") and shutil.which("setarch"):  # after the runs above wrote the bytecode caches
            frames = first_requests()
            subprocess.run([sys.executable, "-c", FIRST_REQUESTS, str(Path(d) / "warm"), *frames], env=ENV, check=True, timeout=120)  # the requests' modules' caches
            bare = instructions(["-c", BARE])
            counted = (
                instructions(["-c", COUNTED, str(Path(d) / "counted")]) - bare,
                instructions(["-c", FLOOR]) - bare,
                instructions(["-c", FIRST_REQUESTS, str(Path(d) / "first"), *frames]) - bare,
            )
    load = os.getloadavg()[0]
    results = []
    if counted is not None:
        broker, below, first = counted
        results += [
            Result("Broker() start-up: instructions beyond the interpreter's own start (valgrind)", broker / 1e6, "M (lower is better)"),
            Result("the floor, asyncio + anyio + uvloop and an empty loop: instructions beyond the interpreter's own start", below / 1e6, "M"),
            Result("Broker() start-up beyond the floor: odradek's own instructions", (broker - below) / 1e6, "M (lower is better)"),
            Result("Broker() start-up and a first ApiVersions, Metadata, CreateTopics, Produce and Fetch: instructions", first / 1e6, "M (lower is better)"),
        ]
    for name, (wall, cpu) in (
        (f"Broker() start-up in a fresh interpreter, imports included (load {load:.1f})", embedded),
        ("the floor, asyncio + anyio + uvloop and an empty loop, as Broker() starts it", floor),
        ("Broker() start-up beyond the floor (best against best)", (embedded[0] - floor[0], embedded[1] - floor[1])),
        ("odradek serve: process start to its first answer", served),
        ("restart with 2,000 partitions: Broker(), imports included", many_embedded),
        ("restart with 2,000 partitions: odradek serve to its first answer", many_served),
    ):
        results += [Result(name, wall, "ms (lower is better)"), Result(f"{name}: CPU time", cpu, "ms (lower is better)")]
    return results


if __name__ == "__main__":
    for result in run():
        print(f"{result.name}: {result.value:,.1f} {result.unit}")
