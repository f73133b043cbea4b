"""Share groups' membership and assignment (KIP-932; Kafka's ``GroupMetadataManager`` share-group parts
and ``SimpleAssignor``), sans-IO.

A share group's members heartbeat (ShareGroupHeartbeat) with the topics they subscribe to; the broker
assigns partitions. Unlike a consumer group, several members may share a partition -- the share
partition hands each record to one of them -- so an assignment change needs no revocation: a member's
epoch moves to the group's assignment epoch at its next heartbeat, with the new assignment.

The simple assignor, for members that all subscribe to the same topics (Kafka's homogeneous case): with
at least as many members as partitions each member gets one partition and the partitions are shared
round-robin; with fewer, each partition goes to one member, round-robin. It is recomputed from scratch
on every membership or subscription change (Kafka's is sticky; the outcome's shape is the same).

Membership lives in memory only: after a coordinator restart or move, members hear UNKNOWN_MEMBER_ID
and join again (Kafka persists ShareGroup* records in ``__consumer_offsets``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from odradek.broker.coordinator.group.group import GroupOverview
from odradek.broker.coordinator.timers import Timers
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
ASSIGNOR = "simple"

TopicPartitions = dict[Uuid, list[int]]


@dataclass
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: list[str]
    epoch: int = 0
    assignment: TopicPartitions = field(default_factory=dict)


@dataclass
class ShareGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, TopicPartitions] = field(default_factory=dict)

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        return "Stable" if all(m.epoch == self.assignment_epoch for m in self.members.values()) else "Reconciling"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}


@dataclass(frozen=True)
class HeartbeatAnswer:
    error: ErrorCode
    member_epoch: int = 0
    assignment: TopicPartitions | None = None
    message: str | None = None


def simple_assignment(members: list[str], partitions: list[tuple[Uuid, int]]) -> dict[str, TopicPartitions]:
    """Kafka's SimpleAssignor for a homogeneous group (see the module's docstring)."""
    out: dict[str, TopicPartitions] = {m: {} for m in members}
    if not members or not partitions:
        return out
    if len(members) >= len(partitions):
        pairs = [(m, partitions[i % len(partitions)]) for i, m in enumerate(members)]
    else:
        pairs = [(members[i % len(members)], p) for i, p in enumerate(partitions)]
    for member, (topic_id, index) in pairs:
        out[member].setdefault(topic_id, []).append(index)
    return out


class ShareGroups:
    """Every share group this coordinator knows. ``topics`` answers the partitions of a topic name
    (id and count) from the broker's metadata, or None when it does not exist; ``topic_names`` lists the
    cluster's topics."""

    def __init__(self, topics: Callable[[str], tuple[Uuid, int] | None], topic_names: Callable[[], Iterable[str]], *, max_size: int = 200) -> None:
        self.topics = topics
        self.topic_names = topic_names
        self.max_size = max_size
        self.groups: dict[str, ShareGroup] = {}

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None, subscribed: list[str] | None, client_id: str, client_host: str) -> HeartbeatAnswer:
        if not group_id:
            return HeartbeatAnswer(ErrorCode.INVALID_REQUEST, message="GroupId can't be empty.")
        if not member_id:
            return HeartbeatAnswer(ErrorCode.INVALID_REQUEST, message="MemberId can't be empty.")
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member_epoch == LEAVE_EPOCH:
            if group is not None and member is not None:
                self.leave(group, member_id)
            return HeartbeatAnswer(ErrorCode.NONE, LEAVE_EPOCH)
        if member_epoch == JOIN_EPOCH:
            if subscribed is None and member is None:
                return HeartbeatAnswer(ErrorCode.INVALID_REQUEST, message="SubscribedTopicNames must be set in first request.")
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            if member is None:
                if len(group.members) >= self.max_size:
                    return HeartbeatAnswer(ErrorCode.GROUP_MAX_SIZE_REACHED, message=f"The share group has reached its maximum capacity of {self.max_size} members.")
                member = group.members[member_id] = ShareMember(member_id, client_id, client_host, rack_id, sorted(subscribed or []))
                group.epoch += 1
        elif member is None:
            return HeartbeatAnswer(ErrorCode.UNKNOWN_MEMBER_ID, message=f"Member {member_id} is not a member of group {group_id}.")
        elif member_epoch != member.epoch:
            return HeartbeatAnswer(ErrorCode.FENCED_MEMBER_EPOCH, message=f"The share group member has an epoch ({member_epoch}) that does not match the group's ({member.epoch}).")
        assert group is not None
        if subscribed is not None and sorted(subscribed) != member.subscribed:
            member.subscribed = sorted(subscribed)
            group.epoch += 1
        if rack_id is not None:
            member.rack_id = rack_id
        self._maybe_assign(group)
        full = member_epoch == JOIN_EPOCH or member.epoch != group.assignment_epoch
        member.epoch = group.assignment_epoch
        member.assignment = group.target.get(member_id, {})
        return HeartbeatAnswer(ErrorCode.NONE, member.epoch, member.assignment if full else None)

    def leave(self, group: ShareGroup, member_id: str) -> None:
        """The member left or its session expired: the group's assignment is recomputed."""
        if group.members.pop(member_id, None) is not None:
            group.epoch += 1
            self._maybe_assign(group)

    def on_metadata_changed(self) -> None:
        """Topics were created, grew or went: a group whose subscribed partitions changed is reassigned."""
        for group in self.groups.values():
            if self._partitions(group) != self._assigned_partitions(group):
                group.epoch += 1
                self._maybe_assign(group)

    def _partitions(self, group: ShareGroup) -> list[tuple[Uuid, int]]:
        partitions = []
        for name in sorted(group.subscribed_topics()):
            found = self.topics(name)
            if found is not None:
                topic_id, count = found
                partitions += [(topic_id, i) for i in range(count)]
        return partitions

    @staticmethod
    def _assigned_partitions(group: ShareGroup) -> list[tuple[Uuid, int]]:
        return sorted({(t, p) for a in group.target.values() for t, ps in a.items() for p in ps}, key=lambda tp: (str(tp[0]), tp[1]))

    def _maybe_assign(self, group: ShareGroup) -> None:
        if group.assignment_epoch == group.epoch:
            return
        partitions = sorted(self._partitions(group), key=lambda tp: (str(tp[0]), tp[1]))
        group.target = simple_assignment(sorted(group.members), partitions)
        group.assignment_epoch = group.epoch


class ShareGroupCoordinator:
    """ShareGroupHeartbeat and ShareGroupDescribe for the groups whose ``__consumer_offsets`` partition
    this broker leads (the group coordinator's runtime decides, as for every group), with members'
    sessions expiring after ``group.share.session.timeout.ms``. ``member_left`` hears of every member that
    leaves, so that its acquired records go back to the others."""

    def __init__(
        self,
        group_runtime: Any,
        groups: ShareGroups,
        timers: Timers,
        member_left: Callable[[str, str], None],
        group_deleted: Callable[[str], None],
        *,
        session_timeout_ms: int = 45000,
        heartbeat_interval_ms: int = 5000,
    ) -> None:
        self.group_runtime = group_runtime
        self.groups = groups
        self.timers = timers
        self.member_left = member_left
        self.group_deleted = group_deleted
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms

    def coordinator_error(self, group_id: str) -> ErrorCode | None:
        return self.group_runtime.status(self.group_runtime.partition_for(group_id))

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None, subscribed: list[str] | None, client_id: str, client_host: str) -> HeartbeatAnswer:
        error = self.coordinator_error(group_id)
        if error is not None:
            return HeartbeatAnswer(error)
        answer = self.groups.heartbeat(group_id, member_id, member_epoch, rack_id, subscribed, client_id, client_host)
        key = ("share-member", group_id, member_id)
        if answer.error == ErrorCode.NONE and member_epoch != LEAVE_EPOCH:
            self.timers.schedule(key, self.session_timeout_ms, lambda: self._expire(group_id, member_id))
        elif member_epoch == LEAVE_EPOCH and answer.error == ErrorCode.NONE:
            self.timers.cancel(key)
            self.member_left(group_id, member_id)
        return answer

    def _expire(self, group_id: str, member_id: str) -> None:
        group = self.groups.groups.get(group_id)
        if group is not None and member_id in group.members:
            self.groups.leave(group, member_id)
            self.member_left(group_id, member_id)

    def is_share_group(self, group_id: str) -> bool:
        return group_id in self.groups.groups

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: only an empty one; its share partitions' state goes with it."""
        error = self.coordinator_error(group_id)
        if error is not None:
            return error
        group = self.groups.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups.groups[group_id]
        self.group_deleted(group_id)
        return ErrorCode.NONE

    def empty_group(self, group_id: str, create: bool) -> tuple[ErrorCode, str | None]:
        """Alter/DeleteShareGroupOffsets' check, as Kafka's: the group must have no members; a group this
        coordinator does not know is made (``create``: Alter, or a group with persisted state that a restart
        left without membership) or GROUP_ID_NOT_FOUND."""
        error = self.coordinator_error(group_id)
        if error is not None:
            return error, None
        group = self.groups.groups.get(group_id)
        if group is None:
            if not create:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
            self.groups.groups[group_id] = ShareGroup(group_id)
        elif group.members:
            return ErrorCode.NON_EMPTY_GROUP, ErrorCode.NON_EMPTY_GROUP.message
        return ErrorCode.NONE, None

    def overviews(self) -> list[GroupOverview]:
        """ListGroups' view of the share groups this broker coordinates (type and protocol type ``share``)."""
        return [
            GroupOverview(g.group_id, "share", g.state, "share")
            for g in self.groups.groups.values()
            if self.coordinator_error(g.group_id) is None
        ]

    def describe(self, group_id: str) -> tuple[ErrorCode, ShareGroup | None]:
        error = self.coordinator_error(group_id)
        if error is not None:
            return error, None
        group = self.groups.groups.get(group_id)
        return (ErrorCode.GROUP_ID_NOT_FOUND, None) if group is None else (ErrorCode.NONE, group)
