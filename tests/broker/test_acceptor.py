"""Connections are accepted while the event loop is busy, as Kafka's Acceptor thread accepts them while its
processors work: the listen queue does not overflow behind a busy loop, and the connections it took are
served once the loop is free.

The broker runs in this process and its event loop is held (a blocking call run on it) while 32 clients
connect, one after another, to a listener whose listen queue holds 4. Accepting on the event loop, 5
connections complete their handshake and the kernel drops the next SYNs until the loop comes back; with
the Acceptor thread all of them complete while the loop is held. (A burst of SYNs within a millisecond
overflows a queue of 4 whoever accepts: that is what socket.listen.backlog.size is for.)
"""

from __future__ import annotations

import logging
import selectors
import shutil
import socket
import struct
import threading
import time

import anyio.from_thread

from odradek import Broker
from odradek.protocol.api import ApiKey, encode_request

BACKLOG = 4
CLIENTS = 32
HELD_S = 6.0


def test_connections_are_accepted_while_the_event_loop_is_held() -> None:
    with Broker(config={"socket.listen.backlog.size": BACKLOG}) as broker:
        held = threading.Event()

        def hold_the_loop() -> None:
            held.set()
            time.sleep(HELD_S)

        holder = threading.Thread(target=lambda: anyio.from_thread.run_sync(hold_the_loop, token=broker._token))
        holder.start()
        assert held.wait(10)
        clients = []
        try:
            # While the loop is held, clients connect one after another (a few milliseconds apart: no
            # burst outruns the acceptor), each waiting for its handshake until the loop is nearly back.
            deadline = time.monotonic() + HELD_S * 2 / 3
            for _ in range(CLIENTS):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                clients.append(s)
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", broker.port))
                with selectors.DefaultSelector() as selector:  # select() refuses descriptors past 1,023
                    selector.register(s, selectors.EVENT_WRITE)
                    if not selector.select(max(0.0, deadline - time.monotonic())):
                        break
                time.sleep(0.01)
            assert holder.is_alive(), "the loop came back before the clients were done"
            assert len(clients) == CLIENTS and not clients[-1].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            holder.join()
            # The loop is back: each connection is served.
            request = encode_request(ApiKey.ApiVersions, 0, 1, {}, client_id="acceptor-test")
            for s in clients:
                s.setblocking(True)
                s.settimeout(30)
                s.sendall(request)
            for s in clients:
                (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
                answer = s.recv(size, socket.MSG_WAITALL)
                assert struct.unpack(">ih", answer[:6]) == (1, 0)  # correlation id, error_code NONE
        finally:
            holder.join()
            for s in clients:
                s.close()



STOP_ROUNDS = 30


def acceptor_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("odradek-acceptor-")}


def test_a_broker_stopped_right_after_starting_stops_its_acceptor_cleanly() -> None:
    """Shutdown wakes and joins the Acceptor thread before the listening socket closes, as Kafka's
    Acceptor is woken and joined before its server channel closes. A broker stopped as soon as it started,
    a client connecting again and again meanwhile (so the thread is between two polls when shutdown comes),
    logs no failed accept (the socket closed under the thread failed every accept, thousands of lines over
    these rounds), leaves no acceptor thread behind and stops within a bound."""
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    def connect_until(done: threading.Event, port: int) -> None:
        # A short connect timeout: once the acceptor stops taking connections its listen queue fills and the
        # kernel drops the next SYN, which a longer timeout would wait out after the round is over.
        while not done.is_set():
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.settimeout(0.1)
                s.connect_ex(("127.0.0.1", port))

    handler = Collect(logging.DEBUG)
    network_log = logging.getLogger("odradek.network")
    network_log.addHandler(handler)
    try:
        for _ in range(STOP_ROUNDS):
            others = acceptor_threads()  # of other tests' brokers still serving in this process (session fixtures)
            broker = Broker().start()
            done = threading.Event()
            client = threading.Thread(target=connect_until, args=(done, broker.port))
            client.start()
            try:
                time.sleep(0.01)
                started = time.monotonic()
                broker.stop()
                stopped_in = time.monotonic() - started
            finally:
                done.set()
                client.join()
                shutil.rmtree(broker.log_dir, ignore_errors=True)
            assert stopped_in < 5.0, f"stop took {stopped_in:.1f} s"
            assert not [t.name for t in acceptor_threads() - others]
    finally:
        network_log.removeHandler(handler)
    failed = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    assert not failed, f"{len(failed)} warnings or errors, the first: {failed[0]}"
