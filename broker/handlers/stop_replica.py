"""StopReplica (API key 5, v0-4): the controller tells this broker to stop serving replicas and, for a
deleted topic or a moved replica, to delete them (:meth:`odradek.broker.zk_broker.ZkBroker.stop_replica`).
Only brokers send it (CLUSTER_ACTION). A single-node broker answers any controller STALE_CONTROLLER_EPOCH.
"""

from __future__ import annotations

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.zk_broker import ZkBroker, stop_replica_states
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode


def handle(zk_broker: ZkBroker | None, authorization: Authorization, request: Request) -> dict:
    if not authorization.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        error, errors = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, dict.fromkeys(stop_replica_states(request.body), ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    elif zk_broker is None:
        error, errors = ErrorCode.STALE_CONTROLLER_EPOCH, {}  # as Kafka's stale answer, no partition named
    else:
        error, errors = zk_broker.stop_replica(request.body)
    return {
        "error_code": error,
        "partition_errors": [{"topic_name": t, "partition_index": p, "error_code": code} for (t, p), code in errors.items()],
    }
