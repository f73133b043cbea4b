"""AlterPartitionReassignments (API key 45, v0): move partitions to other brokers, or cancel a move (KIP-455).

Served by the controller's broker (:meth:`MetadataSupport.alter_partition_reassignments`: in ZooKeeper mode
run on the controller's event thread, the request waiting without blocking the event loop); any other broker
answers NOT_CONTROLLER and the AdminClient asks the controller. Needs ALTER on the cluster. Each partition
is answered once its reassignment has started (or with why it cannot). A broker without ZooKeeper is its own
controller and answers as a one-broker Kafka cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.controller.metadata_support import MetadataSupport
from odradek.controller.reassignment import ApiError
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.protocol.message_types.alter_partition_reassignments import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponseDict, ReassignablePartitionResponseDict


def handle(metadata_support: MetadataSupport, authorization: Authorization, request: Request[AlterPartitionReassignmentsRequest]) -> AlterPartitionReassignmentsResponseDict | Awaitable[AlterPartitionReassignmentsResponseDict]:
    body = request.body
    if not authorization.authorize(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return refused(body, ApiError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))  # Kafka's text describes its request object
    targets = {(t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas) for t in body.topics for p in t.partitions}
    if not metadata_support.is_controller():
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "error_message": ErrorCode.NOT_CONTROLLER.message, "responses": []}
    return answer(metadata_support.alter_partition_reassignments(targets))


async def answer(result: Awaitable[dict[TopicPartition, ApiError] | ApiError]) -> AlterPartitionReassignmentsResponseDict:
    outcome = await result
    if isinstance(outcome, ApiError):
        return {"throttle_time_ms": 0, "error_code": outcome.code, "error_message": outcome.message, "responses": []}
    return response(outcome)


def response(outcome: dict[TopicPartition, ApiError]) -> AlterPartitionReassignmentsResponseDict:
    by_topic: dict[str, list[ReassignablePartitionResponseDict]] = {}
    for (topic, index), error in outcome.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": error.code, "error_message": error.message})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": "", "responses": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


def refused(body: AlterPartitionReassignmentsRequest, error: ApiError) -> AlterPartitionReassignmentsResponseDict:
    """``AlterPartitionReassignmentsRequest.getErrorResponse``: the error at the top and for every partition."""
    return {
        "throttle_time_ms": 0, "error_code": error.code, "error_message": error.message,
        "responses": [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": error.code, "error_message": error.message} for p in t.partitions]} for t in body.topics],
    }
