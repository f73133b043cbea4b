"""CPU cost of forwarding one small request and its answer between two processes (issue 23 item 1).

A multi-process broker forwards work between processes: a worker that holds a client's connection passes a
request for a partition another worker owns to that owner, and the answer back. What each mechanism costs
decides the design (docs/multicore.md). Measured as CPU time (user + system) of both processes together per
round trip, since wall-clock figures on a shared machine are noise: a "front" (this process) sends a
``REQUEST_SIZE``-byte message, the "owner" (a child process) answers ``ANSWER_SIZE`` bytes.

Two shapes per mechanism:

* ``1 in flight``: the front waits for each answer before sending the next (a lone client's produce): every
  message wakes the other process, so each costs a wake-up and a sleep on both sides.
* ``4 in flight`` and ``32 in flight``: the front sends 4 or 32 requests before reading their answers (as
  many busy connections' requests forwarded in one turn of the loop): one syscall moves several messages
  and the wake-ups are shared.

Mechanisms: a stream socketpair with length-prefixed frames (blocking, and under asyncio as a broker would
use it); a SOCK_SEQPACKET socketpair (the kernel keeps message boundaries); a pair of pipes; and
``multiprocessing.Pipe`` (what a pool of workers would use). A ``multiprocessing.shared_memory`` ring was
measured too and dropped (docs/multicore.md says why). Also: passing one descriptor with SCM_RIGHTS (an
accepting process handing a connection over), per descriptor.

Run: ``python benchmarks/bench_multicore_ipc.py``; note ``uptime`` beside the figures.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
import os
import socket
import struct
import sys
import time
from typing import Any, Callable

from run import Result

REQUEST_SIZE = 200
"""About a 1-record produce request's frame (100-byte value), or what a front would forward of it."""
ANSWER_SIZE = 60
"""About a produce answer for one partition."""
ROUND_TRIPS = 20_000
ROUNDS = 3
UNIT = "µs CPU per round trip, both processes (lower is better)"
HEADER = struct.Struct(">I")
STOP = b"\xff"


# -- stream sockets and pipes, length-prefixed --------------------------------------------------------------


def _read_exact(read: Callable[[int], bytes], n: int) -> bytes:
    data = read(n)
    while len(data) < n:
        more = read(n - len(data))
        if not more:
            raise EOFError
        data += more
    return data


def _frames_owner(read: Callable[[int], bytes], write: Callable[[bytes], Any]) -> None:
    """Answer each length-prefixed request; on STOP, answer with this process's CPU seconds."""
    answer = HEADER.pack(ANSWER_SIZE) + b"a" * ANSWER_SIZE
    buf = b""
    started = time.process_time()
    while True:
        chunk = read(1 << 16)
        if not chunk:
            return
        buf += chunk
        answers = []
        while len(buf) >= 4:
            (size,) = HEADER.unpack_from(buf)
            if len(buf) < 4 + size:
                break
            body, buf = buf[4 : 4 + size], buf[4 + size :]
            if body == STOP:
                write(struct.pack(">d", time.process_time() - started))
                return
            answers.append(answer)
        if answers:
            write(b"".join(answers))


def _frames_front(read: Callable[[int], bytes], write: Callable[[bytes], Any], in_flight: int) -> float:
    request = HEADER.pack(REQUEST_SIZE) + b"r" * REQUEST_SIZE
    burst = request * in_flight
    expected = (4 + ANSWER_SIZE) * in_flight
    started = time.process_time()
    for _ in range(ROUND_TRIPS // in_flight):
        write(burst)
        _read_exact(read, expected)
    front = time.process_time() - started
    write(HEADER.pack(1) + STOP)
    (owner,) = struct.unpack(">d", _read_exact(read, 8))
    return front + owner


def _stream_socketpair(in_flight: int) -> float:
    front, owner = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        front.close()
        _frames_owner(owner.recv, owner.sendall)
        os._exit(0)
    owner.close()
    try:
        return _frames_front(front.recv, front.sendall, in_flight)
    finally:
        front.close()
        os.waitpid(pid, 0)


def _pipes(in_flight: int) -> float:
    to_owner_r, to_owner_w = os.pipe()
    to_front_r, to_front_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(to_owner_w)
        os.close(to_front_r)
        _frames_owner(lambda n: os.read(to_owner_r, n), lambda data: _write_all(to_front_w, data))
        os._exit(0)
    os.close(to_owner_r)
    os.close(to_front_w)
    try:
        return _frames_front(lambda n: os.read(to_front_r, n), lambda data: _write_all(to_owner_w, data), in_flight)
    finally:
        os.close(to_owner_w)
        os.close(to_front_r)
        os.waitpid(pid, 0)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# -- SOCK_SEQPACKET: one message per send, no framing in Python ------------------------------------------------


def _seqpacket(in_flight: int) -> float:
    front, owner = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        front.close()
        answer = b"a" * ANSWER_SIZE
        started = time.process_time()
        while True:
            message = owner.recv(1 << 16)
            if message == STOP:
                owner.send(struct.pack(">d", time.process_time() - started))
                os._exit(0)
            owner.send(answer)
    owner.close()
    request = b"r" * REQUEST_SIZE
    try:
        started = time.process_time()
        for _ in range(ROUND_TRIPS // in_flight):
            for _ in range(in_flight):
                front.send(request)
            for _ in range(in_flight):
                front.recv(1 << 16)
        elapsed = time.process_time() - started
        front.send(STOP)
        (owner_s,) = struct.unpack(">d", front.recv(8))
        return elapsed + owner_s
    finally:
        front.close()
        os.waitpid(pid, 0)


# -- a stream socketpair under asyncio on both sides (as broker workers would run it) ------------------------


class _FrameProtocol(asyncio.BufferedProtocol):
    """Length-prefixed frames off a socket into a buffer; ``on_frame`` per complete frame."""

    def __init__(self, on_frame: Callable[[memoryview], None]) -> None:
        self.buf = bytearray(1 << 18)
        self.start = self.end = 0
        self.on_frame = on_frame
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.start == self.end:
            self.start = self.end = 0
        elif len(self.buf) - self.end < 1 << 16:
            self.buf[: self.end - self.start] = self.buf[self.start : self.end]
            self.end -= self.start
            self.start = 0
        return memoryview(self.buf)[self.end :]

    def buffer_updated(self, nbytes: int) -> None:
        self.end += nbytes
        view = memoryview(self.buf)
        while self.end - self.start >= 4:
            (size,) = HEADER.unpack_from(self.buf, self.start)
            if self.end - self.start < 4 + size:
                break
            self.on_frame(view[self.start + 4 : self.start + 4 + size])
            self.start += 4 + size


def _asyncio_owner(sock: socket.socket) -> None:
    answer = HEADER.pack(ANSWER_SIZE) + b"a" * ANSWER_SIZE

    async def main() -> None:
        done = asyncio.get_running_loop().create_future()
        started = time.process_time()
        pending: list[bytes] = []

        def on_frame(frame: memoryview) -> None:
            if frame == STOP:
                done.set_result(None)
                return
            pending.append(answer)

        proto = _FrameProtocol(on_frame)
        original = proto.buffer_updated

        def updated(nbytes: int) -> None:
            original(nbytes)
            if pending:  # the answers to what one read brought go out in one write
                proto.transport.write(b"".join(pending))
                pending.clear()

        proto.buffer_updated = updated  # type: ignore[method-assign]
        transport, _ = await asyncio.get_running_loop().connect_accepted_socket(lambda: proto, sock)
        await done
        transport.write(HEADER.pack(8) + struct.pack(">d", time.process_time() - started))
        await asyncio.sleep(0.05)
        transport.close()

    asyncio.run(main())


def _asyncio_socketpair(in_flight: int) -> float:
    front, owner = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        front.close()
        _asyncio_owner(owner)
        os._exit(0)
    owner.close()

    async def main() -> float:
        loop = asyncio.get_running_loop()
        answers: asyncio.Queue[bytes] = asyncio.Queue()
        proto = _FrameProtocol(lambda frame: answers.put_nowait(bytes(frame)))
        transport, _ = await loop.connect_accepted_socket(lambda: proto, front)
        request = HEADER.pack(REQUEST_SIZE) + b"r" * REQUEST_SIZE
        burst = request * in_flight
        started = time.process_time()
        for _ in range(ROUND_TRIPS // in_flight):
            transport.write(burst)
            for _ in range(in_flight):
                await answers.get()
        elapsed = time.process_time() - started
        transport.write(HEADER.pack(1) + STOP)
        (owner_s,) = struct.unpack(">d", await answers.get())
        transport.close()
        return elapsed + owner_s

    try:
        return asyncio.run(main())
    finally:
        os.waitpid(pid, 0)


# -- multiprocessing.Pipe (send_bytes / recv_bytes) -------------------------------------------------------------


def _mp_owner(conn: multiprocessing.connection.Connection) -> None:
    answer = b"a" * ANSWER_SIZE
    started = time.process_time()
    while True:
        message = conn.recv_bytes()
        if message == STOP:
            conn.send_bytes(struct.pack(">d", time.process_time() - started))
            return
        conn.send_bytes(answer)


def _mp_pipe(in_flight: int) -> float:
    front, owner = multiprocessing.Pipe()
    process = multiprocessing.get_context("fork").Process(target=_mp_owner, args=(owner,))
    process.start()
    request = b"r" * REQUEST_SIZE
    started = time.process_time()
    for _ in range(ROUND_TRIPS // in_flight):
        for _ in range(in_flight):
            front.send_bytes(request)
        for _ in range(in_flight):
            front.recv_bytes()
    elapsed = time.process_time() - started
    front.send_bytes(STOP)
    (owner_s,) = struct.unpack(">d", front.recv_bytes())
    process.join()
    return elapsed + owner_s


# -- SCM_RIGHTS: handing an accepted connection to another process ----------------------------------------------

FDS_PASSED = 5_000


def _scm_rights() -> float:
    """CPU of both processes per descriptor passed (sender: send_fds and close; receiver: recv_fds and
    wrapping it in a socket object, as a worker would)."""
    front, owner = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    passed_a, passed_b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        front.close()
        started = time.process_time()
        for _ in range(FDS_PASSED):
            _, fds, _, _ = socket.recv_fds(owner, 64, 1)
            socket.socket(fileno=fds[0]).close()
        owner.send(struct.pack(">d", time.process_time() - started))
        os._exit(0)
    owner.close()
    started = time.process_time()
    for _ in range(FDS_PASSED):
        dup = os.dup(passed_a.fileno())
        socket.send_fds(front, [b"c"], [dup])
        os.close(dup)
    elapsed = time.process_time() - started
    (owner_s,) = struct.unpack(">d", front.recv(8))
    os.waitpid(pid, 0)
    front.close()
    passed_a.close()
    passed_b.close()
    return (elapsed + owner_s) / FDS_PASSED * 1e6


MECHANISMS: dict[str, Callable[[int], float]] = {
    "stream socketpair, length-prefixed, blocking": _stream_socketpair,
    "stream socketpair, length-prefixed, asyncio both sides": _asyncio_socketpair,
    "SOCK_SEQPACKET socketpair, one message per send": _seqpacket,
    "two pipes, length-prefixed": _pipes,
    "multiprocessing.Pipe send_bytes/recv_bytes": _mp_pipe,
}


def run() -> list[Result]:
    results = []
    for name, mechanism in MECHANISMS.items():
        for in_flight in (1, 4, 32):
            best = min(mechanism(in_flight) for _ in range(ROUNDS))
            results.append(Result(f"{name}, {in_flight} in flight", best / ROUND_TRIPS * 1e6, UNIT))
    results.append(Result("SCM_RIGHTS: one descriptor passed and wrapped", min(_scm_rights() for _ in range(ROUNDS)), "µs CPU per descriptor, both processes (lower is better)"))
    return results


if __name__ == "__main__":
    print(os.popen("uptime").read().strip(), file=sys.stderr)
    for result in run():
        print(f"{result.value:9.2f}  {result.name}")
    print(os.popen("uptime").read().strip(), file=sys.stderr)
