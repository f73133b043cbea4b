"""DeleteGroups: remove Empty groups with their offsets (tombstones in ``__consumer_offsets``).

Groups with members answer NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.protocol.api import Request


def handle(group_coordinator: CoordinatorRuntime, request: Request) -> dict:
    errors = group_coordinator.coordinator.delete_groups(request.body.groups_names)
    return {"results": [{"group_id": group_id, "error_code": error} for group_id, error in errors.items()]}
