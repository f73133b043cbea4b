"""``odradek serve [server.properties] [--override key=value ...]``, as Kafka's kafka-server-start.sh."""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import queue
import sys
import threading

from odradek.broker.config import BrokerConfig, parse_overrides
from odradek.storage.config_types import ConfigError

log = logging.getLogger("odradek")

LOG_QUEUE_RECORDS = 10_000
"""Log records waiting for the writer thread at most; beyond, records are dropped and counted."""
LOG_WRITE_INTERVAL_S = 0.05
"""How often the writer thread writes what waits: log lines appear at most this much later."""


class QueuedLogHandler(logging.handlers.QueueHandler):
    """Log records are written by a thread of their own, so the event loop never waits for the log's reader.

    Written on the event loop, a record waited whenever the pipe or terminal the broker logs to was full: a
    fuzz closing a thousand malformed connections a second logs a line for each, and with a slow reader
    (a test process busy with its own threads) every client's requests waited for those writes. Kafka's
    network threads log the same through log4j's appenders, to a file. The queue is bounded: if the writer
    falls behind by :data:`LOG_QUEUE_RECORDS` records, further ones are dropped, and how many is logged
    when there is room again. Closing (``logging.shutdown``, at exit and before a halt) writes what waits.

    The writer does not wait on the queue: it wakes every :data:`LOG_WRITE_INTERVAL_S` and writes all that
    waits in one write and flush. A writer blocked on the queue was woken by every record, and took the
    GIL from the event loop each time (py-spy under issue 26's fuzz: an eighth of the loop's time in the
    wake-up and in taking the GIL back); a record now costs the loop one append to the queue."""

    def __init__(self, target: logging.StreamHandler) -> None:
        self.records: queue.Queue[logging.LogRecord] = queue.Queue(LOG_QUEUE_RECORDS)
        super().__init__(self.records)
        self.setFormatter(logging.Formatter("%(message)s"))  # the message and its traceback, made now; the target lays it out
        self.target = target
        self.dropped = 0
        self.closing = threading.Event()
        self.writer = threading.Thread(target=self._write_every_interval, name="odradek-log-writer", daemon=True)
        self.writer.start()

    def enqueue(self, record: logging.LogRecord) -> None:
        if self.dropped and not self.records.full():
            dropped, self.dropped = self.dropped, 0
            self.queue.put_nowait(logging.LogRecord("odradek", logging.WARNING, __file__, 0, "%d log records dropped: the log's reader fell behind", (dropped,), None))
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1

    def _write_every_interval(self) -> None:
        while not self.closing.wait(LOG_WRITE_INTERVAL_S):
            self._write_waiting()
        self._write_waiting()

    def _write_waiting(self) -> None:
        target, lines = self.target, []
        while True:
            try:
                record = self.records.get_nowait()
            except queue.Empty:
                break
            if record.levelno >= target.level:
                try:
                    lines.append(target.format(record) + target.terminator)
                except Exception:
                    target.handleError(record)
        if lines:
            try:
                target.stream.write("".join(lines))
                target.flush()
            except Exception:  # a closed or broken stream: as logging's own handlers, say so on stderr and go on
                target.handleError(logging.LogRecord("odradek", logging.ERROR, __file__, 0, "log write failed", None, None))

    def close(self) -> None:
        if self.writer.is_alive():
            self.closing.set()
            self.writer.join()
        super().close()


def log_to_stdout(level: str, process: str | None) -> None:
    """Log lines to stdout through a writer thread; ``process`` names the worker process (or the supervisor)
    of a multi-process broker in each line."""
    named = f"[{process}] " if process is not None else ""
    output = logging.StreamHandler(sys.stdout)
    output.setFormatter(logging.Formatter(f"[%(asctime)s] %(levelname)s {named}%(message)s (%(name)s)"))
    logging.basicConfig(level=level.upper(), handlers=[QueuedLogHandler(output)], force=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("properties", nargs="?", help="a server.properties file (Kafka's key names)")
    parser.add_argument("--override", action="append", default=[], metavar="key=value", help="override a property")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")


def main(args: argparse.Namespace) -> int:
    """Start-up failures are one line and exit status 1, as Kafka's ``Exiting Kafka due to fatal exception
    during startup``; the traceback only at DEBUG, since the line says what the operator must fix."""
    try:
        overrides = parse_overrides(args.override)
        config = BrokerConfig.load(args.properties, overrides)
    except ConfigError as exc:
        print(f"odradek: invalid configuration: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"odradek: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1
    from odradek.broker.supervisor import supervise, worker_count

    if worker_count(config) > 1:
        # Logging starts a thread (its writer): each process sets it up after the fork, naming itself.
        return supervise(config, lambda name: log_to_stdout(args.log_level, name))
    log_to_stdout(args.log_level, None)
    from odradek.broker.runner import StartupError, run_forever

    try:
        run_forever(config)
    except StartupError as exc:
        log.debug("Start-up failure", exc_info=True)
        log.error("Exiting odradek due to fatal exception during startup: %s", exc)
        return 1
    return 0
