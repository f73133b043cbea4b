"""``odradek serve`` over several processes (``worker.processes`` > 1; docs/multicore.md, step 1).

The supervisor is the process ``odradek serve`` started: it binds the listeners, forks the workers before any
thread exists, then accepts every connection and hands it (SCM_RIGHTS over the worker's control socket) to the
worker holding the fewest, as Kafka's Acceptor hands its connections to its processors (``worker.placement``
``fronts``: to the fronts first, since worker 0 does every request's stateful work too). Worker 0 is the whole
broker (every partition, the controller, the coordinators) and serves the connections handed to it as its
own; every other worker (a *front*) forwards its connections' requests to worker 0 over a socketpair and
writes the answers back, fetched records with ``sendfile`` (broker/network/worker_channel.py).

A worker that dies stops the broker: the supervisor stops accepting, tells worker 0 to stop in order without
marking its logs cleanly shut down (the next start recovers them, as after a ``kill -9`` of a single
process), waits for the others and exits non-zero. A supervisor that dies stops its workers: their control
sockets close (and ``PR_SET_PDEATHSIG`` is the backstop), worker 0 stops in order, the fronts exit. A
SIGTERM or SIGINT stops worker 0 in order (it writes the clean-shutdown marker); the fronts ignore both
(a service manager signals every process of the broker) and leave once worker 0 has, and the supervisor
exits with worker 0's status.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable

from odradek.broker.config import BrokerConfig

log = logging.getLogger("odradek.supervisor")

STOP_WAIT_S = 60.0
"""After asking the workers to stop, how long before the ones left are killed."""
_PR_SET_PDEATHSIG = 1


def worker_count(config: BrokerConfig) -> int:
    """``worker.processes``, 0 being one per core this process may run on."""
    count: int = config["worker.processes"]
    return count if count > 0 else len(os.sched_getaffinity(0))


@dataclass
class Worker:
    index: int
    pid: int
    control: socket.socket
    connections: int = 0
    status: int | None = None
    """The exit status once it exited (a negative number: killed by that signal)."""


def supervise(config: BrokerConfig, log_to: Callable[[str], None]) -> int:
    """Run the broker over ``worker_count(config)`` processes; the exit status. ``log_to(name)`` sets up the
    calling process's logging, its lines naming ``name`` (a worker, or the supervisor)."""
    from odradek.broker.runner import StartupError, bind_listeners

    count = worker_count(config)
    try:
        bound, credentials = bind_listeners(config)
        tls = [b.name for b in bound if b.tls is not None]
        if tls:
            for b in bound:
                b.sock.close()
            raise StartupError(f"worker.processes > 1 serves PLAINTEXT and SASL_PLAINTEXT listeners only (docs/multicore.md); {', '.join(tls)} uses TLS")
    except StartupError as exc:
        log_to("supervisor")
        log.error("Exiting odradek due to fatal exception during startup: %s", exc)
        return 1
    controls = [socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(count)]
    channels = [socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(count - 1)]
    supervisor_pid = os.getpid()
    workers: list[Worker] = []
    for index in range(count):
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                _die_with(supervisor_pid, signal.SIGTERM if index == 0 else signal.SIGKILL)
                control = controls[index][1]
                for i, (ours, theirs) in enumerate(controls):
                    ours.close()
                    if i != index:
                        theirs.close()
                log_to(f"worker {index}")
                if index == 0:
                    for _, front_end in channels:
                        front_end.close()
                    status = _worker_zero(config, bound, credentials, control, [zero_end for zero_end, _ in channels])
                else:
                    for b in bound:
                        b.sock.close()
                    for i, (zero_end, front_end) in enumerate(channels):
                        zero_end.close()
                        if i != index - 1:
                            front_end.close()
                    status = _front(control, channels[index - 1][1], [b.sasl is None for b in bound])
            except BaseException:
                log.exception("Worker %d failed", index)
            finally:
                logging.shutdown()
                os._exit(status)
        workers.append(Worker(index, pid, controls[index][0]))
    for _, theirs in controls:
        theirs.close()
    for zero_end, front_end in channels:
        zero_end.close()
        front_end.close()
    log_to("supervisor")
    log.info("Serving with %d worker processes (pids %s)", count, ", ".join(str(w.pid) for w in workers))
    return _supervise(config, [b.sock for b in bound], workers)


def _die_with(parent: int, signum: int) -> None:
    """The kernel sends this worker ``signum`` when the supervisor dies (the backstop to its control socket):
    SIGTERM for worker 0, which then stops in order; SIGKILL for a front, which holds no state."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died before the request took effect
        os.kill(os.getpid(), signum)


def _worker_zero(config: BrokerConfig, bound: list[Any], credentials: Any, control: socket.socket, fronts: list[socket.socket]) -> int:
    from odradek.broker.network.worker_channel import WorkerZeroLinks
    from odradek.broker.runner import StartupError, run_forever

    try:
        run_forever(config, bound=(bound, credentials), links=WorkerZeroLinks(control, fronts))
    except StartupError as exc:
        log.debug("Start-up failure", exc_info=True)
        log.error("Exiting odradek due to fatal exception during startup: %s", exc)
        return 1
    return 0


def _front(control: socket.socket, channel: socket.socket, plaintext: list[bool]) -> int:
    import anyio

    from odradek.broker.network.worker_channel import CONNECTION_CLOSED, Channel, Front, receive_connections, tell_supervisor

    # Ctrl-C reaches the whole process group, and a service manager's SIGTERM every process of the broker:
    # worker 0 and the supervisor stop the broker in order, and a front leaves once worker 0 has.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            front = Front(tg, Channel(channel), lambda: tell_supervisor(control, CONNECTION_CLOSED), plaintext)

            def handed(listener: int, sock: socket.socket) -> None:
                try:
                    peer, local = sock.getpeername(), sock.getsockname()
                except OSError:
                    sock.close()
                    front.connection_closed()
                    return
                front.serve(listener, sock, peer, local)

            async def until_done(what: Any, why: str) -> None:
                await what
                log.info("%s: stopping", why)
                tg.cancel_scope.cancel()

            tg.start_soon(until_done, receive_connections(control, handed), "The supervisor is gone")
            tg.start_soon(until_done, front.serve_channel(), "Worker 0 is gone")
            tg.start_soon(front.sweep_files)

    anyio.run(main, backend="asyncio", backend_options=_loop_options())
    return 0


def _loop_options() -> dict[str, Any]:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}


def _supervise(config: BrokerConfig, listeners: list[socket.socket], workers: list[Worker]) -> int:
    """Accept and hand over until asked to stop or a worker dies; then stop the workers. The exit status."""
    from odradek.broker.network.socket_server import prepare
    from odradek.broker.network.worker_channel import CONNECTION_CLOSED, UNCLEAN_STOP

    selector = selectors.DefaultSelector()
    for index, sock in enumerate(listeners):
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, index)
    for worker in workers:
        worker.control.setblocking(False)
        selector.register(worker.control, selectors.EVENT_READ, worker)
    wake_read, wake_write = socket.socketpair()
    wake_read.setblocking(False)
    wake_write.setblocking(False)
    selector.register(wake_read, selectors.EVENT_READ, None)
    signal.set_wakeup_fd(wake_write.fileno())
    requested: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _: requested.append(signum))
    signal.signal(signal.SIGINT, lambda signum, _: requested.append(signum))
    signal.signal(signal.SIGCHLD, lambda signum, _: None)  # wakes the selector

    stopping: str | None = None
    stop_began = 0.0

    def stop(why: str, unclean: bool) -> None:
        nonlocal stopping, stop_began
        stopping, stop_began = why, time.monotonic()
        for sock in listeners:
            selector.unregister(sock)
            sock.close()
        zero = workers[0]
        if zero.status is None:
            if unclean:
                try:
                    zero.control.send(UNCLEAN_STOP)
                except OSError:
                    pass
            os.kill(zero.pid, signal.SIGTERM)

    fronts_first = config["worker.placement"] == "fronts"

    def hand_over(index: int, sock: socket.socket) -> None:
        live = (w for w in workers if w.status is None)
        order = (lambda w: (w.index == 0, w.connections, w.index)) if fronts_first else (lambda w: (w.connections, w.index))
        for worker in sorted(live, key=order):
            try:
                socket.send_fds(worker.control, [bytes([index])], [sock.fileno()])
            except OSError:
                continue
            worker.connections += 1
            return
        log.warning("No worker took the connection from %s", sock.getpeername()[0])

    while True:
        for key, _ in selector.select(1.0):
            if key.data is None:
                try:
                    while wake_read.recv(4096):
                        pass
                except BlockingIOError:
                    pass
            elif isinstance(key.data, Worker):
                worker = key.data
                try:
                    while message := worker.control.recv(16):
                        if message == CONNECTION_CLOSED:
                            worker.connections -= 1
                    selector.unregister(worker.control)  # its end closed: it is exiting
                except BlockingIOError:
                    pass
                except OSError:
                    selector.unregister(worker.control)
            else:
                listener = key.fileobj
                assert isinstance(listener, socket.socket)
                while True:
                    try:
                        sock, _ = listener.accept()
                    except BlockingIOError:
                        break
                    except OSError as exc:
                        log.warning("Failed to accept a connection: %s", exc)
                        break
                    try:
                        prepare(config, sock)
                        hand_over(key.data, sock)
                    except OSError:
                        pass
                    finally:
                        sock.close()  # the worker holds it now
        if requested and stopping is None:
            log.info("Shutting down (%s)", signal.Signals(requested[0]).name)
            stop("requested", unclean=False)
        for worker in workers:
            if worker.status is not None:
                continue
            pid, status = os.waitpid(worker.pid, os.WNOHANG)
            if pid == 0:
                continue
            worker.status = os.waitstatus_to_exitcode(status)
            if stopping is None:
                how = f"killed by {signal.Signals(-worker.status).name}" if worker.status < 0 else f"exited with status {worker.status}"
                log.error("Worker %d (pid %d) %s: stopping the broker", worker.index, worker.pid, how)
                stop("died", unclean=worker.index != 0)
        if all(w.status is not None for w in workers):
            break
        if stopping is not None and time.monotonic() - stop_began > STOP_WAIT_S:
            for worker in workers:
                if worker.status is None:
                    log.error("Worker %d (pid %d) did not stop: killing it", worker.index, worker.pid)
                    os.kill(worker.pid, signal.SIGKILL)
            stop_began = time.monotonic()
    signal.set_wakeup_fd(-1)
    log.info("All workers stopped")
    return 0 if stopping == "requested" and workers[0].status == 0 else 1
