"""ConsumerGroupDescribe: a consumer group (KIP-848) with its epochs, assignor and members, each with its
current and target assignment (what ``kafka-consumer-groups.sh --describe`` shows for such a group).

Groups the client may not DESCRIBE answer GROUP_AUTHORIZATION_FAILED; a classic group or an unknown id
answers GROUP_ID_NOT_FOUND (the admin client then asks DescribeGroups). A member assigned a topic the
client may not DESCRIBE turns the group's answer into TOPIC_AUTHORIZATION_FAILED, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.group.consumer_group_manager import DescribedGroup
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.consumer_group_describe import AssignmentDict, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponseDict, DescribedGroupDict

CLASSIC_MEMBER_TYPE = 0
CONSUMER_MEMBER_TYPE = 1
"""ConsumerGroupDescribe v1's MemberType (KIP-1099): 0 a classic member (online migration), 1 a
consumer-protocol member (-1 unknown)."""


def _assignment(partitions: list) -> AssignmentDict:
    return {"topic_partitions": [{"topic_id": topic_id, "topic_name": name, "partitions": ps} for topic_id, name, ps in partitions]}


def _group(d: DescribedGroup, authorized_operations: int) -> DescribedGroupDict:
    return {
        "error_code": d.error,
        "error_message": d.error_message,
        "group_id": d.group_id,
        "group_state": d.state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "assignor_name": d.assignor_name,
        "members": [
            {
                "member_id": m.member.member_id,
                "instance_id": m.member.instance_id,
                "rack_id": m.member.rack_id,
                "member_epoch": m.member.member_epoch,
                "client_id": m.member.client_id,
                "client_host": m.member.client_host,
                "subscribed_topic_names": sorted(m.member.subscribed_topic_names),
                "subscribed_topic_regex": m.member.subscribed_topic_regex,
                "assignment": _assignment(m.assignment),
                "target_assignment": _assignment(m.target_assignment),
                "member_type": CLASSIC_MEMBER_TYPE if m.member.uses_classic_protocol else CONSUMER_MEMBER_TYPE,
            }
            for m in d.members
        ],
        "authorized_operations": authorized_operations,
    }


def handle(group_coordinator: CoordinatorRuntime, authorization: Authorization, request: Request[ConsumerGroupDescribeRequest]) -> ConsumerGroupDescribeResponseDict:
    body = request.body
    refused = []
    allowed = []
    for group_id in body.group_ids:
        if authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            allowed.append(group_id)
        else:
            refused.append(_group(DescribedGroup(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED), -(2**31)))
    groups = []
    for d in group_coordinator.coordinator.consumer_group_describe(allowed):
        topics = {name for m in d.members for _, name, _ in m.assignment + m.target_assignment}
        if topics and authorization.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.TOPIC, topics) != topics:
            d = DescribedGroup(d.group_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "The group has described topic(s) that the client is not authorized to describe.")
        operations = authorization.authorized_operations(request, ResourceType.GROUP, d.group_id, body.include_authorized_operations) if d.error == ErrorCode.NONE else -(2**31)
        groups.append(_group(d, operations))
    return {"groups": refused + groups}
