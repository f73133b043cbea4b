"""The network shell: accept connections, cut frames, dispatch, send answers in order.

Only bytes move here. Each connection has a reader that takes whatever the socket holds (large reads into
the framing buffers, framed by hand: several times faster than exact-size reads through stream wrappers), decodes each
request and calls its handler at once, so requests take effect in arrival order; and a writer that sends
the answers in the same order, awaiting those that wait (long polls, acks=all) — Kafka's pipelining with
in-order responses. Record data in fetch responses goes from the segment file to the socket with
``os.sendfile``. Sockets are used directly (non-blocking, with anyio's readiness waits) so that sendfile
and ordinary sends share one socket without a transport buffering in between.
"""

from __future__ import annotations

import errno
import inspect
import logging
import os
import socket
import time
from typing import Any

import anyio
from anyio.abc import TaskGroup

from odradek.broker.config import BrokerConfig
from odradek.broker.framing import FrameReader, FrameTooLarge
from odradek.broker.kafka_apis import CLOSE_CONNECTION, HANDLERS, error_response, unsupported_api_versions_response
from odradek.broker.kafka_server import KafkaServer
from odradek.protocol.api import ApiKey, UnknownApiKey, UnsupportedApiVersion, decode_request, encode_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.schema import DecodeError

log = logging.getLogger("odradek.network")

_IOV_MAX = 1024  # Linux's limit on buffers per sendmsg


class ConnectionClosed(Exception):
    pass


class Connection:
    def __init__(self, server: KafkaServer, sock: socket.socket, peer_host: str, peer_port: int) -> None:
        self.server = server
        self.sock = sock
        self.peer_host = peer_host
        self.peer = f"{peer_host}:{peer_port}"
        self.reader = FrameReader(server.config["socket.request.max.bytes"])
        send, receive = anyio.create_memory_object_stream[Any](server.config["queued.max.requests"])
        self.outbox_send = send
        self.outbox_receive = receive
        self.last_active = time.monotonic()

    async def run(self) -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._write_loop, tg)
                await self._read_loop()
                await self.outbox_send.aclose()
        except* (ConnectionClosed, OSError):
            pass  # the task group wraps a peer's reset in an ExceptionGroup; it ends this connection only
        except* Exception as group:
            # A bug met while serving one connection closes that connection, never the broker.
            for exc in group.exceptions:
                log.error("Closing connection from %s after an unexpected error", self.peer, exc_info=exc)
        finally:
            self.sock.close()

    # -- reading ------------------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        idle_s = self.server.config["connections.max.idle.ms"] / 1000
        sock = self.sock
        while True:
            try:
                n = sock.recv_into(self.reader.buffer())
            except BlockingIOError:
                with anyio.move_on_after(idle_s) as scope:
                    await anyio.wait_readable(sock)
                if scope.cancelled_caught and time.monotonic() - self.last_active >= idle_s:
                    log.debug("Closing idle connection from %s", self.peer)
                    return
                continue
            if not n:
                return
            self.last_active = time.monotonic()
            try:
                frames = self.reader.received(n)
            except FrameTooLarge as exc:
                log.warning("Closing connection from %s: %s", self.peer, exc)
                return
            for frame in frames:
                if not await self._dispatch(frame):
                    return

    async def _dispatch(self, frame: bytearray) -> bool:
        """Decode and handle one request; False closes the connection."""
        try:
            request = decode_request(frame)
        except UnsupportedApiVersion as exc:
            if exc.api_key == ApiKey.ApiVersions:
                await self.outbox_send.send((unsupported_api_versions_response(exc.correlation_id), None))
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
                await self.outbox_send.send((unsupported_api_versions_response(header.correlation_id), None))
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
        await self.outbox_send.send((request, result))
        return True

    # -- writing ------------------------------------------------------------------------------------------

    async def _write_loop(self, tg: TaskGroup) -> None:
        """Answers in request order. Answers already complete when the writer gets to them go out together
        in one ``sendmsg`` (writev): pipelined small requests cost one syscall per batch, not per answer."""
        try:
            async with self.outbox_receive:
                while True:
                    try:
                        first = await self.outbox_receive.receive()
                    except anyio.EndOfStream:
                        return
                    batch = [first]
                    while True:
                        try:
                            batch.append(self.outbox_receive.receive_nowait())
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
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
                    self.last_active = time.monotonic()
        except (ConnectionClosed, OSError):
            tg.cancel_scope.cancel()

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

    async def accept_loop(lsock: socket.socket, tg: TaskGroup) -> None:
        while True:
            await anyio.wait_readable(lsock)
            try:
                sock, addr = lsock.accept()
            except BlockingIOError:
                continue
            except OSError as exc:
                # ECONNABORTED, EMFILE, ENOBUFS...: refuse this one connection and keep accepting, after a
                # pause when the process is out of descriptors (as Kafka's Acceptor does).
                log.warning("Failed to accept a connection: %s", exc)
                await anyio.sleep(0.1)
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _set_buffers(server, sock)
            tg.start_soon(Connection(server, sock, addr[0], addr[1]).run)

    async with anyio.create_task_group() as tg:
        for lsock in listen_socks:
            tg.start_soon(accept_loop, lsock, tg)
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
        sock.listen(max(backlog, 128))
        sock.setblocking(False)
        socks.append(sock)
    return socks
