"""OffsetDelete: remove a group's committed offsets for some partitions (KIP-496).

An Empty group loses any of them; a consumer group with members only those of topics no member subscribes
to (the others answer GROUP_SUBSCRIBED_TO_TOPIC); other groups with members refuse with NON_EMPTY_GROUP.
"""

from __future__ import annotations

from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.broker.group_requests import partition_exists
from odradek.controller.metadata import MetadataImage
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode


def handle(group_coordinator: CoordinatorRuntime, metadata: MetadataImage, request: Request) -> dict:
    body = request.body
    errors: dict[tuple[str, int], ErrorCode] = {}
    known = []
    for topic in body.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if partition_exists(metadata, *tp):
                known.append(tp)
            else:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    error, results = group_coordinator.coordinator.delete_offsets(body.group_id, known)
    if error != ErrorCode.NONE:
        return {"error_code": error, "topics": []}
    errors.update(results)
    by_topic: dict[str, list[dict]] = {}
    for (topic, index), e in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": e})
    return {"error_code": ErrorCode.NONE, "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()]}
