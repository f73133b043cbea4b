"""LeaveGroup: one member (v0-v2) or a batch (v3+, KIP-345), by member id or by group instance id.

v0-v2 have no per-member results: the top-level error is the first member error when there is no
group-level one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.broker.coordinator.group.group_coordinator import LeavingMember
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.leave_group import LeaveGroupRequest, LeaveGroupResponseDict


def handle(group_coordinator: CoordinatorRuntime, authorization: Authorization, request: Request[LeaveGroupRequest]) -> LeaveGroupResponseDict:
    body = request.body
    version = request.header.api_version
    if not authorization.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "members": []}
    if version < 3:
        leaving = [LeavingMember(body.member_id)]
    else:
        leaving = [LeavingMember(m.member_id, m.group_instance_id, m.reason) for m in body.members]
    error, results = group_coordinator.coordinator.leave_group(body.group_id, leaving)
    if version < 3:
        first = next((e for _, e in results if e != ErrorCode.NONE), ErrorCode.NONE)
        return {"error_code": error if error != ErrorCode.NONE else first}
    return {
        "error_code": error,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": e} for m, e in results],
    }
