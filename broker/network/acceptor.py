"""Kafka's Acceptor: a thread per listener that takes connections off the listen queue as fast as the kernel
hands them over, whatever the event loop is doing.

Accepting on the event loop ties the listen queue to request processing: while the loop serves the
requests of the clients that just connected, the queue (``socket.listen.backlog.size``, Kafka's default
50) overflows, the kernel drops the next SYNs and each of those clients connects only after its SYN is
sent again, a second or more later. Kafka's Acceptor thread accepts independently of its processors and
queues each connection for one of them; this one does the same for the event loop: it accepts, makes the
socket non-blocking with the broker's socket options, and queues it, waking the loop through a socket
pair when the queue was empty. At most :data:`ACCEPTED_QUEUE` connections wait there (Kafka's processors
take 20 each); when it is full the thread waits for the loop to take some, as Kafka's Acceptor blocks on a
full processor queue.
"""

from __future__ import annotations

import errno
import logging
import select
import socket
import threading
import time
from collections import deque
from typing import Callable

import anyio

log = logging.getLogger("odradek.network")

ACCEPTED_QUEUE = 1024
"""Connections accepted and not yet taken by the event loop, at most (each holds only its descriptor)."""

Accepted = tuple[socket.socket, tuple, tuple]
"""(socket, peer address, local address)."""


class Acceptor:
    on_socket_closed = None
    """Nothing to tell when a connection closes (a worker's handed-over connections tell the supervisor)."""

    def __init__(self, listening: socket.socket, prepare: Callable[[socket.socket], None], name: str) -> None:
        self.listening = listening
        self.prepare = prepare
        """Socket options for each connection accepted (non-blocking, TCP_NODELAY, buffers), set here."""
        self.accepted: deque[Accepted] = deque()
        self._wake_loop, self._wake_thread = socket.socketpair()
        """The thread writes a byte to ``_wake_thread`` when it queues into an empty queue; the loop waits
        for ``_wake_loop`` to be readable. A byte from the loop's side stops the thread."""
        for s in (self._wake_loop, self._wake_thread):
            s.setblocking(False)
        self._room = threading.Event()
        self._room.set()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"odradek-acceptor-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting: wake the thread, wait for it, then close the listening socket (safe to call again).

        The order is Kafka's (its Acceptor is woken and joined before its server channel closes): a socket
        closed under the thread polls as invalid at once and fails every accept, and the thread, between two
        polls when it closed, spun logging a failed accept per turn until it was told to stop."""
        if not self._stopping:
            self._stopping = True
            self._room.set()
            try:
                self._wake_loop.send(b"\0")
            except OSError:
                pass
        self._thread.join(5)
        self.listening.close()

    def close(self) -> None:
        """Once the loop no longer takes connections: stop, and close what was queued and the wake-up pair."""
        self.stop()
        while self.accepted:
            self.accepted.popleft()[0].close()
        self._wake_loop.close()
        self._wake_thread.close()

    # -- the event loop's side ----------------------------------------------------------------------------

    async def wait(self) -> None:
        """Until the thread has queued a connection (returns at once when some are queued)."""
        while not self.accepted:
            await anyio.wait_readable(self._wake_loop)
            try:
                while self._wake_loop.recv(4096):
                    pass
            except BlockingIOError:
                pass

    def take(self) -> Accepted | None:
        try:
            item = self.accepted.popleft()
        except IndexError:
            return None
        if not self._room.is_set():
            self._room.set()
        return item

    # -- the thread ---------------------------------------------------------------------------------------

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self.listening, select.POLLIN)
        poller.register(self._wake_thread, select.POLLIN)
        while not self._stopping:
            if len(self.accepted) >= ACCEPTED_QUEUE:
                self._room.clear()
                if len(self.accepted) >= ACCEPTED_QUEUE:  # the loop may have taken some meanwhile
                    self._room.wait()
                continue
            if any(fd == self._wake_thread.fileno() for fd, _ in poller.poll()):
                return
            if not self._accept_pending():
                return

    def _accept_pending(self) -> bool:
        """Accept what the listen queue holds; False once the listening socket is closed."""
        while len(self.accepted) < ACCEPTED_QUEUE:
            try:
                sock, addr = self.listening.accept()
            except BlockingIOError:
                return True
            except OSError as exc:
                if exc.errno == errno.EBADF:  # closed: no connection will come again
                    if not self._stopping:
                        log.error("Listening socket closed, no more connections accepted: %s", exc)
                    return False
                # ECONNABORTED, EMFILE, ENOBUFS...: that one connection is lost; out of descriptors, wait a
                # little before trying again (as Kafka's Acceptor does).
                log.warning("Failed to accept a connection: %s", exc)
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    time.sleep(0.1)
                return True
            try:
                self.prepare(sock)
                local = sock.getsockname()
            except OSError:  # reset before we got to it
                sock.close()
                continue
            self.accepted.append((sock, addr, local))
            if len(self.accepted) == 1:
                try:
                    self._wake_thread.send(b"\0")
                except BlockingIOError:  # the loop has wake-ups pending already
                    pass
        return True
