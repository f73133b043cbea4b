"""ShareAcknowledge (KIP-932): acknowledgements without a fetch, in the member's share session (epoch -1
closes it, releasing what the member still holds)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.handlers.share_acknowledgements import acknowledge, topic_responses, when_done
from odradek.broker.share.share_partition_manager import FINAL_EPOCH, PartitionAnswer, SharePartitionManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.share_acknowledge import ShareAcknowledgeRequest


def handle(share_partitions: SharePartitionManager, authorization: Authorization, request: Request[ShareAcknowledgeRequest]) -> Any:
    body = request.body
    manager = share_partitions
    group, member = body.group_id, body.member_id
    if not group or not member:
        return {"error_code": ErrorCode.INVALID_REQUEST, "responses": []}
    if not authorization.authorize(request, AclOperation.READ, ResourceType.GROUP, group):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "responses": []}
    if body.share_session_epoch == 0:
        return {"error_code": ErrorCode.INVALID_SHARE_SESSION_EPOCH, "responses": []}
    error, session = manager.open_session(group, member, body.share_session_epoch, [], [])
    if session is None:
        return {"error_code": error, "responses": []}
    session.connection_id = request.context.connection_id if request.context is not None else None
    outcomes = acknowledge(manager, authorization, request, group, member)
    if body.share_session_epoch == FINAL_EPOCH:
        manager.close_session(session)

    def respond() -> dict:
        answers = [PartitionAnswer(tid, index, d.value) for (tid, index), d in outcomes.items()]
        return {"error_code": ErrorCode.NONE, "acquisition_lock_timeout_ms": manager.group_config(group).lock_duration_ms, "responses": topic_responses(answers, with_records=False)}

    return when_done(list(outcomes.values()), respond)
