"""Running a broker: listeners, startup, periodic duties, and an orderly shutdown.

SIGTERM/SIGINT stop accepting connections, let in-flight requests finish (bounded), then flush the logs,
write the checkpoints and the clean-shutdown marker, so the next start opens without recovery.

A broker that cannot start (a port in use, an unreadable log directory, another broker's meta.properties, a
listener security protocol odradek does not implement) raises :class:`StartupError` with one line saying
why, which ``odradek serve`` prints as Kafka prints its fatal start-up errors.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import logging
import os
from pathlib import Path
import signal
import socket
import time
from typing import TYPE_CHECKING, Any, Callable

import anyio

from odradek.broker.config import BrokerConfig, Listener
from odradek.broker.kafka_server import KafkaServer, credential_store
from odradek.broker.security.listeners import listener_securities
from odradek.broker.network.socket_server import BoundListener, open_listeners, serve
from odradek.storage.config_types import ConfigError
from odradek.storage.log_manager import InconsistentBrokerIdError, InconsistentClusterIdError

if TYPE_CHECKING:
    from odradek.broker.network.worker_channel import WorkerZeroLinks

log = logging.getLogger("odradek")

SHUTDOWN_GRACE_S = 5.0

class StartupError(Exception):
    """The broker cannot start; the message is the one line the operator needs."""


def _check_log_dirs(dirs: list[Path]) -> None:
    """Kafka's ``createAndValidateLogDirs``: each directory exists (created if missing) and is readable."""
    for d in dirs:
        if not d.exists():
            try:
                d.mkdir(parents=True)
            except OSError as exc:
                raise StartupError(f"Failed to create data directory {d.absolute()}: {exc.strerror}") from exc
        if not d.is_dir() or not os.access(d, os.R_OK | os.W_OK | os.X_OK):
            raise StartupError(f"{d.absolute()} is not a readable log directory.")


def _bind_failure(listeners: list[Listener], exc: OSError) -> StartupError:
    """Kafka's message for a listener that cannot bind. The socket error does not say which listener failed,
    so each address is tried again: the first that cannot be bound is the one named."""
    failed = listeners[0]
    for listener in listeners:
        host = listener.host or "0.0.0.0"
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, listener.port))
            except OSError:
                failed = listener
                break
    reason = exc.strerror or os.strerror(exc.errno or errno.EIO)
    return StartupError(f"Socket server failed to bind to {failed.host or '0.0.0.0'}:{failed.port}: {reason}.")


def process_uptime_s() -> float:
    """Seconds since this process started (Linux /proc; 0 elsewhere): the start banner reports the time a
    user waited from launching ``odradek serve``, interpreter start-up and imports included."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


def bind_listeners(config: BrokerConfig) -> tuple[list[BoundListener], Any]:
    """The listeners bound, with their security, and the SCRAM credential store they use; a failure is its
    one line."""
    credentials = credential_store(config)
    try:
        securities = listener_securities(config, credentials)
    except ConfigError as exc:
        raise StartupError(str(exc)) from exc
    _check_log_dirs(config.log_dirs)
    try:
        return open_listeners(config, securities), credentials
    except OSError as exc:
        raise _bind_failure(config.listeners, exc) from exc


def _start(config: BrokerConfig, bound: tuple[list[BoundListener], Any] | None) -> tuple[list[BoundListener], KafkaServer, tuple[str, int]]:
    """Everything that may refuse to start, each failure turned into its one line. ``bound``: the listeners a
    multi-process broker's supervisor bound (broker/supervisor.py)."""
    listeners, credentials = bound if bound is not None else bind_listeners(config)
    socks = [l.sock for l in listeners]
    try:
        server = KafkaServer(config, credentials)
        endpoints = advertised_endpoints(config, listeners)
        _, host, port = endpoints[0]
        server.startup(host, port, endpoints)
    except BaseException as exc:
        _close(socks)
        if isinstance(exc, (ConfigError, InconsistentBrokerIdError, InconsistentClusterIdError)):
            raise StartupError(str(exc)) from exc
        if isinstance(exc, OSError):
            raise StartupError(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc)) from exc
        if isinstance(exc, Exception):
            # Anything else (duplicate partition directories, a damaged file): still one line, naming the
            # exception; ``--log-level DEBUG`` shows where it came from.
            raise StartupError(f"{type(exc).__name__}: {exc}") from exc
        raise
    return listeners, server, (host, port)


def _start_metrics(server: KafkaServer, socks: list[socket.socket]) -> None:
    """The Prometheus endpoint, when ``prometheus.port`` is set (prometheus_client is imported only then)."""
    config = server.config
    if config["prometheus.port"] is None:
        return
    from odradek.broker.metrics import BrokerMetrics

    metrics = BrokerMetrics(server)
    metrics.listeners = [(l.name, bound_address(s)[1]) for l, s in zip(config.listeners, socks)]
    host = config["prometheus.host"] if config["prometheus.host"] is not None else config.listeners[0].host or "0.0.0.0"
    try:
        port = metrics.start_http(host, config["prometheus.port"])
    except OSError as exc:
        raise StartupError(f"Prometheus endpoint failed to bind to {host}:{config['prometheus.port']}: {exc.strerror}.") from exc
    server.metrics = metrics
    log.info("[KafkaServer id=%d] Prometheus metrics at http://%s:%d/metrics", server.broker_id, host, port)


def _open_console(server: KafkaServer, first_listener: socket.socket) -> Any:
    """The web console, when ``console.listener`` is set (only then is any of it imported), bound now."""
    config = server.config
    if config["console.listener"] is None:
        return None
    from odradek.tools.console import missing_message, missing_modules

    if missing_modules():
        raise StartupError(f"console.listener is set, but {missing_message()}")
    from odradek.tools.console.embedded import open_console

    try:
        return open_console(config, server.broker_id, bound_address(first_listener))
    except ValueError as exc:
        raise StartupError(str(exc)) from exc
    except OSError as exc:
        raise StartupError(f"Console failed to bind to {config['console.listener']}: {exc.strerror or exc}.") from exc


def _close(socks: list[socket.socket]) -> None:
    for s in socks:
        s.close()


def bound_address(sock: socket.socket) -> tuple[str, int]:
    host, port = sock.getsockname()[:2]
    return host, port


def advertised_endpoints(config: BrokerConfig, bound: list[BoundListener]) -> tuple[tuple[str, str, int], ...]:
    """(listener, host, port) clients are told to use, per advertised listener (advertised.listeners, else
    listeners), as Kafka's effective advertised listeners: port 0 is the port bound, an empty or wildcard
    host is this machine's name."""
    ports = {l.name: bound_address(l.sock)[1] for l in bound}
    endpoints = []
    for listener in config.advertised_listeners:
        port = ports.get(listener.name, listener.port) if listener.port == 0 or not config.is_set("advertised.listeners") else listener.port
        host = listener.host if listener.host not in ("", "0.0.0.0", "::") else socket.gethostname()
        endpoints.append((listener.name, host, port))
    return tuple(endpoints)


async def run(
    config: BrokerConfig,
    *,
    handle_signals: bool = True,
    on_started: Callable[[KafkaServer, tuple[str, int]], None] | None = None,
    stop_event: Any = None,
    launched_at: float | None = None,
    listeners_bound: tuple[list[BoundListener], Any] | None = None,
    links: WorkerZeroLinks | None = None,
) -> None:
    """Serve until a signal (or ``stop_event``). ``launched_at`` (``time.monotonic()`` clock) is when the
    wait for this broker began, for the banner: the process's start for ``odradek serve``. Worker 0 of a
    multi-process broker gets the listeners the supervisor bound and its ``links`` to the other processes."""
    started = time.monotonic() if launched_at is None else launched_at
    if links is None and config["worker.processes"] != 1:
        log.warning("worker.processes=%d is acted on by odradek serve only: this broker runs in one process", config["worker.processes"])
    bound, server, (host, port) = _start(config, listeners_bound)
    socks = [l.sock for l in bound]
    listeners = ", ".join(f"{l.name}://{bound_address(s)[0]}:{bound_address(s)[1]}" for l, s in zip(config.listeners, socks))
    # The signal receiver is open before the banner (a SIGTERM right after it is a clean shutdown, not a kill)
    # and until the end of the shutdown: a second SIGTERM (make forwards the one it gets to the broker it runs;
    # an impatient Ctrl-C) is taken and ignored, as Kafka's JVM ignores signals while its shutdown hook runs,
    # rather than killing the broker halfway through.
    signal_handlers = contextlib.ExitStack()
    signals = signal_handlers.enter_context(anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT)) if handle_signals else None
    try:
        _start_metrics(server, socks)
        console = _open_console(server, socks[0])
        async with anyio.create_task_group() as tg:
            acceptors = await tg.start(serve, server, bound, links)
            tg.start_soon(_periodic, server)
            await server.coordinators.run(tg)
            if server.metrics is not None:
                tg.start_soon(server.metrics.probe_event_loop)
            if console is not None:
                tg.start_soon(console[0].serve, console[1])
            log.info(
                "[KafkaServer id=%d] started in %.0f ms: listeners %s, advertised %s:%d, log dirs %s, cluster id %s",
                server.broker_id,
                (time.monotonic() - started) * 1000,
                listeners,
                host,
                port,
                ",".join(str(d) for d in config.log_dirs),
                server.metadata.cluster_id,
            )
            if on_started is not None:
                on_started(server, bound_address(socks[0]))
            if links is not None:
                _close(socks)  # the supervisor accepts: a worker's copy of the listeners would outlive it
            if signals is not None:
                async for signum in signals:
                    log.info("[KafkaServer id=%d] shutting down (%s)", server.broker_id, signal.Signals(signum).name)
                    break
            elif stop_event is not None:
                await stop_event.wait()
            else:
                await anyio.sleep_forever()
            await server.controlled_shutdown()
            for acceptor in acceptors:  # no new connection; those open finish their requests meanwhile
                await anyio.to_thread.run_sync(acceptor.stop)
            with anyio.move_on_after(SHUTDOWN_GRACE_S):
                await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    finally:
        for s in socks:
            s.close()
        if server.metrics is not None:
            server.metrics.stop_http()
        server.shutdown(mark_clean=links is None or not links.unclean)
        log.info("[KafkaServer id=%d] shut down completed", server.broker_id)
        signal_handlers.close()


class Duty:
    """A periodic storage duty: what to call (on a worker thread) and how often."""

    def __init__(self, name: str, every_s: float, run: Callable[[int], Any], next_at: float = 0.0) -> None:
        self.name = name
        self.every_s = every_s
        self.run = run
        self.next_at = next_at


def _duties(server: KafkaServer) -> list[Duty]:
    config = server.config
    logs = server.log_manager
    checkpoint_ms = min(config["replica.high.watermark.checkpoint.interval.ms"], config["log.flush.offset.checkpoint.interval.ms"] or 60000)
    now = time.monotonic()
    duties = [
        Duty("flush", 1.0, logs.flush_due),
        # Kafka waits log.initial.task.delay.ms (30 s) before the first retention check.
        Duty("retention", config["log.retention.check.interval.ms"] / 1000, logs.run_retention, next_at=now + min(30.0, config["log.retention.check.interval.ms"] / 1000)),
        Duty("checkpoint", checkpoint_ms / 1000, lambda now_ms: logs.checkpoint(), next_at=now + checkpoint_ms / 1000),
        # Kafka's kafka-delete-logs: deleted partitions' directories go once file.delete.delay.ms has passed.
        Duty("delete logs", 1.0, logs.delete_logs),
    ]
    tokens = server.delegation_tokens
    if tokens is not None and tokens.enabled:
        # Kafka's delete-expired-tokens, run by the active controller (a single node is its own)
        support = server.metadata_support
        expire = lambda now_ms: tokens.expire_tokens() if support is not None and support.is_controller() else None  # noqa: E731
        duties.append(Duty("delete expired tokens", config["delegation.token.expiry.check.interval.ms"] / 1000, expire, next_at=now))
    if config["log.cleaner.enable"]:
        # Compaction reads and rewrites segments on a worker thread while appends go on (LogManager.clean_logs).
        duties.append(Duty("log cleaner", config["log.cleaner.backoff.ms"] / 1000, logs.clean_logs, next_at=now))
    return duties


async def _periodic(server: KafkaServer) -> None:
    """Flushes, retention, checkpoints and compaction on Kafka's intervals (storage owns no timers).

    Every duty runs on a worker thread, one at a time: they fsync, open, delete or rewrite files (after a
    restart the first retention pass opens every log), and storage orders that with the appends the event
    loop makes by each log's lock, so the loop keeps serving requests. A duty that fails is logged and tried
    again at its next turn, as Kafka's scheduler does: a full disk or a lack of file descriptors must not
    stop the broker.
    """
    duties = _duties(server)
    tick = min([1.0] + [d.every_s for d in duties])
    while True:
        await anyio.sleep(tick)
        for duty in duties:
            now = time.monotonic()
            if now < duty.next_at:
                continue
            now_ms = int(time.time() * 1000)
            try:
                await anyio.to_thread.run_sync(duty.run, now_ms)
            except Exception:
                log.exception("Periodic %s failed; retrying at its next turn", duty.name)
            duty.next_at = time.monotonic() + duty.every_s


def run_forever(config: BrokerConfig, bound: tuple[list[BoundListener], Any] | None = None, links: WorkerZeroLinks | None = None) -> None:
    """``odradek serve`` (or its worker 0, given ``bound`` and ``links``): run on uvloop when available (it is
    several times faster for many small I/Os)."""
    try:
        import uvloop  # noqa: F401

        options = {"use_uvloop": True}
    except ImportError:
        options = {}
    launched_at = time.monotonic() - process_uptime_s()
    anyio.run(lambda: run(config, launched_at=launched_at, listeners_bound=bound, links=links, on_started=_freeze_start_up), backend="asyncio", backend_options=options)


def _freeze_start_up(server: KafkaServer, address: tuple[str, int]) -> None:
    """The process is the broker's alone, and what its start made (modules, classes, the configuration, the
    loaded logs' state, ~40k objects) lives about as long as it does: the cyclic garbage collector stops
    walking it (``gc.freeze``). A full collection, which runs on the event loop between two requests, then
    walks only what serving made since: its pause drops from ~5-8 ms to well under one (docs/performance.md,
    "The garbage collector's pauses"). Not for ``Broker()``, which shares its process with the application.
    What the start made and later drops (a topic deleted) is still freed by its reference count; only a
    reference cycle among such objects stays, once, as the start's size bounds it."""
    gc.freeze()
