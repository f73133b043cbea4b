"""DeleteAcls: remove the ACL bindings each filter selects and report them (Kafka's
``AclApis.handleDeleteAcls``). Needs ALTER on the cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.authorizer.acl_bindings import AclBinding, AclBindingFilter, binding_filter, binding_to_fields, unparsable_filter
from odradek.broker.handlers import CLOSE_CONNECTION, CloseConnection
from odradek.broker.handlers.create_acls import NO_AUTHORIZER
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.authorization import Authorization
    from odradek.controller.metadata_support import MetadataSupport
    from odradek.protocol.message_types.delete_acls import DeleteAclsRequest, DeleteAclsResponseDict


def handle(authorization: "Authorization", metadata_support: "MetadataSupport", request: Request[DeleteAclsRequest]) -> DeleteAclsResponseDict | Awaitable[DeleteAclsResponseDict] | CloseConnection:
    if any(unparsable_filter(f) for f in request.body.filters):
        return CLOSE_CONNECTION
    filters = [binding_filter(f) for f in request.body.filters]
    if not authorization.authorize(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return every(filters, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    if authorization.authorizer is None:
        return every(filters, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    return answer(metadata_support.admin_call(authorization.authorizer.delete_acls, filters))


async def answer(deleting: Awaitable[list[list[AclBinding]]]) -> DeleteAclsResponseDict:
    """What each filter deleted (in a cluster, the ZooKeeper writes made on a worker thread)."""
    deleted = await deleting
    return {
        "filter_results": [
            {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "matching_acls": [binding_to_fields(b.pattern, b.entry) | {"error_code": ErrorCode.NONE, "error_message": None} for b in bindings],
            }
            for bindings in deleted
        ]
    }


def every(filters: list[AclBindingFilter], code: ErrorCode, message: str | None) -> DeleteAclsResponseDict:
    return {"filter_results": [{"error_code": code, "error_message": message, "matching_acls": []} for _ in filters]}
