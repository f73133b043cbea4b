"""The server-side assignors of the consumer group protocol: Kafka's ``uniform`` and ``range``.

``group.consumer.assignors`` names those a broker offers (the first is the default); a member may ask
for one with ServerAssignor, and the group uses the one most of its members ask for. An assignor sees
each member's subscription and current target assignment and returns the new target assignment.

- ``uniform`` (Kafka's ``UniformAssignor``): balanced and sticky. When every member subscribes to the same
  topics (a homogeneous group) this is Kafka's algorithm step for step: each member keeps its current
  partitions up to its quota (``partitions // members``, one more for the first ``partitions % members``
  members), and the partitions left over go to the members under quota, in order. Heterogeneous
  subscriptions use the same keep-then-fill rule per member over the topics it subscribes to, filling
  the least loaded eligible member first -- balanced and sticky, but not Kafka's
  ``UniformHeterogeneousAssignmentBuilder`` move for move (docs/protocol.md).
- ``range`` (Kafka's ``RangeAssignor``): per topic, contiguous ranges to members sorted by instance id
  (static members first) then member id; co-partitioned topics get the same ranges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from odradek.broker.coordinator.group.consumer_group import Assignment, without_empty
from odradek.protocol.kafka_uuid import Uuid


class PartitionAssignorError(Exception):
    """The assignment cannot be computed (Kafka's PartitionAssignorException)."""


@dataclass(frozen=True)
class MemberSpec:
    member_id: str
    instance_id: str | None
    subscribed_topic_ids: frozenset[Uuid]
    assignment: Assignment


@dataclass(frozen=True)
class GroupSpec:
    members: dict[str, MemberSpec]
    """In the group's order."""
    homogeneous: bool
    is_partition_assigned: Callable[[Uuid, int], bool]
    """Whether a partition is in the current target assignment (of any member)."""


Assignor = Callable[[GroupSpec, Mapping[Uuid, int]], dict[str, Assignment]]
"""(group spec, partition count by subscribed topic id) -> the target assignment by member id."""


def uniform(spec: GroupSpec, partitions: Mapping[Uuid, int]) -> dict[str, Assignment]:
    if not spec.members:
        return {}
    if spec.homogeneous:
        return _uniform_homogeneous(spec, partitions)
    return _uniform_heterogeneous(spec, partitions)


def _num_partitions(partitions: Mapping[Uuid, int], topic_id: Uuid) -> int:
    n = partitions.get(topic_id, -1)
    if n == -1:
        raise PartitionAssignorError(f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
    return n


def _uniform_homogeneous(spec: GroupSpec, partitions: Mapping[Uuid, int]) -> dict[str, Assignment]:
    """Kafka's ``UniformHomogeneousAssignmentBuilder``."""
    subscribed = next(iter(spec.members.values())).subscribed_topic_ids
    if not subscribed:
        return {member_id: {} for member_id in spec.members}
    unassigned: list[tuple[Uuid, int]] = []
    total = 0
    for topic_id in subscribed:
        count = _num_partitions(partitions, topic_id)
        unassigned.extend((topic_id, p) for p in range(count) if not spec.is_partition_assigned(topic_id, p))
        total += count
    min_quota, extra = divmod(total, len(spec.members))
    target: dict[str, dict[Uuid, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    for member_id, member in spec.members.items():
        quota = min_quota
        if extra > 0:
            quota += 1
            extra -= 1
        kept: dict[Uuid, set[int]] = {}
        for topic_id, owned in member.assignment.items():
            if topic_id not in subscribed:
                continue
            if len(owned) <= quota:
                kept[topic_id] = set(owned)
                quota -= len(owned)
            else:
                ordered = sorted(owned)
                kept[topic_id] = set(ordered[:quota])
                unassigned.extend((topic_id, p) for p in ordered[quota:])
                quota = 0
        if quota > 0:
            unfilled.append((member_id, quota))
        target[member_id] = kept
    index = 0
    for member_id, quota in unfilled:
        for _ in range(quota):
            if index >= len(unassigned):
                break
            topic_id, p = unassigned[index]
            index += 1
            target[member_id].setdefault(topic_id, set()).add(p)
    if index < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    return {member_id: without_empty(a) for member_id, a in target.items()}


def _uniform_heterogeneous(spec: GroupSpec, partitions: Mapping[Uuid, int]) -> dict[str, Assignment]:
    """Keep each member's partitions of the topics it still subscribes to, up to a per-topic fair share,
    then give every other partition to its least loaded subscriber."""
    subscribers: dict[Uuid, list[str]] = {}
    for member_id, member in spec.members.items():
        for topic_id in member.subscribed_topic_ids:
            subscribers.setdefault(topic_id, []).append(member_id)
    target: dict[str, dict[Uuid, set[int]]] = {member_id: {} for member_id in spec.members}
    load = dict.fromkeys(spec.members, 0)
    for topic_id in sorted(subscribers):
        count = _num_partitions(partitions, topic_id)
        members = subscribers[topic_id]
        share = -(-count // len(members))
        taken: set[int] = set()
        for member_id in members:
            owned = sorted(p for p in spec.members[member_id].assignment.get(topic_id, frozenset()) if p < count)[:share]
            if owned:
                target[member_id][topic_id] = set(owned)
                load[member_id] += len(owned)
                taken.update(owned)
        for p in range(count):
            if p in taken:
                continue
            member_id = min(members, key=lambda m: (load[m], len(target[m].get(topic_id, ()))))
            target[member_id].setdefault(topic_id, set()).add(p)
            load[member_id] += 1
    return {member_id: without_empty(a) for member_id, a in target.items()}


def range_(spec: GroupSpec, partitions: Mapping[Uuid, int]) -> dict[str, Assignment]:
    """Kafka's ``RangeAssignor``: homogeneous and heterogeneous alike, topic by topic."""
    if not spec.members:
        return {}

    def order(member: MemberSpec) -> tuple[int, str]:
        return (0, member.instance_id) if member.instance_id is not None else (1, member.member_id)

    members = sorted(spec.members.values(), key=order)
    subscribers: dict[Uuid, int] = {}
    for member in members:
        for topic_id in member.subscribed_topic_ids:
            subscribers[topic_id] = subscribers.get(topic_id, 0) + 1
    ranges: dict[Uuid, list[int]] = {}
    """topic -> [next start, partitions, min quota, extra partitions left]"""
    target: dict[str, Assignment] = {}
    for member in members:
        assignment: dict[Uuid, frozenset[int]] = {}
        for topic_id in member.subscribed_topic_ids:
            state = ranges.get(topic_id)
            if state is None:
                count = _num_partitions(partitions, topic_id)
                state = ranges[topic_id] = [0, count, *divmod(count, subscribers[topic_id])]
            start, count, quota, extra = state
            if extra > 0:
                quota += 1
                state[3] -= 1
            end = min(start + quota, count)
            state[0] = end
            if start < end:
                assignment[topic_id] = frozenset(range(start, end))
        target[member.member_id] = assignment
    return target


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
"""Kafka's built-in server assignors by name (``group.consumer.assignors`` accepts these names)."""
