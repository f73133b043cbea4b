"""CreateTopics: names, partitions, replication factors or explicit assignments, configs, validate-only.

A topic's logs are made off the event loop before the controller publishes it (:mod:`odradek.broker.replication.new_logs`),
by a task of the broker's own: a topic whose logs take longer than the request's timeout (thousands of
partitions) is answered REQUEST_TIMED_OUT then, as Kafka answers a topic its metadata has not led by then,
and is published when they are made (until then its name is taken: TOPIC_ALREADY_EXISTS to a retry).
In ZooKeeper mode the topic is validated and written on a worker thread, and the answer waits, up to the
request's timeout, until this broker's metadata gives every new partition a leader (Kafka's
``DelayedCreatePartitions``: REQUEST_TIMED_OUT for a topic not there by then, at once when the timeout is 0),
so that a client may use the topic as soon as it is told it exists. Only the active controller creates
topics (NOT_CONTROLLER elsewhere, as Kafka's ZooKeeper-mode brokers).
Creating needs CREATE on the cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED), and seeing the new
topic's configs and layout DESCRIBE_CONFIGS on it (else its topic config error is TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import anyio
from anyio.abc import TaskGroup

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.config import BrokerConfig
from odradek.broker.dynamic_config import DynamicBrokerConfig
from odradek.broker.handlers import mutation_quota
from odradek.broker.handlers.describe_configs import topic_config_entries
from odradek.broker.replication.new_logs import make_logs
from odradek.broker.quotas import ClientQuotas
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.controller.embedded_controller import check_batch_size
from odradek.controller.metadata_image import MetadataImage, TopicInfo
from odradek.controller.metadata_support import MetadataSupport
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.kafka_uuid import ZERO_UUID

if TYPE_CHECKING:
    from odradek.protocol.message_types.create_topics import CreatableTopicConfigsDict, CreatableTopicResultDict, CreateTopicsRequest, CreateTopicsResponseDict


log = logging.getLogger("odradek.apis")

STRICT_QUOTA_SINCE = 6
"""The version from which ``controller_mutation_rate`` refuses (KIP-599); older ones are let through."""


@dataclass(frozen=True)
class TopicServices:
    """What CreateTopics is handed: the controller's view and the broker's topic creation, the logs, the
    configs it describes back (KIP-525) and the authorizer."""

    metadata: MetadataImage
    config: BrokerConfig
    metadata_support: MetadataSupport
    create_topic: Callable[..., TopicInfo]
    """``KafkaServer.create_topic``: validates the configs, then the controller creates (or plans) the topic."""
    replica_manager: ReplicaManager
    dynamic_config: DynamicBrokerConfig
    broker_defaults: dict[str, str]
    authorization: Authorization
    background: TaskGroup
    """Where a creation goes on after the request's timeout has answered it."""


async def handle(
    metadata: MetadataImage, config: BrokerConfig, metadata_support: MetadataSupport, create_topic: Callable[..., TopicInfo], replica_manager: ReplicaManager,
    dynamic_config: DynamicBrokerConfig, broker_defaults: dict[str, str], authorization: Authorization, quotas: ClientQuotas, background: TaskGroup,
    request: Request[CreateTopicsRequest],
) -> CreateTopicsResponseDict:
    services = TopicServices(metadata, config, metadata_support, create_topic, replica_manager, dynamic_config, broker_defaults, authorization, background)
    body = request.body
    deadline = time.monotonic() + body.timeout_ms / 1000
    if not metadata_support.is_controller():
        # Kafka sets only the code: the message keeps its default, ""
        return {"topics": [_result(t.name, KafkaError(ErrorCode.NOT_CONTROLLER, "")) for t in body.topics]}
    counts = Counter(t.name for t in body.topics)
    try:
        check_batch_size(sum(1 + _partition_count(services, t) + len(t.configs) for t in body.topics))
    except KafkaError as exc:
        return {"topics": [_result(t.name, exc) for t in body.topics]}
    names = set(counts)
    if authorization.authorize(request, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False):
        creatable = names
    else:
        creatable = authorization.filter_authorized(request, AclOperation.CREATE, ResourceType.TOPIC, names)
    describable = authorization.filter_authorized(request, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names, log_denied=False)
    quota = quotas.controller_mutation_quota(request, STRICT_QUOTA_SINCE, time.monotonic())
    results: list[CreatableTopicResultDict] = []
    created: dict[str, list[int]] = {}
    unfinished: set[str] = set()
    for t in body.topics:
        result = _result(t.name)
        refused_before_creating = counts[t.name] > 1 or t.name not in creatable
        try:
            if counts[t.name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Create topics request from client contains duplicate topic names.")
            if t.name not in creatable:
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            nulls = [c.name for c in t.configs if c.value is None]
            if nulls and t.name not in services.metadata.topics:
                # Kafka checks this right after "already exists", before anything else about the topic.
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}")
            configs = {c.name: c.value for c in t.configs}
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
            topic = await metadata_support.admin_call(services.create_topic, t.name, t.num_partitions, t.replication_factor, configs, assignments, validate_only=True)
            if not body.validate_only:
                quota.record(len(topic.partitions), time.monotonic())
                creation = _Creation(services, topic, (t.name, t.num_partitions, t.replication_factor, configs, assignments))
                metadata_support.reserve_topic_name(t.name)  # at once: no other request may create it meanwhile
                background.start_soon(creation.run)
                with anyio.move_on_after(deadline - time.monotonic() if body.timeout_ms > 0 else None):
                    await creation.done.wait()
                if not creation.done.is_set():
                    unfinished.add(t.name)
                    results.append(result)
                    continue
                topic = creation.outcome()
                created[t.name] = sorted(topic.partitions)
            state = next(iter(topic.partitions.values()))
            # Kafka names the topic's id once it is created, not when only validating.
            topic_id = ZERO_UUID if body.validate_only else topic.topic_id
            if t.name not in describable:
                result.update({"topic_id": topic_id, "topic_config_error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED})
                results.append(result)
                continue
            # A created topic has no null config (refused above, or the topic existed and creating it failed).
            result.update(
                {
                    "topic_id": topic_id,
                    "num_partitions": len(topic.partitions),
                    "replication_factor": len(state.replicas),
                    "configs": _describe(services, {name: value for name, value in configs.items() if value is not None}),
                }
            )
        except KafkaError as exc:
            result = _result(t.name, exc)
            if refused_before_creating and t.name not in describable:
                # Kafka marks these before creating anything and, unlike a failed creation, keeps the mark
                result["topic_config_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        results.append(result)
    late = unfinished | await metadata_support.until_led(created, body.timeout_ms / 1000)
    timed_out = _result("", KafkaError(ErrorCode.REQUEST_TIMED_OUT)) | {"topic_config_error_code": ErrorCode.NONE}
    results = [r | timed_out | {"name": r["name"]} if r["name"] in late else r for r in results]
    response: CreateTopicsResponseDict = {"topics": results}
    return mutation_quota.answer(quotas, request, quota, response)


def _result(name: str, error: KafkaError | None = None) -> CreatableTopicResultDict:
    return {
        "name": name,
        "error_code": ErrorCode.NONE if error is None else error.code,
        "error_message": None if error is None else error.message,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }


def _partition_count(services: TopicServices, t: Any) -> int:
    if t.assignments:
        return len(t.assignments)
    return services.config["num.partitions"] if t.num_partitions == -1 else max(t.num_partitions, 0)


class _Creation:
    """One topic's logs made, then the topic published, on a task of the broker's, which the request waits for
    up to its timeout. Its name is taken (``reserve_topic_name``) before it starts and until it is published,
    so that no other request creates it."""

    def __init__(self, services: TopicServices, planned: TopicInfo, arguments: tuple) -> None:
        self.services = services
        self.planned = planned
        self.arguments = arguments
        self.done = anyio.Event()
        self.topic: TopicInfo | None = None
        self.error: Exception | None = None

    async def run(self) -> None:
        support = self.services.metadata_support
        try:
            try:
                await make_logs(self.services.replica_manager, self.planned)
            finally:
                support.release_topic_name(self.planned.name)
            self.topic = await support.admin_call(self.services.create_topic, *self.arguments, topic_id=self.planned.topic_id)
        except Exception as exc:  # told to the request if it still waits, else logged
            self.error = exc
            if self.done.statistics().tasks_waiting == 0:
                log.error("Creating topic %s failed after its request timed out: %s", self.planned.name, exc, exc_info=not isinstance(exc, KafkaError))
        finally:
            self.done.set()

    def outcome(self) -> TopicInfo:
        if self.error is not None:
            raise self.error
        assert self.topic is not None
        return self.topic


def _describe(services: TopicServices, configs: dict[str, str]) -> list[CreatableTopicConfigsDict]:
    """The topic's effective configs, which CreateTopics v5+ returns (KIP-525), as DescribeConfigs reports them."""
    return [
        {"name": e.name, "value": e.value, "read_only": e.read_only, "config_source": e.source, "is_sensitive": e.is_sensitive}
        for e in topic_config_entries(services.dynamic_config, services.broker_defaults, configs)
    ]
