"""ConsumerGroupHeartbeat: a member of a consumer group (KIP-848) joins, heartbeats, reconciles and leaves.

READ on the group, and DESCRIBE on every topic named in the subscription (Kafka answers
TOPIC_AUTHORIZATION_FAILED otherwise). The coordinator's answer waits until its records are committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.group.consumer_group_manager import HeartbeatRequest, HeartbeatResult
from odradek.broker.coordinator.group.group_requests import client_host
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid

if TYPE_CHECKING:
    from odradek.protocol.message_types.consumer_group_heartbeat import AssignmentDict, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponseDict


def response(result: HeartbeatResult) -> ConsumerGroupHeartbeatResponseDict:
    assignment: AssignmentDict | None = None
    if result.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": topic_id, "partitions": sorted(ps)} for topic_id, ps in result.assignment.items()]}
    return {
        "error_code": result.error,
        "error_message": result.error_message,
        "member_id": result.member_id,
        "member_epoch": result.member_epoch,
        "heartbeat_interval_ms": result.heartbeat_interval_ms,
        "assignment": assignment,
    }


def handle(group_coordinator: CoordinatorRuntime, authorization: Authorization, request: Request[ConsumerGroupHeartbeatRequest]) -> Any:
    body = request.body
    version = request.header.api_version
    if not authorization.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return response(HeartbeatResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    topics = body.subscribed_topic_names
    if topics:
        allowed = authorization.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.TOPIC, set(topics))
        if set(topics) - allowed:
            return response(HeartbeatResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    owned: dict[Uuid, frozenset[int]] | None = None
    if body.topic_partitions is not None:
        owned = {}
        for tp in body.topic_partitions:
            owned[tp.topic_id] = owned.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    req = HeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        subscribed_topic_names=list(topics) if topics is not None else None,
        subscribed_topic_regex=body.subscribed_topic_regex if version >= 1 else None,
        server_assignor=body.server_assignor,
        owned=owned,
        client_id=request.header.client_id or "",
        client_host=client_host(request),
        api_version=version,
    )
    return group_coordinator.respond(group_coordinator.coordinator.consumer_group_heartbeat(req), response)
