"""Heartbeat: keeps a member's session; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.protocol.api import Request


def handle(group_coordinator: CoordinatorRuntime, request: Request) -> dict:
    body = request.body
    error = group_coordinator.coordinator.heartbeat(body.group_id, body.member_id, body.group_instance_id, body.generation_id)
    return {"error_code": error}
