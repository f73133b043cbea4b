"""DeleteGroups: remove Empty groups with their offsets (tombstones in ``__consumer_offsets``).

Groups with members answer NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND. An empty share group goes with its
share partitions' state (tombstones in ``__share_group_state``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.coordinator.group.share_groups import ShareGroupCoordinator
    from odradek.protocol.message_types.delete_groups import DeletableGroupResultDict, DeleteGroupsRequest, DeleteGroupsResponseDict


def handle(group_coordinator: CoordinatorRuntime, share_groups: ShareGroupCoordinator | None, authorization: Authorization, request: Request[DeleteGroupsRequest]) -> DeleteGroupsResponseDict:
    """Groups the client may not DELETE are answered GROUP_AUTHORIZATION_FAILED and kept. ``share_groups``:
    the share groups' coordinator once some share group used this broker (an empty share group is deleted
    with its share partitions' state)."""
    names = list(dict.fromkeys(request.body.groups_names))
    deletable = authorization.filter_authorized(request, AclOperation.DELETE, ResourceType.GROUP, names)
    shares = [g for g in names if g in deletable and share_groups is not None and share_groups.is_share_group(g)]
    errors = group_coordinator.coordinator.delete_groups([g for g in names if g in deletable and g not in shares])
    if share_groups is not None:
        errors.update((g, share_groups.delete(g)) for g in shares)
    refused: list[DeletableGroupResultDict] = [{"group_id": g, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED} for g in names if g not in deletable]
    deleted: list[DeletableGroupResultDict] = [{"group_id": group_id, "error_code": error} for group_id, error in errors.items()]
    return {"results": deleted + refused}
