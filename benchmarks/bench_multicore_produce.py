"""Issue 23's per-request benchmark over 1 and 2 worker processes (``worker.processes``, docs/multicore.md).

8 client processes, each producing one 100-byte record at a time (acks=1) and waiting for its
acknowledgement, against one ``odradek serve`` run with ``worker.processes`` 1 and then 2 (the same log
directory shape, a fresh one each). Reported: requests/s (acknowledged records per second over the measured
window) and broker CPU per request, the user+system CPU of every broker process (the supervisor and its
workers, from /proc) over the window divided by the requests.

Apache Kafka 3.9.1 from the suite's jars runs the same clients in the same run, side by side (its broker
JVM's CPU; ZooKeeper's is left out).

Run: ``python benchmarks/bench_multicore_produce.py [seconds] [1 | 2 | kafka ...]`` (default: 1 2 kafka); note
``uptime`` beside the figures: on a shared 2-core machine the clients compete with the broker for the cores.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

CLIENTS = 8
RECORD = b"x" * 100
BANNER = re.compile(r"started in \d+ ms: listeners \w+://[^:]+:(\d+)")


def _cpu_s(pids: list[int]) -> list[float]:
    """Each process's user+system CPU seconds so far."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            out.append(0.0)
            continue
        out.append((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))  # utime, stime
    return out


def _family(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [pid, *(int(p) for p in f.read().split())]
    except OSError:
        return [pid]


def _client(bootstrap: str, topic: str, start_at: float, stop_at: float, counts: "multiprocessing.Queue[int]") -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    producer.produce(topic, RECORD)
    producer.flush(30)  # connected and the topic's metadata known before the window
    while time.time() < start_at:
        time.sleep(0.001)
    done = 0
    while time.time() < stop_at:
        producer.produce(topic, RECORD)
        producer.flush(10)
        done += 1
    counts.put(done)


@contextlib.contextmanager
def odradek(workers: int) -> Iterator[tuple[str, list[int]]]:
    """``odradek serve`` with ``workers`` worker processes: its bootstrap and its processes' pids."""
    with tempfile.TemporaryDirectory(prefix="bench-multicore-") as log_dir:
        cmd = [sys.executable, "-m", "odradek", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={log_dir}",
               "--override", f"worker.processes={workers}", "--override", "num.partitions=8"]
        broker = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert broker.stdout is not None
        port = None
        for line in broker.stdout:
            if (match := BANNER.search(line)) is not None:
                port = int(match.group(1))
                break
        assert port is not None, "broker did not start"
        drain = subprocess.Popen(["cat"], stdin=broker.stdout, stdout=subprocess.DEVNULL)
        try:
            yield f"127.0.0.1:{port}", _family(broker.pid)
        finally:
            broker.terminate()
            broker.wait(60)
            drain.wait(10)


@contextlib.contextmanager
def kafka() -> Iterator[tuple[str, list[int]]]:
    """Apache Kafka 3.9.1 from the suite's jars (ZooKeeper mode), its JVM started as Kafka's scripts start it
    (G1, full compilation, 1 GiB heap; not the tests' quick-start options): its bootstrap and the JVM's pid."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "jvm"))
    import kafka_jvm

    with tempfile.TemporaryDirectory(prefix="bench-multicore-kafka-") as root:
        zookeeper = kafka_jvm.ZooKeeper(Path(root) / "zookeeper").start()
        broker = kafka_jvm.KafkaBroker(Path(root) / "kafka", zookeeper.connect, settings={"num.partitions": "8"})
        try:
            broker.start(heap="1G", as_shipped=True)
            assert broker.process is not None
            yield broker.bootstrap, [broker.process.pid]
        finally:
            broker.stop()
            zookeeper.stop()


def measure(broker: contextlib.AbstractContextManager[tuple[str, list[int]]], seconds: float) -> tuple[float, list[float]]:
    """(requests/s, broker CPU µs per request of each broker process: for odradek the supervisor, then worker
    0, 1...; one process when there is one)."""
    with broker as (bootstrap, pids):
        counts: multiprocessing.Queue[int] = multiprocessing.Queue()
        start_at = time.time() + 5
        stop_at = start_at + seconds
        clients = [multiprocessing.Process(target=_client, args=(bootstrap, "bench", start_at, stop_at, counts)) for _ in range(CLIENTS)]
        for client in clients:
            client.start()
        time.sleep(max(0.0, start_at - time.time()))
        cpu_before = _cpu_s(pids)
        time.sleep(max(0.0, stop_at - time.time()))
        cpu_after = _cpu_s(pids)
        requests = sum(counts.get(timeout=60) for _ in clients)
        for client in clients:
            client.join(30)
    return requests / seconds, [(after - before) / max(requests, 1) * 1e6 for before, after in zip(cpu_before, cpu_after)]


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 15.0
    kinds = sys.argv[2:] or ["1", "2", "kafka"]
    print(f"load average before: {os.getloadavg()}")
    for kind in kinds:
        rate, cpu = measure(kafka() if kind == "kafka" else odradek(int(kind)), seconds)
        name = "Apache Kafka 3.9.1" if kind == "kafka" else f"odradek worker.processes={kind}"
        parts = "" if len(cpu) == 1 else " (supervisor, worker 0, 1...: " + ", ".join(f"{c:.0f}" for c in cpu) + ")"
        print(f"{name}: {rate:,.0f} requests/s, {sum(cpu):,.0f} µs broker CPU per request{parts} (load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
