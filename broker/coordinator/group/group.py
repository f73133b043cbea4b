"""A classic consumer group and its members, as Kafka's coordinator keeps them (sans-IO).

This module holds the group's data and the rules that only look at the group itself: its state machine
(Kafka's ``GroupState`` with the same allowed transitions), membership with static ``group.instance.id``
mappings and MEMBER_ID_REQUIRED pending members, protocol selection by member votes, the members parked in
JoinGroup and SyncGroup, and the offsets cache with its pending commits and expiry rules. Timers and the
offsets log belong to :mod:`odradek.broker.coordinator.group.group_coordinator`, which drives this.
"""

from __future__ import annotations

import enum
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.group.group_metadata_records import GroupRecord, MemberMetadata, MemberRecord, OffsetAndMetadata, subscribed_topics
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import random_uuid
from odradek.protocol.schema import DecodeError
from odradek.storage.topic_partition import TopicPartition

log = logging.getLogger("odradek.group")

CONSUMER_PROTOCOL_TYPE = "consumer"
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1

Protocols = list[tuple[str, bytes]]


def distinct_protocols(protocols: Protocols) -> Protocols:
    """A member's protocols as the set of names it supports, in its order of preference, each with the
    metadata of its first occurrence (the one a lookup by name finds).

    Kafka 3.9 keeps a repeated name twice and counts it twice towards "supported by every member", so a
    member naming ``range`` twice supports no candidate protocol and its group never completes the
    rebalance (compat-tests/README.md). Counted once, the repeat is harmless.
    """
    first: dict[str, bytes] = {}
    for name, metadata in protocols:
        first.setdefault(name, metadata)
    return list(first.items())


class GroupState(enum.Enum):
    """Kafka's names, which DescribeGroups/ListGroups report and ListGroups filters on."""

    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"
    EMPTY = "Empty"


S = GroupState
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset(GroupState),
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
}


@dataclass
class JoinResult:
    member_id: str
    error: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    """(member id, group instance id, metadata): only the leader gets them."""


@dataclass
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class MemberSummary(MemberMetadata):
    """A member as DescribeGroups shows it."""

    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary]


@dataclass(frozen=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(eq=False)
class Member(MemberMetadata):
    protocol_type: str
    supported_protocols: Protocols
    assignment: bytes = b""
    awaiting_join: Deferred[JoinResult] | None = None
    awaiting_sync: Deferred[SyncResult] | None = None
    is_new: bool = False
    heartbeat_satisfied: bool = False

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """A member parked in JoinGroup or SyncGroup cannot heartbeat, so it counts as alive -- except a
        new member, whose JoinGroup is bounded by its own (long) join timeout."""
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Protocols) -> bool:
        return len(protocols) == len(self.supported_protocols) and all(
            a[0] == b[0] and bytes(a[1]) == bytes(b[1]) for a, b in zip(protocols, self.supported_protocols)
        )

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of the candidate protocols")

    def summary(self, protocol: str | None) -> MemberSummary:
        if protocol is None:
            return MemberSummary(**self.member_metadata(), metadata=b"", assignment=b"")
        return MemberSummary(**self.member_metadata(), metadata=self.metadata(protocol), assignment=self.assignment)


@dataclass
class CommitRecord:
    """A cached offset and where its record sits in the offsets log (the later record wins). A
    transactional commit has no place yet (None) until its append completes."""

    log_offset: int | None
    offset: OffsetAndMetadata

    def older_than(self, other: "CommitRecord") -> bool:
        assert self.log_offset is not None and other.log_offset is not None
        return self.log_offset < other.log_offset


class Group:
    def __init__(self, group_id: str, state: GroupState, clock: Callable[[], int]) -> None:
        self.group_id = group_id
        self.state = state
        self.clock = clock
        self.current_state_timestamp: int | None = clock()
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.offsets: dict[TopicPartition, CommitRecord] = {}
        self.pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}
        self.pending_txn_offset_commits: dict[int, dict[TopicPartition, CommitRecord]] = {}
        """TxnOffsetCommits by producer id: cached offsets once the producer's COMMIT marker is written."""
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state.value}, generation {self.generation_id}, {len(self.members)} members)"

    # -- state ------------------------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise RuntimeError(f"Group {self.group_id} should be in one of {sorted(s.value for s in VALID_PREVIOUS_STATES[state])} before moving to {state.value}, not {self.state.value}")
        self.state = state
        self.current_state_timestamp = self.clock()

    @property
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # -- membership -------------------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> Member:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    @property
    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_members

    def not_yet_rejoined_members(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        return f"{client_id if group_instance_id is None else group_instance_id}-{random_uuid()}"

    def add(self, member: Member, join: Deferred[JoinResult] | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"Static member {member.group_instance_id} is already a member of group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(name for name, _ in member.supported_protocols)
        member.awaiting_join = join
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(name for name, _ in member.supported_protocols)
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else promote any member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                log.info("Group %s leader %s failed to join before the rebalance timeout; %s is the new leader", self.group_id, self.leader_id, member.member_id)
                self.leader_id = member.member_id
                return True
        return False

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """A static member came back with a new member id: fence whoever still waits under the old one."""
        member = self.members.pop(old_member_id)
        self.maybe_complete_join(member, JoinResult(old_member_id, ErrorCode.FENCED_INSTANCE_ID))
        self.maybe_complete_sync(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def add_pending_member(self, member_id: str) -> None:
        if self.has(member_id):
            raise RuntimeError(f"Pending member {member_id} is already a member of group {self.group_id}")
        self.pending_members.add(member_id)

    def update_member(self, member: Member, protocols: Protocols, rebalance_timeout_ms: int, session_timeout_ms: int, join: Deferred[JoinResult] | None) -> None:
        self.supported_protocols.subtract(name for name, _ in member.supported_protocols)
        member.supported_protocols = protocols
        self.supported_protocols.update(name for name, _ in protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.awaiting_join = join

    def maybe_complete_join(self, member: Member, result: JoinResult) -> None:
        waiting = member.awaiting_join
        if waiting is not None:
            member.awaiting_join = None
            waiting.complete(result)

    def maybe_complete_sync(self, member: Member, result: SyncResult) -> bool:
        waiting = member.awaiting_sync
        if waiting is None:
            return False
        member.awaiting_sync = None
        waiting.complete(result)
        return True

    # -- protocols --------------------------------------------------------------------------------------

    def _candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol all members support; most votes wins (ties go
        to the first protocol voted for, in member order)."""
        if not self.members:
            raise RuntimeError("Cannot select protocol for empty group")
        candidates = self._candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols[p] == n for p in protocols)

    def compute_subscribed_topics(self) -> set[str] | None:
        """The topics a consumer group's members subscribe to; None when unknown (another protocol type, or
        metadata that is not the consumer protocol), which makes offset expiry and OffsetDelete cautious."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        try:
            topics: set[str] = set()
            for member in self.members.values():
                topics |= subscribed_topics(member.metadata(self.protocol_name))
            return topics
        except DecodeError:
            log.warning("Failed to parse consumer protocol %s of group %s: its subscribed topics are unknown", self.protocol_name, self.group_id)
            return None

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE) or self.protocol_name is None:
            raise RuntimeError(f"Cannot obtain member metadata for group {self.group_id} in state {self.state.value}")
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    # -- views ------------------------------------------------------------------------------------------

    def summary(self) -> GroupSummary:
        """What DescribeGroups shows: metadata and assignments only once the group is Stable."""
        if self.is_(GroupState.STABLE):
            assert self.protocol_name is not None
            members = [m.summary(self.protocol_name) for m in self.members.values()]
            return GroupSummary(self.state.value, self.protocol_type or "", self.protocol_name, members)
        return GroupSummary(self.state.value, self.protocol_type or "", "", [m.summary(None) for m in self.members.values()])

    def overview(self) -> GroupOverview:
        return GroupOverview(self.group_id, self.protocol_type or "", self.state.value)

    def record(self, assignment: dict[str, bytes]) -> GroupRecord:
        """The group as its GroupMetadataValue persists it, with the given assignment."""
        members = []
        for m in self.members.values():
            assert self.protocol_name is not None, "a non-empty group always has a protocol"
            members.append(
                MemberRecord(**m.member_metadata(), subscription=m.metadata(self.protocol_name), assignment=assignment[m.member_id])
            )
        return GroupRecord(self.protocol_type or "", self.generation_id, self.protocol_name, self.leader_id, self.current_state_timestamp, members)

    @classmethod
    def loaded(cls, group_id: str, record: GroupRecord, clock: Callable[[], int]) -> "Group":
        """A group as its last GroupMetadataValue left it: Stable with its members, or Empty."""
        group = cls(group_id, GroupState.STABLE if record.members else GroupState.EMPTY, clock)
        group.generation_id = record.generation
        group.protocol_type = record.protocol_type or None
        group.protocol_name = record.protocol
        group.leader_id = record.leader
        group.current_state_timestamp = record.current_state_timestamp
        for m in record.members:
            protocols = [(record.protocol or "", m.subscription)]
            member = Member(**m.member_metadata(), protocol_type=record.protocol_type, supported_protocols=protocols, assignment=m.assignment)
            group.add(member)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    # -- offsets ----------------------------------------------------------------------------------------

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        record = self.offsets.get(tp)
        return None if record is None else record.offset

    @property
    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits) or bool(self.pending_txn_offset_commits)

    def has_pending_offset_commits(self, tp: TopicPartition) -> bool:
        """An offset commit for ``tp`` not yet final: OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT."""
        return tp in self.pending_offset_commits or any(tp in pending for pending in self.pending_txn_offset_commits.values())

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(self, tp: TopicPartition, record: CommitRecord) -> None:
        if tp in self.pending_offset_commits:
            current = self.offsets.get(tp)
            if current is None or current.older_than(record):
                self.offsets[tp] = record
            if self.pending_offset_commits[tp] == record.offset:
                del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == offset:
            del self.pending_offset_commits[tp]

    # Transactional offset commits (TxnOffsetCommit): pending per producer until its marker.

    def prepare_txn_offset_commit(self, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        pending = self.pending_txn_offset_commits.setdefault(producer_id, {})
        for tp, offset in offsets.items():
            pending[tp] = CommitRecord(None, offset)

    def on_txn_offset_commit_append(self, producer_id: int, tp: TopicPartition, record: CommitRecord) -> None:
        """The commit's record is in the log: it now has a place, which decides against later commits."""
        pending = self.pending_txn_offset_commits.get(producer_id)
        if pending is not None and tp in pending and pending[tp].offset == record.offset:
            pending[tp] = record

    def fail_pending_txn_offset_commit(self, producer_id: int, tp: TopicPartition) -> None:
        """The record was not written: the client gets the error and retries."""
        pending = self.pending_txn_offset_commits.get(producer_id)
        if pending is not None:
            pending.pop(tp, None)
            if not pending:
                del self.pending_txn_offset_commits[producer_id]

    def complete_pending_txn_offset_commit(self, producer_id: int, committed: bool) -> None:
        """The producer's marker is written: on COMMIT its offsets replace older ones; on ABORT they go."""
        pending = self.pending_txn_offset_commits.pop(producer_id, {})
        if not committed:
            return
        for tp, record in pending.items():
            if record.log_offset is None:
                raise RuntimeError(f"Trying to complete a transactional offset commit for producerId {producer_id} and groupId {self.group_id} even though the offset commit record itself hasn't been appended to the log.")
            current = self.offsets.get(tp)
            if current is None or current.older_than(record):
                self.offsets[tp] = record

    def remove_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        removed = {}
        for tp in partitions:
            self.pending_offset_commits.pop(tp, None)
            for pending in self.pending_txn_offset_commits.values():
                pending.pop(tp, None)
            record = self.offsets.pop(tp, None)
            if record is not None:
                removed[tp] = record.offset
        return removed

    def remove_expired_offsets(self, now_ms: int, retention_ms: int, subscribed: set[str] | None = None) -> dict[TopicPartition, OffsetAndMetadata]:
        """Kafka's expiry: an Empty group's offsets expire ``retention_ms`` after it became empty; a Stable
        consumer group's offsets of topics it no longer subscribes to expire after their commit; a group
        used only for commits expires each offset after its commit -- except, for the offsets of a consumer
        group (KIP-848), those of the ``subscribed`` topics. Offsets committed with an explicit retention
        (OffsetCommit v2-v4) expire at their own deadline."""
        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            base = lambda r: self.current_state_timestamp if self.current_state_timestamp is not None else r.offset.commit_timestamp  # noqa: E731
            keep_topics: set[str] = set()
        elif self.is_consumer_group and self.subscribed_topics is not None and self.is_(GroupState.STABLE):
            base = lambda r: r.offset.commit_timestamp  # noqa: E731
            keep_topics = self.subscribed_topics
        elif self.protocol_type is None:
            base = lambda r: r.offset.commit_timestamp  # noqa: E731
            keep_topics = subscribed or set()
        else:
            return {}
        expired = {}
        for tp, record in self.offsets.items():
            if tp[0] in keep_topics or tp in self.pending_offset_commits:
                continue
            expire_at = record.offset.expire_timestamp
            if (now_ms >= expire_at) if expire_at is not None else (now_ms - base(record) >= retention_ms):
                expired[tp] = record.offset
        for tp in expired:
            del self.offsets[tp]
        return expired
