"""An I/O error on a log directory in a cluster (Kafka's ``LogDirFailureChannel`` and ``LogDirFailureHandler``).

In Kafka an ``IOException`` on a log (an append, a roll, a flush: a full or failed disk) takes the log's whole
directory offline (``ReplicaManager.handleLogDirFailure``): the partitions there stop (no fetcher, no append,
no read: clients get KAFKA_STORAGE_ERROR), the log manager closes their logs and writes no more checkpoints
there, and the broker tells the controller with a sequential znode
``/log_dir_event_notification/log_dir_event_<seq>``. The controller then asks the broker, with LeaderAndIsr,
about every replica it holds; those in the failed directory answer KAFKA_STORAGE_ERROR and the controller
takes them offline (other ISR members lead, they leave the ISR, metadata lists them as offline replicas).
The broker goes on serving the partitions of its other directories.

A broker left with no online log directory halts instead (``LogManager.handleLogDirFailure``:
``Exit.halt(1)``, no controlled shutdown): its ZooKeeper session then expires and the controller elects
other leaders from the ISR. A broker with one log directory, the common case, does this at its first write
to a full disk; restarted with space, it recovers its logs as after any crash and catches up.

odradek follows this in ZooKeeper mode. A single-node broker has no other replica: it keeps answering
KAFKA_STORAGE_ERROR and works again once there is space (docs/operations.md).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Callable

log = logging.getLogger("odradek.log_dir_failure")


class LogDirFailureChannel:
    """The broker's log directories and those that failed; the last one failing halts the process, an
    earlier one is handed to ``on_offline`` (once)."""

    def __init__(self, log_dirs: list[Path], on_offline: Callable[[Path], None], halt: Callable[[int], None] = os._exit) -> None:
        self.log_dirs = log_dirs
        self.on_offline = on_offline
        """Takes a directory offline (Kafka's ``ReplicaManager.handleLogDirFailure``), called on the event loop."""
        self.halt = halt
        self.offline: set[Path] = set()

    def maybe_add_offline_log_dir(self, log_dir: Path, message: str, exc: OSError) -> None:
        """Called where an I/O error on a log in ``log_dir`` was caught (the caller still answers its
        request KAFKA_STORAGE_ERROR)."""
        log.error("%s: %s", message, exc)
        failed = log_dir.resolve()
        if failed in self.offline:
            return
        self.offline.add(failed)
        if self.offline >= {d.resolve() for d in self.log_dirs}:
            log.critical("Shutdown broker because all log dirs in %s have failed", ", ".join(str(d) for d in self.log_dirs))
            logging.shutdown()
            self.halt(1)
            return
        log.error("Stopping serving replicas in dir %s", log_dir)
        self.on_offline(failed)

    def is_offline(self, log_dir: Path) -> bool:
        return log_dir.resolve() in self.offline
