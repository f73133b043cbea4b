"""LeaderAndIsr (API key 4, v0-7): the controller makes this broker leader or follower of partitions
(:meth:`odradek.controller.metadata_support.MetadataSupport.leader_and_isr`). Only brokers send it (CLUSTER_ACTION).

The answer names each partition's error: by topic name before v5, by topic id from v5. A single-node broker
follows only its embedded controller and answers any other STALE_CONTROLLER_EPOCH.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.controller.metadata_support import MetadataSupport
from odradek.controller.zk_controller_state import leader_and_isr_states
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid

if TYPE_CHECKING:
    from odradek.broker.coordinator.coordinators import Coordinators
    from odradek.controller.metadata_image import PartitionState
    from odradek.storage.topic_partition import TopicPartition
    from odradek.protocol.message_types.leader_and_isr import LeaderAndIsrPartitionErrorDict, LeaderAndIsrRequest, LeaderAndIsrResponseDict

TOPIC_IDS_VERSION = 5
"""From v5 the answer groups partitions by topic id."""

PartitionStates = dict["TopicPartition", tuple[Uuid, "PartitionState"]]


def handle(metadata_support: MetadataSupport, coordinators: Coordinators, broker_id: int, authorization: Authorization, request: Request[LeaderAndIsrRequest]) -> LeaderAndIsrResponseDict | Awaitable[LeaderAndIsrResponseDict]:
    """The answer; awaitable when the request makes this broker the leader of a partition of a coordinator's
    topic (``__consumer_offsets``, ``__transaction_state``) whose coordinator is not built and whose modules are
    not imported: they are imported on a worker thread first (``Coordinators.prepare``), then the request is
    applied as it comes, building the coordinator (its imports done) on the event loop."""
    states = leader_and_isr_states(request.body)
    if not authorization.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return _answer(request, states, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, {key: ErrorCode.CLUSTER_AUTHORIZATION_FAILED for key in states})
    led = coordinators.kinds_of({name for (name, _), (_, state) in states.items() if state.leader == broker_id})
    return coordinators.when_prepared(led, lambda: _answer(request, states, *metadata_support.leader_and_isr(request.body)))


def _answer(request: Request[LeaderAndIsrRequest], states: PartitionStates, error: ErrorCode, errors: Mapping[TopicPartition, ErrorCode]) -> LeaderAndIsrResponseDict:
    if request.header.api_version < TOPIC_IDS_VERSION:
        return {
            "error_code": error,
            "partition_errors": [{"topic_name": t, "partition_index": p, "error_code": code} for (t, p), code in errors.items()],
        }
    by_topic: dict[Uuid, list[LeaderAndIsrPartitionErrorDict]] = {}
    for (topic, index), code in errors.items():
        by_topic.setdefault(states[(topic, index)][0], []).append({"partition_index": index, "error_code": code})
    return {"error_code": error, "topics": [{"topic_id": topic_id, "partition_errors": errors} for topic_id, errors in by_topic.items()]}
