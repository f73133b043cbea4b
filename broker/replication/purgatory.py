"""Delayed operations keyed by partition (Kafka's DelayedOperationPurgatory, for produce and fetch).

An operation that cannot complete yet — a fetch short of ``min_bytes``, an acks=all produce waiting for the
high watermark — watches its partitions here and is woken when one of them changes (the log end offset or
the high watermark moves, the partition goes away) or its timeout passes; it then checks its own
condition again. Replication will complete the same operations from follower fetches.
"""

from __future__ import annotations

import time
from typing import Callable, Hashable, Iterable, Sequence

import anyio

Key = Hashable
"""A partition, as its operations are keyed: ``(topic, index)``."""


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Key, set[anyio.Event]] = {}

    def watch(self, keys: Iterable[Key]) -> anyio.Event:
        """Start watching ``keys``: a change from now on sets the event, even before the operation waits."""
        event = anyio.Event()
        for key in keys:
            self._watchers.setdefault(key, set()).add(event)
        return event

    def unwatch(self, keys: Iterable[Key], event: anyio.Event) -> None:
        for key in keys:
            waiting = self._watchers.get(key)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._watchers[key]

    def check_and_complete(self, key: Key) -> None:
        """``key`` changed: every operation watching it checks its condition again."""
        waiting = self._watchers.pop(key, None)
        if waiting:
            for event in waiting:
                event.set()

    async def wait(self, keys: Sequence[Key], timeout_s: float, watching: anyio.Event | None = None) -> None:
        """Wait until any of ``keys`` changes, or the timeout passes. ``watching``, from :meth:`watch`, lets
        an operation that read before it yields wait from the moment it read: a change in between is not
        missed."""
        if watching is None:
            watching = self.watch(keys)
        try:
            if timeout_s > 0:
                with anyio.move_on_after(timeout_s):
                    await watching.wait()
        finally:
            self.unwatch(keys, watching)

    async def wait_until(self, key: Key, completed: Callable[[], bool], abandoned: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``completed()`` holds (checked whenever ``key`` changes); False once the timeout passes
        or ``abandoned()`` holds first (the partition went away)."""
        deadline = time.monotonic() + timeout_s
        while not completed():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or abandoned():
                return completed()
            await self.wait([key], remaining)
        return True
