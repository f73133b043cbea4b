"""OffsetFetch: a group's committed offsets; v8+ ask for several groups at once (KIP-709).

Partitions without a committed offset answer offset -1 and empty metadata. A null topic list (v2+) asks
for every partition the group committed. A group-level error is the top-level ``error_code`` (v2-v7) or the
group's (v8+), with no partitions; v0-v1 have no such field, so, as in Kafka, every partition asked for
carries it. v9+ name the member and its epoch (KIP-848): a consumer group's member fetches at its current
epoch (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.offset_fetch import (
        OffsetFetchRequest,
        OffsetFetchRequestTopic,
        OffsetFetchRequestTopics,
        OffsetFetchResponseDict,
        OffsetFetchResponseGroupDict,
        OffsetFetchResponsePartitionDict,
        OffsetFetchResponseTopicDict,
        OffsetFetchResponseTopicsDict,
    )


def _fetch(
    group_coordinator: CoordinatorRuntime, authorization: Authorization, request: Request[OffsetFetchRequest], group_id: str,
    topics: list[OffsetFetchRequestTopic] | list[OffsetFetchRequestTopics] | None, require_stable: bool, member_id: str | None = None, member_epoch: int = -1,
) -> tuple[ErrorCode, list[OffsetFetchResponseTopicDict]]:
    """Kafka's authorization: DESCRIBE on the group, and offsets only of topics the client may DESCRIBE
    (others asked for by name answered TOPIC_AUTHORIZATION_FAILED, after the rest; left out of "all")."""
    if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    refused = []
    if topics is not None:
        describable = authorization.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.TOPIC, {t.name for t in topics})
        refused = [t for t in topics if t.name not in describable]
        topics = [t for t in topics if t.name in describable]
    partitions = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    error, offsets = group_coordinator.coordinator.fetch_offsets(group_id, require_stable, partitions, member_id, member_epoch)
    if error != ErrorCode.NONE:
        return error, []
    if topics is None:
        describable = authorization.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.TOPIC, {topic for topic, _ in offsets})
        offsets = {tp: r for tp, r in offsets.items() if tp[0] in describable}
    by_topic: dict[str, list[OffsetFetchResponsePartitionDict]] = {}
    for (topic, index), r in offsets.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": index, "committed_offset": r.offset, "committed_leader_epoch": r.leader_epoch, "metadata": r.metadata, "error_code": r.error}
        )
    denied: list[OffsetFetchResponseTopicDict] = [
        {"name": t.name, "partitions": [{"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "", "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED} for p in t.partition_indexes]}
        for t in refused
    ]
    answered: list[OffsetFetchResponseTopicDict] = [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
    return ErrorCode.NONE, answered + denied


def handle(group_coordinator: CoordinatorRuntime, authorization: Authorization, request: Request[OffsetFetchRequest]) -> OffsetFetchResponseDict:
    body = request.body
    if request.header.api_version < 8:
        error, topics = _fetch(group_coordinator, authorization, request, body.group_id, body.topics, body.require_stable)
        if error != ErrorCode.NONE and request.header.api_version < 2 and body.topics:
            # v0-v1 have no group-level error field: Kafka puts the error on every partition asked for.
            topics = [
                {"name": t.name, "partitions": [{"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": error} for p in t.partition_indexes]}
                for t in body.topics
            ]
        return {"error_code": error, "topics": topics}
    groups: list[OffsetFetchResponseGroupDict] = []
    for group in body.groups:
        member = (group.member_id, group.member_epoch) if request.header.api_version >= 9 else (None, -1)
        error, topics = _fetch(group_coordinator, authorization, request, group.group_id, group.topics, body.require_stable, *member)
        # The same dicts: a group's topics (OffsetFetchResponseTopics) have the fields of v0-v7's up to v9;
        # v10's TopicId (Kafka 4.x) is declared but not served.
        groups.append({"group_id": group.group_id, "error_code": error, "topics": cast("list[OffsetFetchResponseTopicsDict]", topics)})
    return {"groups": groups}
