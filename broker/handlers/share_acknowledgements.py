"""What ShareFetch and ShareAcknowledge have in common: their acknowledgement batches, applied to the
share partitions, and their per-partition answers."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import anyio

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.share.share_partition import Acknowledgement
from odradek.broker.share.share_partition_manager import PartitionAnswer, SharePartitionManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid

PartitionId = tuple[Uuid, int]
NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


def topic_error(manager: SharePartitionManager, authorization: Authorization, request: Request, topic_id: Uuid) -> ErrorCode | None:
    """Why a partition of this topic is not served: an unknown topic id, or no READ on the topic."""
    name = manager.replica_manager.by_topic_id.get(topic_id)
    if name is None:
        return ErrorCode.UNKNOWN_TOPIC_ID
    if not authorization.authorize(request, AclOperation.READ, ResourceType.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return None


def acknowledge(manager: SharePartitionManager, authorization: Authorization, request: Request, group: str, member: str) -> dict[PartitionId, Deferred[ErrorCode]]:
    """Apply the request's acknowledgement batches, partition by partition."""
    outcomes: dict[PartitionId, Deferred[ErrorCode]] = {}
    for topic in request.body.topics:
        refused = topic_error(manager, authorization, request, topic.topic_id)
        for p in topic.partitions:
            if not p.acknowledgement_batches:
                continue
            tp = (topic.topic_id, p.partition_index)
            if refused is not None:
                outcomes[tp] = Deferred.completed(refused)
                continue
            batches = [Acknowledgement(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in p.acknowledgement_batches]
            outcomes[tp] = manager.acknowledge(group, member, tp, batches)
    return outcomes


def when_done(deferreds: list[Deferred[Any]], then: Callable[[], dict]) -> dict | Awaitable[dict]:
    """``then()`` once every Deferred completed (the share coordinator wrote what they persist)."""
    pending = [d for d in deferreds if not d.done]
    if not pending:
        return then()

    async def wait() -> dict:
        for d in pending:
            if not d.done:
                event = anyio.Event()
                d.add_callback(lambda _: event.set())
                await event.wait()
        return then()

    return wait()


def topic_responses(answers: list[PartitionAnswer], with_records: bool) -> list[dict]:
    """Per-topic response entries (ShareFetch's with records and acquired ranges)."""
    by_topic: dict[Uuid, list[dict]] = {}
    for a in answers:
        entry: dict = {"partition_index": a.partition, "error_code": a.error, "current_leader": NO_LEADER}
        if with_records:
            entry["acknowledge_error_code"] = a.acknowledge_error
            entry["records"] = a.records if a.records is not None else b""
            entry["acquired_records"] = [{"first_offset": r.first, "last_offset": r.last, "delivery_count": r.delivery_count} for r in a.acquired]
        by_topic.setdefault(a.topic_id, []).append(entry)
    return [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()]
