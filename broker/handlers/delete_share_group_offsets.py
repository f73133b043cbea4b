"""DeleteShareGroupOffsets (KIP-932; ``kafka-share-groups.sh --delete-offsets``): the group's state for whole
topics goes (tombstones in ``__share_group_state``), so its next consumer of such a topic starts where
``share.auto.offset.reset`` says.

As Kafka 4.4: the group must exist (GROUP_ID_NOT_FOUND, "Group <id> not found.") and be empty
(NON_EMPTY_GROUP); a topic that does not exist is answered UNKNOWN_TOPIC_OR_PARTITION on its own; the
answer waits for the tombstones to be written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.group.share_groups import ShareGroupCoordinator
from odradek.broker.handlers.alter_share_group_offsets import NO_TOPIC_ID, group_refusal
from odradek.broker.handlers.share_acknowledgements import when_done
from odradek.broker.share.share_partition_manager import SharePartitionManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.delete_share_group_offsets import DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponseTopicDict


def handle(share_groups: ShareGroupCoordinator, share_partitions: SharePartitionManager, authorization: Authorization, request: Request[DeleteShareGroupOffsetsRequest]) -> Any:
    refusal = group_refusal(share_groups, share_partitions, authorization, request, AclOperation.DELETE, create=False)
    if refusal is not None:
        return refusal
    group = request.body.group_id
    writes: list[tuple[DeleteShareGroupOffsetsResponseTopicDict, list[Deferred[ErrorCode]]]] = []
    topics: list[DeleteShareGroupOffsetsResponseTopicDict] = []
    for topic in request.body.topics:
        found = share_groups.groups.topics(topic.topic_name)
        allowed = authorization.authorize(request, AclOperation.READ, ResourceType.TOPIC, topic.topic_name)
        error = ErrorCode.TOPIC_AUTHORIZATION_FAILED if not allowed else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if found is None else None
        answer: DeleteShareGroupOffsetsResponseTopicDict = {
            "topic_name": topic.topic_name, "topic_id": found[0] if found and allowed else NO_TOPIC_ID,
            "error_code": error or ErrorCode.NONE, "error_message": error.message if error else None,
        }
        topics.append(answer)
        if error is None and found is not None:
            writes.append((answer, share_partitions.delete_state(group, found[0], found[1])))

    def respond() -> dict:
        for answer, deleted in writes:
            failed = next((d.value for d in deleted if d.value != ErrorCode.NONE), None)
            if failed is not None:
                answer.update({"error_code": failed, "error_message": failed.message})
        return {"error_code": ErrorCode.NONE, "error_message": None, "responses": topics}

    return when_done([d for _, ds in writes for d in ds], respond)
