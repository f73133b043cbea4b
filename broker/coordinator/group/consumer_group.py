"""A consumer group of the consumer group protocol (KIP-848), as Kafka's coordinator keeps it (sans-IO).

Kafka's ``ConsumerGroup``, ``ConsumerGroupMember`` and ``CurrentAssignmentBuilder``. The broker runs the
assignment; a member's heartbeat moves it towards its share of the group's **target assignment** one step
at a time:

- the **group epoch** is bumped whenever the membership, a subscription or the subscribed topics'
  metadata change; the target assignment is then recomputed at that epoch (the **assignment epoch**);
- a member's **member epoch** reaches the assignment epoch once it owns exactly its target partitions.
  Partitions it must give up are **revoked** first (UNREVOKED_PARTITIONS: it stays at its epoch until it
  stops reporting them), and a partition another member still owns is **unreleased**
  (UNRELEASED_PARTITIONS: assigned once its owner has revoked it), so a partition is never owned twice.

The group holds nothing that the records in ``__consumer_offsets`` do not say: every change is a record
(:mod:`~odradek.broker.coordinator.group.consumer_group_records`) that :meth:`ConsumerGroup.replay`
applies, when written as when loaded.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping

from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid
from odradek.protocol.values import CodeEnum

Assignment = Mapping[Uuid, frozenset[int]]
"""Partitions by topic id. Never holds an empty set."""

AssignmentEpochs = Mapping[tuple[Uuid, int], int]
"""(topic id, partition) -> the member epoch at which the member was given the partition (KIP-1251)."""

EMPTY_ASSIGNMENT: Assignment = {}

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
CONSUMER_GROUP_TYPE = "consumer"
CONSUMER_PROTOCOL_TYPE = "consumer"


class MemberState(CodeEnum):
    """Kafka's ``MemberState``, with the byte the CurrentMemberAssignment record stores."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> "MemberState":
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ConsumerGroupState(enum.Enum):
    """Kafka's names, which ConsumerGroupDescribe and ListGroups report."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupError(Exception):
    """A request the group refuses: Kafka's ApiException with its error code and message."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def without_empty(assignment: Mapping[Uuid, frozenset[int] | set[int]]) -> Assignment:
    return {topic_id: frozenset(partitions) for topic_id, partitions in assignment.items() if partitions}


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member of the classic protocol in a consumer group (KIP-848's online migration) said in its
    JoinGroup: its session timeout and its protocols (name, ConsumerProtocolSubscription bytes), kept in its
    ConsumerGroupMemberMetadata record so that the group can be converted back to a classic group."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol its JoinGroup answer named: its first (Kafka's ``supportedClassicProtocols().get().iterator().next()``)."""
        return self.supported_protocols[0][0]

    def metadata(self, protocol: str) -> bytes:
        return next((metadata for name, metadata in self.supported_protocols if name == protocol), b"")


@dataclass(frozen=True)
class ConsumerGroupMember:
    """A member: what its heartbeats said (subscription, timeouts) and where its reconciliation stands."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    assignment_epochs: AssignmentEpochs = field(default_factory=dict)
    """For each partition it owns (assigned or pending revocation), the epoch at which it got it; a partition
    a record stores no epoch for (one written before Kafka 4.3) counts as given at the member's epoch."""
    classic: ClassicMemberMetadata | None = None
    """Set for a member that uses the classic protocol (JoinGroup/SyncGroup/Heartbeat) in this group."""

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def assignment_epoch(self, topic_id: Uuid, partition: int) -> int | None:
        """The epoch at which the member got the partition; None if it does not own it."""
        if partition not in self.assigned_partitions.get(topic_id, ()) and partition not in self.partitions_pending_revocation.get(topic_id, ()):
            return None
        return self.assignment_epochs.get((topic_id, partition), max(self.member_epoch, 0))

    def with_epoch(self, epoch: int) -> "ConsumerGroupMember":
        """Kafka's ``updateMemberEpoch``: the current epoch becomes the previous one."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def same_subscription(self, other: "ConsumerGroupMember") -> bool:
        return self.subscribed_topic_names == other.subscribed_topic_names and self.subscribed_topic_regex == other.subscribed_topic_regex


@dataclass(frozen=True)
class TopicMetadata:
    """A subscribed topic as the assignment sees it."""

    topic_id: Uuid
    name: str
    num_partitions: int


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        """The hash of the subscribed topics' metadata at the group epoch: a change means a new epoch."""
        self.assignment_epoch = 0
        self.assignment_timestamp = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        """Instance id -> member id."""
        self.target_assignment: dict[str, Assignment] = {}
        self.inverted_target_assignment: dict[Uuid, dict[int, str]] = {}
        self.partition_epochs: dict[Uuid, dict[int, int]] = {}
        """The epoch at which each owned (or being revoked) partition is owned: a partition with an epoch
        here cannot be given to another member yet."""
        self.subscribed_topic_names: Counter[str] = Counter()
        self.server_assignors: Counter[str] = Counter()
        self.resolved_regexes: dict[str, frozenset[str]] = {}
        """A regular expression subscription -> the topics it matched when last resolved."""
        self.regex_resolved_at: dict[str, int] = {}
        """When each regular expression was last resolved (not persisted: a loaded group resolves anew)."""

    def __repr__(self) -> str:
        return f"ConsumerGroup({self.group_id!r}, epoch={self.group_epoch}, assignment_epoch={self.assignment_epoch}, members={len(self.members)})"

    # -- state --------------------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's ``maybeUpdateGroupState``, computed rather than stored."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def is_empty(self) -> bool:
        return not self.members

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    def member(self, member_id: str) -> ConsumerGroupMember:
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}.")
        return member

    def member_target(self, member_id: str, instance_id: str | None = None) -> Assignment:
        """A member's target assignment; a static member replacing its old incarnation gets the old one's."""
        if instance_id is not None:
            previous = self.static_members.get(instance_id)
            return self.target_assignment.get(previous, EMPTY_ASSIGNMENT) if previous is not None else EMPTY_ASSIGNMENT
        return self.target_assignment.get(member_id, EMPTY_ASSIGNMENT)

    def current_partition_epoch(self, topic_id: Uuid, partition: int) -> int:
        return self.partition_epochs.get(topic_id, {}).get(partition, -1)

    def preferred_server_assignor(self, counts: Counter[str] | None = None) -> str | None:
        """The assignor most members ask for (Kafka's ``computePreferredServerAssignor``)."""
        counts = self.server_assignors if counts is None else counts
        best = max(((n, name) for name, n in counts.items() if n > 0), default=None, key=lambda item: item[0])
        return best[1] if best is not None else None

    def server_assignors_with(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None) -> Counter[str]:
        counts = Counter(self.server_assignors)
        if old is not None and old.server_assignor is not None:
            counts[old.server_assignor] -= 1
        if new is not None and new.server_assignor is not None:
            counts[new.server_assignor] += 1
        return counts

    def subscribed_topics_with(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None) -> Counter[str]:
        """The subscribed topic names (with how many members subscribe) if ``old`` became ``new``."""
        counts = Counter(self.subscribed_topic_names)
        if old is not None:
            counts.subtract(self.member_topics(old))
        if new is not None:
            counts.update(self.member_topics(new))
        return +counts

    def member_topics(self, member: ConsumerGroupMember) -> frozenset[str]:
        """The topics a member subscribes to: its names, or what its regular expression resolved to."""
        if member.subscribed_topic_regex:
            return member.subscribed_topic_names | self.resolved_regexes.get(member.subscribed_topic_regex, frozenset())
        return member.subscribed_topic_names

    # -- offsets ------------------------------------------------------------------------------------------

    def validate_offset_commit(
        self, member_id: str, member_epoch: int, is_transactional: bool, api_version: int, partitions: Iterable[tuple[Uuid | None, int]]
    ) -> ErrorCode | None:
        """Kafka 4.4's ``ConsumerGroup.validateOffsetCommit``: a commit without a member (epoch < 0) only into
        an empty group; a member commits with OffsetCommit v9+, at its current epoch or -- KIP-1251 -- at an
        older one for partitions it has owned since that epoch or before (``partitions``: topic id, or None
        for a topic the metadata does not know, and partition).

        The older epoch is the common case, not a corner: a member commits while its heartbeat is in flight,
        and the heartbeat that moves it to a new epoch is applied before the commit that still carries the
        old one arrives. Refusing it (STALE_MEMBER_EPOCH) fails the Java client's ``commitSync`` with a
        CommitFailedException although the member owned those partitions all along."""
        if member_epoch < 0 and not self.members:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.classic is not None:
            # A classic member commits at its generation, which is its member epoch.
            return ErrorCode.ILLEGAL_GENERATION if member_epoch != member.member_epoch else None
        if not is_transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch > member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        if member_epoch < member.member_epoch:
            for topic_id, partition in partitions:
                given_at = member.assignment_epoch(topic_id, partition) if topic_id is not None else None
                if given_at is None or given_at > member_epoch:
                    return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """Kafka's ``ConsumerGroup.validateOffsetFetch``: admin clients fetch without member id and epoch."""
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH
        return None

    def recount_subscribed_topics(self) -> None:
        """After a regular expression resolved anew: its members' topics changed."""
        counts: Counter[str] = Counter()
        for member in self.members.values():
            counts.update(self.member_topics(member))
        self.subscribed_topic_names = counts

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topic_names[topic] > 0

    # -- classic members (online migration) ---------------------------------------------------------------

    def classic_members(self) -> list[ConsumerGroupMember]:
        return [m for m in self.members.values() if m.classic is not None]

    def supports_classic_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        """Kafka's ``supportsClassicProtocols``: a classic member may join if it is a consumer and shares a
        protocol with every classic member already in."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        if not self.members:
            return bool(protocols)
        classic = self.classic_members()
        return any(all(any(n == name for n, _ in m.classic.supported_protocols) for m in classic if m.classic is not None) for name in protocols)

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        """Kafka's ``allMembersUseClassicProtocolExcept``: ``member_id`` is the last consumer-protocol member."""
        leaving = self.members.get(member_id)
        return leaving is not None and leaving.classic is None and len(self.classic_members()) == len(self.members) - 1

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Kafka's ``waitingOnUnreleasedPartition``: a target partition of the member another still owns."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in self.target_assignment.get(member.member_id, EMPTY_ASSIGNMENT).items():
            owned = member.assigned_partitions.get(topic_id, frozenset())
            if any(p not in owned and self.current_partition_epoch(topic_id, p) != -1 for p in partitions):
                return True
        return False

    # -- replay: the records' effect ------------------------------------------------------------------------

    def update_member(self, new: ConsumerGroupMember) -> None:
        old = self.members.get(new.member_id)
        self._remove_partition_epochs(old)
        self.members[new.member_id] = new
        self.subscribed_topic_names = self.subscribed_topics_with(old, new)
        self.server_assignors = +self.server_assignors_with(old, new)
        for assignment in (new.assigned_partitions, new.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                epochs = self.partition_epochs.setdefault(topic_id, {})
                for p in partitions:
                    epochs[p] = new.member_epoch
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._remove_partition_epochs(old)
        self.subscribed_topic_names = self.subscribed_topics_with(old, None)
        self.server_assignors = +self.server_assignors_with(old, None)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]

    def _remove_partition_epochs(self, old: ConsumerGroupMember | None) -> None:
        if old is None:
            return
        for assignment in (old.assigned_partitions, old.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                epochs = self.partition_epochs.get(topic_id)
                if epochs is None:
                    continue
                for p in partitions:
                    if epochs.get(p) == old.member_epoch:
                        del epochs[p]
                if not epochs:
                    del self.partition_epochs[topic_id]

    def set_target_assignment(self, member_id: str, assignment: Assignment | None) -> None:
        old = self.target_assignment.pop(member_id, EMPTY_ASSIGNMENT)
        for topic_id, partitions in old.items():
            owners = self.inverted_target_assignment.get(topic_id, {})
            for p in partitions:
                if owners.get(p) == member_id:
                    del owners[p]
            if not owners:
                self.inverted_target_assignment.pop(topic_id, None)
        if assignment is None:
            return
        self.target_assignment[member_id] = assignment
        for topic_id, partitions in assignment.items():
            owners = self.inverted_target_assignment.setdefault(topic_id, {})
            for p in partitions:
                owners[p] = member_id

    def is_partition_in_target(self, topic_id: Uuid, partition: int) -> bool:
        return partition in self.inverted_target_assignment.get(topic_id, {})


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    current_partition_epoch: Callable[[Uuid, int], int],
    owned: Mapping[Uuid, frozenset[int]] | None,
) -> ConsumerGroupMember:
    """Kafka's ``CurrentAssignmentBuilder.build``: the member's next step towards ``target``.

    ``owned`` is what the heartbeat reported as owned (None when the request did not say). Raises
    GroupError(FENCED_MEMBER_EPOCH) for a member in a state this coordinator does not know.
    """
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next_assignment(member, member.member_epoch, target_epoch, target, current_partition_epoch, owned)
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        # Kafka 4.2+ (KAFKA-19974) no longer bumps the epoch here: a partition is owned by one member at any
        # given epoch, which the assignment epochs of offset commits rely on.
        return _next_assignment(member, member.member_epoch, target_epoch, target, current_partition_epoch, owned)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target, current_partition_epoch, owned)
    if owned is None or owned:
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.")
    return _next_assignment(member, target_epoch, target_epoch, target, current_partition_epoch, owned)


def _owns_any(owned: Mapping[Uuid, frozenset[int]] | None, partitions: Assignment) -> bool:
    """Whether the member still reports any of ``partitions``; not saying counts as still owning them."""
    if owned is None:
        return True
    return any(partitions.get(topic_id, frozenset()) & ps for topic_id, ps in owned.items())


def _next_assignment(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    current_partition_epoch: Callable[[Uuid, int], int],
    owned: Mapping[Uuid, frozenset[int]] | None,
) -> ConsumerGroupMember:
    has_unreleased = False
    assigned: dict[Uuid, set[int]] = {}
    pending_revocation: dict[Uuid, set[int]] = {}
    pending_assignment: dict[Uuid, set[int]] = {}
    for topic_id in set(target) | set(member.assigned_partitions):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned_partitions.get(topic_id, frozenset())
        kept = current & wanted
        revoke = current - kept
        add = set(wanted - kept)
        # A partition this member itself is revoking is not another member's (KAFKA-19449).
        revoking = member.partitions_pending_revocation.get(topic_id, frozenset())
        unreleased = {p for p in add if current_partition_epoch(topic_id, p) != -1 and p not in revoking}
        if unreleased:
            has_unreleased = True
            add -= unreleased
        assigned[topic_id] = set(kept)
        pending_revocation[topic_id] = set(revoke)
        pending_assignment[topic_id] = add
    revocation = without_empty(pending_revocation)
    if revocation and _owns_any(owned, revocation):
        # Revocation before assignment: the member stays at its epoch until it gives these up.
        kept_assignment = without_empty(assigned)
        return replace(
            member.with_epoch(member_epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned_partitions=kept_assignment,
            partitions_pending_revocation=revocation,
            assignment_epochs=_epochs(member, (kept_assignment, revocation), member_epoch),
        )
    for topic_id, partitions in pending_assignment.items():
        assigned[topic_id] |= partitions
    state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
    new_assignment = without_empty(assigned)
    return replace(
        member.with_epoch(target_epoch),
        state=state,
        assigned_partitions=new_assignment,
        partitions_pending_revocation={},
        assignment_epochs=_epochs(member, (new_assignment,), target_epoch),
    )


def _epochs(member: ConsumerGroupMember, assignments: tuple[Assignment, ...], new_epoch: int) -> dict[tuple[Uuid, int], int]:
    """The assignment epochs of what the member owns next: a partition it keeps keeps its epoch, a partition
    it is given now gets ``new_epoch``, the epoch it moves to (Kafka's KIP-1251)."""
    epochs = {}
    for assignment in assignments:
        for topic_id, partitions in assignment.items():
            for p in partitions:
                old = member.assignment_epoch(topic_id, p)
                epochs[(topic_id, p)] = new_epoch if old is None else old
    return epochs
