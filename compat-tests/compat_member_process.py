"""A group member in a process of its own, so that a scenario can kill it.

A consumer whose process dies stops heartbeating without leaving its group: only the session timeout tells
the coordinator it is gone (or, for a static member, a new process with the same group.instance.id takes
its place). Killing a real process is the one way every client library shows that. The child runs the
client library's member through the same adapter as the tests (``CLIENTS``), prints its assignment as a
JSON line whenever it changes, and exits when its standard input closes (the test process ended).

Run as ``python compat_member_process.py '<json spec>'``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time

from compat_client import GroupMember, MemberConfig, Offsets

STARTUP_TIMEOUT_S = 30


class MemberProcess(GroupMember):
    """The parent's handle: the child's latest assignment, and ``kill`` (SIGKILL, no LeaveGroup)."""

    def __init__(self, client_name: str, bootstrap: str, group: str, topics: list[str], config: MemberConfig) -> None:
        super().__init__()
        spec = {"client": client_name, "bootstrap": bootstrap, "group": group, "topics": topics, "config": dataclasses.asdict(config)}
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), json.dumps(spec)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        self._assignment: set[tuple[str, int]] = set()
        self._reader = threading.Thread(target=self._read, daemon=True, name="compat-member-process")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._assignment = {(topic, partition) for topic, partition in json.loads(line)}
            self._saw(self._assignment)

    def assignment(self) -> set[tuple[str, int]]:
        return set(self._assignment)

    def commit(self, offsets: Offsets) -> None:
        raise NotImplementedError("a member process only joins and holds its assignment")

    def kill(self) -> None:
        """The process dies at once: no LeaveGroup, no more heartbeats."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self._reader.join(5)

    close = kill


def main() -> None:
    from compat_clients import CLIENTS

    spec = json.loads(sys.argv[1])
    # the test process ended (or closed our input): leave as a crash would, without cleaning up
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    client = CLIENTS[spec["client"]](spec["bootstrap"])
    member = client.group_member(spec["group"], spec["topics"], MemberConfig(**spec["config"]))
    shown = None
    while True:
        current = sorted(member.assignment())
        if current != shown:
            print(json.dumps(current), flush=True)
            shown = current
        time.sleep(0.05)


if __name__ == "__main__":
    main()
