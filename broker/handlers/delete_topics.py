"""DeleteTopics: by name (v0+) or by topic id (v6+).

As Kafka's ``KafkaApis.handleDeleteTopicsRequest`` and ``ZkAdminManager.deleteTopics``:
``delete.topic.enable=false`` answers TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3, which lacks that
code); a topic id that names no topic is UNKNOWN_TOPIC_ID. Internal topics are not protected: Kafka deletes
``__consumer_offsets`` when asked. Deletion is immediate here, yet a request with ``timeout_ms <= 0`` gets
REQUEST_TIMED_OUT for the topics it deleted, as Kafka answers requests that do not wait for completion
(clients such as librdkafka treat that as success).
In ZooKeeper mode the deletions are written (``/admin/delete_topics``) on a worker thread, and the answer
waits, up to the request's timeout, until the topics are gone from this broker's metadata (Kafka's
``DelayedDeleteTopics``; REQUEST_TIMED_OUT for those still there); only the active controller serves it
(NOT_CONTROLLER elsewhere, as Kafka's ZooKeeper-mode brokers).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.config import BrokerConfig
from odradek.broker.handlers import mutation_quota
from odradek.broker.quotas import ClientQuotas, ControllerMutationQuota
from odradek.controller.metadata_image import MetadataImage
from odradek.controller.metadata_support import MetadataSupport
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.kafka_uuid import Uuid, ZERO_UUID

if TYPE_CHECKING:
    from odradek.protocol.message_types.delete_topics import DeletableTopicResultDict, DeleteTopicsRequest, DeleteTopicsResponseDict

STRICT_QUOTA_SINCE = 5
"""The version from which ``controller_mutation_rate`` refuses (KIP-599); older ones are let through."""


def _requested(request: Request[DeleteTopicsRequest]) -> list[tuple[str | None, Uuid]]:
    body = request.body
    if request.header.api_version >= 6:
        return [(t.name, t.topic_id) for t in body.topics]
    return [(name, ZERO_UUID) for name in body.topic_names]


def _result(name: str | None, topic_id: Uuid, code: ErrorCode, message: str | None = None) -> DeletableTopicResultDict:
    return {"name": name, "topic_id": topic_id, "error_code": code, "error_message": message}


def handle(
    metadata: MetadataImage, config: BrokerConfig, metadata_support: MetadataSupport, authorization: Authorization, quotas: ClientQuotas,
    request: Request[DeleteTopicsRequest],
) -> DeleteTopicsResponseDict | Awaitable[DeleteTopicsResponseDict]:
    requested = _requested(request)
    if not metadata_support.is_controller():
        return {"responses": [_result(name, topic_id, ErrorCode.NOT_CONTROLLER) for name, topic_id in requested]}
    if not config["delete.topic.enable"]:
        code = ErrorCode.INVALID_REQUEST if request.header.api_version < 3 else ErrorCode.TOPIC_DELETION_DISABLED
        return {"responses": [_result(name, topic_id, code) for name, topic_id in requested]}
    if any(name is not None and topic_id != ZERO_UUID for name, topic_id in requested):
        message = "Topic name and topic ID can not both be specified."
        return {"responses": [_result(name, topic_id, ErrorCode.INVALID_REQUEST, message) for name, topic_id in requested]}

    image = metadata
    results: list[DeletableTopicResultDict] = []
    to_delete: dict[str, DeletableTopicResultDict] = {}
    names = {n for n, _ in requested if n is not None} | {t.name for _, i in requested if i != ZERO_UUID and (t := image.topic_by_id(i)) is not None}
    deletable = authorization.filter_authorized(request, AclOperation.DELETE, ResourceType.TOPIC, names)
    for name, topic_id in requested:
        if topic_id != ZERO_UUID:
            topic = image.topic_by_id(topic_id)
            if topic is None:
                results.append(_result(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            name = topic.name
            if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                # Kafka does not tell a client that may not describe the topic its name.
                results.append(_result(None, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
        if name not in deletable:
            results.append(_result(name, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        if name not in image.topics:
            results.append(_result(name, topic_id, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        results.append(_result(name, topic_id, ErrorCode.NONE))
        to_delete.setdefault(name, results[-1])

    quota = quotas.controller_mutation_quota(request, STRICT_QUOTA_SINCE, time.monotonic())
    return _delete(metadata_support, image, quotas, quota, request, results, to_delete)


async def _delete(
    metadata_support: MetadataSupport, image: MetadataImage, quotas: ClientQuotas, quota: ControllerMutationQuota,
    request: Request[DeleteTopicsRequest], results: list[DeletableTopicResultDict], to_delete: dict[str, DeletableTopicResultDict],
) -> DeleteTopicsResponseDict:
    """Each topic deleted (marked for deletion, in ZooKeeper mode); there, the answer waits for the topics to
    leave this broker's metadata. A topic deleted is REQUEST_TIMED_OUT when the request did not wait
    (``timeout_ms <= 0``) or when the wait ended with it still there.

    ``to_delete`` holds each name's first entry: as Kafka (``results.find(name)`` sets each topic's outcome),
    a name repeated in the request is deleted once, and its later entries stay NONE whatever the outcome."""
    for name, answer in to_delete.items():
        # A concurrent request may have deleted the topic since this one found it (each deletion awaits):
        # its partitions then count as none, as Kafka's ``numPartitions(topic).getOrElse(0)``, and the
        # answer stays NONE, as Kafka answers a topic another request already marked for deletion.
        topic = image.topics.get(name)
        try:
            quota.record(len(topic.partitions) if topic is not None else 0, time.monotonic())
            await metadata_support.admin_call(metadata_support.delete_topic, name)
        except KafkaError as exc:
            if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                continue
            # Over the mutation quota, or the deletion could not be persisted (a full disk): the topic stays,
            # and the client may retry.
            answer.update({"error_code": exc.code, "error_message": exc.message})
    timeout_s = request.body.timeout_ms / 1000
    deleted = [name for name, answer in to_delete.items() if answer["error_code"] == ErrorCode.NONE]
    late = await metadata_support.until_gone(deleted, timeout_s)
    for name in deleted:
        if timeout_s <= 0 or name in late:
            to_delete[name]["error_code"] = ErrorCode.REQUEST_TIMED_OUT
    response: DeleteTopicsResponseDict = {"responses": results}
    return mutation_quota.answer(quotas, request, quota, response)
