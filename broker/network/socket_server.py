"""The network shell: accept connections, move their bytes, dispatch, send answers in order.

Only bytes move here; what they mean is the sans-IO :class:`KafkaConnection`'s (broker/network/connection.py). Each
connection has a reader that takes whatever the socket holds (large reads into the receive buffer the event
loop's connections share: several times faster than exact-size reads through stream wrappers), hands it to
its ``KafkaConnection`` and calls the handler of each request that comes out in turn, so requests take
effect in arrival order; and, while answers are queued, a writer that sends them in the same order. A request
whose answer waits (a long poll, an acks=all produce waiting for the ISR) holds the next one back until the
answer is complete, as Kafka mutes a channel while one of its requests is handled: a pipelined produce is
appended only after the one before it was answered, so it meets the ISR that answer left (docs/replication.md).
Record data in fetch responses goes from the segment file to the socket with ``os.sendfile``. Sockets are used directly
(non-blocking, with anyio's readiness waits) so that sendfile and ordinary sends share one socket without a
transport buffering in between. docs/performance.md has what a connection costs.
"""

from __future__ import annotations

import asyncio
import errno
import inspect
import itertools
import logging
import os
import socket
import ssl
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from odradek.broker.network.acceptor import Acceptor
from odradek.broker.config import BrokerConfig
from odradek.broker.network.connection import AnswerReady, Endpoint, Event, KafkaConnection, RequestReceived
from odradek.broker.network.connection_quotas import ConnectionQuotas
from odradek.broker.network.framing import RECEIVE_BUFFER_SIZE
from odradek.broker.kafka_apis import CLOSE_CONNECTION, HANDLERS, error_response, unsupported_api_versions_response
from odradek.broker.kafka_server import KafkaServer
from odradek.broker.network.memory_pool import MemoryPool, Unbounded, memory_pool
from odradek.broker.request_quota import charge, charged
from odradek.protocol.api import Request, encode_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.schema import EncodeError

if TYPE_CHECKING:
    from odradek.broker.security.listeners import ListenerSecurity
    from odradek.broker.security.sasl_authenticator import SaslSettings
    from odradek.broker.security.tls import TlsSession, TlsSettings

log = logging.getLogger("odradek.network")

_IOV_MAX = 1024  # Linux's limit on buffers per sendmsg
_TLS_READ_SIZE = 256 * 1024
_TLS_FILE_CHUNK = 256 * 1024
"""Record data read from a segment file per TLS write (sendfile cannot encrypt: docs/performance.md)."""



def _tls_session(settings: TlsSettings) -> TlsSession:
    """A TLS listener's connection state (the tls module is imported by a TLS listener's first connection)."""
    from odradek.broker.security.tls import TlsSession

    return TlsSession(settings)

class ConnectionClosed(Exception):
    pass


class Readable:
    """Waits for a socket to be readable, leaving it registered with the event loop from one wait to the next.

    ``anyio.wait_readable`` registers the socket and unregisters it at every wait (two ``epoll_ctl`` calls,
    and a future, a context variable and a backend lookup in Python): for a client that sends one request
    and waits for its answer, that is once per request. Here the registration stays while the connection
    is served; a readiness reported while nobody waits (the connection waits for an answer, such as an
    acks=all produce, with the client's next request already arrived) unregisters the socket until the next
    wait, as the loop would otherwise report it again on every turn."""

    __slots__ = ("_loop", "_fd", "_waiter", "_registered")

    def __init__(self, sock: socket.socket) -> None:
        self._loop = asyncio.get_running_loop()
        self._fd = sock.fileno()
        self._waiter: asyncio.Future[None] | None = None
        self._registered = False

    def _ready(self) -> None:
        waiter = self._waiter
        if waiter is None:
            self._loop.remove_reader(self._fd)
            self._registered = False
            return
        self._waiter = None
        if not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        if not self._registered:
            self._loop.add_reader(self._fd, self._ready)
            self._registered = True
        self._waiter = waiter = self._loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        """Unregister (before the socket is closed)."""
        if self._registered:
            self._loop.remove_reader(self._fd)
            self._registered = False


Piece = bytes | memoryview | tuple[Any, int, int]
"""What an answer is sent as: buffers, and ``(file, position, length)`` slices of segment files to sendfile."""

_PIECES = object()
"""The outbox's marker for what remains of answers the reader began to send (their pieces follow it)."""


@dataclass
class Network:
    """What the connections of one event loop share: the receive buffer, the request memory pool, the task
    group their tasks run in, the connection limits, and the set of open connections (for idle expiry)."""

    config: BrokerConfig
    tg: TaskGroup
    receive_buffer: bytearray
    pool: MemoryPool | Unbounded
    connection_quotas: ConnectionQuotas
    connections: set["Connection"] = field(default_factory=set)
    tls_buffer: memoryview = field(default_factory=lambda: memoryview(bytearray(_TLS_READ_SIZE)))
    """Where TLS connections receive their encrypted bytes (handed to their TLS session at once)."""
    slot_freed: anyio.Event = field(default_factory=anyio.Event)
    """Set when a connection closes: a listener at max.connections waits for it."""

    def connection_closed(self, ip: str) -> None:
        self.connection_quotas.close(ip)
        self.slot_freed.set()
        self.slot_freed = anyio.Event()

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
                if not conn.writing and not conn.waiting and now - conn.last_active >= idle_s:
                    log.debug("Closing idle connection from %s", conn.peer)
                    conn.end()


class Connection:
    """The socket shell of one client connection: reads into its :class:`KafkaConnection`, calls the handler
    of each request it decodes in turn (so requests take effect in arrival order, each once the answer before
    it is complete), and writes the answers it queues in the same order (Kafka's pipelining with in-order
    responses).

    An idle connection is only its socket, its unfinished request bytes and one task waiting for the socket to
    be readable: the writer task runs only while answers are queued, and idle expiry is one task for all
    connections, so that thousands of connections cost a few kilobytes each.
    """

    __slots__ = ("server", "network", "sock", "peer", "protocol", "tls", "tls_lock", "room", "reading", "waiting", "writing", "closed", "last_active")

    def __init__(self, server: KafkaServer, network: Network, sock: socket.socket, endpoint: Endpoint, index: int, tls: TlsSettings | None, sasl: SaslSettings | None) -> None:
        self.server = server
        self.network = network
        self.sock = sock
        self.peer = f"{endpoint.peer_host}:{endpoint.peer_port}"
        self.protocol = KafkaConnection(
            endpoint,
            index,
            HANDLERS,
            unsupported_api_versions_response,
            max_request_size=server.config["socket.request.max.bytes"],
            max_queued=server.config["queued.max.requests"],
            receive_buffer=network.receive_buffer,
            pool=network.pool,
            sasl=sasl,
        )
        self.tls = _tls_session(tls) if tls is not None else None
        self.tls_lock = anyio.Lock() if tls is not None else None
        """The reader (handshake, TLS 1.3 tickets) and the writer both send TLS records: one at a time."""
        self.room: anyio.Event | None = None  # set when the writer takes answers from a full outbox
        self.reading = True
        self.waiting = False
        """A request's answer is waiting (a long poll, acks=all): the connection is not idle meanwhile."""
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
            self.network.connection_closed(self.protocol.endpoint.peer_host)
            self.server.quotas.throttles.forget(self.protocol.connection_id)
            share_partitions = self.server.__dict__.get("share_partitions")  # built once a share group fetched
            if share_partitions is not None:
                share_partitions.connection_closed(self.protocol.connection_id)
            self.protocol.close()
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
        protocol = self.protocol
        pool = self.network.pool
        tls = self.tls
        readable = Readable(sock)
        try:
            await self._read_requests(sock, protocol, pool, tls, readable)
        finally:
            readable.close()

    async def _read_requests(self, sock: socket.socket, protocol: KafkaConnection, pool: MemoryPool | Unbounded, tls: TlsSession | None, readable: Readable) -> None:
        while True:
            if pool.exhausted and not protocol.reading_frame:
                await pool.wait_available()  # Kafka mutes the channel until the pool has memory again
            throttled_s = self.server.quotas.throttles.remaining_s(protocol.connection_id, time.monotonic())
            if throttled_s > 0:
                await anyio.sleep(throttled_s)  # a client over its quota is not read until its throttle time passed (KIP-219)
                continue
            target = protocol.buffer() if tls is None else self.network.tls_buffer
            try:
                n = sock.recv_into(target)
            except BlockingIOError:
                await readable.wait()
                continue
            if not n or self.closed:
                return
            self.last_active = time.monotonic()
            events = protocol.received(n) if tls is None else await self._received_tls(target[:n])
            charged = [getattr(event, "size", 0) for event in events]  # released as each is handled
            try:
                for event in events:
                    keep_open = await self._handle(event)
                    protocol.release(charged.pop(0))
                    if not keep_open:
                        return
            finally:
                protocol.release(sum(charged))

    async def _received_tls(self, data: memoryview) -> list[Event]:
        """Decrypt, answer the handshake, and feed the plaintext to the connection."""
        assert self.tls is not None
        handshaking = not self.tls.handshake_done
        try:
            plain = self.tls.receive(data)
        except ssl.SSLError as exc:
            log.info("Closing connection from %s: failed TLS handshake or record: %s", self.peer, exc.reason or exc)
            await self._flush_tls()  # the alert, so the client learns why
            raise ConnectionClosed from exc
        if handshaking and self.tls.handshake_done:
            self.protocol.principal = self.tls.principal()
        await self._flush_tls()
        events = self.protocol.feed(plain) if plain else []
        if self.tls.peer_closed and not events:
            raise ConnectionClosed
        return events

    async def _handle(self, event: Event) -> bool:
        """Act on one event of the connection; False closes it."""
        if isinstance(event, RequestReceived):
            return await self._dispatch(event.request)
        if isinstance(event, AnswerReady):
            await self._send(event.data, None)
            return True
        if event.authentication_failed:
            log.info("%s", event.reason)  # Kafka's Selector logs it so, at INFO
        else:
            log.warning("Closing connection from %s: %s", self.peer, event.reason)
        if event.delay_s > 0:
            await anyio.sleep(event.delay_s)  # connection.failed.authentication.delay.ms: no quick retries
        if event.answer is not None:
            await self._send(event.answer, None)
        return False

    async def _send(self, request: Any, result: Any) -> None:
        """Send an answer at once when nothing is queued before it and the socket takes it all (no writer task,
        one ``sendmsg``); else queue it, or what the socket did not take of it (at most queued.max.requests:
        reading waits beyond), and start the writer if idle."""
        protocol = self.protocol
        if not self.writing and self.tls is None and not self.closed:
            pieces: list[Piece] = []
            close = self._add_answer(request, result, pieces)
            rest = self._send_some(pieces)
            if close:
                raise ConnectionClosed
            self.last_active = time.monotonic()
            if not rest:
                return
            request, result = _PIECES, rest
        while protocol.outbox_full and not self.closed:
            if self.room is None:
                self.room = anyio.Event()
            await self.room.wait()
        if self.closed:
            raise ConnectionClosed
        protocol.queue(request, result)
        if not self.writing:
            self.writing = True
            self.network.tg.start_soon(self._write_loop)

    async def _dispatch(self, request: Request) -> bool:
        """Handle one request; False closes the connection."""
        header = request.header
        quotas = self.server.quotas
        timed = quotas.any_quota() and charged(request)  # request_percentage: the handling time, when a quota may apply
        start_ns = time.perf_counter_ns() if timed else 0
        try:
            result = HANDLERS[header.api_key].handle(self.server, request)
        except Exception:
            log.exception("Error handling %s v%d from %s (client %s)", request.api.name, header.api_version, self.peer, header.client_id)
            result = error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR)
            if result is None:
                return False
        if result is CLOSE_CONNECTION:
            return False
        if timed:
            result = charge(quotas, request, time.perf_counter_ns() - start_ns, result)
        if result is None:
            return True
        if type(result) is not dict and inspect.isawaitable(result):
            # Kafka mutes the channel from a request's arrival until its answer is sent: the next request of
            # the connection is not handled before this one's answer is complete.
            self.waiting = True
            try:
                result = await self._complete(request, result)
            finally:
                self.waiting = False
                self.last_active = time.monotonic()
        await self._send(request, result)
        return True

    # -- writing ------------------------------------------------------------------------------------------

    async def _write_loop(self) -> None:
        """Answers in request order, until none is queued. The answers queued when the writer gets to them go
        out together in one ``sendmsg`` (writev): pipelined small requests cost one syscall per batch."""
        try:
            while self.protocol.outbox and not self.closed:
                batch = self.protocol.take_answers()
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
            if not self.reading:
                self.sock.close()

    async def _write(self, batch: list[tuple[Any, Any]]) -> None:
        pieces: list[Piece] = []
        close = False
        for request, result in batch:
            if self._add_answer(request, result, pieces):
                close = True
                break
        if self.tls is not None:
            await self._send_tls(pieces)
        else:
            while pieces := self._send_some(pieces):
                await anyio.wait_writable(self.sock)
        if close:
            raise ConnectionClosed

    def _add_answer(self, request: Any, result: Any, pieces: list[Piece]) -> bool:
        """Append what the answer is sent as to ``pieces``; True when the connection closes after what came
        before it (an answer that cannot be encoded and has no error answer)."""
        if isinstance(request, bytes):
            pieces.append(request)
            return False
        if request is _PIECES:
            pieces.extend(result)
            return False
        encoded = self._encode(request, result)
        if encoded is None:
            return True
        data, splices = encoded
        if not splices:
            pieces.append(data)
            return False
        view = memoryview(data)
        pos = 0
        for splice in splices:
            if splice.position > pos:
                pieces.append(view[pos : splice.position])
            pos = splice.position
            pieces.extend((piece.file, piece.position, piece.length) for piece in splice.value.slices if piece.length > 0)
        if pos < len(data):
            pieces.append(view[pos:])
        return False

    def _send_some(self, pieces: list[Piece]) -> list[Piece]:
        """Send the pieces in order, as much as the socket takes now, without waiting: consecutive buffers in
        one ``sendmsg`` (writev), file slices with ``os.sendfile`` (zero-copy from the page cache). Returns
        what is left, empty when all went out.

        Buffers mixed with file slices (a fetch answer: its fields, the records, the fields after them) are
        sent with the socket corked, so that they leave as full TCP segments rather than one per call: a
        small fetch answer is one segment instead of three (each costs the broker the loopback's or the
        network stack's work again). The cork is taken out before returning, whatever is left."""
        if len(pieces) > 1 and any(type(piece) is tuple for piece in pieces):
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

    async def _send_tls(self, pieces: list[Piece]) -> None:
        """Over TLS every byte is encrypted here: buffers through the session, file slices read in chunks."""
        assert self.tls is not None
        for piece in pieces:
            if type(piece) is tuple:
                await self._flush_tls()
                await self._send_file_tls(*piece)
            else:
                self.tls.send(piece)  # type: ignore[arg-type]
        await self._flush_tls()

    def _encode(self, request: Request, result: Any) -> tuple[bytes, list[Any]] | None:
        """The answer's frame; for an answer holding a value its field cannot carry (a string over 32,767
        bytes, such as a member id made of a client id that long), the request's error answer, as Kafka's
        KafkaApis answers when its writer refuses (``'memberId' field is too long to be serialized``), or
        None to close when the API has no such answer."""
        header = request.header
        try:
            return encode_response(header.api_key, header.api_version, header.correlation_id, result)
        except EncodeError as exc:
            log.error("Unexpected error handling %s v%d from %s (client %s): %s", request.api.name, header.api_version, self.peer, header.client_id, exc)
        answer = error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR)
        if answer is None:
            return None
        return encode_response(header.api_key, header.api_version, header.correlation_id, answer)

    async def _complete(self, request: Any, result: Any) -> Any:
        try:
            return await result
        except Exception:
            log.exception("Error completing %s from %s", request.api.name, self.peer)
            answer = error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR)
            if answer is None:
                raise ConnectionClosed from None
            return answer

    async def _flush_tls(self) -> None:
        assert self.tls is not None and self.tls_lock is not None
        async with self.tls_lock:
            outgoing = self.tls.outgoing()
            pieces: list[Piece] = [outgoing] if outgoing else []
            while pieces := self._send_some(pieces):
                await anyio.wait_writable(self.sock)

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


class BoundListener(NamedTuple):
    """A listening socket and what its connections speak."""

    name: str
    security_protocol: str
    sock: socket.socket
    tls: TlsSettings | None = None
    sasl: SaslSettings | None = None


async def serve(server: KafkaServer, listeners: list[BoundListener], task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
    """Accept connections on the listening sockets until cancelled. Started, it hands over the listeners'
    Acceptors: shutdown stops them (no new connection) while the open connections finish."""
    indexes = itertools.count()

    async def accept_loop(listener: BoundListener, acceptor: Acceptor, network: Network) -> None:
        """Serve the connections the listener's Acceptor thread takes off the listen queue (broker/network/acceptor.py),
        once the connection limits let each in."""
        quotas = network.connection_quotas
        try:
            while True:
                await acceptor.wait()
                for taken in itertools.count():
                    if (accepted := acceptor.take()) is None:
                        break
                    if taken and taken % 64 == 0:
                        await anyio.lowlevel.checkpoint()  # a burst does not hold the loop from the requests
                    sock, addr, local = accepted
                    while not quotas.slot_available(listener.name):
                        await network.slot_freed.wait()  # max.connections: serve it once one closes
                    if not await _within_creation_rates(network, listener.name, sock, addr[0]):
                        continue
                    if (limit := quotas.open(addr[0])) is not None:
                        log.info("Rejected connection from %s, address already has the configured maximum of %d connections.", addr[0], limit)
                        sock.close()
                        continue
                    endpoint = Endpoint(listener.name, listener.security_protocol, local[0], local[1], addr[0], addr[1])
                    network.tg.start_soon(Connection(server, network, sock, endpoint, next(indexes), listener.tls, listener.sasl).run)
        finally:
            acceptor.close()

    async with anyio.create_task_group() as tg:
        network = Network(
            server.config, tg, bytearray(RECEIVE_BUFFER_SIZE), memory_pool(server.config["queued.max.request.bytes"]),
            ConnectionQuotas.from_config(
                server.config, [listener.name for listener in listeners], server.client_quotas.ip_connection_rate,
                lambda: server.dynamic_config.current["max.connection.creation.rate"],
            ),
        )
        server.background = tg
        tg.start_soon(network.expire_idle_connections)
        acceptors = []
        for listener in listeners:
            acceptor = Acceptor(listener.sock, lambda sock: _prepare(server, sock), listener.name)
            acceptor.start()
            acceptors.append(acceptor)
            tg.start_soon(accept_loop, listener, acceptor, network)
        task_status.started(acceptors)


async def _within_creation_rates(network: Network, listener: str, sock: socket.socket, ip: str) -> bool:
    """Kafka's connection creation rates, for a connection just accepted: over the broker's or the
    listener's, the listener waits the throttle time before going on; over its address's, the connection is
    left unserved and closed once the throttle time has passed (False)."""
    quotas = network.connection_quotas
    try:
        throttle_ms = quotas.accept_throttle_ms(listener, _now_ms())
        if throttle_ms > 0:
            await anyio.sleep(throttle_ms / 1000)
    except BaseException:
        sock.close()
        raise
    throttle_ms = quotas.ip_throttle_ms(listener, ip, _now_ms())
    if throttle_ms == 0:
        return True
    log.debug("Delaying closing of connection from %s for %d ms", ip, throttle_ms)
    network.tg.start_soon(_close_after, sock, throttle_ms / 1000)
    return False


async def _close_after(sock: socket.socket, delay_s: float) -> None:
    try:
        await anyio.sleep(delay_s)
    finally:
        sock.close()


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _prepare(server: KafkaServer, sock: socket.socket) -> None:
    """A connection just accepted (on the Acceptor's thread): non-blocking, no Nagle delay, the configured
    buffer sizes."""
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    send, recv = server.config["socket.send.buffer.bytes"], server.config["socket.receive.buffer.bytes"]
    if send > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send)
    if recv > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, recv)


def open_listeners(config: BrokerConfig, securities: dict[str, ListenerSecurity]) -> list[BoundListener]:
    """Bind every listener, each with its security."""
    bound: list[BoundListener] = []
    backlog = config["socket.listen.backlog.size"]
    try:
        for listener in config.listeners:
            host = listener.host or "0.0.0.0"
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            security = securities[listener.name]
            bound.append(BoundListener(listener.name, security.security_protocol, sock, security.tls, security.sasl))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, listener.port))
            sock.listen(backlog)  # Kafka binds with socket.listen.backlog.size as it is (the OS caps it at somaxconn)
            sock.setblocking(False)
    except OSError:
        for b in bound:
            b.sock.close()
        raise
    return bound
