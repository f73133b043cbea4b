"""Heartbeat: keeps a member's session; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.coordinator_runtime import group_coordinator
from odradek.protocol.api import Request

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer


def handle(server: "KafkaServer", request: Request) -> dict:
    body = request.body
    error = group_coordinator(server).coordinator.heartbeat(body.group_id, body.member_id, body.group_instance_id, body.generation_id)
    return {"error_code": error}
