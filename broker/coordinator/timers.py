"""Keyed one-shot timers on an injected clock (sans-IO): the coordinator's purgatory for heartbeats,
rebalances and syncs.

Scheduling under a key replaces whatever was scheduled under it, so "complete the member's current
heartbeat expectation and expect the next one" is one call, as Kafka's ``completeAndScheduleNextExpiration``.
Whoever owns the event loop asks :meth:`Timers.next_deadline` how long it may sleep and calls
:meth:`Timers.run_due` when it wakes.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable


@dataclass(order=True)
class Timer:
    deadline_ms: int
    seq: int
    key: Hashable = field(compare=False)
    action: Callable[[], None] = field(compare=False)
    tag: Any = field(compare=False, default=None)
    cancelled: bool = field(compare=False, default=False)


class Timers:
    def __init__(self, clock: Callable[[], int], on_schedule: Callable[[int], None] | None = None) -> None:
        self.clock = clock
        self.on_schedule = on_schedule
        self._heap: list[Timer] = []
        self._active: dict[Hashable, Timer] = {}
        self._seq = itertools.count()

    def schedule(self, key: Hashable, delay_ms: int, action: Callable[[], None], tag: Any = None) -> Timer:
        self.cancel(key)
        timer = Timer(self.clock() + max(0, delay_ms), next(self._seq), key, action, tag)
        self._active[key] = timer
        heapq.heappush(self._heap, timer)
        if self.on_schedule is not None:
            self.on_schedule(timer.deadline_ms)
        return timer

    def get(self, key: Hashable) -> Timer | None:
        return self._active.get(key)

    def cancel(self, key: Hashable) -> bool:
        timer = self._active.pop(key, None)
        if timer is None:
            return False
        timer.cancelled = True
        return True

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap and heap[0].cancelled:
            heapq.heappop(heap)
        return heap[0].deadline_ms if heap else None

    def run_due(self, on_error: Callable[[Timer, Exception], None]) -> int:
        """Run every timer whose deadline has passed, in deadline order; returns how many ran.

        A timer whose action raises is handed to ``on_error`` and the others still run: one failure must
        neither stop the timers behind it nor be retried forever (a timer is consumed before it runs).
        """
        ran = 0
        heap = self._heap
        while heap and (heap[0].cancelled or heap[0].deadline_ms <= self.clock()):
            timer = heapq.heappop(heap)
            if timer.cancelled:
                continue
            del self._active[timer.key]
            timer.cancelled = True
            try:
                timer.action()
            except Exception as exc:
                on_error(timer, exc)
            ran += 1
        return ran

    def __len__(self) -> int:
        return len(self._active)
