"""DeleteGroups: remove Empty groups with their offsets (tombstones in ``__consumer_offsets``).

Groups with members answer NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.coordinator_runtime import group_coordinator
from odradek.protocol.api import Request

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer


def handle(server: "KafkaServer", request: Request) -> dict:
    errors = group_coordinator(server).coordinator.delete_groups(request.body.groups_names)
    return {"results": [{"group_id": group_id, "error_code": error} for group_id, error in errors.items()]}
