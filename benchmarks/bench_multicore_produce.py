"""Issue 23's per-request benchmark over 1 and 2 worker processes (``worker.processes``, docs/multicore.md).

8 client processes, each producing one 100-byte record at a time (acks=1) and waiting for its
acknowledgement, against one ``odradek serve`` run with ``worker.processes`` 1 and then 2 (the same log
directory shape, a fresh one each). Reported: requests/s (acknowledged records per second over the measured
window) and broker CPU per request, the user+system CPU of every broker process (the supervisor and its
workers, from /proc) over the window divided by the requests.

Apache Kafka 3.9.1 from the suite's jars runs the same clients in the same run, side by side (its broker
JVM's CPU; ZooKeeper's is left out).

Clients (``--client``): ``confluent`` (the default), confluent-kafka producers; ``light``, each process sends a
pre-encoded Produce v9 request of one 100-byte record (acks=1, its own partition of the topic's 8) over a plain
blocking socket and reads its answer (checking its error code), at a small part of librdkafka's client CPU, so
that on a two-core machine the broker's processes get the CPU to show what a second worker gives.

``--placement fronts`` starts odradek with ``worker.placement=fronts``: every client connection goes to a
front (worker ≥ 1), none to worker 0, so worker 0's figure is its CPU per request forwarded to it (with the
default ``fewest`` the supervisor puts about half the connections on worker 0's own socket).

Run: ``python benchmarks/bench_multicore_produce.py [seconds] [1 | 2 | kafka ...] [--client light]
[--placement fronts]`` (default: 15 s, 1 2 kafka); note ``uptime`` beside the figures: on a shared 2-core
machine the clients compete with the broker for the cores.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

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


class LightClient:
    """A blocking socket sending one pre-encoded request at a time and reading its answer."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = memoryview(bytearray(1 << 16))

    def call(self, request: bytes) -> memoryview:
        """The answer's frame (its size included), valid until the next call."""
        sock, buffer = self.sock, self.buffer
        sock.sendall(request)
        got = 0
        while got < 4 or got < 4 + int.from_bytes(buffer[:4], "big"):
            n = sock.recv_into(buffer[got:])
            if not n:
                raise ConnectionError("broker closed the connection")
            got += n
        return buffer[:got]


def _light_client(bootstrap: str, topic: str, start_at: float, stop_at: float, counts: "multiprocessing.Queue[int]", partition: int) -> None:
    import uuid

    from odradek.protocol.api import ApiKey, decode_response, encode_request
    from odradek.protocol.records import Record, build_batch

    client = LightClient(bootstrap)
    metadata = encode_request(ApiKey.Metadata, 12, 0, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
    deadline = time.time() + 30
    while True:  # the topic created and its partitions led
        _, answer = decode_response(ApiKey.Metadata, 12, bytes(client.call(metadata)[4:]))
        if answer.topics[0].error_code == 0 and all(p.error_code == 0 and p.leader_id >= 0 for p in answer.topics[0].partitions):
            break
        assert time.time() < deadline, answer
        time.sleep(0.1)
    body = {"acks": 1, "timeout_ms": 30000, "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": build_batch([Record(value=RECORD)])}]}]}
    produce = encode_request(ApiKey.Produce, 9, 1, body, client_id="bench-light")
    # v9's answer: correlation id, header tags, 1 topic, its name, 1 partition, its index, then the error code
    error_at = 4 + 4 + 1 + 1 + 1 + len(topic.encode()) + 1 + 4
    while True:  # the first answer decoded in full: the error code where it is looked for
        answer = client.call(produce)
        _, decoded = decode_response(ApiKey.Produce, 9, bytes(answer[4:]))
        code = decoded.responses[0].partition_responses[0].error_code
        assert int.from_bytes(answer[error_at : error_at + 2], "big", signed=True) == code
        if code == 0:
            break
        assert time.time() < deadline, code
        time.sleep(0.1)
    while time.time() < start_at:
        time.sleep(0.001)
    done = 0
    while time.time() < stop_at:
        answer = client.call(produce)
        if answer[error_at] or answer[error_at + 1]:
            raise AssertionError(f"produce failed: error {int.from_bytes(answer[error_at : error_at + 2], 'big', signed=True)}")
        done += 1
    counts.put(done)


@contextlib.contextmanager
def odradek(workers: int, placement: str = "fewest") -> Iterator[tuple[str, list[int]]]:
    """``odradek serve`` with ``workers`` worker processes: its bootstrap and its processes' pids."""
    with tempfile.TemporaryDirectory(prefix="bench-multicore-") as log_dir:
        cmd = [sys.executable, "-m", "odradek", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={log_dir}",
               "--override", f"worker.processes={workers}", "--override", "num.partitions=8", "--override", f"worker.placement={placement}"]
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


def measure(broker: contextlib.AbstractContextManager[tuple[str, list[int]]], seconds: float, light: bool = False) -> tuple[float, list[float]]:
    """(requests/s, broker CPU µs per request of each broker process: for odradek the supervisor, then worker
    0, 1...; one process when there is one)."""
    with broker as (bootstrap, pids):
        counts: multiprocessing.Queue[int] = multiprocessing.Queue()
        start_at = time.time() + 5
        stop_at = start_at + seconds
        client: Callable[..., None] = _light_client if light else _client
        clients = [multiprocessing.Process(target=client, args=(bootstrap, "bench", start_at, stop_at, counts, *((i,) if light else ()))) for i in range(CLIENTS)]
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seconds", nargs="?", type=float, default=15.0)
    parser.add_argument("kinds", nargs="*", default=["1", "2", "kafka"], help="1, 2 (worker.processes) or kafka")
    parser.add_argument("--client", choices=("confluent", "light"), default="confluent")
    parser.add_argument("--placement", choices=("fewest", "fronts"), default="fewest", help="odradek's worker.placement")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}; {args.client} clients, placement {args.placement}")
    for kind in args.kinds:
        rate, cpu = measure(kafka() if kind == "kafka" else odradek(int(kind), args.placement), args.seconds, args.client == "light")
        name = "Apache Kafka 3.9.1" if kind == "kafka" else f"odradek worker.processes={kind}"
        parts = "" if len(cpu) == 1 else " (supervisor, worker 0, 1...: " + ", ".join(f"{c:.0f}" for c in cpu) + ")"
        print(f"{name}: {rate:,.0f} requests/s, {sum(cpu):,.0f} µs broker CPU per request{parts} (load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
