"""sendfile of a segment's bytes by a process that did not write them (issue 23 item 1).

In a multi-process broker one process owns a partition's log and appends to it; a fetch may arrive at
another process, the one holding the client's connection. If that process can ``sendfile`` the records from
its own descriptor of the segment file, a fetch forwards only its small question to the owner (which offsets,
which file, which byte range, the high watermark) and never the records themselves. This checks that it
works and what it costs:

* a writer process appends ``RECORD_SIZE``-byte batches to a segment file with ``os.write`` (no fsync: the
  bytes are in the page cache only) and, after each, tells the reader the byte range it wrote;
* the reader, which opened the file by its path once before any append, sends that range to a TCP peer
  with ``os.sendfile``; the peer checks every byte against what was written.

Reported: the CPU time of the ``sendfile`` call (user + system) from the non-writing process's descriptor,
against the same call from the writing process's own descriptor; and the count of ranges whose bytes
differed (must be 0; the ranges sent after the deletion included).

Run: ``python benchmarks/bench_multicore_sendfile.py``; note ``uptime`` beside the figures.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

APPENDS = 4000
ROUNDS = 3
SIZES = (1024, 64 * 1024)
RANGE = struct.Struct(">QI")


def _payload(i: int, size: int) -> bytes:
    return (i.to_bytes(4, "big") * (size // 4 + 1))[:size]


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
    return client, peer


def _receive_and_check(peer: socket.socket, expected: bytes) -> bool:
    got = bytearray()
    while len(got) < len(expected):
        got += peer.recv(len(expected) - len(got))
    return bytes(got) == expected


def _from_another_process(path: Path, size: int) -> tuple[float, int, int]:
    """CPU seconds in sendfile over all appends, how many ranges arrived wrong, and how many were sent."""
    path.write_bytes(b"")
    own = os.open(path, os.O_RDONLY)  # opened before the writer appended anything
    ranges_r, ranges_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ranges_r)
        os.close(go_w)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        position = 0
        for i in range(APPENDS):
            data = _payload(i, size)
            os.write(fd, data)
            os.write(ranges_w, RANGE.pack(position, len(data)))
            position += len(data)
            os.read(go_r, 1)  # the next append once the reader sent this one
        os._exit(0)
    os.close(ranges_w)
    os.close(go_r)
    sender, peer = _tcp_pair()
    cpu, wrong = 0.0, 0
    try:
        for i in range(APPENDS):
            position, length = RANGE.unpack(os.read(ranges_r, RANGE.size))
            started = time.process_time()
            sent = os.sendfile(sender.fileno(), own, position, length)
            cpu += time.process_time() - started
            while sent < length:
                sent += os.sendfile(sender.fileno(), own, position + sent, length - sent)
            wrong += not _receive_and_check(peer, _payload(i, size))
            os.write(go_w, b"g")
        # Retention deletes segments under readers: a descriptor opened before keeps the bytes readable.
        os.waitpid(pid, 0)
        pid = 0
        path.unlink()
        sent = 0
        while sent < length:
            sent += os.sendfile(sender.fileno(), own, position + sent, length - sent)
        wrong += not _receive_and_check(peer, _payload(APPENDS - 1, size))
    finally:
        if pid:
            os.waitpid(pid, 0)
        for fd in (own, ranges_r, go_w):
            os.close(fd)
        sender.close()
        peer.close()
    return cpu, wrong, APPENDS + 1


def _from_the_writer(path: Path, size: int) -> tuple[float, int, int]:
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    sender, peer = _tcp_pair()
    cpu, wrong, position = 0.0, 0, 0
    try:
        for i in range(APPENDS):
            data = _payload(i, size)
            os.write(fd, data)
            started = time.process_time()
            sent = os.sendfile(sender.fileno(), fd, position, len(data))
            cpu += time.process_time() - started
            while sent < len(data):
                sent += os.sendfile(sender.fileno(), fd, position + sent, len(data) - sent)
            wrong += not _receive_and_check(peer, data)
            position += len(data)
    finally:
        os.close(fd)
        sender.close()
        peer.close()
    return cpu, wrong, APPENDS


def main() -> None:
    print(os.popen("uptime").read().strip())
    with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parent.parent) as d:  # the disk, not a tmpfs
        path = Path(d) / "00000000000000000000.log"
        for size in SIZES:
            for name, how in (("the writing process's descriptor", _from_the_writer), ("another process's descriptor", _from_another_process)):
                runs = [how(path, size) for _ in range(ROUNDS)]
                best = min(cpu for cpu, _, _ in runs)
                wrong = sum(w for _, w, _ in runs)
                sent = sum(n for _, _, n in runs)
                print(f"sendfile of {size} B from {name}: {best / APPENDS * 1e6:.2f} µs CPU per call; ranges wrong: {wrong} of {sent}")
    print(os.popen("uptime").read().strip())


if __name__ == "__main__":
    sys.exit(main())
