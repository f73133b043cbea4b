"""Requests that wait for the broker's own metadata to show what the ZooKeeper-mode controller did (Kafka
3.9's ``DelayedElectLeader``, ``DelayedCreatePartitions`` and ``DelayedDeleteTopics`` purgatories, checked
again at each UpdateMetadata the broker applies).

The controller answers once ZooKeeper holds the change; a client told "done" then asks this broker (or
another) for metadata at once, so the answer waits until this broker's cache agrees, or the request's
timeout passes.
"""

from __future__ import annotations

from typing import Callable

import anyio


class MetadataWaits:
    def __init__(self) -> None:
        self._changed: anyio.Event | None = None
        """Set (and replaced) at each metadata update; made by the first waiter, on the event loop."""

    def changed(self) -> None:
        """The metadata cache was just replaced: every waiter checks its condition again."""
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def wait_until(self, shown: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``shown()`` holds (checked now and after each update); False when the timeout passed
        first."""
        with anyio.move_on_after(max(0.0, timeout_s)):
            while not shown():
                if self._changed is None:
                    self._changed = anyio.Event()
                await self._changed.wait()
        return shown()
