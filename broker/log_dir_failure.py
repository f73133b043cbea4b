"""An I/O error on a log directory in a cluster (Kafka's ``LogDirFailureChannel`` and ``LogDirFailureHandler``).

In Kafka an ``IOException`` on a log (an append, a roll, a flush: a full or failed disk) takes the log's whole
directory offline. A broker left with no online log directory halts (``LogManager.handleLogDirFailure``:
``Exit.halt(1)``, no controlled shutdown): its ZooKeeper session then expires and the controller elects
other leaders from the ISR. A broker with one log directory, the common case, does this at its first write
to a full disk; restarted with space, it recovers its logs as after any crash and catches up.

odradek follows this in ZooKeeper mode, where other replicas can take over. Not built: a broker with several
log directories whose failed one is not its last keeps answering KAFKA_STORAGE_ERROR for the partitions
there instead of taking them offline and telling the controller (``/log_dir_event_notification``). A
single-node broker has no other replica: it keeps answering KAFKA_STORAGE_ERROR and works again once there
is space (docs/operations.md).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

log = logging.getLogger("odradek.log_dir_failure")


@dataclass
class LogDirFailureChannel:
    """The broker's log directories and those that failed; the last one failing halts the process."""

    log_dirs: list[Path]
    halt: Callable[[int], None] = os._exit
    offline: set[Path] = field(default_factory=set)

    def maybe_add_offline_log_dir(self, log_dir: Path, message: str, exc: OSError) -> None:
        """Called where an I/O error on a log in ``log_dir`` was caught (the caller still answers its
        request KAFKA_STORAGE_ERROR)."""
        log.error("%s: %s", message, exc)
        self.offline.add(log_dir.resolve())
        if self.offline >= {d.resolve() for d in self.log_dirs}:
            log.critical("Shutdown broker because all log dirs in %s have failed", ", ".join(str(d) for d in self.log_dirs))
            logging.shutdown()
            self.halt(1)
