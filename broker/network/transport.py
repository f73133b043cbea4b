"""A connection's transport: moves its bytes, and nothing of what they mean.

The request side (``socket_server.Connection``: the sans-IO ``KafkaConnection``'s events to the handlers,
one request at a time, the ordered answers) reads through a transport and writes its answers, buffers and
``(file, position, length)`` slices of segment files, through one. :class:`SocketTransport` is a client's
socket (TLS included): non-blocking, with the event loop's readiness waits, so that ``sendfile`` and ordinary
sends share one socket without a buffer in between. A worker process's connection forwarded over a
channel has a transport of its own (broker/network/worker_channel.py), so that one request side serves
both (docs/multicore.md).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import ssl
from typing import TYPE_CHECKING, Any, Callable, Protocol

import anyio

if TYPE_CHECKING:
    from odradek.broker.security.tls import TlsSession, TlsSettings

log = logging.getLogger("odradek.network")

_IOV_MAX = 1024  # Linux's limit on buffers per sendmsg
_TLS_FILE_CHUNK = 256 * 1024
"""Record data read from a segment file per TLS write (sendfile cannot encrypt: docs/performance.md)."""
_COPY_UP_TO = 16 * 1024
"""Record data up to this many bytes per send is read from the segment and sent with the answer's fields in
one ``sendmsg``, rather than ``sendfile`` between them with the socket corked: two system calls instead of
five, cheaper in CPU up to about this size (docs/performance.md, the per-request floor's third round)."""

Piece = bytes | memoryview | tuple[Any, int, int]
"""What an answer is sent as: buffers, and ``(file, position, length)`` slices of segment files to sendfile."""


class ConnectionClosed(Exception):
    pass


if TYPE_CHECKING:  # a type for the checker only: creating a Protocol class costs ~0.13 M instructions a start
    class Transport(Protocol):
        """What the request side needs of the bytes' carrier."""

        tls: TlsSession | None
        front: bool
        """A connection a front worker process holds, forwarded to worker 0 (broker/network/worker_channel.py):
        the only kind that needs the multi-process modules, which a single-process broker never imports."""

        def recv_into(self, target: memoryview) -> int:
            """Bytes received now (0: the peer closed); BlockingIOError when none is there yet."""
            ...

        async def wait_readable(self) -> None: ...

        def send_some(self, pieces: list[Piece]) -> list[Piece]:
            """Send what can go now, without waiting; what is left."""
            ...

        async def write(self, pieces: list[Piece]) -> None:
            """Send all the pieces, waiting for room as needed."""
            ...

        def shutdown(self) -> None:
            """Stop both directions: a reader wakes to an end of stream."""
            ...

        def close(self) -> None: ...


def _tls_session(settings: TlsSettings) -> TlsSession:
    """A TLS listener's connection state (the tls module is imported by a TLS listener's first connection)."""
    from odradek.broker.security.tls import TlsSession

    return TlsSession(settings)


class Readiness:
    """Waits for a socket to be readable (or writable), leaving it registered with the event loop from one wait
    to the next.

    ``anyio.wait_readable`` registers the socket and unregisters it at every wait (two ``epoll_ctl`` calls,
    and a future, a context variable and a backend lookup in Python, whose running-loop lookups each cost a
    ``getpid`` on Python 3.11): for a client that sends one request and waits for its answer, that is once per
    request; for a large fetch answer written as the socket makes room, once per socket buffer's worth. Here
    the registration stays while the connection is served (a write's, while one answer is written); a
    readiness reported while nobody waits (the connection waits for an answer, such as an acks=all produce,
    with the client's next request already arrived) unregisters the socket until the next wait, as the loop
    would otherwise report it again on every turn."""

    __slots__ = ("_loop", "_fd", "_waiter", "_registered", "_add", "_remove")

    def __init__(self, sock: socket.socket, *, writing: bool = False) -> None:
        self._loop = loop = asyncio.get_running_loop()
        self._fd = sock.fileno()
        self._waiter: asyncio.Future[None] | None = None
        self._registered = False
        self._add, self._remove = (loop.add_writer, loop.remove_writer) if writing else (loop.add_reader, loop.remove_reader)

    def _ready(self) -> None:
        waiter = self._waiter
        if waiter is None:
            self._remove(self._fd)
            self._registered = False
            return
        self._waiter = None
        if not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        if not self._registered:
            self._add(self._fd, self._ready)
            self._registered = True
        self._waiter = waiter = self._loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        """Unregister (before the socket is closed)."""
        if self._registered:
            self._remove(self._fd)
            self._registered = False


class SocketTransport:
    """A client's socket, plain or TLS (the TLS session ends here: the request side sees plaintext)."""

    __slots__ = ("sock", "tls", "tls_lock", "_readable", "_writable", "on_close")

    front = False

    def __init__(self, sock: socket.socket, tls: TlsSettings | None, on_close: Callable[[], None] | None = None) -> None:
        self.sock = sock
        self.on_close = on_close
        """Called once the socket is closed (a worker tells the supervisor, which counts its connections)."""
        self.tls = _tls_session(tls) if tls is not None else None
        self.tls_lock = anyio.Lock() if tls is not None else None
        """The reader (handshake, TLS 1.3 tickets) and the writer both send TLS records: one at a time."""
        self._readable: Readiness | None = None
        self._writable: Readiness | None = None
        """The socket's registration for writing, kept from one wait for room to the next while an answer is
        written (the writer's, and the reader's TLS handshake records, one at a time under ``tls_lock``)."""

    def recv_into(self, target: memoryview) -> int:
        return self.sock.recv_into(target)

    async def wait_readable(self) -> None:
        if self._readable is None:
            self._readable = Readiness(self.sock)
        await self._readable.wait()

    def shutdown(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    async def _wait_writable(self) -> None:
        if self._writable is None:
            self._writable = Readiness(self.sock, writing=True)
        await self._writable.wait()

    def close(self) -> None:
        if self._readable is not None:
            self._readable.close()
            self._readable = None
        if self._writable is not None:
            self._writable.close()
            self._writable = None
        if self.sock.fileno() < 0:
            return
        self.sock.close()
        if self.on_close is not None:
            self.on_close()

    # -- TLS ----------------------------------------------------------------------------------------------

    async def received_tls(self, data: memoryview, peer: str) -> tuple[bytes, bool]:
        """Decrypt, answer the handshake: the plaintext, and whether the handshake completed just now."""
        assert self.tls is not None
        handshaking = not self.tls.handshake_done
        try:
            plain = self.tls.receive(data)
        except ssl.SSLError as exc:
            log.info("Closing connection from %s: failed TLS handshake or record: %s", peer, exc.reason or exc)
            await self._flush_tls()  # the alert, so the client learns why
            raise ConnectionClosed from exc
        await self._flush_tls()
        return plain, handshaking and self.tls.handshake_done

    async def _flush_tls(self) -> None:
        assert self.tls is not None and self.tls_lock is not None
        async with self.tls_lock:
            outgoing = self.tls.outgoing()
            pieces: list[Piece] = [outgoing] if outgoing else []
            while pieces := self.send_some(pieces):
                await self._wait_writable()

    async def _send_file_tls(self, file: Any, position: int, remaining: int) -> None:
        assert self.tls is not None
        in_fd = file.fileno()
        while remaining > 0:
            chunk = os.pread(in_fd, min(remaining, _TLS_FILE_CHUNK), position)
            if not chunk:
                raise ConnectionClosed("segment file shorter than its slice")
            self.tls.send(chunk)
            await self._flush_tls()
            position += len(chunk)
            remaining -= len(chunk)

    # -- writing ------------------------------------------------------------------------------------------

    async def write(self, pieces: list[Piece]) -> None:
        """Send the answers' pieces, waiting for room as needed: the socket stays registered for writing from
        one wait to the next (:class:`Readiness`: until the loop finds it writable with nobody waiting, once
        the answers are out), not registered again per buffer's worth (the wait cost two ``epoll_ctl`` and four
        ``getpid`` calls each time, a 1 MiB fetch answer four to eight times)."""
        if self.tls is not None:
            for piece in pieces:
                if type(piece) is tuple:
                    await self._flush_tls()
                    await self._send_file_tls(*piece)
                else:
                    self.tls.send(piece)  # type: ignore[arg-type]
            await self._flush_tls()
        elif pieces := self.send_some(pieces):
            await self._write_rest(pieces)

    async def _write_rest(self, pieces: list[Piece]) -> None:
        """What ``send_some`` left (a large answer: the socket's buffer is full), sent as room is made, with the
        socket corked until the whole answer is out if file slices and buffers are still mixed (not corked and
        uncorked per buffer's worth: two more system calls each time)."""
        sock = self.sock
        corked = len(pieces) > 1 and any(type(piece) is tuple for piece in pieces)
        try:
            if corked:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            while pieces:
                await self._wait_writable()
                pieces = self._send_now(pieces)
        finally:
            if corked and sock.fileno() >= 0:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)

    def send_some(self, pieces: list[Piece]) -> list[Piece]:
        """Send the pieces in order, as much as the socket takes now, without waiting: consecutive buffers in
        one ``sendmsg`` (writev), file slices with ``os.sendfile`` (zero-copy from the page cache). Returns
        what is left, empty when all went out.

        Buffers mixed with file slices (a fetch answer: its fields, the records, the fields after them) are
        sent with the socket corked, so that they leave as full TCP segments rather than one per call: a
        small fetch answer is one segment instead of three (each costs the broker the loopback's or the
        network stack's work again). The cork is taken out before returning, whatever is left. Slices of
        little data (a small fetch's) are read instead and sent with the buffers, in one ``sendmsg``."""
        if len(pieces) > 1:
            slices = in_files = 0
            for piece in pieces:
                if type(piece) is tuple:
                    slices += 1
                    in_files += piece[2]
            if not slices:
                return self._send_now(pieces)
            if in_files <= _COPY_UP_TO:
                return self._send_now([_read_slice(*piece) if type(piece) is tuple else piece for piece in pieces])
            sock = self.sock
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            try:
                return self._send_now(pieces)
            finally:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
        return self._send_now(pieces)

    def _send_now(self, pieces: list[Piece]) -> list[Piece]:
        sock = self.sock
        i, count = 0, len(pieces)
        while i < count:
            piece = pieces[i]
            if type(piece) is tuple:
                file, position, length = piece
                try:
                    sent = os.sendfile(sock.fileno(), file.fileno(), position, length)
                except BlockingIOError:
                    return pieces[i:]
                except OSError as exc:
                    if exc.errno in (errno.EPIPE, errno.ECONNRESET):
                        raise ConnectionClosed from exc
                    raise
                if sent == 0:
                    raise ConnectionClosed("segment file shorter than its slice")
                if sent < length:
                    pieces[i] = (file, position + sent, length - sent)
                    return pieces[i:]
                i += 1
                continue
            j = i + 1
            while j < count and type(pieces[j]) is not tuple and j - i < _IOV_MAX:
                j += 1
            try:
                sent = sock.sendmsg(pieces[i:j]) if j - i > 1 else sock.send(piece)  # type: ignore[arg-type]
            except BlockingIOError:
                return pieces[i:]
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise ConnectionClosed from exc
            while i < j:
                n = len(pieces[i])
                if sent < n:
                    if sent:
                        pieces[i] = memoryview(pieces[i])[sent:]  # type: ignore[arg-type]
                    return pieces[i:]
                sent -= n
                i += 1
        return []


def _read_slice(file: Any, position: int, length: int) -> bytes:
    """A segment file's slice, read (a short read is a segment truncated under the read, as in ``_send_now``)."""
    data = os.pread(file.fileno(), length, position)
    if len(data) < length:
        raise ConnectionClosed("segment file shorter than its slice")
    return data
