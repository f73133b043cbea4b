"""Running a broker: listeners, startup, periodic duties, and an orderly shutdown.

SIGTERM/SIGINT stop accepting connections, let in-flight requests finish (bounded), then flush the logs,
write the checkpoints and the clean-shutdown marker, so the next start opens without recovery.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
import signal
import socket
import time
from typing import Any, Callable

import anyio

from odradek.broker.config import BrokerConfig
from odradek.broker.kafka_server import KafkaServer
from odradek.broker.socket_server import open_listeners, serve

log = logging.getLogger("odradek")

SHUTDOWN_GRACE_S = 5.0


def bound_address(sock: socket.socket) -> tuple[str, int]:
    host, port = sock.getsockname()[:2]
    return host, port


def advertised(config: BrokerConfig, socks: list[socket.socket]) -> tuple[str, int]:
    """The address clients are told to use: advertised.listeners, else the first listener's real port."""
    first = config.advertised_listeners[0]
    host, port = first.host, first.port
    if not config.is_set("advertised.listeners"):
        bound_host, bound_port = bound_address(socks[0])
        port = bound_port
        host = host or socket.gethostname()
        if host in ("0.0.0.0", "::"):
            host = socket.gethostname()
    return host, port


async def run(config: BrokerConfig, *, handle_signals: bool = True, on_started: Callable[[KafkaServer, tuple[str, int]], None] | None = None, stop_event: Any = None) -> None:
    started = time.monotonic()
    socks = open_listeners(config)
    server = KafkaServer(config)
    host, port = advertised(config, socks)
    server.startup(host, port)
    listeners = ", ".join(f"{l.name}://{bound_address(s)[0]}:{bound_address(s)[1]}" for l, s in zip(config.listeners, socks))
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(serve, server, socks)
            tg.start_soon(_periodic, server)
            await tg.start(server.coordinators["group"].run)
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
            if handle_signals:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for signum in signals:
                        log.info("[KafkaServer id=%d] shutting down (%s)", server.broker_id, signal.Signals(signum).name)
                        break
            elif stop_event is not None:
                await stop_event.wait()
            else:
                await anyio.sleep_forever()
            for s in socks:
                s.close()
            with anyio.move_on_after(SHUTDOWN_GRACE_S):
                await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    finally:
        for s in socks:
            s.close()
        server.shutdown()
        log.info("[KafkaServer id=%d] shut down completed", server.broker_id)


@dataclass
class Duty:
    """A periodic storage duty: what to call, how often, and whether it may block (fsync, rewrites)."""

    name: str
    every_s: float
    run: Callable[[int], Any]
    blocking: bool
    next_at: float = 0.0


def _duties(server: KafkaServer) -> list[Duty]:
    config = server.config
    logs = server.log_manager
    checkpoint_ms = min(config["replica.high.watermark.checkpoint.interval.ms"], config["log.flush.offset.checkpoint.interval.ms"] or 60000)
    now = time.monotonic()
    duties = [
        Duty("flush", 1.0, logs.flush_due, blocking=True),
        # Kafka waits log.initial.task.delay.ms (30 s) before the first retention check.
        Duty("retention", config["log.retention.check.interval.ms"] / 1000, logs.run_retention, blocking=False, next_at=now + min(30.0, config["log.retention.check.interval.ms"] / 1000)),
        Duty("checkpoint", checkpoint_ms / 1000, lambda now_ms: logs.checkpoint(), blocking=True, next_at=now + checkpoint_ms / 1000),
    ]
    if config["log.cleaner.enable"]:
        # Compaction reads and rewrites segments on a worker thread while appends go on (LogManager.clean_logs).
        duties.append(Duty("log cleaner", config["log.cleaner.backoff.ms"] / 1000, logs.clean_logs, blocking=True, next_at=now))
    return duties


async def _periodic(server: KafkaServer) -> None:
    """Flushes, retention, checkpoints and compaction on Kafka's intervals (storage owns no timers).

    Duties that fsync or rewrite files run on a worker thread: storage does that outside its locks and the
    event loop keeps serving requests. A duty that fails is logged and tried again at its next turn, as
    Kafka's scheduler does: a full disk or a lack of file descriptors must not stop the broker.
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
                if duty.blocking:
                    await anyio.to_thread.run_sync(duty.run, now_ms)
                else:
                    duty.run(now_ms)
            except Exception:
                log.exception("Periodic %s failed; retrying at its next turn", duty.name)
            duty.next_at = time.monotonic() + duty.every_s


def run_forever(config: BrokerConfig) -> None:
    """``odradek serve``: run on uvloop when available (it is several times faster for many small I/Os)."""
    try:
        import uvloop  # noqa: F401

        options = {"use_uvloop": True}
    except ImportError:
        options = {}
    anyio.run(run, config, backend="asyncio", backend_options=options)
