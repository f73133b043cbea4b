"""CreateAcls: add ACL bindings through the authorizer (Kafka's ``AclApis.handleCreateAcls``).

Needs ALTER on the cluster. A creation with UNKNOWN's code 0 fails the request's parsing in Kafka, which
closes the connection; a code Kafka does not define is UNKNOWN after parsing, refused per creation by the
authorizer; ANY/MATCH where a concrete value is needed fails every creation with UNKNOWN_SERVER_ERROR, as
Kafka's handler throws building the binding. Kafka answers success with an empty error message, not null.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from odradek.broker.authorizer.acl_bindings import AccessControlEntry, AclBinding, ResourcePattern
from odradek.broker.handlers import CLOSE_CONNECTION, CloseConnection
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.broker.authorization import Authorization
    from odradek.controller.metadata_support import MetadataSupport
    from odradek.protocol.message_types.create_acls import AclCreation, AclCreationResultDict, CreateAclsRequest, CreateAclsResponseDict

NO_AUTHORIZER = "No Authorizer is configured."


def handle(authorization: "Authorization", metadata_support: "MetadataSupport", request: Request[CreateAclsRequest]) -> CreateAclsResponseDict | Awaitable[CreateAclsResponseDict] | CloseConnection:
    creations = request.body.creations
    if any(0 in (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type) for c in creations):
        return CLOSE_CONNECTION
    if not authorization.authorize(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return every(creations, KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    if authorization.authorizer is None:
        return every(creations, KafkaError(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER))
    codes = [
        (ResourceType.from_code(c.resource_type), PatternType.from_code(c.resource_pattern_type), AclOperation.from_code(c.operation), AclPermissionType.from_code(c.permission_type))
        for c in creations
    ]
    if any(rt == ResourceType.ANY or pt in (PatternType.ANY, PatternType.MATCH) or op == AclOperation.ANY or perm == AclPermissionType.ANY for rt, pt, op, perm in codes):
        return every(creations, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR))
    results: list[KafkaError | None] = [None] * len(creations)
    valid: list[tuple[int, AclBinding]] = []
    for i, (c, (rt, pt, op, perm)) in enumerate(zip(creations, codes)):
        if rt == ResourceType.CLUSTER and c.resource_name != CLUSTER_NAME:
            results[i] = KafkaError(ErrorCode.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        elif not c.resource_name:
            results[i] = KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty resource name")
        else:
            valid.append((i, AclBinding(ResourcePattern(rt, c.resource_name, pt), AccessControlEntry(c.principal, c.host, op, perm))))
    return answer(results, [i for i, _ in valid], metadata_support.admin_call(authorization.authorizer.create_acls, [b for _, b in valid]))


async def answer(results: list[KafkaError | None], indexes: list[int], created: Awaitable[list[KafkaError | None]]) -> CreateAclsResponseDict:
    """The authorizer's outcome for the valid creations (in a cluster, its ZooKeeper writes made on a worker thread)."""
    for i, error in zip(indexes, await created):
        results[i] = error
    return {"results": [result(e) for e in results]}


def result(error: KafkaError | None) -> AclCreationResultDict:
    if error is None:
        return {"error_code": ErrorCode.NONE, "error_message": ""}
    return {"error_code": error.code, "error_message": error.message}


def every(creations: list[AclCreation], error: KafkaError) -> CreateAclsResponseDict:
    return {"results": [result(error) for _ in creations]}
