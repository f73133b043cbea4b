"""CreateTopics: names, partitions, replication factors or explicit assignments, configs, validate-only."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.broker.handlers.describe_configs import topic_config_entries

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer


def handle(server: "KafkaServer", request: Request) -> dict:
    body = request.body
    counts = Counter(t.name for t in body.topics)
    results = []
    for t in body.topics:
        result = {"name": t.name, "error_code": ErrorCode.NONE, "error_message": None, "num_partitions": -1, "replication_factor": -1, "configs": None}
        try:
            if counts[t.name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Create topics request from client contains duplicate topic names.")
            nulls = [c.name for c in t.configs if c.value is None]
            if nulls and t.name not in server.metadata.topics:
                # Kafka checks this right after "already exists", before anything else about the topic.
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}")
            configs = {c.name: c.value for c in t.configs}
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
            topic = server.create_topic(t.name, t.num_partitions, t.replication_factor, configs, assignments, validate_only=body.validate_only)
            state = next(iter(topic.partitions.values()))
            result.update(
                topic_id=topic.topic_id,
                num_partitions=len(topic.partitions),
                replication_factor=len(state.replicas),
                configs=_describe(server, configs),
            )
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        results.append(result)
    return {"topics": results}


def _describe(server: "KafkaServer", configs: dict[str, str]) -> list[dict]:
    """The topic's effective configs, which CreateTopics v5+ returns (KIP-525), as DescribeConfigs reports them."""
    return [
        {"name": e.name, "value": e.value, "read_only": e.read_only, "config_source": e.source, "is_sensitive": e.is_sensitive}
        for e in topic_config_entries(server, configs)
    ]
