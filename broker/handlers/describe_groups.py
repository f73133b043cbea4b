"""DescribeGroups: state, protocol and members of groups; member metadata and assignments once Stable.

A group this coordinator does not know is reported Dead with no error (v0-v5). Without an authorizer
every operation on a group is allowed, so the requested authorized operations are all of a group's
(READ, DELETE, DESCRIBE).
"""

from __future__ import annotations

from odradek.broker.authorization import GROUP_OPERATIONS, authorized_operations
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.protocol.api import Request

def handle(group_coordinator: CoordinatorRuntime, request: Request) -> dict:
    body = request.body
    coordinator = group_coordinator.coordinator
    groups = []
    for group_id in body.groups:
        error, summary = coordinator.describe_group(group_id)
        groups.append(
            {
                "error_code": error,
                "group_id": group_id,
                "group_state": summary.state,
                "protocol_type": summary.protocol_type,
                "protocol_data": summary.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in summary.members
                ],
                "authorized_operations": authorized_operations(GROUP_OPERATIONS, body.include_authorized_operations),
            }
        )
    return {"groups": groups}
