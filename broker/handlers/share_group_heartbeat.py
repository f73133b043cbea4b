"""ShareGroupHeartbeat (KIP-932): a share group member joins (epoch 0), stays (its epoch), or leaves
(epoch -1); the answer carries its epoch and, when it changed, its assignment. As Kafka 4.4: READ on the
group, and DESCRIBE on every topic it subscribes to (TOPIC_AUTHORIZATION_FAILED otherwise)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.group.group_requests import client_host
from odradek.broker.coordinator.group.share_groups import ShareGroupCoordinator
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponseDict


def handle(share_groups: ShareGroupCoordinator, authorization: Authorization, request: Request[ShareGroupHeartbeatRequest]) -> ShareGroupHeartbeatResponseDict:
    body = request.body
    if not authorization.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "member_epoch": 0, "heartbeat_interval_ms": 0}
    subscribed = list(body.subscribed_topic_names) if body.subscribed_topic_names is not None else None
    if subscribed and any(not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, t) for t in subscribed):
        return {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "member_epoch": 0, "heartbeat_interval_ms": 0}
    answer = share_groups.heartbeat(body.group_id, body.member_id, body.member_epoch, body.rack_id, subscribed, request.header.client_id or "", client_host(request))
    response: ShareGroupHeartbeatResponseDict = {
        "error_code": answer.error,
        "error_message": answer.message,
        "member_id": body.member_id if answer.error == ErrorCode.NONE else None,
        "member_epoch": answer.member_epoch,
        "heartbeat_interval_ms": share_groups.heartbeat_interval_ms if answer.error == ErrorCode.NONE else 0,
    }
    if answer.assignment is not None:
        response["assignment"] = {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)} for t, ps in answer.assignment.items()]}
    return response
