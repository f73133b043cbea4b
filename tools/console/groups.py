"""Consumer groups as kafka-consumer-groups.sh shows them (tools/admin_groups.py asks the same questions):
state, protocol, members and their assignments, committed offsets and lag per partition and in total."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.broker.network.kafka_client import KafkaClient
from odradek.storage.topic_partition import TopicPartition
from odradek.tools.admin_common import LATEST, list_offsets
from odradek.tools.admin_groups import committed_offsets, decode_assignment, describe_group, listed_groups


@dataclass
class MemberView:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]


@dataclass
class OffsetView:
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    member: str | None

    @property
    def lag(self) -> int | None:
        return None if self.committed is None or self.log_end is None else max(self.log_end - self.committed, 0)


@dataclass
class GroupView:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberView]
    offsets: list[OffsetView]

    @property
    def total_lag(self) -> int:
        return sum(o.lag or 0 for o in self.offsets)


async def list_group_states(client: KafkaClient) -> list[tuple[str, str, str]]:
    """(group id, protocol type, state) of every group, sorted by id."""
    return sorted((g.group_id, g.protocol_type, getattr(g, "group_state", "") or "") for g in await listed_groups(client))


async def read_group(client: KafkaClient, group_id: str) -> GroupView:
    described = await describe_group(client, group_id)
    members = [
        MemberView(m.member_id, m.group_instance_id, m.client_id, m.client_host, sorted(decode_assignment(m.member_assignment) if described.protocol_type == "consumer" else []))
        for m in described.members
    ]
    owner = {tp: m.client_id or m.member_id for m in members for tp in m.assignment}
    committed = await committed_offsets(client, group_id)
    partitions = sorted(set(committed) | set(owner))
    ends = await list_offsets(client, partitions, LATEST)
    offsets = [OffsetView(t, p, committed.get((t, p)), ends.get((t, p)), owner.get((t, p))) for t, p in partitions]
    return GroupView(group_id, described.group_state, described.protocol_type, described.protocol_data, members, offsets)
