"""Kafka's request memory pool (``queued.max.request.bytes``): a bound on the bytes of requests in flight.

As Kafka's non-strict ``SimpleMemoryPool``: a request is admitted while any memory is left, even one larger
than what is left (the pool dips below zero by at most one request), and none is admitted while the pool is
exhausted, so connections stop reading new requests until handled ones are released. ``queued.max.request.bytes``
of -1 (Kafka's default) means no pool: only ``socket.request.max.bytes`` bounds one request.
"""

from __future__ import annotations

import anyio


class MemoryPool:
    def __init__(self, size: int) -> None:
        self.size = size
        self.available = size
        self._released = anyio.Event()

    @property
    def exhausted(self) -> bool:
        return self.available <= 0

    def allocate(self, n: int) -> None:
        """Charge a request whose size prefix was read (the caller checked the pool was not exhausted)."""
        self.available -= n

    def release(self, n: int) -> None:
        self.available += n
        if self.available > 0:
            self._released.set()
            self._released = anyio.Event()

    async def wait_available(self) -> None:
        while self.exhausted:
            await self._released.wait()


class Unbounded:
    """No pool (``queued.max.request.bytes`` <= 0): never exhausted, nothing to count."""

    exhausted = False

    def allocate(self, n: int) -> None:
        pass

    def release(self, n: int) -> None:
        pass

    async def wait_available(self) -> None:
        pass


UNBOUNDED = Unbounded()


def memory_pool(queued_max_request_bytes: int) -> MemoryPool | Unbounded:
    return MemoryPool(queued_max_request_bytes) if queued_max_request_bytes > 0 else UNBOUNDED
