"""ListPartitionReassignments (API key 46, v0): the reassignments in progress, with each partition's full
replica set and the replicas being added and removed (KIP-455).

Served by the controller's broker (:meth:`MetadataSupport.list_partition_reassignments`, in ZooKeeper mode
answered from the controller's event thread); others answer NOT_CONTROLLER. Needs DESCRIBE on the cluster.
A broker without ZooKeeper, its own controller, has none in progress.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.controller.metadata_support import MetadataSupport
from odradek.controller.reassignment import ApiError
from odradek.controller.zk_data import ReplicaAssignment
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.protocol.message_types.list_partition_reassignments import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponseDict, OngoingPartitionReassignmentDict, OngoingTopicReassignmentDict


def handle(metadata_support: MetadataSupport, authorization: Authorization, request: Request[ListPartitionReassignmentsRequest]) -> ListPartitionReassignmentsResponseDict | Awaitable[ListPartitionReassignmentsResponseDict]:
    body = request.body
    if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return refused(body, ApiError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))  # Kafka's text describes its request object
    if not metadata_support.is_controller():
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "error_message": ErrorCode.NOT_CONTROLLER.message, "topics": []}
    partitions = None if body.topics is None else [(t.name, index) for t in body.topics for index in t.partition_indexes]
    return answer(metadata_support.list_partition_reassignments(partitions))


async def answer(result: Awaitable[dict[TopicPartition, ReplicaAssignment] | ApiError]) -> ListPartitionReassignmentsResponseDict:
    outcome = await result
    if isinstance(outcome, ApiError):
        return {"throttle_time_ms": 0, "error_code": outcome.code, "error_message": outcome.message, "topics": []}
    by_topic: dict[str, list[OngoingPartitionReassignmentDict]] = {}
    for (topic, index), assignment in sorted(outcome.items()):
        by_topic.setdefault(topic, []).append({
            "partition_index": index, "replicas": list(assignment.replicas),
            "adding_replicas": list(assignment.adding), "removing_replicas": list(assignment.removing),
        })
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": "", "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


def refused(body: ListPartitionReassignmentsRequest, error: ApiError) -> ListPartitionReassignmentsResponseDict:
    """``ListPartitionReassignmentsRequest.getErrorResponse``: the error, and each named partition bare."""
    topics: list[OngoingTopicReassignmentDict] = [] if body.topics is None else [{"name": t.name, "partitions": [{"partition_index": i, "replicas": [], "adding_replicas": [], "removing_replicas": []} for i in t.partition_indexes]} for t in body.topics]
    return {"throttle_time_ms": 0, "error_code": error.code, "error_message": error.message, "topics": topics}
