"""Members of a consumer group run as Java programs (tests/e2e/java44/GroupMember.java, kafka-clients 4.4.0),
one JVM each, and what they printed: the partitions they were given and lost, the batches they received and
committed. Shared by the consumer group protocol's tests and its rebalance benchmark."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import kafka44_jvm


class Member:
    """One GroupMember JVM and the lines it printed so far."""

    def __init__(self, java44: kafka44_jvm.JavaPrograms, bootstrap: str, topic: str, group: str, log: Path, *, instance: str | None = None, protocol: str = "consumer") -> None:
        self.log = log
        cmd = java44.command("GroupMember", bootstrap, topic, group, instance or "-", "-", protocol, heap="128m")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.lock:
                self.events.append(json.loads(line))

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def owned(self) -> set[int]:
        owned: set[int] = set()
        for e in self.snapshot():
            if e["event"] == "assigned":
                owned |= set(e["partitions"])
            elif e["event"] == "revoked":
                owned -= set(e["partitions"])
        return owned

    def batches(self) -> tuple[list[tuple[int, int, str]], list[tuple[int, int, str]]]:
        """(records whose commit succeeded, the last batch received without a commit after it)."""
        committed: list[tuple[int, int, str]] = []
        pending: list[tuple[int, int, str]] = []
        for e in self.snapshot():
            if e["event"] == "received":
                pending = [tuple(r) for r in e["records"]]
            elif e["event"] == "committed":
                committed += pending
                pending = []
        return committed, pending

    def leave(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(60) == 0, self.log.read_text()[-3000:]
        self.reader.join(10)

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.reader.join(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def wait_until(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what() if callable(what) else what}"
        time.sleep(0.2)
