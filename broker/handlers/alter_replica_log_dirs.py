"""AlterReplicaLogDirs: move replicas between this broker's log directories (``kafka-reassign-partitions``
with ``log_dirs``, Cruise Control's disk balancing). Needs ALTER on the cluster, as in Kafka; each
partition's outcome is :meth:`ReplicaManager.alter_replica_log_dir`'s, the move itself happening afterwards
(broker/replication/replica_alter_log_dirs.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.alter_replica_log_dirs import AlterReplicaLogDirPartitionResultDict, AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponseDict


def handle(replica_manager: ReplicaManager, authorization: Authorization, request: Request[AlterReplicaLogDirsRequest]) -> AlterReplicaLogDirsResponseDict:
    allowed = authorization.authorize(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
    results: dict[str, list[AlterReplicaLogDirPartitionResultDict]] = {}
    for directory in request.body.dirs:
        for topic in directory.topics:
            for index in topic.partitions:
                error = replica_manager.alter_replica_log_dir(topic.name, index, directory.path) if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                results.setdefault(topic.name, []).append({"partition_index": index, "error_code": error})
    return {"throttle_time_ms": 0, "results": [{"topic_name": name, "partitions": partitions} for name, partitions in results.items()]}
