"""Incremental fetch sessions (KIP-227), sans-IO.

A client opens a session with a full fetch (epoch 0), then sends only what changed (epoch 1, 2, ...);
the broker answers only partitions with something new: records, an error, or a moved high watermark,
last stable offset or log start offset. Epoch -1 means a sessionless full fetch (and closes a named
session). The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions; when full, a
new session may evict one that has been idle past the eviction time or that has fewer partitions, as
Kafka's ``FetchSessionCache`` does. Answering without a session (id 0) is always legal.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Hashable

from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid
from odradek.protocol.values import Fields, plain_init

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0
EVICTION_MS = 120_000

PartitionKey = tuple[Hashable, int]
"""(topic name or topic id, partition index)."""


@plain_init
class FetchPartition(Fields):
    """What the client asked for one partition (one per partition of every fetch: made in C, see ``plain_init``)."""

    __slots__ = _FIELDS = ("key", "topic", "topic_id", "partition", "fetch_offset", "max_bytes", "current_leader_epoch", "log_start_offset", "last_fetched_epoch")

    def __init__(
        self, key: PartitionKey, topic: str | None, topic_id: Uuid, partition: int, fetch_offset: int, max_bytes: int,
        current_leader_epoch: int = -1, log_start_offset: int = -1, last_fetched_epoch: int = -1,
    ) -> None:
        self.key = key
        self.topic = topic
        self.topic_id = topic_id
        """The request's topic id (zeros before v13, which name topics)."""
        self.partition = partition
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.current_leader_epoch = current_leader_epoch
        self.log_start_offset = log_start_offset
        self.last_fetched_epoch = last_fetched_epoch
        """The epoch of the fetcher's last batch (v12+): the leader answers a diverging epoch if its log parts there."""


@dataclass
class CachedPartition:
    request: FetchPartition
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@plain_init
class PartitionOutcome(Fields):
    """What the broker found for one partition: decides whether an incremental response includes it."""

    __slots__ = _FIELDS = ("error", "high_watermark", "last_stable_offset", "log_start_offset", "records_length", "preferred_read_replica", "diverging")

    def __init__(
        self, error: int, high_watermark: int, last_stable_offset: int, log_start_offset: int, records_length: int,
        preferred_read_replica: int = -1, diverging: bool = False,
    ) -> None:
        self.error = error
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.records_length = records_length
        self.preferred_read_replica = preferred_read_replica
        self.diverging = diverging


@dataclass
class FetchSession:
    session_id: int
    epoch: int
    is_follower: bool
    partitions: OrderedDict[PartitionKey, CachedPartition]
    last_used_ms: int


@dataclass
class FetchContext:
    """One fetch request's view of its session: what to read, and which results to send."""

    error: ErrorCode = ErrorCode.NONE
    session: FetchSession | None = None
    incremental: bool = False
    requested: list[FetchPartition] = field(default_factory=list)
    create_session: bool = False

    def partitions(self, topic_name: Callable[[Uuid], str | None] | None = None) -> list[FetchPartition]:
        """The partitions to read. A session's partition whose topic id was unknown when it joined gets its
        name from ``topic_name`` once the broker knows it (Kafka's ``maybeResolveUnknownName``): a fetcher
        sends a partition again only when its request changes, so the name is never asked for again."""
        if self.incremental and self.session is not None:
            requests = [c.request for c in self.session.partitions.values()]
            if topic_name is not None:
                for request in requests:
                    if request.topic is None and (name := topic_name(request.topic_id)) is not None:
                        request.topic = name
            return requests
        return self.requested


class FetchSessionCache:
    def __init__(self, max_slots: int, rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.sessions: dict[int, FetchSession] = {}
        self._rng = rng or random.Random()

    def new_context(
        self,
        session_id: int,
        epoch: int,
        partitions: list[FetchPartition],
        forgotten: list[PartitionKey],
        is_follower: bool,
        now_ms: int,
    ) -> FetchContext:
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)
            return FetchContext(requested=partitions, create_session=epoch == INITIAL_EPOCH)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext(error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        for key in forgotten:
            session.partitions.pop(key, None)
        for p in partitions:
            cached = session.partitions.get(p.key)
            if cached is None:
                session.partitions[p.key] = CachedPartition(p)
            else:
                cached.request = p
        session.epoch = _next_epoch(epoch)
        session.last_used_ms = now_ms
        return FetchContext(session=session, incremental=True)

    def finish(self, context: FetchContext, outcomes: dict[PartitionKey, PartitionOutcome], is_follower: bool, now_ms: int) -> tuple[int, list[PartitionKey]]:
        """(session id to answer, keys of the partitions the response carries, in order)."""
        if context.incremental:
            assert context.session is not None
            included = []
            for key, cached in context.session.partitions.items():
                outcome = outcomes.get(key)
                if outcome is not None and _must_respond(cached, outcome):
                    included.append(key)
            return context.session.session_id, included
        keys = [p.key for p in context.requested]
        if not context.create_session:
            return INVALID_SESSION_ID, keys
        session = self._create(context.requested, outcomes, is_follower, now_ms)
        return (session.session_id if session else INVALID_SESSION_ID), keys

    def _create(self, requested: list[FetchPartition], outcomes: dict[PartitionKey, PartitionOutcome], is_follower: bool, now_ms: int) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        if len(self.sessions) >= self.max_slots and not self._evict_for(len(requested), is_follower, now_ms):
            return None
        session_id = self._new_session_id()
        cached: OrderedDict[PartitionKey, CachedPartition] = OrderedDict()
        for p in requested:
            c = CachedPartition(p)
            outcome = outcomes.get(p.key)
            if outcome is not None:
                _must_respond(c, outcome)
            cached[p.key] = c
        session = FetchSession(session_id, _next_epoch(INITIAL_EPOCH), is_follower, cached, now_ms)
        self.sessions[session_id] = session
        return session

    def _evict_for(self, size: int, is_follower: bool, now_ms: int) -> bool:
        """Evict a stale session, else one less valuable (a consumer's, or a smaller one) than the new one."""
        by_age = sorted(self.sessions.values(), key=lambda s: s.last_used_ms)
        for s in by_age:
            if now_ms - s.last_used_ms > EVICTION_MS:
                del self.sessions[s.session_id]
                return True
        for s in by_age:
            if (is_follower and not s.is_follower) or (is_follower == s.is_follower and len(s.partitions) < size):
                del self.sessions[s.session_id]
                return True
        return False

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, 2**31 - 1)
            if session_id not in self.sessions:
                return session_id


def _must_respond(cached: CachedPartition, outcome: PartitionOutcome) -> bool:
    """Kafka's ``CachedPartition.maybeUpdateResponseData``: update the cache and say if anything is news. Records,
    an error, a preferred read replica and a diverging epoch always are; after an error the cached high watermark
    is forgotten, so the partition is sent again once the error is gone."""
    respond = outcome.records_length > 0 or outcome.error != 0 or outcome.preferred_read_replica >= 0 or outcome.diverging
    if cached.high_watermark != outcome.high_watermark:
        cached.high_watermark = outcome.high_watermark
        respond = True
    if cached.last_stable_offset != outcome.last_stable_offset:
        cached.last_stable_offset = outcome.last_stable_offset
        respond = True
    if cached.log_start_offset != outcome.log_start_offset:
        cached.log_start_offset = outcome.log_start_offset
        respond = True
    if outcome.error != 0:
        cached.high_watermark = -1
    return respond


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1
