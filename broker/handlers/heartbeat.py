"""Heartbeat: keeps a member's session; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.heartbeat import HeartbeatRequest, HeartbeatResponseDict


def handle(group_coordinator: CoordinatorRuntime, authorization: Authorization, request: Request[HeartbeatRequest]) -> HeartbeatResponseDict:
    body = request.body
    if not authorization.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    error = group_coordinator.coordinator.heartbeat(body.group_id, body.member_id, body.group_instance_id, body.generation_id)
    return {"error_code": error}
