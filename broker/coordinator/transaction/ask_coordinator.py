"""What a partition leader's check of a transactional produce raises when another broker's transaction
coordinator must be asked first (:mod:`.transaction_verification`).

A module of its own, so that the replica manager, which waits for the answer, imports neither the
verification nor the transaction coordinator before a transactional produce needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import anyio

if TYPE_CHECKING:  # the coordinators' Deferred, with them: a broker without transactions never imports it
    from odradek.broker.coordinator.deferred import Deferred
    from odradek.protocol.errors import ErrorCode


class AskCoordinator(Exception):
    """Another broker coordinates the transactional id: ``answer()`` asks it (the append waits for it), and
    the check is made again with its verdict."""

    def __init__(self, ask: Callable[[], Deferred[ErrorCode]]) -> None:
        super().__init__("the transaction coordinator is another broker")
        self._ask = ask

    async def answer(self) -> ErrorCode:
        [verdict] = await self.answers([self])
        return verdict

    @staticmethod
    async def answers(asks: list["AskCoordinator"]) -> list[ErrorCode]:
        """Every ask sent before any answer is awaited: those for one coordinator share its next request."""
        deferreds = [ask._ask() for ask in asks]
        verdicts = []
        for deferred in deferreds:
            if not deferred.done:
                arrived = anyio.Event()
                deferred.add_callback(lambda _: arrived.set())
                await arrived.wait()
            verdicts.append(deferred.value)
        return verdicts
