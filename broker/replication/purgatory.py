"""Delayed operations keyed by partition (Kafka's DelayedOperationPurgatory, for produce and fetch).

An operation that cannot complete yet — a fetch short of ``min_bytes``, an acks=all produce waiting for the
high watermark — watches its partitions here and is woken when one of them changes (the log end offset or
the high watermark moves, the partition goes away) or its timeout passes; it then checks its own
condition again. Replication will complete the same operations from follower fetches.

A long poll, every tailing consumer's usual state, is Kafka's DelayedFetch (:class:`DelayedFetch`): a
future with callbacks on the loop, as Kafka's is an operation its purgatory completes, so it costs no task,
coroutine chain or cancel scope of its own. The rarer waits (acks=all, share fetches) are coroutines
(:meth:`Purgatory.wait_until`, :meth:`Purgatory.wait`).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Callable, Generic, Hashable, Iterable, Protocol, Sequence, TypeVar

import anyio

Key = Hashable
"""A partition, as its operations are keyed: ``(topic, index)``."""


if TYPE_CHECKING:  # types for the checker only: creating a Protocol class costs ~0.13 M instructions a start
    class Watcher(Protocol):
        """What watches keys: told by ``set()`` that one changed (an ``anyio.Event``, or an operation such as
        :class:`DelayedFetch` that checks itself)."""

        def set(self) -> None: ...

    W = TypeVar("W", bound=Watcher)

    class Read(Protocol):
        """What the wait looks at in a partition's read (the replica manager's ``PartitionRead``)."""

        length: int
        error: int


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Key, set[Watcher]] = {}

    def watch(self, keys: Iterable[Key], watcher: W) -> W:
        """Start watching ``keys``: a change from now on sets ``watcher``, once (a change takes every watcher
        off the key's list: one still interested watches again)."""
        for key in keys:
            self._watchers.setdefault(key, set()).add(watcher)
        return watcher

    def unwatch(self, keys: Iterable[Key], watcher: Watcher) -> None:
        for key in keys:
            waiting = self._watchers.get(key)
            if waiting is not None:
                waiting.discard(watcher)
                if not waiting:
                    del self._watchers[key]

    def check_and_complete(self, key: Key) -> None:
        """``key`` changed: every operation watching it checks its condition again."""
        waiting = self._watchers.pop(key, None)
        if waiting:
            for watcher in waiting:
                watcher.set()

    async def wait(self, keys: Sequence[Key], timeout_s: float) -> None:
        """Wait until any of ``keys`` changes, or the timeout passes."""
        watching = self.watch(keys, anyio.Event())
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


R = TypeVar("R", bound="Read")


class DelayedFetch(Generic[R]):
    """One long poll. ``future`` holds its reads once complete; cancelling it (the connection closed) stops
    the wait. A change is looked at in a callback of its own, after the work that made it (an append and its
    high watermark move) is done, as Kafka completes delayed operations after the request that made them
    completable."""

    __slots__ = ("future", "_purgatory", "_keys", "_read", "_fetchable", "_min_bytes", "_seen", "_timer", "_checking")

    def __init__(
        self,
        purgatory: Purgatory,
        keys: Sequence[Key],
        read: Callable[[], list[R]],
        fetchable: Callable[[], list[object]],
        min_bytes: int,
        max_wait_ms: int,
    ) -> None:
        loop = asyncio.get_running_loop()
        self.future: asyncio.Future[list[R]] = loop.create_future()
        self._purgatory = purgatory
        self._keys = keys
        self._read = read
        self._fetchable = fetchable
        self._min_bytes = min_bytes
        self._seen = fetchable()
        self._checking = False
        self._timer = loop.call_later(max_wait_ms / 1000, self._expire)
        purgatory.watch(keys, self)
        self.future.add_done_callback(self._done)

    def set(self) -> None:
        """A watched partition changed (the purgatory's ``check_and_complete``): look once the loop is free."""
        if not self._checking:
            self._checking = True
            self.future.get_loop().call_soon(self._check)

    def _check(self) -> None:
        self._checking = False
        if self.future.done():
            return
        if self._fetchable() != self._seen:
            try:
                reads = self._read()
            except Exception as exc:
                self.future.set_exception(exc)
                return
            if sum(r.length for r in reads) >= self._min_bytes or any(r.error for r in reads):
                self.future.set_result(reads)
                return
            self._seen = self._fetchable()
        self._purgatory.watch(self._keys, self)  # a check takes the operation off its keys' watch lists

    def _expire(self) -> None:
        """``max_wait_ms`` passed: answer with what there is."""
        if not self.future.done():
            try:
                self.future.set_result(self._read())
            except Exception as exc:
                self.future.set_exception(exc)

    def _done(self, _: object) -> None:
        """Completed, failed or cancelled: off the watch lists, the timer stopped."""
        self._timer.cancel()
        self._purgatory.unwatch(self._keys, self)
