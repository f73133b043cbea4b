"""ListGroups: the groups this broker coordinates, optionally filtered by state (v4+, KIP-518) and type
(v5+, KIP-848; every group here is a classic group)."""

from __future__ import annotations

from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.broker.group_coordinator import CLASSIC_GROUP_TYPE
from odradek.protocol.api import Request


def handle(group_coordinator: CoordinatorRuntime, request: Request) -> dict:
    body = request.body
    error, groups = group_coordinator.coordinator.list_groups(list(body.states_filter), list(body.types_filter))
    return {
        "error_code": error,
        "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state, "group_type": CLASSIC_GROUP_TYPE} for g in groups],
    }
