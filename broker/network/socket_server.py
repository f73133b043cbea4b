"""The network shell: accept connections, dispatch their requests, send answers in order.

What the bytes mean is the sans-IO :class:`KafkaConnection`'s (broker/network/connection.py); moving them is the
connection's transport's (broker/network/transport.py: a socket, or a worker process's channel). Each
connection has a reader that takes whatever the transport holds (large reads into the receive buffer the event
loop's connections share: several times faster than exact-size reads through stream wrappers), hands it to
its ``KafkaConnection`` and calls the handler of each request that comes out in turn, so requests take
effect in arrival order; and, while answers are queued, a writer that sends them in the same order. A request
whose answer waits (a long poll, an acks=all produce waiting for the ISR) holds the next one back until the
answer is complete, as Kafka mutes a channel while one of its requests is handled: a pipelined produce is
appended only after the one before it was answered, so it meets the ISR that answer left (docs/replication.md).
Record data in fetch responses goes from the segment file to the socket with ``os.sendfile``. docs/performance.md
has what a connection costs.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import socket
import time
from functools import cached_property
from typing import TYPE_CHECKING, Any, Coroutine, cast

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from odradek.broker.network.acceptor import Acceptor
from odradek.broker.config import BrokerConfig
from odradek.broker.network.connection import AnswerReady, ConnectionEnded, Endpoint, Event, KafkaConnection, RequestReceived
from odradek.broker.network.connection_quotas import ConnectionQuotas
from odradek.broker.network.framing import RECEIVE_BUFFER_SIZE
from odradek.broker.kafka_apis import CLOSE_CONNECTION, HANDLERS, error_response, unsupported_api_versions_response
from odradek.broker.kafka_server import KafkaServer
from odradek.broker.network.memory_pool import MemoryPool, Unbounded, memory_pool
from odradek.broker.network.transport import ConnectionClosed, Piece, SocketTransport
from odradek.protocol.api import Request, decode_request, encode_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.schema import EncodeError
from odradek.protocol.values import TupleFields

if TYPE_CHECKING:
    from odradek.broker.network.transport import Transport
    from odradek.broker.network.worker_channel import ChannelTransport, HandedOver, WorkerZeroLinks
    from odradek.broker.security.listeners import ListenerSecurity
    from odradek.broker.security.sasl_authenticator import SaslSettings
    from odradek.broker.security.tls import TlsSettings

log = logging.getLogger("odradek.network")

_TLS_READ_SIZE = 256 * 1024

_HOLD_AT_MOST = 64
"""Pieces of pipelined answers held back at most (:meth:`Connection._send`): the first of many waits for a few
dozen more to be handled, not for a whole receive buffer of requests."""

_PIECES = object()
"""The outbox's marker for what remains of answers the reader began to send (their pieces follow it)."""


class Network:
    """What the connections of one event loop share: the receive buffer, the request memory pool, the task
    group their tasks run in, the connection limits, and the set of open connections (for idle expiry)."""

    def __init__(self, config: BrokerConfig, tg: TaskGroup, receive_buffer: bytearray, pool: MemoryPool | Unbounded, connection_quotas: ConnectionQuotas) -> None:
        self.config = config
        self.tg = tg
        self.receive_buffer = receive_buffer
        self.pool = pool
        self.connection_quotas = connection_quotas
        self.connections: set[Connection] = set()
        self.slot_freed = anyio.Event()
        """Set when a connection closes: a listener at max.connections waits for it."""

    @cached_property
    def tls_buffer(self) -> memoryview:
        """Where TLS connections receive their encrypted bytes (handed to their TLS session at once): made by
        the first, so that a broker without TLS listeners neither zeroes nor holds its 256 KiB."""
        return memoryview(bytearray(_TLS_READ_SIZE))

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
    """The request side of one client connection: reads through its transport into its
    :class:`KafkaConnection`, calls the handler of each request it decodes in turn (so requests take effect in
    arrival order, each once the answer before it is complete), charges the request quotas, and writes the
    answers it queues in the same order (Kafka's pipelining with in-order responses). The transport moves the
    bytes: a client's socket (broker/network/transport.py), or a worker process's channel for a connection
    that worker holds (broker/network/worker_channel.py), so that one request side serves both.

    An idle connection is only its socket, its unfinished request bytes and one task waiting for the socket to
    be readable: the writer task runs only while answers are queued, and idle expiry is one task for all
    connections, so that thousands of connections cost a few kilobytes each.
    """

    __slots__ = ("server", "network", "transport", "peer", "protocol", "room", "reading", "waiting", "writing", "closed", "last_active", "held", "holding", "left")

    def __init__(self, server: KafkaServer, network: Network, transport: Transport, endpoint: Endpoint, index: int, sasl: SaslSettings | None) -> None:
        self.server = server
        self.network = network
        self.transport = transport
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
            decode=_forwarded_produce().decode_frame if transport.front and sasl is None else decode_request,
        )
        self.room: anyio.Event | None = None  # set when the writer takes answers from a full outbox
        self.reading = True
        self.waiting = False
        """A request's answer is waiting (a long poll, acks=all): the connection is not idle meanwhile."""
        self.writing = False
        self.closed = False
        self.last_active = time.monotonic()
        self.held: list[Piece] = []
        """Answers held back while more requests read with theirs are handled, to go out with the last one's."""
        self.holding = False
        """More requests of the same read follow the one being handled: its answer is held (:meth:`_send`)."""
        self.left: tuple[Coroutine[Any, Any, bool], int] | None = None
        """What is left of a frame served from a front's channel (:meth:`_serve_frame`) for the reader to
        finish (an answer that waits, such as acks=all's, or an event that is no request), and the bytes it
        holds of the memory pool."""
        if transport.front and sasl is None:
            cast("ChannelTransport", transport).serve_frame = self._serve_frame

    async def run(self) -> None:
        self.network.connections.add(self)
        try:
            await self._read_requests()
        except (ConnectionClosed, OSError):
            pass
        except Exception:
            # A bug met while serving one connection closes that connection, never the broker.
            log.exception("Closing connection from %s after an unexpected error", self.peer)
        finally:
            self.reading = False
            if self.left is not None:  # the reader was cancelled before it got to it
                work, size = self.left
                work.close()
                self.protocol.release(size)
            self.network.connections.discard(self)
            self.network.connection_closed(self.protocol.endpoint.peer_host)
            self.server.quotas.throttles.forget(self.protocol.connection_id)
            share_partitions = self.server.__dict__.get("share_partitions")  # built once a share group fetched
            if share_partitions is not None:
                share_partitions.connection_closed(self.protocol.connection_id)
            self.protocol.close()
            if not self.writing:  # else the writer sends what is queued, then closes
                self.transport.close()

    def end(self) -> None:
        """Stop both directions: the reader wakes to an end of stream and the connection closes."""
        self.closed = True
        if self.room is not None:
            self.room.set()
        self.transport.shutdown()

    # -- reading ------------------------------------------------------------------------------------------

    async def _read_requests(self) -> None:
        transport = self.transport
        protocol = self.protocol
        pool = self.network.pool
        tls = transport.tls
        throttled, connection_id = self.server.quotas.throttles.until, protocol.connection_id
        while True:
            if pool.exhausted and not protocol.reading_frame:
                await pool.wait_available()  # Kafka mutes the channel until the pool has memory again
            if connection_id in throttled:  # the usual case: one lookup per request, no clock read
                await self._wait_out_throttle()
            target = protocol.buffer() if tls is None else self.network.tls_buffer
            try:
                n = transport.recv_into(target)
            except BlockingIOError:
                await transport.wait_readable()
                if self.left is not None and not await self._finish_left():
                    return
                continue
            if not n or self.closed:
                return
            self.last_active = time.monotonic()
            events = protocol.received(n) if tls is None else await self._received_tls(target[:n])
            last = len(events) - 1
            handled = 0  # the events whose bytes went back to the pool: the others' go back if this read ends
            try:
                for event in events:
                    self.holding = handled < last  # pipelined requests read at once: their answers leave together
                    if connection_id in throttled:  # also between requests already read: one at a time, as Kafka's
                        await self._wait_out_throttle()
                    if isinstance(event, RequestReceived):
                        request, size = event
                        keep_open = self._serve(request)
                    else:
                        size, keep_open = getattr(event, "size", 0), self._handle(event)
                    if type(keep_open) is not bool:
                        keep_open = await keep_open
                    handled += 1
                    pool.release(size)
                    if not keep_open:
                        await self._release_held()
                        return
            finally:
                for event in events[handled:]:
                    pool.release(getattr(event, "size", 0))
            if self.held:
                await self._release_held()

    async def _wait_out_throttle(self) -> None:
        """A client over its quota is neither read nor served until its throttle time passed (KIP-219: Kafka
        mutes the channel, and handles one request of a connection at a time, so requests the client
        pipelined wait too)."""
        throttles, connection_id = self.server.quotas.throttles, self.protocol.connection_id
        while (throttled_s := throttles.remaining_s(connection_id, time.monotonic())) > 0:
            await self._release_held()  # the answers before the throttle do not wait it out
            await anyio.sleep(throttled_s)

    async def _received_tls(self, data: memoryview) -> list[Event]:
        """Decrypt (the transport answers the handshake), and feed the plaintext to the connection."""
        transport = self.transport
        assert isinstance(transport, SocketTransport) and transport.tls is not None
        plain, handshake_done = await transport.received_tls(data, self.peer)
        if handshake_done:
            self.protocol.principal = transport.tls.principal()
        events = self.protocol.feed(plain) if plain else []
        if transport.tls.peer_closed and not events:
            raise ConnectionClosed
        return events

    async def _handle(self, event: AnswerReady | ConnectionEnded) -> bool:
        """Act on an event of the connection that is no request; False closes it."""
        if isinstance(event, AnswerReady):
            await self._send(event.data, None)
            return True
        if event.authentication_failed:
            log.info("%s", event.reason)  # Kafka's Selector logs it so, at INFO
        else:
            log.warning("Closing connection from %s: %s", self.peer, event.reason)
        if event.delay_s > 0:
            await self._release_held()
            await anyio.sleep(event.delay_s)  # connection.failed.authentication.delay.ms: no quick retries
        if event.answer is not None:
            await self._send(event.answer, None)
        return False

    async def _send(self, request: Any, result: Any) -> None:
        """Send an answer at once when nothing is queued before it (:meth:`_try_send`); else queue it (at most
        queued.max.requests: reading waits beyond), and start the writer if idle."""
        if not self._try_send(request, result):
            await self._queue(request, result)

    def _try_send(self, request: Any, result: Any) -> bool:
        """Unless the writer is busy (or TLS or closing leave the answer to it): send the answer now, and queue
        for the writer what the socket did not take of it (the outbox is empty: no room to wait for); False,
        with nothing done, when the answer must be queued behind those before it.

        The answers to requests a client pipelined, read from the socket together and answered without a wait,
        go out together with the last one's (one ``sendmsg``, one wake-up of the client, instead of one each);
        any wait in between (an acks=all produce, a long poll, a throttle) sends what is held first."""
        if self.writing or self.transport.tls is not None or self.closed:
            return False
        if rest := self._send_at_once(request, result):
            self._enqueue(_PIECES, rest)
        return True

    def _send_at_once(self, request: Any, result: Any) -> list[Piece]:
        """``_try_send``'s, while nothing is being written, without TLS, open: the answer joins those held and, unless
        held back, they are sent; what the transport did not take."""
        close = self._add_answer(request, result, self.held)
        if self.holding and not close and len(self.held) < _HOLD_AT_MOST:
            return []
        rest = self._send_held()
        if close:
            raise ConnectionClosed
        return rest

    def _send_held(self) -> list[Piece]:
        """Send the held answers now, as much as the socket takes; what it did not."""
        pieces, self.held = self.held, []
        rest = self.transport.send_some(pieces)
        self.last_active = time.monotonic()
        return rest

    async def _release_held(self) -> None:
        """Stop holding answers back, and send those held."""
        self.holding = False
        if self.held and (rest := self._send_held()):
            await self._queue(_PIECES, rest)

    async def _queue(self, request: Any, result: Any) -> None:
        """Queue an answer (or, after ``_PIECES``, what remains of answers begun) for the writer, starting it."""
        protocol = self.protocol
        while protocol.outbox_full and not self.closed:
            if self.room is None:
                self.room = anyio.Event()
            await self.room.wait()
        if self.closed:
            raise ConnectionClosed
        self._enqueue(request, result)

    def _enqueue(self, request: Any, result: Any) -> None:
        self.protocol.queue(request, result)
        if not self.writing:
            self.writing = True
            self.network.tg.start_soon(self._write_loop)

    def _serve(self, request: Request) -> bool | Coroutine[Any, Any, bool]:
        """Handle one request, and send or queue its answer, as far as that goes without waiting: whether the
        connection stays open, or else what finishes it (an answer that waits, such as a long poll's or an
        acks=all produce's, or one that must wait for room in the outbox), for the caller to await. The usual
        request makes no coroutine on its way from the frame to the ``sendmsg``."""
        result = self._start(request)
        if result is CLOSE_CONNECTION:
            return False
        if result is not None and ((type(result) is not dict and inspect.isawaitable(result)) or not self._try_send(request, result)):
            return self._answer(request, result)
        return True

    def _start(self, request: Request) -> Any:
        """Run the request's handler, charging its time to the request quota: its answer, an awaitable of it,
        None (no answer) or CLOSE_CONNECTION."""
        header = request.header
        quotas = self.server.quotas
        if quotas.entities:  # request_percentage: the handling time, when a quota may apply
            from odradek.broker.request_quota import charge, charged  # a broker without quotas never imports it

            timed = charged(request)
        else:
            timed = False
        start_ns = time.perf_counter_ns() if timed else 0
        try:
            result = HANDLERS[header.api_key].handle(self.server, request)
        except Exception:
            log.exception("Error handling %s v%d from %s (client %s)", request.api.name, header.api_version, self.peer, header.client_id)
            result = error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR)
            if result is None:
                return CLOSE_CONNECTION
        if result is CLOSE_CONNECTION:
            return result
        if timed:
            result = charge(quotas, request, time.perf_counter_ns() - start_ns, result)
        return result

    async def _answer(self, request: Request, result: Any) -> bool:
        """Send the answer once complete; True (the connection stays open)."""
        if type(result) is not dict and inspect.isawaitable(result):
            # Kafka mutes the channel from a request's arrival until its answer is sent: the next request of
            # the connection is not handled before this one's answer is complete.
            await self._release_held()
            self.waiting = True
            try:
                result = await self._complete(request, result)
            finally:
                self.waiting = False
                self.last_active = time.monotonic()
        await self._send(request, result)
        return True

    # -- a front's whole frames ------------------------------------------------------------------------------

    def _serve_frame(self, frame: bytearray) -> bool:
        """A whole frame a front made (worker_channel.FRAME: a Produce it decoded), served at once from the
        channel's reader while this connection's reader waits for bytes with none queued: what the reader
        would do with it, in the same order and with the same charges, without copying it into the frame
        reader and waking the reader's task per request (docs/multicore.md, step 2). An answer that waits
        (acks=all), or an event that is no request, is left to the reader, woken for it: later frames queue
        behind it meanwhile. False, with nothing done: not now (closing, throttled, writing, a frame begun),
        read it in its turn."""
        protocol = self.protocol
        if self.closed or self.writing or self.left is not None or protocol.connection_id in self.server.quotas.throttles.until:
            return False
        transport = cast("ChannelTransport", self.transport)
        size = 0
        try:
            event = protocol.whole_frame(memoryview(frame)[4:])
            if event is None:
                return False
            self.last_active = time.monotonic()
            if not isinstance(event, RequestReceived):
                self.left = (self._handle(event), getattr(event, "size", 0))
                transport.wake()
                return True
            request, size = event
            served = self._serve(request)
            if served is False:
                self.end()
            elif served is not True:
                self.left = (served, size)
                transport.wake()
                return True
        except (ConnectionClosed, OSError):
            self.end()
        except Exception:
            # As the reader's: a bug met while serving one connection closes that connection, never the broker.
            log.exception("Closing connection from %s after an unexpected error", self.peer)
            self.end()
        protocol.release(size)
        return True

    async def _finish_left(self) -> bool:
        """The reader finishes what :meth:`_serve_frame` left it; False closes the connection."""
        assert self.left is not None
        work, size = self.left
        self.left = None
        try:
            return await work
        finally:
            self.protocol.release(size)

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
                self.transport.close()

    async def _write(self, batch: list[tuple[Any, Any]]) -> None:
        pieces: list[Piece] = []
        close = False
        for request, result in batch:
            if self._add_answer(request, result, pieces):
                close = True
                break
        await self.transport.write(pieces)
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
            for piece in splice.value.slices:
                if piece.length > 0:
                    pieces.append((piece.file, piece.position, piece.length))
        if pos < len(data):
            pieces.append(view[pos:])
        return False

    def _encode(self, request: Request, result: Any) -> tuple[bytes, list[Any]] | None:
        """The answer's frame (a ``ProduceAnswer`` for a Produce a front decoded); for an answer holding a value
        its field cannot carry (a string over 32,767 bytes, such as a member id made of a client id that long),
        the request's error answer, as Kafka's KafkaApis answers when its writer refuses (``'memberId' field
        is too long to be serialized``), or None to close when the API has no such answer."""
        header = request.header
        try:
            if self.transport.front and type(request.body) is (forwarded := _forwarded_produce()).ForwardedProduce:
                return forwarded.answer(result), []  # a Produce a front decoded: the front encodes its answer
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


class BoundListener(TupleFields):
    """A listening socket and what its connections speak."""

    name: str
    security_protocol: str
    sock: socket.socket
    tls: TlsSettings | None = None
    sasl: SaslSettings | None = None


async def serve(server: KafkaServer, listeners: list[BoundListener], links: WorkerZeroLinks | None = None, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
    """Accept connections on the listening sockets until cancelled. Started, it hands over the listeners'
    Acceptors: shutdown stops them (no new connection) while the open connections finish. Worker 0 of a
    multi-process broker (``links``) accepts nothing itself: it serves the connections the supervisor hands
    it and those the other workers forward (broker/network/worker_channel.py)."""
    indexes = itertools.count()

    async def accept_loop(listener: BoundListener, acceptor: Acceptor | HandedOver, network: Network) -> None:
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
                    transport = SocketTransport(sock, listener.tls, acceptor.on_socket_closed) if isinstance(sock, socket.socket) else sock
                    while not quotas.slot_available(listener.name):
                        await network.slot_freed.wait()  # max.connections: serve it once one closes
                    if not await _within_creation_rates(network, listener.name, transport, addr[0]):
                        continue
                    if (limit := quotas.open(addr[0])) is not None:
                        log.info("Rejected connection from %s, address already has the configured maximum of %d connections.", addr[0], limit)
                        transport.close()
                        continue
                    endpoint = Endpoint(listener.name, listener.security_protocol, local[0], local[1], addr[0], addr[1])
                    network.tg.start_soon(Connection(server, network, transport, endpoint, next(indexes), listener.sasl).run)
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
        acceptors: list[Acceptor | HandedOver] = []
        handed_over: list[HandedOver] = []
        for listener in listeners:
            acceptor: Acceptor | HandedOver
            if links is None:
                acceptor = Acceptor(listener.sock, lambda sock: prepare(server.config, sock), listener.name)
                acceptor.start()
            else:
                from odradek.broker.network.worker_channel import HandedOver  # only worker 0 of several processes

                acceptor = HandedOver()
                acceptor.on_socket_closed = links.connection_closed
                handed_over.append(acceptor)
            acceptors.append(acceptor)
            tg.start_soon(accept_loop, listener, acceptor, network)
        if links is not None:
            links.start(tg, handed_over)
        task_status.started(acceptors)


def _forwarded_produce() -> Any:
    """broker/network/forwarded_produce.py, for connections a front holds: imported by the first of them, so a
    broker in one process (``Broker()``, ``worker.processes=1``) never loads the multi-process modules."""
    from odradek.broker.network import forwarded_produce

    return forwarded_produce


async def _within_creation_rates(network: Network, listener: str, sock: Transport, ip: str) -> bool:
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


async def _close_after(sock: Transport, delay_s: float) -> None:
    try:
        await anyio.sleep(delay_s)
    finally:
        sock.close()


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def prepare(config: BrokerConfig, sock: socket.socket) -> None:
    """A connection just accepted (on the Acceptor's thread, or by the supervisor): non-blocking, no Nagle
    delay, the configured buffer sizes."""
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    send, recv = config["socket.send.buffer.bytes"], config["socket.receive.buffer.bytes"]
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
