"""SyncGroup: the leader hands in the assignment; every member's answer carries its own part.

Followers wait for the leader. Every answer has the assignment field, empty for a member the leader gave
nothing. v5+ requests must name the protocol type and name, which must match the group's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.broker.coordinator.group.group import SyncResult
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.sync_group import SyncGroupRequest, SyncGroupResponseDict


def _response(result: SyncResult) -> SyncGroupResponseDict:
    return {"error_code": result.error, "protocol_type": result.protocol_type, "protocol_name": result.protocol_name, "assignment": result.assignment}


def handle(group_coordinator: CoordinatorRuntime, authorization: Authorization, request: Request[SyncGroupRequest]) -> SyncGroupResponseDict | Awaitable[SyncGroupResponseDict]:
    body = request.body
    if request.header.api_version >= 5 and (body.protocol_type is None or body.protocol_name is None):
        return _response(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    if not authorization.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _response(SyncResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    runtime = group_coordinator
    assignments = {a.member_id: bytes(a.assignment) for a in body.assignments}
    deferred = runtime.coordinator.sync_group(body.group_id, body.generation_id, body.member_id, body.protocol_type, body.protocol_name, body.group_instance_id, assignments)
    return runtime.respond(deferred, _response)
