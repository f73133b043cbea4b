"""DescribeAcls: the ACL bindings a filter selects, grouped by resource pattern (Kafka's
``AclApis.handleDescribeAcls``). Needs DESCRIBE on the cluster; a filter with an UNKNOWN element fails
Kafka's request parsing, which closes the connection."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.authorizer.acl_bindings import ResourcePattern, binding_filter, unparsable_filter
from odradek.broker.handlers import CLOSE_CONNECTION, CloseConnection
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.authorization import Authorization
    from odradek.protocol.message_types.describe_acls import AclDescriptionDict, DescribeAclsRequest, DescribeAclsResourceDict, DescribeAclsResponseDict


def handle(authorization: "Authorization", request: Request[DescribeAclsRequest]) -> DescribeAclsResponseDict | CloseConnection:
    if unparsable_filter(request.body):
        return CLOSE_CONNECTION
    acl_filter = binding_filter(request.body)
    if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "resources": []}
    if authorization.authorizer is None:
        return {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": "No Authorizer is configured on the broker", "resources": []}
    resources: dict[ResourcePattern, DescribeAclsResourceDict] = {}
    for binding in authorization.authorizer.acls(acl_filter):
        pattern, entry = binding.pattern, binding.entry
        resource = resources.setdefault(pattern, {"resource_type": pattern.resource_type, "resource_name": pattern.name, "pattern_type": pattern.pattern_type, "acls": []})
        described: AclDescriptionDict = {"principal": entry.principal, "host": entry.host, "operation": entry.operation, "permission_type": entry.permission_type}
        resource["acls"].append(described)
    return {"error_code": ErrorCode.NONE, "error_message": "", "resources": list(resources.values())}
