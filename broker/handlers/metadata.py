"""Metadata: brokers, controller, cluster id, and topics with their partitions' leaders, epochs and ISRs.

An unknown topic is created when both the broker (``auto.create.topics.enable``) and the request
(``allow_auto_topic_creation``, always true before v4) allow it; as in Kafka, the answer for a topic
created by this request is LEADER_NOT_AVAILABLE, and clients ask again.

Authorization is Kafka's: a topic the client may not DESCRIBE is left out of an all-topics listing and,
when named, answered TOPIC_AUTHORIZATION_FAILED without saying whether it exists (after the others);
auto-creation needs CREATE on the cluster or on the topic; authorized operations come from the ACLs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable


from odradek.broker.authorization import AUTHORIZED_OPERATIONS_OMITTED, Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.config import BrokerConfig
from odradek.broker.network.request_context import listener_name
from odradek.controller.metadata_image import MetadataImage, TopicInfo, topic_name_error
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.kafka_uuid import Uuid, ZERO_UUID

if TYPE_CHECKING:
    from odradek.protocol.message_types.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponseDict, MetadataResponsePartitionDict, MetadataResponseTopicDict

TopicCreator = Callable[[str], Awaitable[TopicInfo]]
"""Creates a topic with the broker's defaults, its logs made off the event loop (``KafkaServer.auto_create_topic``)."""


def topic_entry(topic: TopicInfo, authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED) -> MetadataResponseTopicDict:
    partitions: list[MetadataResponsePartitionDict] = []
    for index, state in sorted(topic.partitions.items()):
        partitions.append(
            {
                # A partition without a live leader (a ZooKeeper cluster's offline partition), as Kafka's metadata cache.
                "error_code": ErrorCode.NONE if state.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                "partition_index": index,
                "leader_id": state.leader,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": state.replicas,
                "isr_nodes": state.isr,
                "offline_replicas": state.offline_replicas,
            }
        )
    return {
        "error_code": ErrorCode.NONE,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": partitions,
        "topic_authorized_operations": authorized_operations,
    }


def _error_entry(name: str | None, error: ErrorCode, topic_id: Uuid | None = None) -> MetadataResponseTopicDict:
    entry: MetadataResponseTopicDict = {"error_code": error, "name": name, "is_internal": False, "partitions": [], "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
    if topic_id is not None:
        entry["topic_id"] = topic_id
    return entry


TOPIC_IDS_VERSION = 12
"""Metadata v10 and v11 carry a topic id field but Kafka looks topics up by id only from v12."""


def _refused_before_topic_ids(body: MetadataRequest, version: int) -> MetadataResponseDict | None:
    """Kafka's answer to a v10/v11 request naming a topic by id (or by a null name): its generic error
    response, INVALID_REQUEST on every requested topic and nothing else (KafkaApis refuses the whole request)."""
    if version >= TOPIC_IDS_VERSION or body.topics is None or not any(t.name is None or t.topic_id.int != 0 for t in body.topics):
        return None
    return {
        "brokers": [],
        "cluster_id": None,
        "controller_id": -1,
        "topics": [{**_error_entry(t.name or "", ErrorCode.INVALID_REQUEST), "topic_id": t.topic_id} for t in body.topics],
        "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def handle(metadata: MetadataImage, config: BrokerConfig, create_topic: TopicCreator, authorization: Authorization, request: Request[MetadataRequest]) -> MetadataResponseDict | Awaitable[MetadataResponseDict]:
    body = request.body
    version = request.header.api_version
    refused = _refused_before_topic_ids(body, version)
    if refused is not None:
        return refused
    image = metadata
    allow_auto_create = config["auto.create.topics.enable"] and (version < 4 or body.allow_auto_topic_creation)

    def entry(topic: TopicInfo) -> MetadataResponseTopicDict:
        if not body.include_topic_authorized_operations:
            return topic_entry(topic)
        return topic_entry(topic, authorization.authorized_operations(request, ResourceType.TOPIC, topic.name))

    def may(operation: AclOperation, name: str) -> bool:
        return authorization.authorize(request, operation, ResourceType.TOPIC, name)

    topics: list[MetadataResponseTopicDict] = []
    refused_topics: list[MetadataResponseTopicDict] = []
    to_create: list[tuple[int, str]] = []
    if body.topics is None or (version == 0 and not body.topics):
        visible = authorization.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.TOPIC, image.topics, log_denied=False)
        topics = [entry(t) for t in image.topics.values() if t.name in visible]
    else:
        # Kafka answers each topic once however often the request names it (KafkaApis takes the names, and the
        # ids, as a Set): a request naming one topic a hundred thousand times is one answer, not 100,000.
        named: dict[str | Uuid, MetadataRequestTopic] = {}
        for requested in body.topics:
            named.setdefault(requested.name if requested.name is not None else requested.topic_id, requested)
        for requested in named.values():
            name = requested.name
            if name is None:
                topic = image.topic_by_id(requested.topic_id)
                if topic is None:
                    topics.append(_error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, requested.topic_id))
                elif may(AclOperation.DESCRIBE, topic.name):
                    topics.append(entry(topic))
                else:  # topic ids are not sensitive, Kafka says: refused with the id
                    refused_topics.append(_error_entry(None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, topic.topic_id))
                continue
            if not may(AclOperation.DESCRIBE, name):
                refused_topics.append(_error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, ZERO_UUID))
                continue
            topic = image.topics.get(name)
            if topic is not None:
                topics.append(entry(topic))
            elif topic_name_error(name):
                topics.append(_error_entry(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
            elif allow_auto_create:
                if authorization.authorize(request, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False) or may(AclOperation.CREATE, name):
                    to_create.append((len(topics), name))
                    topics.append({})  # answered once the topic is created
                else:
                    refused_topics.append(_error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, ZERO_UUID))
            else:
                topics.append(_error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    response: MetadataResponseDict = {
        "brokers": [
            {"node_id": b.node_id, "host": endpoint[0], "port": endpoint[1], "rack": b.rack}
            for b in image.brokers.values()
            if (endpoint := b.endpoint(listener_name(request))) is not None
        ],
        "cluster_id": image.cluster_id,
        "controller_id": image.controller_id,
        "topics": topics + refused_topics,
        "cluster_authorized_operations": authorization.cluster_authorized_operations(request, body.include_cluster_authorized_operations),
    }
    return _with_auto_created(metadata, create_topic, response, to_create) if to_create else response


async def _with_auto_created(metadata: MetadataImage, create_topic: TopicCreator, response: MetadataResponseDict, to_create: list[tuple[int, str]]) -> MetadataResponseDict:
    """Auto-created topics' logs are made off the event loop (broker/replication/new_logs.py); the answer waits for them."""
    for index, name in to_create:
        response["topics"][index] = await _auto_create(metadata, create_topic, name)
    return response


async def _auto_create(metadata: MetadataImage, create_topic: TopicCreator, name: str) -> MetadataResponseTopicDict:

    try:
        topic = await create_topic(name)
    except KafkaError as exc:
        if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            existing = metadata.topics.get(name)
            # A name taken by a creation still making its logs: not available yet.
            return topic_entry(existing) if existing is not None else _error_entry(name, ErrorCode.LEADER_NOT_AVAILABLE)
        return _error_entry(name, exc.code)
    entry = _error_entry(name, ErrorCode.LEADER_NOT_AVAILABLE, topic.topic_id)
    entry["is_internal"] = topic.is_internal
    return entry
