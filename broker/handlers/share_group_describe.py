"""ShareGroupDescribe (KIP-932): share groups' members, epochs and assignments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.group.share_groups import ASSIGNOR, ShareGroupCoordinator, TopicPartitions
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.share_group_describe import AssignmentDict, DescribedGroupDict, ShareGroupDescribeRequest, ShareGroupDescribeResponseDict


def _assignment(assignment: TopicPartitions, names: Any) -> AssignmentDict:
    return {"topic_partitions": [{"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)} for t, ps in assignment.items()]}


def handle(share_groups: ShareGroupCoordinator, replica_manager: Any, authorization: Authorization, request: Request[ShareGroupDescribeRequest]) -> ShareGroupDescribeResponseDict:
    names = replica_manager.by_topic_id
    groups: list[DescribedGroupDict] = []
    for group_id in request.body.group_ids:
        entry: DescribedGroupDict = {"group_id": group_id, "group_state": "", "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": []}
        groups.append(entry)
        if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            entry["error_code"] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        error, group = share_groups.describe(group_id)
        if group is None:
            entry["error_code"] = error
            entry["error_message"] = f"Group {group_id} not found." if error == ErrorCode.GROUP_ID_NOT_FOUND else None
            continue
        entry["error_code"] = ErrorCode.NONE
        entry["group_state"] = group.state
        entry["group_epoch"] = group.epoch
        entry["assignment_epoch"] = group.assignment_epoch
        entry["assignor_name"] = ASSIGNOR
        entry["members"] = [
            {
                "member_id": m.member_id,
                "rack_id": m.rack_id,
                "member_epoch": m.epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": m.subscribed,
                "assignment": _assignment(m.assignment, names),
            }
            for m in group.members.values()
        ]
    return {"groups": groups}
