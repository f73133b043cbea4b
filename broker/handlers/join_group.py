"""JoinGroup: enter a group's next generation; the answer waits until the rebalance completes.

v4+ dynamic members first get MEMBER_ID_REQUIRED with their member id (KIP-394); static members
(``group.instance.id``, v5+) do not. v0 has no rebalance timeout: the session timeout is used. v7+ may
answer a null protocol name; earlier versions get an empty string.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.broker.coordinator.group.group import JoinResult
from odradek.broker.coordinator.group.group_coordinator import JoinRequest
from odradek.broker.coordinator.group.group_requests import client_host
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.join_group import JoinGroupRequest, JoinGroupResponseDict


def handle(group_coordinator: CoordinatorRuntime, authorization: Authorization, request: Request[JoinGroupRequest]) -> JoinGroupResponseDict | Awaitable[JoinGroupResponseDict]:
    body = request.body
    version = request.header.api_version
    runtime = group_coordinator

    def response(result: JoinResult) -> JoinGroupResponseDict:
        return {
            "error_code": result.error,
            "generation_id": result.generation_id,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name if version >= 7 else (result.protocol_name or ""),
            "leader": result.leader_id,
            "skip_assignment": result.skip_assignment,
            "member_id": result.member_id,
            "members": [{"member_id": m, "group_instance_id": i, "metadata": md} for m, i, md in result.members],
        }

    if not authorization.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return response(JoinResult("", ErrorCode.GROUP_AUTHORIZATION_FAILED))
    join = JoinRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        group_instance_id=body.group_instance_id,
        client_id=request.header.client_id or "",
        client_host=client_host(request),
        rebalance_timeout_ms=body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms,
        session_timeout_ms=body.session_timeout_ms,
        protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
        require_known_member_id=version >= 4 and body.group_instance_id is None,
        support_skipping_assignment=version >= 9,
        reason=body.reason,
    )

    return runtime.respond(runtime.coordinator.join_group(join), response)
