"""ElectLeaders (API key 43, v0-2; the election type from v1): hand partitions back to their preferred
replica (PREFERRED) or give leaderless ones a leader even from outside the ISR (UNCLEAN).

As Kafka 3.9's ZooKeeper-mode ``KafkaApis.handleElectLeaders`` and ``ReplicaManager.electLeaders``: ALTER on
the CLUSTER is needed (else CLUSTER_AUTHORIZATION_FAILED, at the top and for each named partition); no
partitions named (null) means every partition this broker's metadata knows, and those whose leader is
already right are then left out of the answer. The controller elects
(:meth:`odradek.controller.metadata_support.MetadataSupport.elect_leaders`: in ZooKeeper mode the active
controller, on its event thread; any other broker answers each partition NOT_CONTROLLER, so the admin client
asks the controller); the answer then waits until this broker's metadata shows each elected leader,
REQUEST_TIMED_OUT for those not shown within the request's timeout. A broker without ZooKeeper is its own
controller of single-replica partitions, each already led by its preferred replica.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.controller.leader_election import ElectionError, ElectionType
from odradek.controller.metadata_image import MetadataImage
from odradek.controller.metadata_support import MetadataSupport
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.protocol.message_types.elect_leaders import ElectLeadersRequest, ElectLeadersResponseDict, PartitionResultDict


def handle(metadata_support: MetadataSupport, metadata: MetadataImage, authorization: Authorization, request: Request[ElectLeadersRequest]) -> ElectLeadersResponseDict | Awaitable[ElectLeadersResponseDict]:
    body = request.body
    requested = None if body.topic_partitions is None else {(t.topic, p) for t in body.topic_partitions for p in t.partitions}
    try:
        election_type = ElectionType(body.election_type)
    except ValueError:  # Kafka's ElectionType.valueOf throws: an unexpected error, its message not told
        error = ElectionError(ErrorCode.UNKNOWN_SERVER_ERROR)
        return response(error.code, {p: error for p in requested or ()}, all_partitions=False)
    if not authorization.authorize(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        denied = ElectionError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return response(denied.code, {p: denied for p in requested or ()}, all_partitions=requested is None)
    partitions = requested if requested is not None else {(t.name, p) for t in metadata.topics.values() for p in t.partitions}
    return elect(metadata_support.elect_leaders(partitions, election_type, body.timeout_ms / 1000), all_partitions=requested is None)


async def elect(outcome: Awaitable[dict[TopicPartition, ElectionError]], *, all_partitions: bool) -> ElectLeadersResponseDict:
    return response(ErrorCode.NONE, await outcome, all_partitions=all_partitions)


def response(error: ErrorCode, answers: dict[TopicPartition, ElectionError], *, all_partitions: bool) -> ElectLeadersResponseDict:
    """Grouped by topic; an election over all partitions leaves out those that needed none."""
    by_topic: dict[str, list[PartitionResultDict]] = {}
    for (topic, partition), answer in sorted(answers.items()):
        if not (all_partitions and answer.code == ErrorCode.ELECTION_NOT_NEEDED):
            by_topic.setdefault(topic, []).append({"partition_id": partition, "error_code": answer.code, "error_message": answer.message})
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "replica_election_results": [{"topic": topic, "partition_result": results} for topic, results in by_topic.items()],
    }
