"""ListGroups: the groups this broker coordinates, optionally filtered by state (v4+, KIP-518) and type
(v5+, KIP-848: ``classic`` or ``consumer``; KIP-932: ``share``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.protocol.api import Request

if TYPE_CHECKING:
    from odradek.broker.coordinator.group.share_groups import ShareGroupCoordinator
    from odradek.protocol.message_types.list_groups import ListGroupsRequest, ListGroupsResponseDict


def handle(group_coordinator: CoordinatorRuntime, share_groups: ShareGroupCoordinator | None, authorization: Authorization, request: Request[ListGroupsRequest]) -> ListGroupsResponseDict:
    """All groups with DESCRIBE on the cluster; otherwise only those the client may DESCRIBE (as Kafka).
    ``share_groups``: the share groups' coordinator once some share group used this broker."""
    body = request.body
    error, groups = group_coordinator.coordinator.list_groups(list(body.states_filter), list(body.types_filter))
    if share_groups is not None:
        states, types = {s.lower() for s in body.states_filter}, {t.lower() for t in body.types_filter}
        groups += [g for g in share_groups.overviews() if (not states or g.state.lower() in states) and (not types or "share" in types)]
    if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False):
        visible = authorization.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.GROUP, {g.group_id for g in groups}, log_denied=False)
        groups = [g for g in groups if g.group_id in visible]
    return {
        "error_code": error,
        "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state, "group_type": g.group_type} for g in groups],
    }
