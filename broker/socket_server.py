"""The network shell: accept connections, cut frames, dispatch, send answers in order.

Only bytes move here. Each connection has a reader that takes whatever the socket holds (large reads into
the receive buffer the event loop's connections share, framed by hand: several times faster than exact-size
reads through stream wrappers), decodes each request and calls its handler at once, so requests take effect
in arrival order; and, while answers are queued, a writer that sends them in the same order, awaiting those
that wait (long polls, acks=all) — Kafka's pipelining with in-order responses. Record data in fetch
responses goes from the segment file to the socket with ``os.sendfile``. Sockets are used directly
(non-blocking, with anyio's readiness waits) so that sendfile and ordinary sends share one socket without a
transport buffering in between. docs/performance.md has what a connection costs.
"""

from __future__ import annotations

import collections
import errno
import inspect
import logging
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

from odradek.broker.config import BrokerConfig
from odradek.broker.framing import RECEIVE_BUFFER_SIZE, FrameReader, FrameTooLarge
from odradek.broker.kafka_apis import CLOSE_CONNECTION, HANDLERS, error_response, unsupported_api_versions_response
from odradek.broker.kafka_server import KafkaServer
from odradek.broker.memory_pool import MemoryPool, Unbounded, memory_pool
from odradek.protocol.api import ApiKey, UnknownApiKey, UnsupportedApiVersion, decode_request, encode_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.schema import DecodeError

log = logging.getLogger("odradek.network")

_IOV_MAX = 1024  # Linux's limit on buffers per sendmsg


class ConnectionClosed(Exception):
    pass


@dataclass
class Network:
    """What the connections of one event loop share: the receive buffer, the request memory pool, the task
    group their tasks run in, and the set of open connections (for idle expiry)."""

    config: BrokerConfig
    tg: TaskGroup
    receive_buffer: bytearray
    pool: MemoryPool | Unbounded
    connections: set["Connection"] = field(default_factory=set)

    async def expire_idle_connections(self) -> None:
        """Close connections idle for connections.max.idle.ms, as Kafka's Selector does, from one task for all
        of them rather than a timer per connection."""
        idle_s = self.config["connections.max.idle.ms"] / 1000
        if idle_s < 0:
            return  # Kafka's Selector: a negative connections.max.idle.ms never expires a connection
        while True:
            await anyio.sleep(min(1.0, max(idle_s / 4, 0.01)))
            now = time.monotonic()
            for conn in list(self.connections):
                if not conn.writing and now - conn.last_active >= idle_s:
                    log.debug("Closing idle connection from %s", conn.peer)
                    conn.end()


class Connection:
    """One client connection: requests are handled in arrival order as they are read, answers are sent in the
    same order (Kafka's pipelining with in-order responses).

    An idle connection is only its socket, its unfinished request bytes and one task waiting for the socket to
    be readable: the writer task runs only while answers are queued, and idle expiry is one task for all
    connections, so that thousands of connections cost a few kilobytes each.
    """

    __slots__ = ("server", "network", "sock", "peer_host", "peer", "pool", "reader", "outbox", "max_queued", "room", "reading", "writing", "closed", "last_active")

    def __init__(self, server: KafkaServer, network: Network, sock: socket.socket, peer_host: str, peer_port: int) -> None:
        self.server = server
        self.network = network
        self.sock = sock
        self.peer_host = peer_host
        self.peer = f"{peer_host}:{peer_port}"
        self.pool = network.pool
        self.reader = FrameReader(server.config["socket.request.max.bytes"], network.receive_buffer, network.pool)
        self.outbox: collections.deque[tuple[Any, Any]] = collections.deque()
        self.max_queued: int = server.config["queued.max.requests"]
        self.room: anyio.Event | None = None  # set when the writer takes answers from a full outbox
        self.reading = True
        self.writing = False
        self.closed = False
        self.last_active = time.monotonic()

    async def run(self) -> None:
        self.network.connections.add(self)
        try:
            await self._read_loop()
        except (ConnectionClosed, OSError):
            pass
        except Exception:
            # A bug met while serving one connection closes that connection, never the broker.
            log.exception("Closing connection from %s after an unexpected error", self.peer)
        finally:
            self.reading = False
            self.network.connections.discard(self)
            self.reader.close()
            if not self.writing:  # else the writer sends what is queued, then closes
                self.sock.close()

    def end(self) -> None:
        """Stop both directions: the reader wakes to an end of stream and the connection closes."""
        self.closed = True
        if self.room is not None:
            self.room.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- reading ------------------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        sock = self.sock
        reader = self.reader
        pool = self.pool
        while True:
            if pool.exhausted and not reader.in_frame:
                await pool.wait_available()  # Kafka mutes the channel until the pool has memory again
            try:
                n = sock.recv_into(reader.buffer())
            except BlockingIOError:
                await anyio.wait_readable(sock)
                continue
            if not n or self.closed:
                return
            self.last_active = time.monotonic()
            try:
                frames = reader.received(n)
            except FrameTooLarge as exc:
                log.warning("Closing connection from %s: %s", self.peer, exc)
                return
            charged = [len(frame) for frame in frames]  # released as each is handled, as Kafka's handlers do
            try:
                for frame in frames:
                    keep_open = await self._dispatch(frame)
                    pool.release(charged.pop(0))
                    if not keep_open:
                        return
            finally:
                pool.release(sum(charged))

    async def _send(self, request: Any, result: Any) -> None:
        """Queue an answer (at most queued.max.requests: reading waits beyond) and start the writer if idle."""
        while len(self.outbox) >= self.max_queued and not self.closed:
            if self.room is None:
                self.room = anyio.Event()
            await self.room.wait()
        if self.closed:
            raise ConnectionClosed
        self.outbox.append((request, result))
        if not self.writing:
            self.writing = True
            self.network.tg.start_soon(self._write_loop)

    async def _dispatch(self, frame: bytearray) -> bool:
        """Decode and handle one request; False closes the connection."""
        try:
            request = decode_request(frame)
        except UnsupportedApiVersion as exc:
            if exc.api_key == ApiKey.ApiVersions:
                await self._send(unsupported_api_versions_response(exc.correlation_id), None)
                return True
            log.warning("Closing connection from %s: %s", self.peer, exc)
            return False
        except UnknownApiKey as exc:
            log.warning("Closing connection from %s: %s", self.peer, exc)
            return False
        except DecodeError as exc:
            log.warning("Closing connection from %s: malformed request: %s", self.peer, exc)
            return False
        request.client_address = self.peer_host
        header = request.header
        handler = HANDLERS.get(header.api_key)
        if handler is None or not handler.min_version <= header.api_version <= handler.max_version:
            if header.api_key == ApiKey.ApiVersions:
                await self._send(unsupported_api_versions_response(header.correlation_id), None)
                return True
            log.warning("Closing connection from %s: unsupported %s v%d", self.peer, request.api.name, header.api_version)
            return False
        try:
            result = handler.handle(self.server, request)
        except Exception:
            log.exception("Error handling %s v%d from %s (client %s)", request.api.name, header.api_version, self.peer, header.client_id)
            result = error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR)
            if result is None:
                return False
        if result is CLOSE_CONNECTION:
            return False
        if result is None:
            return True
        await self._send(request, result)
        return True

    # -- writing ------------------------------------------------------------------------------------------

    async def _write_loop(self) -> None:
        """Answers in request order, until none is queued. Answers already complete when the writer gets to them
        go out together in one ``sendmsg`` (writev): pipelined small requests cost one syscall per batch."""
        try:
            while self.outbox and not self.closed:
                batch = list(self.outbox)
                self.outbox.clear()
                if self.room is not None:
                    self.room.set()
                    self.room = None
                await self._write(batch)
                self.last_active = time.monotonic()
        except (ConnectionClosed, OSError):
            self.end()
        except Exception:
            log.exception("Closing connection from %s after an unexpected error", self.peer)
            self.end()
        finally:
            self.writing = False
            if self.closed:
                for _, result in self.outbox:
                    if inspect.iscoroutine(result):
                        result.close()
                self.outbox.clear()
            if not self.reading:
                self.sock.close()

    async def _write(self, batch: list[tuple[Any, Any]]) -> None:
        pending: list[bytes | memoryview] = []
        for request, result in batch:
            if isinstance(request, bytes):
                pending.append(request)
                continue
            if inspect.isawaitable(result):
                await self._send_all(pending)
                pending = []
                result = await self._complete(request, result)
            header = request.header
            data, splices = encode_response(header.api_key, header.api_version, header.correlation_id, result)
            if not splices:
                pending.append(data)
                continue
            view = memoryview(data)
            pos = 0
            for splice in splices:
                pending.append(view[pos : splice.position])
                await self._send_all(pending)
                pending = []
                pos = splice.position
                for piece in splice.value.slices:
                    await self._sendfile(piece)
            pending.append(view[pos:])
        await self._send_all(pending)

    async def _complete(self, request: Any, result: Any) -> Any:
        try:
            return await result
        except Exception:
            log.exception("Error completing %s from %s", request.api.name, self.peer)
            answer = error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR)
            if answer is None:
                raise ConnectionClosed from None
            return answer

    async def _send_all(self, buffers: list[bytes | memoryview]) -> None:
        """Send the buffers in order with as few ``sendmsg`` calls as the socket allows."""
        views = [memoryview(b) for b in buffers if len(b)]
        sock = self.sock
        while views:
            try:
                sent = sock.sendmsg(views[:_IOV_MAX])
            except BlockingIOError:
                await anyio.wait_writable(sock)
                continue
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise ConnectionClosed from exc
            while sent:
                if sent >= len(views[0]):
                    sent -= len(views[0])
                    views.pop(0)
                else:
                    views[0] = views[0][sent:]
                    sent = 0

    async def _sendfile(self, piece: Any) -> None:
        """Zero-copy from the page cache: the segment file's bytes go to the socket without entering Python."""
        out_fd = self.sock.fileno()
        in_fd = piece.file.fileno()
        position = piece.position
        remaining = piece.length
        while remaining > 0:
            try:
                sent = os.sendfile(out_fd, in_fd, position, remaining)
            except BlockingIOError:
                await anyio.wait_writable(self.sock)
                continue
            except OSError as exc:
                if exc.errno in (errno.EPIPE, errno.ECONNRESET):
                    raise ConnectionClosed from exc
                raise
            if sent == 0:
                raise ConnectionClosed("segment file shorter than its slice")
            position += sent
            remaining -= sent


async def serve(server: KafkaServer, listen_socks: list[socket.socket], task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
    """Accept connections on the listening sockets until cancelled."""

    async def accept_loop(lsock: socket.socket, network: Network) -> None:
        """Accept every connection the listen queue holds at each wake-up, as Kafka's Acceptor does: one
        accept per readiness wait lets a burst of connects overflow the queue (the kernel drops the SYN and
        the client retries a second later)."""
        while True:
            await anyio.wait_readable(lsock)
            while True:
                try:
                    sock, addr = lsock.accept()
                except BlockingIOError:
                    break
                except OSError as exc:
                    # ECONNABORTED, EMFILE, ENOBUFS...: refuse this one connection and keep accepting, after a
                    # pause when the process is out of descriptors (as Kafka's Acceptor does).
                    log.warning("Failed to accept a connection: %s", exc)
                    await anyio.sleep(0.1)
                    break
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                _set_buffers(server, sock)
                network.tg.start_soon(Connection(server, network, sock, addr[0], addr[1]).run)

    async with anyio.create_task_group() as tg:
        network = Network(server.config, tg, bytearray(RECEIVE_BUFFER_SIZE), memory_pool(server.config["queued.max.request.bytes"]))
        server.background = tg
        tg.start_soon(network.expire_idle_connections)
        for lsock in listen_socks:
            tg.start_soon(accept_loop, lsock, network)
        task_status.started()


def _set_buffers(server: KafkaServer, sock: socket.socket) -> None:
    send, recv = server.config["socket.send.buffer.bytes"], server.config["socket.receive.buffer.bytes"]
    if send > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send)
    if recv > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, recv)


def open_listeners(config: BrokerConfig) -> list[socket.socket]:
    socks = []
    backlog = config["socket.listen.backlog.size"]
    for listener in config.listeners:
        host = listener.host or "0.0.0.0"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, listener.port))
        sock.listen(backlog)  # Kafka binds with socket.listen.backlog.size as it is (the OS caps it at somaxconn)
        sock.setblocking(False)
        socks.append(sock)
    return socks
