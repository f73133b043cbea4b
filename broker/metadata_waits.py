"""ZooKeeper-mode admin requests' answers waiting for the broker's own metadata to show what the controller
did (Kafka 3.9's ``DelayedElectLeader``, ``DelayedCreatePartitions`` and ``DelayedDeleteTopics`` purgatories,
checked again at each UpdateMetadata the broker applies).

The controller acts once ZooKeeper holds the change; a client told "done" then asks this broker (or another)
for metadata at once, so the answer waits until this broker's cache agrees, or the request's timeout passes.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

import anyio

from odradek.controller.metadata_image import MetadataImage


class MetadataWaits:
    def __init__(self, image: Callable[[], MetadataImage]) -> None:
        self.image = image
        """The broker's current metadata (replaced at each UpdateMetadata)."""
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

    async def until_led(self, partitions: Mapping[str, Iterable[int]], timeout_s: float) -> set[str]:
        """``DelayedCreatePartitions``: the topics of which a partition still has no leader here once the
        timeout passed (none when every one has)."""
        wanted = {topic: list(indexes) for topic, indexes in partitions.items()}

        def leaderless() -> set[str]:
            topics = self.image().topics
            return {
                name for name, indexes in wanted.items()
                if (topic := topics.get(name)) is None or any(i not in topic.partitions or topic.partitions[i].leader < 0 for i in indexes)
            }

        await self.wait_until(lambda: not leaderless(), timeout_s)
        return leaderless()

    async def until_gone(self, topics: Iterable[str], timeout_s: float) -> set[str]:
        """``DelayedDeleteTopics``: the topics still in the metadata here once the timeout passed."""
        wanted = set(topics)
        await self.wait_until(lambda: not wanted & set(self.image().topics), timeout_s)
        return wanted & set(self.image().topics)
