"""The channel between a worker process that holds client connections and worker 0, which serves them
(docs/multicore.md, step 1), and the control socket over which the supervisor hands connections over.

A worker ≥ 1 (a *front*) holds its clients' sockets and forwards what they send, unchanged, to worker 0 over
one stream socketpair; worker 0 serves each forwarded connection with the same request side as its own
(``socket_server.Connection``) through a :class:`ChannelTransport`, and sends the answers back as buffers and
``(segment path, device, inode, position, length)`` slices, which the front writes to the client, the slices
with ``sendfile`` from its own descriptor of the segment (:class:`SegmentFiles`). Messages are written once
per event-loop turn, all that waits in one ``sendmsg``: busy, a forwarded request costs a couple of µs
(docs/multicore.md, "Forwarding a small request").

A Produce request the front decoded goes as a FRAME, one whole internal frame (broker/network/forwarded_produce.py):
worker 0 serves it at once, from the channel's reader, when its connection is idle (its reader waits for bytes
and none is queued), without the connection's frame reader and the wake-up of its task (docs/multicore.md,
step 2); otherwise it is read in its turn as any bytes.

Flow control is a window, as TCP's: a front forwards at most :data:`WINDOW` bytes of a connection that worker
0 has not yet read (it reads them as its own socket's: one request at a time, muted while one is handled), and
worker 0 returns credit as it reads, for every connection in one message per write; a front stops reading a
client whose answers are not yet written.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import signal
import socket
import struct
from typing import Any, Callable

import anyio

from odradek.broker.network.forwarded_produce import ProduceAnswer, ProduceFramer
from odradek.broker.network.transport import ConnectionClosed, Piece, Readiness, SocketTransport
from odradek.protocol.api import ApiKey
from odradek.protocol.schema import EncodeError

log = logging.getLogger("odradek.network")

HEADER = struct.Struct("!IBI")
"""A message: its payload's length, its kind, the connection it is about (the front's number for it)."""
NEW, DATA, CLOSED, ANSWER, CREDIT, CLOSE, FRAME = range(7)
"""Front → worker 0: NEW (payload :data:`ENDPOINT`, a client connected), DATA (bytes the client sent), FRAME
(one whole frame the front made in place of the client's: read as DATA, or served at once), CLOSED (the client
went). Worker 0 → front: ANSWER (pieces), CREDIT (:data:`CREDIT_ENTRY` per connection: bytes of DATA and FRAME
read; the message's own connection is 0), CLOSE (close once the answers before are written)."""
ENDPOINT = struct.Struct("!B")
"""NEW's payload: the listener's index, then "peer host|peer port|local host|local port" in ASCII."""
CREDIT_ENTRY = struct.Struct("!II")
"""A connection and how many of its bytes worker 0 read."""
BUFFER = struct.Struct("!BI")
"""An answer's piece: kind 0 and its length, the bytes following; kind 2, a forwarded Produce's
``ProduceAnswer`` (the front builds the Kafka response); or :data:`SLICE`."""
SLICE = struct.Struct("!BHQQQI")
"""kind 1, the path's length, the file's device and inode, position, length; the path (bytes) follows."""
WINDOW = 1 << 20
"""Bytes of one connection forwarded and not yet read by worker 0, at most."""
_READ_SIZE = 256 * 1024


class Channel:
    """One end of a worker-to-worker stream socket: messages out, written together once per loop turn; a
    reader task hands each message in to ``handle(kind, connection, payload)``."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.out: list[Any] = []
        self.credits: dict[int, int] = {}
        """Bytes read per connection since the last write: sent as one CREDIT message with it."""
        self.flushing = False
        self.blocked = False
        self.broken = False

    def send(self, kind: int, connection: int, *payload: Any) -> None:
        if self.broken:
            return
        self.out.append(HEADER.pack(sum(len(p) for p in payload), kind, connection))
        self.out.extend(payload)
        if not self.flushing and not self.blocked:
            self.flushing = True
            self.loop.call_soon(self._flush)

    def credit(self, connection: int, n: int) -> None:
        """``n`` bytes of the connection were read: told with the next write, summed with the others'."""
        credits = self.credits
        credits[connection] = credits.get(connection, 0) + n
        if not self.flushing and not self.blocked:
            self.flushing = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self.flushing = False
        out = self.out
        if self.credits and not self.broken:
            entries = b"".join([CREDIT_ENTRY.pack(connection, n) for connection, n in self.credits.items()])
            self.credits = {}
            out.append(HEADER.pack(len(entries), CREDIT, 0))
            out.append(entries)
        while out:
            try:
                sent = self.sock.sendmsg(out[:1024])
            except BlockingIOError:
                sent = 0
            except OSError:
                self.broken = True
                out.clear()
                return
            i = 0
            while i < len(out) and sent >= len(out[i]):
                sent -= len(out[i])
                i += 1
            if sent:
                out[i] = memoryview(out[i])[sent:]
            del out[:i]
            if out and (i == 0 or sent):
                break
        if out:
            self.blocked = True
            self.loop.add_writer(self.sock.fileno(), self._writable)

    def _writable(self) -> None:
        self.loop.remove_writer(self.sock.fileno())
        self.blocked = False
        self._flush()

    async def receive(self, handle: Callable[[int, int, bytearray], None]) -> None:
        """Until the other end closes. Each payload is a copy of its own (writable: a FRAME's records are
        appended from it, as from a frame read off a socket)."""
        readable = Readiness(self.sock)
        buf = bytearray()
        try:
            while True:
                try:
                    data = self.sock.recv(_READ_SIZE)
                except BlockingIOError:
                    if self.flushing:  # what the messages read made (answers, credit) goes before the wait
                        self._flush()
                    await readable.wait()
                    continue
                except OSError:
                    return
                if not data:
                    return
                buf += data
                pos, end = 0, len(buf)
                while end - pos >= HEADER.size:
                    size, kind, connection = HEADER.unpack_from(buf, pos)
                    start = pos + HEADER.size
                    if end - start < size:
                        break
                    handle(kind, connection, buf[start : start + size])
                    pos = start + size
                del buf[:pos]
        finally:
            readable.close()

    def close(self) -> None:
        if self.blocked:
            self.loop.remove_writer(self.sock.fileno())
        self.sock.close()


def encode_answer(pieces: list[Piece]) -> list[Any]:
    """An answer's pieces as ANSWER's payload: buffers as they are, file slices by their segment's path and
    identity (so a front never sends from another file that took the name since)."""
    out: list[Any] = []
    for piece in pieces:
        if type(piece) is ProduceAnswer:
            out.append(BUFFER.pack(2, len(piece)))
            out.append(piece)
        elif type(piece) is tuple:
            file, position, length = piece
            path = os.fsencode(file.path)
            st = os.fstat(file.fileno())
            out.append(SLICE.pack(1, len(path), st.st_dev, st.st_ino, position, length))
            out.append(path)
        else:
            out.append(BUFFER.pack(0, len(piece)))
            out.append(piece)
    return out


class SegmentFile:
    """A front's read-only descriptor of a segment file, closed when the cache and every queued slice let go."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def __del__(self) -> None:
        os.close(self.fd)


class SegmentFiles:
    """A front's open segment files, by identity, at most ``capacity``; a deleted one is let go at the next
    :meth:`sweep`, so that its disk space is freed once the slices queued from it are sent."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self.files: collections.OrderedDict[tuple[int, int], SegmentFile] = collections.OrderedDict()

    def get(self, path: bytes, dev: int, ino: int) -> SegmentFile | None:
        key = (dev, ino)
        file = self.files.get(key)
        if file is not None:
            self.files.move_to_end(key)
            return file
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        file = SegmentFile(fd)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != key:
            return None  # the name is another file's now: the segment was deleted or replaced
        self.files[key] = file
        while len(self.files) > self.capacity:
            self.files.popitem(last=False)
        return file

    def sweep(self) -> None:
        for key, file in list(self.files.items()):
            if os.fstat(file.fd).st_nlink == 0:
                del self.files[key]


def decode_answer(payload: bytearray, files: SegmentFiles, framer: ProduceFramer) -> list[Piece] | None:
    """ANSWER's payload as pieces to write (a Produce's answer as its Kafka response, built by the connection's
    ``framer``); None when a segment file cannot be opened as worker 0 named it (deleted and gone meanwhile:
    the connection is closed, as for a segment shorter than its slice)."""
    pieces: list[Piece] = []
    view = memoryview(payload)
    pos = 0
    while pos < len(payload):
        kind = payload[pos]
        if kind != 1:
            _, size = BUFFER.unpack_from(payload, pos)
            pos += BUFFER.size
            pieces.append(view[pos : pos + size] if kind == 0 else framer.answered(view[pos : pos + size]))
            pos += size
        else:
            _, path_size, dev, ino, position, length = SLICE.unpack_from(payload, pos)
            pos += SLICE.size
            file = files.get(bytes(payload[pos : pos + path_size]), dev, ino)
            pos += path_size
            if file is None:
                return None
            pieces.append((file, position, length))
    return pieces


def encode_endpoint(listener: int, peer: tuple, local: tuple) -> bytes:
    return ENDPOINT.pack(listener) + f"{peer[0]}|{peer[1]}|{local[0]}|{local[1]}".encode()


def decode_endpoint(payload: bytearray) -> tuple[int, tuple[str, int], tuple[str, int]]:
    (listener,) = ENDPOINT.unpack_from(payload)
    peer_host, peer_port, local_host, local_port = payload[ENDPOINT.size :].decode().split("|")
    return listener, (peer_host, int(peer_port)), (local_host, int(local_port))


# -- worker 0's side ----------------------------------------------------------------------------------------


class ChannelTransport:
    """Worker 0's transport for a connection a front holds: what it reads is what the front forwarded, what it
    writes goes back as ANSWER messages (never waits: the front queues)."""

    __slots__ = ("channel", "connection", "inbound", "eof", "ended", "waiter", "on_close", "serve_frame")

    tls = None
    front = True

    def __init__(self, channel: Channel, connection: int, on_close: Callable[[], None]) -> None:
        self.channel = channel
        self.connection = connection
        self.inbound: collections.deque[bytearray] = collections.deque()
        self.eof = False
        self.ended = False
        self.waiter: anyio.Event | None = None
        """Set while the connection's reader waits for bytes: it has read and handled all before."""
        self.on_close = on_close
        self.serve_frame: Callable[[bytearray], bool] | None = None
        """The connection's way to serve a whole FRAME at once (False: not now, read it in its turn)."""

    def received(self, data: bytearray) -> None:
        self.inbound.append(data)
        self.wake()

    def received_frame(self, frame: bytearray) -> None:
        """A whole frame the front made: served at once while the reader waits with nothing queued before it
        (no copy into the frame reader, no wake-up of the connection's task), else queued as any bytes."""
        if self.waiter is not None and not self.inbound and self.serve_frame is not None and self.serve_frame(frame):
            self.channel.credit(self.connection, len(frame))
        else:
            self.received(frame)

    def peer_closed(self) -> None:
        self.eof = True
        self.wake()

    def wake(self) -> None:
        """Wake the reader waiting for bytes (to find new ones, the end, or work left for it)."""
        if self.waiter is not None:
            self.waiter.set()
            self.waiter = None

    def recv_into(self, target: memoryview) -> int:
        if not self.inbound:
            if self.eof:
                return 0
            raise BlockingIOError
        chunk = self.inbound[0]
        n = min(len(chunk), len(target))
        target[:n] = chunk[:n]
        if n < len(chunk):
            self.inbound[0] = chunk[n:]
        else:
            self.inbound.popleft()
        self.channel.credit(self.connection, n)
        return n

    async def wait_readable(self) -> None:
        if self.inbound or self.eof:
            return
        self.waiter = waiter = anyio.Event()
        await waiter.wait()

    def send_some(self, pieces: list[Piece]) -> list[Piece]:
        if self.ended:
            raise ConnectionClosed
        self.channel.send(ANSWER, self.connection, *encode_answer(pieces))
        return []

    async def write(self, pieces: list[Piece]) -> None:
        self.send_some(pieces)

    def shutdown(self) -> None:
        self.eof = True
        self.wake()
        if not self.ended:
            self.ended = True
            self.channel.send(CLOSE, self.connection)

    def close(self) -> None:
        self.shutdown()
        self.inbound.clear()
        self.on_close()


class FrontChannel:
    """Worker 0's end of one front's channel: NEW connections go to ``accepted(listener, transport, peer,
    local)`` (the listener's accept loop admits and serves them); DATA and CLOSED to their transports."""

    def __init__(self, sock: socket.socket, accepted: Callable[[int, ChannelTransport, tuple, tuple], None]) -> None:
        self.channel = Channel(sock)
        self.accepted = accepted
        self.transports: dict[int, ChannelTransport] = {}

    def _handle(self, kind: int, connection: int, payload: bytearray) -> None:
        if kind == FRAME:
            transport = self.transports.get(connection)
            if transport is not None:
                transport.received_frame(payload)
        elif kind == DATA:
            transport = self.transports.get(connection)
            if transport is not None:
                transport.received(payload)
        elif kind == NEW:
            listener, peer, local = decode_endpoint(payload)
            transport = ChannelTransport(self.channel, connection, lambda: self._forget(connection))
            self.transports[connection] = transport
            self.accepted(listener, transport, peer, local)
        elif kind == CLOSED:
            transport = self.transports.get(connection)
            if transport is not None:
                transport.ended = True  # nothing to send it any more
                transport.peer_closed()

    def _forget(self, connection: int) -> None:
        self.transports.pop(connection, None)

    async def serve(self) -> None:
        """Until the front's end closes (it died, or the broker stops): its connections end with it."""
        try:
            await self.channel.receive(self._handle)
        finally:
            for transport in list(self.transports.values()):
                transport.ended = True
                transport.peer_closed()


# -- a front's side -----------------------------------------------------------------------------------------


class ForwardedConnection:
    """A front's client connection: what the client sends goes to worker 0, worker 0's answers to the client."""

    def __init__(self, front: Front, number: int, transport: SocketTransport, framer: ProduceFramer) -> None:
        self.front = front
        self.number = number
        self.transport = transport
        self.framer = framer
        self.unread = 0
        """Bytes forwarded that worker 0 has not read yet."""
        self.answers: list[Piece] = []
        self.writing = False
        self.closing = False
        self.room = anyio.Event()

    def credit(self, n: int) -> None:
        blocked = self.unread >= WINDOW  # else reading waits for nothing, or for the answers to be written
        self.unread -= n
        if blocked:
            self.room.set()

    def answer(self, pieces: list[Piece]) -> None:
        """Write the answer: at once when nothing is queued before it (one ``sendmsg``, no writer task), what
        the socket does not take by the writer."""
        if not self.writing:
            try:
                pieces = self.transport.send_some(pieces)
            except (ConnectionClosed, OSError):
                self.transport.shutdown()
                return
            if not pieces:
                return
            self.writing = True
            self.front.tg.start_soon(self._write)
        self.answers.extend(pieces)

    def close_after_answers(self) -> None:
        self.closing = True
        if not self.writing:
            self.transport.shutdown()
        self.room.set()

    async def _write(self) -> None:
        try:
            while self.answers:
                pieces, self.answers = self.answers, []
                await self.transport.write(pieces)
            if self.closing:
                self.transport.shutdown()
        except (ConnectionClosed, OSError):
            self.transport.shutdown()
        finally:
            self.writing = False
            self.room.set()

    async def run(self) -> None:
        """Forward what the client sends, while worker 0 keeps up with it and the client with its answers."""
        buffer = memoryview(bytearray(_READ_SIZE))
        transport, channel = self.transport, self.front.channel
        try:
            while not self.closing:
                if self.unread >= WINDOW or self.answers:
                    self.room = anyio.Event()
                    await self.room.wait()
                    continue
                try:
                    n = transport.recv_into(buffer)
                except BlockingIOError:
                    await transport.wait_readable()
                    continue
                if not n:
                    break
                for whole, data in self.framer.feed(buffer[:n]):
                    channel.send(FRAME if whole else DATA, self.number, data)
                    self.unread += len(data)
        except OSError:
            pass
        finally:
            if not self.closing:
                channel.send(CLOSED, self.number)
            self.front.connections.pop(self.number, None)
            while self.writing:
                await self.room.wait()
                self.room = anyio.Event()
            transport.close()
            self.front.connection_closed()


class Front:
    """A worker ≥ 1: takes the connections the supervisor hands it and forwards them to worker 0, a Produce
    request decoded and checked (broker/network/forwarded_produce.py) on a listener without SASL
    (``plaintext[listener]``)."""

    def __init__(self, tg: Any, channel: Channel, connection_closed: Callable[[], None], plaintext: list[bool]) -> None:
        from odradek.broker.kafka_apis import HANDLERS  # the versions worker 0 serves

        produce = HANDLERS[ApiKey.Produce]
        self.produce_versions = range(produce.min_version, produce.max_version + 1)
        self.plaintext = plaintext
        self.tg = tg
        self.channel = channel
        self.connection_closed = connection_closed
        self.files = SegmentFiles()
        self.connections: dict[int, ForwardedConnection] = {}
        self.numbers = itertools.count()

    def serve(self, listener: int, sock: socket.socket, peer: tuple, local: tuple) -> None:
        number = next(self.numbers)
        framer = ProduceFramer(self.produce_versions if self.plaintext[listener] else None)
        connection = ForwardedConnection(self, number, SocketTransport(sock, None), framer)
        self.connections[number] = connection
        self.channel.send(NEW, number, encode_endpoint(listener, peer, local))
        self.tg.start_soon(connection.run)

    def _handle(self, kind: int, number: int, payload: bytearray) -> None:
        if kind == CREDIT:
            connections = self.connections
            for number, n in CREDIT_ENTRY.iter_unpack(payload):
                if (credited := connections.get(number)) is not None:
                    credited.credit(n)
            return
        connection = self.connections.get(number)
        if connection is None:
            return
        if kind == ANSWER:
            try:
                pieces = decode_answer(payload, self.files, connection.framer)
            except (IndexError, ValueError, struct.error, EncodeError) as exc:  # a bug of ours, never a client's bytes
                log.error("Closing connection %d: worker 0's answer could not be read: %r", number, exc)
                connection.close_after_answers()
                return
            if pieces is None:
                log.warning("Closing connection %d: a segment file worker 0 named is gone", number)
                connection.close_after_answers()
            else:
                connection.answer(pieces)
        elif kind == CLOSE:
            connection.close_after_answers()

    async def serve_channel(self) -> None:
        """Until worker 0's end closes."""
        await self.channel.receive(self._handle)

    async def sweep_files(self) -> None:
        while True:
            await anyio.sleep(5)
            self.files.sweep()


# -- the supervisor's control socket, a worker's side ---------------------------------------------------------


class HandedOver:
    """A listener's connections as a worker gets them (from the supervisor, or a front's NEW): what the
    listener's accept loop takes in place of an :class:`Acceptor`'s. Items are ``(socket or transport, peer,
    local)``."""

    def __init__(self) -> None:
        self.accepted: collections.deque[tuple[Any, tuple, tuple]] = collections.deque()
        self.ready = anyio.Event()
        self.stopped = False
        self.on_socket_closed: Callable[[], None] | None = None
        """Tells the supervisor a connection it handed here closed (it counts each worker's)."""

    def put(self, item: tuple[Any, tuple, tuple]) -> None:
        if self.stopped:
            item[0].close()
            return
        self.accepted.append(item)
        self.ready.set()

    async def wait(self) -> None:
        while not self.accepted:
            self.ready = anyio.Event()
            await self.ready.wait()

    def take(self) -> tuple[Any, tuple, tuple] | None:
        return self.accepted.popleft() if self.accepted else None

    def stop(self) -> None:
        self.stopped = True

    def close(self) -> None:
        self.stop()
        while self.accepted:
            self.accepted.popleft()[0].close()


CONNECTION_CLOSED = b"c"
"""A worker to the supervisor: one of the connections it was handed closed."""
UNCLEAN_STOP = b"u"
"""The supervisor to worker 0: another worker died; stop in order but do not mark the logs cleanly shut down."""


def tell_supervisor(control: socket.socket, message: bytes) -> None:
    try:
        control.send(message)
    except OSError:
        pass  # the supervisor is gone: the worker is stopping anyway


async def receive_connections(control: socket.socket, handed: Callable[[int, socket.socket], None], unclean: Callable[[], None] = lambda: None) -> None:
    """Connections the supervisor hands over (SCM_RIGHTS; the message is the listener's index), until its end
    of the control socket closes."""
    control.setblocking(False)
    readable = Readiness(control)
    try:
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(control, 16, 4)
            except BlockingIOError:
                await readable.wait()
                continue
            except OSError:
                return
            if not message:
                for fd in fds:
                    os.close(fd)
                return
            if message == UNCLEAN_STOP:
                unclean()
                continue
            for fd in fds:
                sock = socket.socket(fileno=fd)
                sock.setblocking(False)
                handed(message[0], sock)
    finally:
        readable.close()


class WorkerZeroLinks:
    """Worker 0's sockets to the rest of a multi-process broker: its control socket to the supervisor and a
    channel to each front."""

    def __init__(self, control: socket.socket, fronts: list[socket.socket]) -> None:
        self.control = control
        self.fronts = fronts
        self.unclean = False
        """Another worker died: the logs are not marked cleanly shut down (the next start recovers them)."""

    def connection_closed(self) -> None:
        tell_supervisor(self.control, CONNECTION_CLOSED)

    def start(self, tg: Any, sources: list[HandedOver]) -> None:
        """Serve what the supervisor hands over and what the fronts forward, as the listeners' connections."""

        def handed(index: int, sock: socket.socket) -> None:
            try:
                peer, local = sock.getpeername(), sock.getsockname()
            except OSError:  # reset before we got to it
                sock.close()
                self.connection_closed()
                return
            sources[index].put((sock, peer, local))

        def forwarded(index: int, transport: ChannelTransport, peer: tuple, local: tuple) -> None:
            sources[index].put((transport, peer, local))

        tg.start_soon(self._control, handed)
        for sock in self.fronts:
            tg.start_soon(FrontChannel(sock, forwarded).serve)

    async def _control(self, handed: Callable[[int, socket.socket], None]) -> None:
        await receive_connections(self.control, handed, self._unclean)
        log.error("The supervisor is gone: stopping")
        os.kill(os.getpid(), signal.SIGTERM)  # the broker's own orderly shutdown, as for the supervisor's SIGTERM

    def _unclean(self) -> None:
        self.unclean = True
