"""One partition as a share group sees it (Kafka's ``SharePartition``), sans-IO: which records are in
flight, who holds them and until when.

A share partition hands its records to many consumers. Records from the share-partition start offset
(SPSO) on are *in flight* until their delivery completes; records before it are done. Each in-flight
record is AVAILABLE (to be handed out), ACQUIRED by one member under a time lock
(``group.share.record.lock.duration.ms``), ACKNOWLEDGED (accepted) or ARCHIVED (rejected, or delivered
``group.share.delivery.count.limit`` times). An acquisition counts a delivery; RELEASE, the lock's
expiry and the member's leaving make the records AVAILABLE again -- or ARCHIVED once their delivery
count reached the limit. When the records at the SPSO reach a terminal state the SPSO moves past them.

In-flight records are kept as runs of offsets in one state (:class:`InFlight`), split only where
acknowledgements differ: a fetch of a thousand-record batch is one run, not a thousand objects. Records
are acquired a whole fetched batch at a time, as Kafka does, since the client receives whole batches.

Every change that must survive a restart is returned as :class:`StateBatch` es for the share coordinator
(``__share_group_state``); acquisitions are not persisted (a restart makes them AVAILABLE again, as in
Kafka), only their outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from odradek.broker.share.state_batches import RecordState, StateBatch, overlay
from odradek.protocol.errors import ErrorCode
from odradek.protocol.values import CodeEnum

NO_MEMBER = ""
NO_DEADLINE = -1


class AcknowledgeType(CodeEnum):
    """What a consumer says of records it acquired (ShareFetch/ShareAcknowledge ``AcknowledgeTypes``)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4
    """KIP-1222 (ShareFetch/ShareAcknowledge v2): keep the records, their lock starting again."""


_ACKNOWLEDGED_STATE = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
}


@dataclass(slots=True)
class InFlight:
    """Offsets ``first``..``last`` in one state; ``member`` and ``deadline_ms`` while ACQUIRED."""

    first: int
    last: int
    state: RecordState
    delivery_count: int
    member: str = NO_MEMBER
    deadline_ms: int = NO_DEADLINE

    def split_at(self, offset: int) -> "InFlight":
        """Cut before ``offset``: this run keeps the offsets below it, the returned run the rest."""
        tail = InFlight(offset, self.last, self.state, self.delivery_count, self.member, self.deadline_ms)
        self.last = offset - 1
        return tail

    def as_state_batch(self) -> StateBatch:
        return StateBatch(self.first, self.last, self.state, self.delivery_count)


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """A range handed to a consumer (ShareFetch's ``AcquiredRecords``)."""

    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Acknowledgement:
    """An acknowledgement batch: one type for the whole range, or one per offset."""

    first: int
    last: int
    types: Sequence[int]


@dataclass(frozen=True, slots=True)
class StateUpdate:
    """What to persist after a change: the SPSO and the state batches that changed
    (WriteShareGroupState's partition data)."""

    start_offset: int
    batches: list[StateBatch]


class SharePartition:
    def __init__(
        self,
        start_offset: int,
        state_batches: Iterable[StateBatch] = (),
        *,
        delivery_count_limit: int = 5,
        lock_duration_ms: int = 30000,
        max_in_flight: int = 2000,
    ) -> None:
        """A share partition from its persisted state (the SPSO and the state batches from it on)."""
        self.start_offset = start_offset
        self.delivery_count_limit = delivery_count_limit
        self.lock_duration_ms = lock_duration_ms
        self.max_in_flight = max_in_flight
        self.in_flight: list[InFlight] = [
            InFlight(b.first, b.last, b.state if b.state is not RecordState.ACQUIRED else RecordState.AVAILABLE, b.delivery_count)
            for b in overlay((), state_batches, start_offset)
        ]
        self._end = self.in_flight[-1].last + 1 if self.in_flight else start_offset
        """The first offset never acquired: the share-partition end offset (SPEO) plus one."""
        self._advance_start()

    # -- what a fetch reads -----------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        """The offset after the last in-flight record (Kafka's SPEO + 1)."""
        return self._end

    def next_fetch_offset(self) -> int:
        """Where the next fetch reads from: the first AVAILABLE record, else past the in-flight records."""
        for run in self.in_flight:
            if run.state is RecordState.AVAILABLE:
                return run.first
        return self._end

    def can_acquire(self) -> bool:
        """Whether a fetch may acquire anything: some record is AVAILABLE again, or fewer records than
        ``group.share.partition.max.record.locks`` are in flight."""
        return self.next_fetch_offset() < self._end or self._end - self.start_offset < self.max_in_flight

    def next_deadline(self) -> int | None:
        deadlines = [run.deadline_ms for run in self.in_flight if run.state is RecordState.ACQUIRED]
        return min(deadlines, default=None)

    # -- acquisition ------------------------------------------------------------------------------------

    def acquire(self, member: str, batches: Sequence[tuple[int, int]], max_records: int, now_ms: int, strict: bool = False) -> list[AcquiredRecords]:
        """Acquire for ``member`` what is acquirable of the fetched batches (their (base, last) offsets in
        log order): AVAILABLE in-flight records and records never acquired, a whole batch at a time,
        until ``max_records`` -- a soft limit, as in Kafka's batch-optimized mode (the last batch is taken
        whole), or a hard one when ``strict`` (the record-limit mode)."""
        acquired: list[InFlight] = []
        count = 0
        deadline = now_ms + self.lock_duration_ms
        for base, last in batches:
            if count >= max_records:
                break
            first = max(base, self.start_offset)
            if first > last:
                continue
            # Records in flight already: take those AVAILABLE within the batch.
            if first < self._end:
                for run in self._cut(first, min(last, self._end - 1)):
                    if strict and count >= max_records:
                        break
                    if strict and run.last - run.first + 1 > max_records - count:
                        self.in_flight.insert(self.in_flight.index(run) + 1, run.split_at(run.first + max_records - count))
                    if run.state is RecordState.AVAILABLE:
                        run.state, run.member, run.deadline_ms = RecordState.ACQUIRED, member, deadline
                        run.delivery_count += 1
                        acquired.append(run)
                        count += run.last - run.first + 1
                first = self._end
            # Records never acquired, while the in-flight window has room.
            if strict:
                last = min(last, max(first, self._end) + max_records - count - 1)
            if first <= last and count < max_records and self._end - self.start_offset < self.max_in_flight:
                first = max(first, self._end)
                tail = self.in_flight[-1] if self.in_flight else None
                if tail is not None and acquired and acquired[-1] is tail and tail.last + 1 == first and tail.delivery_count == 1:
                    tail.last = last  # the previous batch of this fetch, acquired new: one run
                else:
                    if not self.in_flight:
                        self.start_offset = first
                    self.in_flight.append(InFlight(first, last, RecordState.ACQUIRED, 1, member, deadline))
                    acquired.append(self.in_flight[-1])
                self._end = last + 1
                count += last - first + 1
        return _ranges(acquired)

    # -- acknowledgement, release, expiry ------------------------------------------------------------------

    def acknowledge(self, member: str, acknowledgements: Sequence[Acknowledgement], now_ms: int = 0) -> tuple[ErrorCode, StateUpdate | None]:
        """Apply ``member``'s acknowledgements: all or none. INVALID_RECORD_STATE when an offset is not
        ACQUIRED by the member (never fetched, acknowledged already, its lock expired); INVALID_REQUEST
        for a malformed batch. Also returns what to persist (None: nothing changed)."""
        steps: list[tuple[int, int, AcknowledgeType]] = []
        for ack in acknowledgements:
            if ack.last < ack.first or not ack.types or (len(ack.types) != 1 and len(ack.types) != ack.last - ack.first + 1):
                return ErrorCode.INVALID_REQUEST, None
            try:
                types = [AcknowledgeType(t) for t in ack.types]
            except ValueError:
                return ErrorCode.INVALID_REQUEST, None
            if len(types) == 1:
                steps.append((ack.first, ack.last, types[0]))
                continue
            start = ack.first
            for i in range(1, len(types) + 1):
                if i == len(types) or types[i] is not types[i - 1]:
                    steps.append((start, ack.first + i - 1, types[i - 1]))
                    start = ack.first + i
        for first, last, _ in steps:
            if not self._held_by(member, first, last):
                return ErrorCode.INVALID_RECORD_STATE, None
        changed: list[InFlight] = []
        for first, last, kind in steps:
            for run in self._cut(first, last):
                if kind is AcknowledgeType.RENEW:
                    run.deadline_ms = now_ms + self.lock_duration_ms
                    continue
                self._settle(run, _ACKNOWLEDGED_STATE[kind])
                changed.append(run)
        return ErrorCode.NONE, self._persist(changed)

    def release(self, member: str) -> StateUpdate | None:
        """``member`` left or closed its share session: what it holds becomes AVAILABLE again."""
        return self._release(lambda run: run.member == member)

    def expire_locks(self, now_ms: int) -> StateUpdate | None:
        """Acquisition locks whose time is up: their records become AVAILABLE again."""
        return self._release(lambda run: run.deadline_ms <= now_ms)

    def move_start_to(self, log_start_offset: int) -> StateUpdate | None:
        """The log's start moved past the SPSO (retention, DeleteRecords): those records are gone, so
        their delivery is over."""
        if log_start_offset <= self.start_offset:
            return None
        changed: list[InFlight] = []
        if self.in_flight and self.in_flight[0].first < log_start_offset:
            for run in self._cut(self.in_flight[0].first, min(log_start_offset, self._end) - 1):
                if not run.state.terminal:
                    run.state, run.member, run.deadline_ms = RecordState.ARCHIVED, NO_MEMBER, NO_DEADLINE
                    changed.append(run)
        self._end = max(self._end, log_start_offset)
        self.start_offset = log_start_offset
        self._advance_start()
        return self._persist(changed, force=True)

    # -- internals ------------------------------------------------------------------------------------------

    def _release(self, which: Callable[[InFlight], bool]) -> StateUpdate | None:
        changed = [run for run in self.in_flight if run.state is RecordState.ACQUIRED and which(run)]
        for run in changed:
            self._settle(run, RecordState.AVAILABLE)
        return self._persist(changed)

    def _settle(self, run: InFlight, state: RecordState) -> None:
        if state is RecordState.AVAILABLE and run.delivery_count >= self.delivery_count_limit:
            state = RecordState.ARCHIVED
        run.state, run.member, run.deadline_ms = state, NO_MEMBER, NO_DEADLINE

    def _persist(self, changed: list[InFlight], force: bool = False) -> StateUpdate | None:
        """The changed runs as state batches, with the SPSO as it was before they changed: as Kafka, the
        state is written first and the SPSO moves past completed records after, so the persisted SPSO
        trails by one write (the batches say those records are done)."""
        start = self.start_offset
        batches = overlay((), [run.as_state_batch() for run in changed], 0)
        moved = self._advance_start()
        return StateUpdate(start, batches) if batches or moved or force else None

    def _held_by(self, member: str, first: int, last: int) -> bool:
        """Every offset of first..last is in flight, ACQUIRED by ``member``."""
        expected = first
        for run in self.in_flight:
            if run.last < first or run.first > last:
                continue
            if run.first > expected or run.state is not RecordState.ACQUIRED or run.member != member:
                return False
            expected = run.last + 1
        return expected > last

    def _cut(self, first: int, last: int) -> list[InFlight]:
        """The in-flight runs covering first..last, split so that none reaches outside it."""
        out: list[InFlight] = []
        i = 0
        while i < len(self.in_flight):
            run = self.in_flight[i]
            if run.last < first:
                i += 1
                continue
            if run.first > last:
                break
            if run.first < first:
                self.in_flight.insert(i + 1, run.split_at(first))
                i += 1
                continue
            if run.last > last:
                self.in_flight.insert(i + 1, run.split_at(last + 1))
            out.append(run)
            i += 1
        return out

    def _advance_start(self) -> bool:
        """Move the SPSO past the records whose delivery is complete; True when it moved."""
        before = self.start_offset
        while self.in_flight and self.in_flight[0].state.terminal:
            self.in_flight.pop(0)
        self.start_offset = max(self.start_offset, self.in_flight[0].first if self.in_flight else self._end)
        return self.start_offset != before

    def state_batches(self) -> list[StateBatch]:
        """The whole in-flight state as persisted (ACQUIRED records as what they would return to)."""
        return overlay((), [StateBatch(r.first, r.last, RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state, r.delivery_count) for r in self.in_flight], self.start_offset)


def _ranges(runs: list[InFlight]) -> list[AcquiredRecords]:
    """Acquired runs as the response's ranges, neighbours with one delivery count merged."""
    out: list[AcquiredRecords] = []
    for run in runs:
        if out and out[-1].last + 1 == run.first and out[-1].delivery_count == run.delivery_count:
            out[-1] = AcquiredRecords(out[-1].first, run.last, run.delivery_count)
        else:
            out.append(AcquiredRecords(run.first, run.last, run.delivery_count))
    return out

