"""How connections spread over worker processes that accept on one port (issue 23 item 1).

A broker of N worker processes keeps one listener address. Two ways for every worker to accept there:

* ``SO_REUSEPORT``: each worker binds its own listening socket to the port; the kernel picks the socket of
  a new connection by a hash of its addresses and ports (no process in between, and no thundering herd).
* one listening socket inherited by every worker, each blocking in ``accept()`` (a thread per worker, as the
  broker's Acceptor thread does): the kernel wakes one waiting accepter per connection.

Kafka clients open few connections per broker (a producer one, a consumer two or three), so what matters is
the spread of a few connections, not of thousands: for ``CONNECTIONS`` connections over ``WORKERS`` workers,
``TRIALS`` times, this prints how many the busiest worker got, against ``CONNECTIONS / WORKERS`` for an even
spread. (Connections are opened one after the other, held until the trial ends; the workers are idle.)

Run: ``python benchmarks/bench_multicore_accept.py``; note ``uptime`` beside the figures.
"""

from __future__ import annotations

import collections
import os
import socket
import sys
import threading

TRIALS = 100
SHAPES = ((8, 2), (8, 4), (64, 4), (64, 16))
"""(connections, workers): 8 client processes as in issue 23's benchmark; 64 for a busier broker."""


def _worker(listening: socket.socket, report: socket.socket) -> None:
    """Accept until the parent closes ``report``; each accepted connection reports this worker's index."""
    threading.Thread(target=_exit_when_closed, args=(report,), daemon=True).start()
    while True:
        conn, _ = listening.accept()
        report.send(b"a")  # before the client hears of it: counted once the client got its byte
        conn.send(b"!")
        conn.close()


def _exit_when_closed(report: socket.socket) -> None:
    try:
        report.recv(1)
    finally:
        os._exit(0)


def _start_workers(count: int, reuseport: bool) -> tuple[int, list[tuple[int, socket.socket]]]:
    shared = None
    if not reuseport:
        shared = socket.socket()
        shared.bind(("127.0.0.1", 0))
        shared.listen(1024)
        port = shared.getsockname()[1]
    else:
        probe = socket.socket()
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    workers = []
    for _ in range(count):
        mine, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            mine.close()
            for _, earlier in workers:  # so that the parent's close of it reaches that worker
                earlier.close()
            if shared is None:
                listening = socket.socket()
                listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                listening.bind(("127.0.0.1", port))
                listening.listen(1024)
            else:
                listening = shared
            theirs.send(b"r")
            _worker(listening, theirs)
        theirs.close()
        mine.recv(1)  # listening
        workers.append((pid, mine))
    if shared is not None:
        shared.close()
    else:
        probe.close()
    return port, workers


def _trial(connections: int, workers_count: int, reuseport: bool) -> int:
    port, workers = _start_workers(workers_count, reuseport)
    clients = []
    try:
        for _ in range(connections):
            client = socket.create_connection(("127.0.0.1", port))
            client.recv(1)
            clients.append(client)
        counts = []
        for _, report in workers:
            report.setblocking(False)
            try:
                counts.append(len(report.recv(4096)))
            except BlockingIOError:
                counts.append(0)
        assert sum(counts) == connections, counts
        return max(counts)
    finally:
        for client in clients:
            client.close()
        for pid, report in workers:
            report.close()
            os.waitpid(pid, 0)


def main() -> None:
    print(os.popen("uptime").read().strip())
    for reuseport in (True, False):
        how = "SO_REUSEPORT" if reuseport else "one inherited listener, blocking accept per worker"
        for connections, workers in SHAPES:
            busiest = collections.Counter(_trial(connections, workers, reuseport) for _ in range(TRIALS))
            even = connections / workers
            spread = ", ".join(f"{n}: {busiest[n]}%" if TRIALS == 100 else f"{n}: {busiest[n]}" for n in sorted(busiest))
            mean = sum(n * c for n, c in busiest.items()) / TRIALS
            print(f"{how}: {connections} connections over {workers} workers (even: {even:g}): busiest worker got {spread}; mean {mean:.2f} = {mean / even:.2f}x even")
    print(os.popen("uptime").read().strip())


if __name__ == "__main__":
    sys.exit(main())
