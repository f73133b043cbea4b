"""Admin requests that must leave no broker state broken or half-made: null config values are refused at
the door as Kafka 3.9 refuses them (each answer compared with the real Kafka's), and partition counts
beyond what one request may create are refused whole.
"""

from __future__ import annotations

import itertools

import pytest

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode

E = ErrorCode
TOPIC = 2
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_names = itertools.count()


@pytest.fixture(scope="module")
def broker():
    with Broker(config={}) as b:
        yield b


def name(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def create(wire, topics: list[tuple[str, int, dict[str, str | None]]], validate_only: bool = False) -> list[tuple[str, int, str | None]]:
    body = {
        "topics": [
            {"name": t, "num_partitions": n, "replication_factor": 1, "assignments": [], "configs": [{"name": k, "value": v} for k, v in configs.items()]}
            for t, n, configs in topics
        ],
        "timeout_ms": 30000,
        "validate_only": validate_only,
    }
    return [(r.name, r.error_code, r.error_message) for r in wire.call(ApiKey.CreateTopics, 4, body).topics]


def null_config_answers(wire, topic: str) -> list[tuple[int, str | None]]:
    """What CreateTopics, AlterConfigs and IncrementalAlterConfigs (each operation) answer for null values."""
    answers = [create(wire, [(f"{topic}-{key}", 1, {key: None})])[0][1:] for key in ("retention.ms", "cleanup.policy", "no.such.key")]
    assert create(wire, [(topic, 1, {})])[0][1] == E.NONE
    for key in ("retention.ms", "cleanup.policy"):
        body = {"resources": [{"resource_type": TOPIC, "resource_name": topic, "configs": [{"name": key, "value": None}]}], "validate_only": False}
        answers += [(r.error_code, r.error_message) for r in wire.call(ApiKey.AlterConfigs, 1, body).responses]
        for op in (SET, DELETE, APPEND, SUBTRACT):
            ops = [{"name": key, "config_operation": op, "value": None}]
            body = {"resources": [{"resource_type": TOPIC, "resource_name": topic, "configs": ops}], "validate_only": False}
            answers += [(r.error_code, r.error_message) for r in wire.call(ApiKey.IncrementalAlterConfigs, 1, body).responses]
    return answers


def test_null_config_values_are_answered_as_kafka_answers_them(broker, real_kafka, connect) -> None:
    topic = name("null-configs")
    ours = null_config_answers(connect(broker.bootstrap), topic)
    assert ours == null_config_answers(connect(real_kafka.bootstrap), topic)
    assert ours[0] == (E.INVALID_CONFIG, "Null value not supported for topic configs: retention.ms")
    assert ours[3] == (E.INVALID_REQUEST, "Null value not supported for : retention.ms")
    assert ours[5] == (E.NONE, None), "DELETE needs no value"
    metadata = connect(broker.bootstrap).call(ApiKey.Metadata, 1, {"topics": None})
    assert not [t.name for t in metadata.topics if t.name.startswith(f"{topic}-")], "no topic was created"
