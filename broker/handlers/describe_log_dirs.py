"""DescribeLogDirs: per log directory, the partitions it holds with their size and lag, and its disk space.

As Kafka's ``ReplicaManager.describeLogDirs``: every configured directory is listed (absolute path), an
unreadable one with KAFKA_STORAGE_ERROR; ``topics`` null means every partition; a partition's offset lag is
how far its log end offset is behind the high watermark (0 on a leader); a replica being moved here
(AlterReplicaLogDirs) is listed with ``is_future_key`` and how far its copy is behind. Total and usable bytes
(v4+) come from the file system holding the directory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.describe_log_dirs import DescribeLogDirsPartitionDict, DescribeLogDirsRequest, DescribeLogDirsResponseDict, DescribeLogDirsResultDict


def handle(replica_manager: ReplicaManager, authorization: Authorization, request: Request[DescribeLogDirsRequest]) -> DescribeLogDirsResponseDict:
    if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    topics = request.body.topics
    wanted = None if topics is None else {(t.topic, p) for t in topics for p in t.partitions}
    results: list[DescribeLogDirsResultDict] = []
    for described in replica_manager.describe_log_dirs(wanted):
        if described.error != ErrorCode.NONE:
            results.append({"error_code": described.error, "log_dir": str(described.path), "topics": []})
            continue
        by_topic: dict[str, list[DescribeLogDirsPartitionDict]] = {}
        for p in described.partitions:
            by_topic.setdefault(p.topic, []).append({"partition_index": p.index, "partition_size": p.size, "offset_lag": p.offset_lag, "is_future_key": p.is_future})
        results.append({
            "error_code": ErrorCode.NONE,
            "log_dir": str(described.path),
            "topics": [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()],
            "total_bytes": described.total_bytes,
            "usable_bytes": described.usable_bytes,
        })
    return {"error_code": ErrorCode.NONE, "results": results}
