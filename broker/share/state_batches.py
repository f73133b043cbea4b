"""Share-partition state batches: runs of offsets that share a delivery state and a delivery count, as
the share coordinator persists them (``ShareSnapshotValue``/``ShareUpdateValue``'s ``StateBatches``) and
as a share partition keeps its in-flight records.

One function, :func:`overlay`, lays newer batches over older ones (Kafka's
``PersisterStateBatchCombiner``): the newer state of an offset wins, offsets before the start offset are
dropped, and neighbours with the same state and count merge, so the list stays short however the
acknowledgements were fragmented.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from odradek.protocol.values import CodeEnum


class RecordState(CodeEnum):
    """A record's delivery state (Kafka's ``RecordState``); the persisted ones are 0, 2 and 4."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        """Delivery of the record is complete: the start offset may pass it."""
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(frozen=True, slots=True)
class StateBatch:
    """Offsets ``first``..``last`` (inclusive) in one state, delivered ``delivery_count`` times."""

    first: int
    last: int
    state: RecordState
    delivery_count: int

    def to_wire(self) -> dict:
        return {"first_offset": self.first, "last_offset": self.last, "delivery_state": int(self.state), "delivery_count": self.delivery_count}

    @classmethod
    def from_wire(cls, batch: dict) -> "StateBatch":
        return cls(batch["first_offset"], batch["last_offset"], RecordState(batch["delivery_state"]), batch["delivery_count"])


def overlay(older: Iterable[StateBatch], newer: Iterable[StateBatch], start_offset: int) -> list[StateBatch]:
    """``older`` with ``newer`` laid over it, from ``start_offset`` on, sorted, merged where contiguous and equal."""
    result: list[StateBatch] = [b for b in older if b.last >= start_offset]
    for top in newer:
        kept: list[StateBatch] = []
        for b in result:
            if b.last < top.first or b.first > top.last:
                kept.append(b)
                continue
            if b.first < top.first:
                kept.append(StateBatch(b.first, top.first - 1, b.state, b.delivery_count))
            if b.last > top.last:
                kept.append(StateBatch(top.last + 1, b.last, b.state, b.delivery_count))
        kept.append(top)
        result = kept
    result.sort(key=lambda b: b.first)
    merged: list[StateBatch] = []
    for b in result:
        if b.last < start_offset:
            continue
        if b.first < start_offset:
            b = StateBatch(start_offset, b.last, b.state, b.delivery_count)
        if merged and merged[-1].last + 1 == b.first and (merged[-1].state, merged[-1].delivery_count) == (b.state, b.delivery_count):
            merged[-1] = StateBatch(merged[-1].first, b.last, b.state, b.delivery_count)
        else:
            merged.append(b)
    return merged
