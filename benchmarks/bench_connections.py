"""The connection layer: how many connections a broker takes how fast, and what each costs (issue 17).

A broker process (``Broker(subprocess=True)``) is opened ``ODRADEK_BENCH_CONNECTIONS`` (default 2,000)
connections one after another, with a listen queue that holds the burst (``socket.listen.backlog.size``,
as KIP-764 lets Kafka's users set), then with Kafka's default of 50. Its resident memory is read from /proc
before, with the connections open and idle, after they are closed, and after a second round (what closed
connections held serves new ones). Also the memory 20 connections cost that each announce a 100 MB request
and send nothing: it follows the bytes received, not the size prefix.

Then a burst: ``ODRADEK_BENCH_CONNECTIONS`` clients connecting at once, each sending ApiVersions and
waiting for its answer (as every client's first request), with the listen backlog at Kafka's default of
50 and at twice the burst, against odradek and against a real Kafka 3.9.1 (ZooKeeper mode, from
``.cache/jvm``) in the same run:
the time until every client has its answer, and the median and 99th percentile of a client's wait. A
client whose SYN the full listen queue dropped waits for its retry (1 s, then 3 s, ...).
"""

from __future__ import annotations

import os
import selectors
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

from run import Result

from odradek import Broker
from odradek.protocol.api import ApiKey, encode_request

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "jvm"))

import kafka_jvm  # noqa: E402

CONNECTIONS = int(os.environ.get("ODRADEK_BENCH_CONNECTIONS", "2000"))
MB = 1024 * 1024


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _wait(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)


def _open(broker: Broker, count: int) -> tuple[list[socket.socket], float, float]:
    """(sockets, seconds until the broker accepted them all, slowest connect in seconds)."""
    host, port = broker.bootstrap.rsplit(":", 1)
    base = _descriptors(broker.pid)
    socks, slowest = [], 0.0
    started = time.monotonic()
    for _ in range(count):
        t = time.monotonic()
        socks.append(socket.create_connection((host, int(port)), timeout=30))
        slowest = max(slowest, time.monotonic() - t)
    _wait(lambda: _descriptors(broker.pid) >= base + count)
    return socks, time.monotonic() - started, slowest


def _close(broker: Broker, socks: list[socket.socket], base: int) -> None:
    for s in socks:
        s.close()
    _wait(lambda: _descriptors(broker.pid) <= base + 5)
    time.sleep(0.5)


def many_connections(backlog: int) -> list[Result]:
    label = f"backlog {backlog}"
    with tempfile.TemporaryDirectory() as d, Broker(log_dir=d, subprocess=True, config={"socket.listen.backlog.size": backlog}) as broker:
        time.sleep(0.5)
        base_fds, before = _descriptors(broker.pid), _rss(broker.pid)
        socks, elapsed, slowest = _open(broker, CONNECTIONS)
        time.sleep(0.5)
        held = _rss(broker.pid) - before
        _close(broker, socks, base_fds)
        after = _rss(broker.pid) - before
        socks, _, _ = _open(broker, CONNECTIONS)
        time.sleep(0.5)
        second = _rss(broker.pid) - before - after
        _close(broker, socks, base_fds)
    return [
        Result(f"{CONNECTIONS} connections accepted, one after another ({label})", CONNECTIONS / elapsed, "connections/s"),
        Result(f"slowest connect ({label}; a full listen queue costs a 1 s SYN retry)", slowest * 1000, "ms (lower is better)"),
        Result(f"resident memory per idle connection ({label})", held / CONNECTIONS / 1024, "KiB (lower is better)"),
        Result(f"resident memory kept after all closed, per connection ({label})", after / CONNECTIONS / 1024, "KiB (lower is better)"),
        Result(f"resident memory a second round adds, per connection ({label})", second / CONNECTIONS / 1024, "KiB (lower is better)"),
    ]


def announced_requests() -> list[Result]:
    with tempfile.TemporaryDirectory() as d, Broker(log_dir=d, subprocess=True) as broker:
        time.sleep(0.5)
        before = _rss(broker.pid)
        host, port = broker.bootstrap.rsplit(":", 1)
        socks = [socket.create_connection((host, int(port))) for _ in range(20)]
        for s in socks:
            s.sendall(struct.pack(">i", 100 * MB))
        time.sleep(1.0)
        grown = _rss(broker.pid) - before
        for s in socks:
            s.close()
    return [Result("memory 20 connections announcing 100 MB requests (and sending nothing) cost", grown / MB, "MiB (lower is better)")]


def _burst(bootstrap: str, count: int, timeout_s: float = 180.0) -> tuple[float, float, float, int]:
    """``count`` clients connecting at once, each sending ApiVersions v0 as soon as it is connected: (seconds
    until all have their answer, median and 99th percentile of a client's wait from its first connect, in
    s, connections reset or refused). A client whose connection is reset connects again at once, as a
    client library would (after its backoff)."""
    host, port = bootstrap.rsplit(":", 1)
    request = encode_request(ApiKey.ApiVersions, 0, 1, {}, client_id="burst")
    selector = selectors.DefaultSelector()
    waiting: dict[socket.socket, tuple[float, bytearray]] = {}
    done: list[socket.socket] = []
    waits: list[float] = []
    resets = 0

    def connect(first_at: float) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex((host, int(port)))
        waiting[s] = (first_at, bytearray())
        selector.register(s, selectors.EVENT_WRITE)

    started = time.monotonic()
    for _ in range(count):
        connect(time.monotonic())
    try:
        while waiting:
            assert time.monotonic() - started < timeout_s, f"{len(waiting)} clients still waiting after {timeout_s} s"
            for key, events in selector.select(1.0):
                s = key.fileobj
                first_at, received = waiting[s]
                try:
                    if events & selectors.EVENT_WRITE:
                        if err := s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                            raise OSError(err, os.strerror(err))
                        s.sendall(request)
                        selector.modify(s, selectors.EVENT_READ)
                        continue
                    chunk = s.recv(65536)
                    if not chunk:
                        raise ConnectionError("closed by the broker")
                except OSError:
                    resets += 1
                    selector.unregister(s)
                    del waiting[s]
                    s.close()
                    connect(first_at)
                    continue
                received += chunk
                if len(received) >= 4 and len(received) >= 4 + struct.unpack(">i", received[:4])[0]:
                    waits.append(time.monotonic() - first_at)
                    selector.unregister(s)
                    del waiting[s]
                    done.append(s)
        elapsed = time.monotonic() - started
    finally:
        for s in [*waiting, *done]:
            s.close()
        selector.close()
    waits.sort()
    return elapsed, waits[len(waits) // 2], waits[min(len(waits) - 1, int(len(waits) * 0.99))], resets


def _burst_results(label: str, bootstrap: str) -> list[Result]:
    elapsed, median, p99, resets = _burst(bootstrap, CONNECTIONS)
    return [
        Result(f"{CONNECTIONS} clients at once, each an ApiVersions round trip ({label}): all answered", elapsed, "s (lower is better)"),
        Result(f"  a client's wait, median ({label})", median * 1000, "ms (lower is better)"),
        Result(f"  a client's wait, 99th percentile ({label})", p99 * 1000, "ms (lower is better)"),
        Result(f"  connections reset or refused, each connected again ({label})", resets, "(lower is better)"),
    ]


def connection_burst(backlog: int) -> list[Result]:
    """The same burst against odradek and against a real Kafka 3.9.1, with ``socket.listen.backlog.size``."""
    settings = {"socket.listen.backlog.size": str(backlog)}
    with tempfile.TemporaryDirectory() as d, Broker(log_dir=d, subprocess=True, config=settings) as broker:
        time.sleep(0.5)
        results = _burst_results(f"odradek, backlog {backlog}", broker.bootstrap)
    with tempfile.TemporaryDirectory() as root:
        zookeeper = kafka_jvm.ZooKeeper(Path(root) / "zookeeper").start()
        try:
            kafka = kafka_jvm.KafkaBroker(Path(root) / "kafka", zookeeper.connect, settings=settings).start()
            try:
                time.sleep(0.5)
                results += _burst_results(f"Kafka 3.9.1, backlog {backlog}", kafka.bootstrap)
            finally:
                kafka.stop()
        finally:
            zookeeper.stop()
    return results


def run() -> list[Result]:
    return many_connections(2 * CONNECTIONS) + many_connections(50) + announced_requests() + connection_burst(50) + connection_burst(2 * CONNECTIONS)


if __name__ == "__main__":
    for r in run():
        print(f"{r.name}: {r.value:.1f} {r.unit}")
