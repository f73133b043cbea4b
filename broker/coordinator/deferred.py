"""A result that is known later: how the sans-IO group coordinator answers requests it must park.

A JoinGroup waits for the other members, a SyncGroup for the leader's assignment, an offset commit for
the offsets topic's high watermark. The coordinator hands out a :class:`Deferred`, completes it when the
answer is known (possibly before returning it), and the event-loop shell awaits it; unit tests simply
read ``value``.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

T = TypeVar("T")
U = TypeVar("U")

_PENDING = object()


class Deferred(Generic[T]):
    __slots__ = ("_value", "_callbacks")

    def __init__(self) -> None:
        self._value: object = _PENDING
        self._callbacks: list[Callable[[T], None]] = []

    @classmethod
    def completed(cls, value: T) -> "Deferred[T]":
        deferred: Deferred[T] = cls()
        deferred.complete(value)
        return deferred

    @property
    def done(self) -> bool:
        return self._value is not _PENDING

    @property
    def value(self) -> T:
        if self._value is _PENDING:
            raise RuntimeError("deferred result is not known yet")
        return self._value  # type: ignore[return-value]

    def complete(self, value: T) -> None:
        if self._value is not _PENDING:
            raise RuntimeError("deferred result completed twice")
        self._value = value
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(value)

    def add_callback(self, callback: Callable[[T], None]) -> None:
        """Run ``callback`` with the value once known (at once if it already is)."""
        if self._value is _PENDING:
            self._callbacks.append(callback)
        else:
            callback(self._value)  # type: ignore[arg-type]

    def then(self, transform: Callable[[T], "U"]) -> "Deferred[U]":
        out: Deferred[U] = Deferred()
        self.add_callback(lambda value: out.complete(transform(value)))
        return out
