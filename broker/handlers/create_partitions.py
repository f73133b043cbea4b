"""CreatePartitions: raise a topic's partition count, with explicit replica assignments or Kafka's own.

Kafka's checks (``KafkaApis.handleCreatePartitionsRequest``, ``ZkAdminManager.createPartitions``): a topic
named twice is INVALID_REQUEST; then the controller's count and assignment checks. The new partitions' logs
are made off the event loop before they are published (:mod:`odradek.broker.replication.new_logs`).
As with DeleteTopics, ``timeout_ms <= 0`` answers REQUEST_TIMED_OUT for partitions created without waiting.
In ZooKeeper mode the request is checked and written on a worker thread, and the answer waits, up to the
request's timeout, until this broker's metadata gives every new partition a leader (Kafka's
``DelayedCreatePartitions``; REQUEST_TIMED_OUT for a topic whose new partitions are not all led by then);
only the active controller serves it (NOT_CONTROLLER elsewhere, as Kafka's ZooKeeper-mode brokers).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.handlers import mutation_quota
from odradek.broker.replication.new_logs import make_logs
from odradek.broker.quotas import ClientQuotas
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.controller.metadata_support import MetadataSupport
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.protocol.message_types.create_partitions import CreatePartitionsRequest, CreatePartitionsResponseDict, CreatePartitionsTopicResultDict


STRICT_QUOTA_SINCE = 3
"""The version from which ``controller_mutation_rate`` refuses (KIP-599); older ones are let through."""


async def handle(
    metadata_support: MetadataSupport, replica_manager: ReplicaManager, authorization: Authorization, quotas: ClientQuotas, request: Request[CreatePartitionsRequest]
) -> CreatePartitionsResponseDict:
    """Needs ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED with Kafka's message."""
    body = request.body
    if not metadata_support.is_controller():
        return {"results": [{"name": name, "error_code": ErrorCode.NOT_CONTROLLER, "error_message": None} for name in dict.fromkeys(t.name for t in body.topics)]}
    counts = Counter(t.name for t in body.topics)
    alterable = authorization.filter_authorized(request, AclOperation.ALTER, ResourceType.TOPIC, {t.name for t in body.topics if counts[t.name] == 1})
    quota = quotas.controller_mutation_quota(request, STRICT_QUOTA_SINCE, time.monotonic())
    results: list[CreatePartitionsTopicResultDict] = []
    created: dict[str, list[int]] = {}
    for t in body.topics:
        result: CreatePartitionsTopicResultDict = {"name": t.name, "error_code": ErrorCode.NONE, "error_message": None}
        try:
            if counts[t.name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            if t.name not in alterable:
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed.")
            assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
            planned = await metadata_support.admin_call(metadata_support.plan_partitions, t.name, t.count, assignments)
            if not body.validate_only:
                quota.record(len(planned.partitions), time.monotonic())
                await make_logs(replica_manager, planned)
                created[t.name] = await metadata_support.admin_call(metadata_support.create_partitions, t.name, t.count, assignments)
            if body.timeout_ms <= 0 and not body.validate_only:
                result["error_code"] = ErrorCode.REQUEST_TIMED_OUT
        except KafkaError as exc:
            result.update({"error_code": exc.code, "error_message": exc.message})
        results.append(result)
    late = await metadata_support.until_led(created, body.timeout_ms / 1000)
    for result in results:
        if result["name"] in late:
            result["error_code"] = ErrorCode.REQUEST_TIMED_OUT
    response: CreatePartitionsResponseDict = {"results": results}
    return mutation_quota.answer(quotas, request, quota, response)
