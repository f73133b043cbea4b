"""``odradek serve [server.properties] [--override key=value ...]``, as Kafka's kafka-server-start.sh."""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import queue
import sys

from odradek.broker.config import BrokerConfig, parse_overrides
from odradek.storage.config_types import ConfigError

log = logging.getLogger("odradek")

LOG_QUEUE_RECORDS = 10_000
"""Log records waiting for the writer thread at most; beyond, records are dropped and counted."""


class QueuedLogHandler(logging.handlers.QueueHandler):
    """Log records are written by a thread of their own, so the event loop never waits for the log's reader.

    Written on the event loop, a record waited whenever the pipe or terminal the broker logs to was full: a
    fuzz closing a thousand malformed connections a second logs a line for each, and with a slow reader
    (a test process busy with its own threads) every client's requests waited for those writes. Kafka's
    network threads log the same through log4j's appenders, to a file. The queue is bounded: if the writer
    falls behind by :data:`LOG_QUEUE_RECORDS` records, further ones are dropped, and how many is logged
    when there is room again. Closing (``logging.shutdown``, at exit and before a halt) writes what waits."""

    def __init__(self, target: logging.Handler) -> None:
        self.records: queue.Queue[logging.LogRecord] = queue.Queue(LOG_QUEUE_RECORDS)
        super().__init__(self.records)
        self.setFormatter(logging.Formatter("%(message)s"))  # the message and its traceback, made now; the target lays it out
        self.dropped = 0
        self.listener = logging.handlers.QueueListener(self.queue, target, respect_handler_level=True)
        self.listener.start()

    def enqueue(self, record: logging.LogRecord) -> None:
        if self.dropped and not self.records.full():
            dropped, self.dropped = self.dropped, 0
            self.queue.put_nowait(logging.LogRecord("odradek", logging.WARNING, __file__, 0, "%d log records dropped: the log's reader fell behind", (dropped,), None))
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1

    def close(self) -> None:
        if self.listener._thread is not None:
            self.listener.stop()
        super().close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("properties", nargs="?", help="a server.properties file (Kafka's key names)")
    parser.add_argument("--override", action="append", default=[], metavar="key=value", help="override a property")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")


def main(args: argparse.Namespace) -> int:
    """Start-up failures are one line and exit status 1, as Kafka's ``Exiting Kafka due to fatal exception
    during startup``; the traceback only at DEBUG, since the line says what the operator must fix."""
    output = logging.StreamHandler(sys.stdout)
    output.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(message)s (%(name)s)"))
    logging.basicConfig(level=args.log_level.upper(), handlers=[QueuedLogHandler(output)])
    try:
        overrides = parse_overrides(args.override)
        config = BrokerConfig.load(args.properties, overrides)
    except ConfigError as exc:
        print(f"odradek: invalid configuration: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"odradek: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1
    from odradek.broker.runner import StartupError, run_forever

    try:
        run_forever(config)
    except StartupError as exc:
        log.debug("Start-up failure", exc_info=True)
        log.error("Exiting odradek due to fatal exception during startup: %s", exc)
        return 1
    return 0
