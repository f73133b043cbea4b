"""The connection layer: how many connections a broker takes how fast, and what each costs (issue 17).

A broker process (``Broker(subprocess=True)``) is opened ``ODRADEK_BENCH_CONNECTIONS`` (default 2,000)
connections one after another, with a listen queue that holds the burst (``socket.listen.backlog.size``,
as KIP-764 lets Kafka's users set), then with Kafka's default of 50. Its resident memory is read from /proc
before, with the connections open and idle, after they are closed, and after a second round (what closed
connections held serves new ones). Also the memory 20 connections cost that each announce a 100 MB request
and send nothing: it follows the bytes received, not the size prefix.
"""

from __future__ import annotations

import os
import socket
import struct
import tempfile
import time

from run import Result

from odradek import Broker

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


def run() -> list[Result]:
    return many_connections(2 * CONNECTIONS) + many_connections(50) + announced_requests()


if __name__ == "__main__":
    for r in run():
        print(f"{r.name}: {r.value:.1f} {r.unit}")
