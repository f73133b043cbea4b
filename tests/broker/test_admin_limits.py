"""Admin requests that must leave no broker state broken or half-made: null config values are refused at
the door as Kafka 3.9 refuses them (each answer compared with the real Kafka's), and partition counts
beyond what one request may create are refused whole.
"""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import build_batch

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


def topic_names(wire) -> set[str]:
    return {t.name for t in wire.call(ApiKey.Metadata, 1, {"topics": None}).topics}


EXCESSIVE = (E.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")


def test_partition_counts_beyond_one_requests_bound_are_refused_whole(broker, connect) -> None:
    """Kafka's controller bounds the records one request writes (10,000: a topic record, one per partition,
    one per config) and refuses the whole request beyond it; ZooKeeper-mode Kafka would run out of heap
    on 2^31-1 partitions instead."""
    wire = connect(broker.bootstrap)
    huge, big, small, odd = name("huge"), name("big"), name("small"), name("odd")
    for validate_only in (True, False):
        assert [r[1:] for r in create(wire, [(huge, 2**31 - 1, {})], validate_only)] == [EXCESSIVE]
    assert [r[1:] for r in create(wire, [(big, 9_999, {"retention.ms": "1000"})])] == [EXCESSIVE]
    assert [r[1:] for r in create(wire, [(big, 5_000, {}), (small, 4_999, {})])] == [EXCESSIVE, EXCESSIVE]
    assert not {huge, big, small} & topic_names(wire)
    assert create(wire, [(odd, 1, {})])[0][1] == E.NONE
    body = {"topics": [{"name": odd, "count": 2**31 - 1, "assignments": None}], "timeout_ms": 5000, "validate_only": False}
    answer = wire.call(ApiKey.CreatePartitions, 1, body).results[0]
    assert (answer.error_code, answer.error_message) == EXCESSIVE


def produce_one(wire, topic: str, partition: int = 0) -> int:
    records = build_batch([(None, b"v")])
    body = {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    return wire.call(ApiKey.Produce, 7, body).responses[0].partition_responses[0].error_code


def memory_maps(pid: int) -> int:
    with open(f"/proc/{pid}/maps") as maps:
        return sum(1 for _ in maps)


def test_a_large_topic_is_created_without_stalling_others_or_mapping_idle_indexes(connect) -> None:
    """Creating thousands of partitions maps no index of theirs (vm.max_map_count is 65,530) and leaves
    the event loop serving: another client's produce latency stays low throughout."""
    partitions = 1_000
    with Broker(config={}, subprocess=True) as broker:
        wire, other = connect(broker.bootstrap), connect(broker.bootstrap)
        assert create(wire, [("busy", 1, {})])[0][1] == E.NONE
        maps_before = memory_maps(broker.pid)
        latencies: list[float] = []
        done = threading.Event()

        def keep_producing() -> None:
            while not done.is_set():
                started = time.monotonic()
                assert produce_one(other, "busy") == E.NONE
                latencies.append(time.monotonic() - started)
                time.sleep(0.02)

        producer = threading.Thread(target=keep_producing)
        producer.start()
        try:
            started = time.monotonic()
            wire.sock.settimeout(300)
            assert create(wire, [("large", partitions, {})])[0][1] == E.NONE
            took = time.monotonic() - started
        finally:
            done.set()
            producer.join(30)
        assert len(latencies) > took / 0.5, "the other client kept producing while the topic was created"
        assert max(latencies) < 2.0, f"a produce waited {max(latencies):.2f} s while the topic was created in {took:.1f} s"
        assert memory_maps(broker.pid) - maps_before < 50
        assert produce_one(wire, "large", partitions - 1) == E.NONE
        assert memory_maps(broker.pid) - maps_before < 52, "only the partition written to maps its indexes"


INVALID_VALUES = [
    {"retention.ms": "abc"},
    {"segment.bytes": "99999999999"},
    {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
    {"preallocate": "yes"},
    {"cleanup.policy": "bogus"},
    {"segment.bytes": "1"},
]


def invalid_value_answers(wire, topic: str) -> list[tuple[int, str | None]]:
    assert create(wire, [(topic, 1, {})])[0][1] == E.NONE
    answers = []
    for configs in INVALID_VALUES:
        answers.append(create(wire, [(f"{topic}-x", 1, configs)])[0][1:])
        resources = [{"resource_type": TOPIC, "resource_name": topic, "configs": [{"name": k, "value": v} for k, v in configs.items()]}]
        answers += [(r.error_code, r.error_message) for r in wire.call(ApiKey.AlterConfigs, 1, {"resources": resources, "validate_only": False}).responses]
        ops = [{"name": k, "config_operation": SET, "value": v} for k, v in configs.items()]
        resources = [{"resource_type": TOPIC, "resource_name": topic, "configs": ops}]
        answers += [(r.error_code, r.error_message) for r in wire.call(ApiKey.IncrementalAlterConfigs, 1, {"resources": resources, "validate_only": False}).responses]
    return answers


def test_invalid_config_values_are_answered_as_kafka_answers_them(broker, real_kafka, connect) -> None:
    topic = name("invalid-values")
    ours = invalid_value_answers(connect(broker.bootstrap), topic)
    assert ours == invalid_value_answers(connect(real_kafka.bootstrap), topic)
    assert ours[0] == (E.INVALID_CONFIG, "Invalid value abc for configuration retention.ms: Not a number of type LONG")
    assert ours[1] == (E.INVALID_CONFIG, f"Invalid config value for resource ConfigResource(type=TOPIC, name='{topic}'): {ours[0][1]}")
