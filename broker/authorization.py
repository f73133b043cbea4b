"""What a request's sender may do: the handlers' one door to the authorizer (Kafka's ``AuthHelper``).

With ``authorizer.class.name`` unset (Kafka's default) every operation is allowed and the
authorized-operations fields list every operation the resource type supports; with the ACL authorizer
the answers come from the ACLs. Requests that do not ask for the bitfield (Metadata v8+, DescribeCluster,
DescribeGroups v3+ include flags) get Kafka's "omitted" marker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from odradek.broker.authorizer.acl import ANONYMOUS, CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from odradek.protocol.api import Request

if TYPE_CHECKING:
    # The authorizer's modules are imported only by a broker that has one (authorizer.class.name).
    from odradek.broker.authorizer.acl_authorizer import AclAuthorizer, Session
    from odradek.broker.authorizer.acl_bindings import ResourcePattern

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

def authorized_operations(operations: frozenset[AclOperation], requested: bool = True) -> int:
    """The bitfield for ``operations``, or the omitted marker when the request did not ask for it."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    return sum(1 << op for op in operations)


def session_of(request: Request) -> Session:
    """The principal and host the connection established (``User:ANONYMOUS`` where nothing authenticated)."""
    from odradek.broker.authorizer.acl_authorizer import Session

    context = getattr(request, "context", None)
    principal = str(context.principal) if context is not None else ANONYMOUS
    return Session(principal, request.client_address or "")


def pattern_of(resource_type: ResourceType, name: str) -> ResourcePattern:
    """The literal pattern of one resource, as the authorizer is asked about it."""
    from odradek.broker.authorizer.acl_bindings import ResourcePattern

    return ResourcePattern(resource_type, name)


class Authorization:
    def __init__(self, authorizer: AclAuthorizer | None = None) -> None:
        self.authorizer = authorizer

    def authorize(self, request: Request, operation: AclOperation, resource_type: ResourceType, name: str, *, log_denied: bool = True) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(session_of(request), operation, pattern_of(resource_type, name), log_denied=log_denied)

    def filter_authorized(self, request: Request, operation: AclOperation, resource_type: ResourceType, names: Iterable[str], *, log_denied: bool = True) -> set[str]:
        """The names the sender may ``operation`` (Kafka's ``filterByAuthorized``; a listing that only
        selects what to show passes ``log_denied=False``). Without an authorizer, every name: no call per
        name on the produce and fetch paths."""
        if self.authorizer is None:
            return set(names)
        return {n for n in names if self.authorize(request, operation, resource_type, n, log_denied=log_denied)}

    def authorize_by_resource_type(self, request: Request, operation: AclOperation, resource_type: ResourceType) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize_by_resource_type(session_of(request), operation, resource_type)

    def authorized_operations(self, request: Request, resource_type: ResourceType, name: str, requested: bool = True) -> int:
        """The authorized-operations bitfield of one resource for the sender."""
        if self.authorizer is None or not requested:
            return authorized_operations(SUPPORTED_OPERATIONS[resource_type], requested)
        return authorized_operations(self.authorizer.authorized_operations(session_of(request), pattern_of(resource_type, name)))

    def cluster_authorized_operations(self, request: Request, requested: bool) -> int:
        """Metadata's and DescribeCluster's field: 0 for a client that may not DESCRIBE the cluster (Kafka)."""
        if not requested:
            return AUTHORIZED_OPERATIONS_OMITTED
        if not self.authorize(request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return 0
        return self.authorized_operations(request, ResourceType.CLUSTER, CLUSTER_NAME)
