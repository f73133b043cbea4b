"""ElectLeaders (API key 43, v0-2; the election type from v1): hand partitions back to their preferred
replica (PREFERRED) or give leaderless ones a leader even from outside the ISR (UNCLEAN).

As Kafka 3.9's ZooKeeper-mode ``KafkaApis.handleElectLeaders`` and ``ReplicaManager.electLeaders``: ALTER on
the CLUSTER is needed (else CLUSTER_AUTHORIZATION_FAILED, at the top and for each named partition); no
partitions named (null) means every partition this broker's metadata knows, and those whose leader is
already right are then left out of the answer. The active controller elects
(:meth:`odradek.controller.zk_controller.ZkController.elect_leaders`, on its event thread; any other broker
answers each partition NOT_CONTROLLER, so the admin client asks the controller); the answer then waits
until this broker's metadata shows each elected leader, REQUEST_TIMED_OUT for those not shown within the
request's timeout. A broker without ZooKeeper is its own controller of single-replica partitions, each
already led by its preferred replica.
"""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.zk_broker import ZkBroker
from odradek.controller import leader_election
from odradek.controller.leader_election import ElectionError, ElectionType
from odradek.controller.metadata import MetadataImage
from odradek.controller.zk_controller_state import TopicPartition
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode


def handle(zk_broker: ZkBroker | None, metadata: MetadataImage, authorization: Authorization, request: Request) -> dict | Awaitable[dict]:
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
    if zk_broker is None:
        return response(ErrorCode.NONE, single_node(metadata, partitions, election_type), all_partitions=requested is None)
    return elect(zk_broker, partitions, election_type, body.timeout_ms, all_partitions=requested is None)


def single_node(metadata: MetadataImage, partitions: set[TopicPartition], election_type: ElectionType) -> dict[TopicPartition, ElectionError]:
    """The embedded controller's answer: the rules' triage over its metadata; a partition left to elect has no
    other replica that could lead."""
    states = {(t.name, p): s for t in metadata.topics.values() for p, s in t.partitions.items()}
    electable, answered = leader_election.triage(
        partitions, election_type, {tp: tuple(s.replicas) for tp, s in states.items()}, {tp: s.leader for tp, s in states.items()}, set(metadata.brokers), set()
    )
    return {**answered, **{p: leader_election.failed(p, election_type) for p in electable}}


async def elect(zk_broker: ZkBroker, partitions: set[TopicPartition], election_type: ElectionType, timeout_ms: int, *, all_partitions: bool) -> dict:
    """The controller's outcome, each elected leader awaited in this broker's metadata (``DelayedElectLeader``)."""
    deadline = time.monotonic() + timeout_ms / 1000
    controller = zk_broker.controller
    if controller is None:
        return response(ErrorCode.NONE, {p: leader_election.NOT_CONTROLLER for p in partitions}, all_partitions=all_partitions)
    outcome = await asyncio.wrap_future(controller.elect_leaders(partitions, election_type))
    expected = {p: leader for p, leader in outcome.items() if isinstance(leader, int)}

    def leads(partition: TopicPartition, leader: int) -> bool:
        topic = zk_broker.image.topics.get(partition[0])
        state = topic.partitions.get(partition[1]) if topic is not None else None
        return state is not None and state.leader == leader

    await zk_broker.metadata_waits.wait_until(lambda: all(leads(p, leader) for p, leader in expected.items()), deadline - time.monotonic())
    answers = {p: result for p, result in outcome.items() if isinstance(result, ElectionError)}
    answers.update({p: leader_election.ELECTED if leads(p, leader) else leader_election.TIMED_OUT for p, leader in expected.items()})
    return response(ErrorCode.NONE, answers, all_partitions=all_partitions)


def response(error: ErrorCode, answers: dict[TopicPartition, ElectionError], *, all_partitions: bool) -> dict:
    """Grouped by topic; an election over all partitions leaves out those that needed none."""
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), answer in sorted(answers.items()):
        if not (all_partitions and answer.code == ErrorCode.ELECTION_NOT_NEEDED):
            by_topic.setdefault(topic, []).append({"partition_id": partition, "error_code": answer.code, "error_message": answer.message})
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "replica_election_results": [{"topic": topic, "partition_result": results} for topic, results in by_topic.items()],
    }
