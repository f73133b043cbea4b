"""StopReplica (API key 5, v0-4): the controller tells this broker to stop serving replicas and, for a
deleted topic or a moved replica, to delete them (:meth:`odradek.controller.metadata_support.MetadataSupport.stop_replica`).
Only brokers send it (CLUSTER_ACTION). A single-node broker answers any controller STALE_CONTROLLER_EPOCH.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.controller.metadata_support import MetadataSupport
from odradek.controller.zk_controller_state import stop_replica_states
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.stop_replica import StopReplicaRequest, StopReplicaResponseDict


def handle(metadata_support: MetadataSupport, authorization: Authorization, request: Request[StopReplicaRequest]) -> StopReplicaResponseDict:
    if not authorization.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        error, errors = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, dict.fromkeys(stop_replica_states(request.body), ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    else:
        error, errors = metadata_support.stop_replica(request.body)
    return {
        "error_code": error,
        "partition_errors": [{"topic_name": t, "partition_index": p, "error_code": code} for (t, p), code in errors.items()],
    }
