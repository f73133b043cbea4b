"""DescribeGroups: state, protocol and members of groups; member metadata and assignments once Stable.

A group this coordinator does not know is reported Dead with no error (v0-v5). Without an authorizer
every operation on a group is allowed, so the requested authorized operations are all of a group's
(READ, DELETE, DESCRIBE).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.describe_groups import DescribedGroupDict, DescribeGroupsRequest, DescribeGroupsResponseDict

def handle(group_coordinator: CoordinatorRuntime, authorization: Authorization, request: Request[DescribeGroupsRequest]) -> DescribeGroupsResponseDict:
    """Groups the client may not DESCRIBE are answered GROUP_AUTHORIZATION_FAILED, before the others (as Kafka)."""
    body = request.body
    coordinator = group_coordinator.coordinator
    refused: list[DescribedGroupDict] = []
    groups: list[DescribedGroupDict] = []
    for group_id in body.groups:
        if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            refused.append({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": group_id, "group_state": "", "protocol_type": "", "protocol_data": "", "members": []})
            continue
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
                "authorized_operations": authorization.authorized_operations(request, ResourceType.GROUP, group_id, body.include_authorized_operations),
            }
        )
    return {"groups": refused + groups}
