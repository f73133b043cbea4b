"""Dynamic broker configs (AlterConfigs / IncrementalAlterConfigs on BROKER resources), on the wire.

The same requests go to odradek and to the real Kafka, and the answers (errors, values, sources, synonyms)
must match. Kafka applies a change when ZooKeeper notifies it, a moment after answering, so its
DescribeConfigs is read again for a while until it shows the change. The real Kafka is shared by the test run: its dynamic configs
are emptied again afterwards, and the values set meanwhile keep more data than Kafka's defaults, never less.
"""

from __future__ import annotations

import itertools
import time

import pytest

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import build_batch

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND = 0, 1, 2
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
KEYS = ["log.retention.ms", "log.retention.hours", "log.segment.bytes", "num.io.threads", "log.cleaner.threads", "message.max.bytes"]
EIGHT_DAYS, NINE_DAYS = "691200000", "777600000"


@pytest.fixture(scope="module")
def odradek(tmp_path_factory):
    config = {"log.retention.check.interval.ms": "300", "log.segment.delete.delay.ms": "0"}
    with Broker(tmp_path_factory.mktemp("dynamic"), config=config, subprocess=True) as b:
        yield b


def incremental(wire, name: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False) -> tuple[int, str | None]:
    body = {
        "resources": [{"resource_type": BROKER, "resource_name": name, "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
        "validate_only": validate_only,
    }
    response = wire.call(ApiKey.IncrementalAlterConfigs, 1, body).responses[0]
    return response.error_code, response.error_message


def alter(wire, name: str, configs: dict[str, str]) -> tuple[int, str | None]:
    body = {"resources": [{"resource_type": BROKER, "resource_name": name, "configs": [{"name": k, "value": v} for k, v in configs.items()]}], "validate_only": False}
    response = wire.call(ApiKey.AlterConfigs, 1, body).responses[0]
    return response.error_code, response.error_message


def describe(wire, resource_type: int, name: str, keys: list[str] | None = None) -> dict[str, tuple]:
    """name -> (value, source, read_only, synonyms) of each config."""
    body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}], "include_synonyms": True, "include_documentation": False}
    result = wire.call(ApiKey.DescribeConfigs, 4, body).results[0]
    assert result.error_code == ErrorCode.NONE, result
    return {c.name: (c.value, c.config_source, c.read_only, [(s.name, s.value, s.source) for s in c.synonyms]) for c in result.configs}


def as_kafka_settles(read, expected):
    """Kafka's answer once it has applied the change it acknowledged (within 15 s), to compare with ours."""
    deadline = time.monotonic() + 15
    while (current := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    return current


STEPS: list[tuple[str, str, object]] = [
    ("incremental", "0", [("log.retention.ms", SET, NINE_DAYS)]),
    ("incremental", "", [("log.retention.ms", SET, EIGHT_DAYS), ("log.segment.bytes", SET, "1000000000")]),
    ("incremental", "0", [("broker.id", SET, "3")]),
    ("incremental", "0", [("log.retention.hours", SET, "3")]),
    ("incremental", "0", [("log.retention.ms", SET, "abc")]),
    ("incremental", "0", [("log.segment.bytes", SET, "1")]),
    ("incremental", "0", [("num.io.threads", SET, "100")]),
    ("incremental", "0", [("num.io.threads", SET, "3")]),
    ("incremental", "0", [("num.io.threads", SET, "0")]),
    ("incremental", "0", [("log.cleaner.threads", SET, "0")]),
    ("incremental", "0", [("log.cleaner.threads", SET, "3")]),
    ("incremental", "5", [("log.retention.ms", SET, NINE_DAYS)]),
    ("incremental", "x", [("log.retention.ms", SET, NINE_DAYS)]),
    ("incremental", "0", [("log.retention.ms", APPEND, "1")]),
    ("incremental", "0", [("log.retention.ms", 9, "1")]),
    ("incremental", "0", [("message.max.bytes", SET, "2000000")]),
    ("validate_only", "0", [("log.retention.ms", SET, "1")]),
    ("incremental", "0", [("some.custom.key", SET, "1")]),
    ("alter", "0", {"log.segment.bytes": "1000000001"}),
    ("alter", "0", {"log.retention.hours": "1"}),
    ("incremental", "", [("log.segment.bytes", DELETE, None)]),
]


def run(wire, step) -> tuple[int, str | None]:
    kind, name, ops = step
    if kind == "alter":
        return alter(wire, name, ops)
    return incremental(wire, name, ops, validate_only=kind == "validate_only")


def states(wire, topic: str) -> list[dict]:
    return [describe(wire, BROKER, "0", KEYS), describe(wire, BROKER, ""), describe(wire, TOPIC, topic, ["retention.ms", "segment.bytes", "max.message.bytes"])]


_topics = itertools.count()


def create_topic(wire, configs: dict[str, str] | None = None) -> str:
    name = f"dynamic-broker-config-{time.time_ns()}-{next(_topics)}"
    topic = {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
    result = wire.call(ApiKey.CreateTopics, 4, {"topics": [topic], "timeout_ms": 10000}).topics[0]
    assert result.error_code == ErrorCode.NONE, result
    return name


def test_alter_and_describe_broker_configs_as_kafka_does(odradek, real_kafka, connect):
    ours, theirs = connect(odradek.bootstrap), connect(real_kafka.bootstrap)
    our_topic, their_topic = create_topic(ours), create_topic(theirs)
    try:
        for step in STEPS:
            answer = run(ours, step)
            assert answer == run(theirs, step), step
            if answer[0] == ErrorCode.NONE:
                expected = states(ours, our_topic)
                assert as_kafka_settles(lambda: states(theirs, their_topic), expected) == expected, step
    finally:
        for wire in (ours, theirs):
            assert alter(wire, "0", {}) == alter(wire, "", {}) == (ErrorCode.NONE, None)
    expected = states(ours, our_topic)
    assert as_kafka_settles(lambda: states(theirs, their_topic), expected) == expected
    assert expected[1] == {}


def produce(wire, topic: str, size: int) -> int:
    body = {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": build_batch([(None, b"v" * size)])}]}]}
    return wire.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0].error_code


def log_start_offset(wire, topic: str) -> int:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -2}]}]}
    return wire.call(ApiKey.ListOffsets, 7, body).topics[0].partitions[0].offset


def test_topics_follow_changed_defaults_at_run_time_and_after_a_restart(odradek, connect):
    wire = connect(odradek.bootstrap)
    follower, own = create_topic(wire), create_topic(wire, {"retention.ms": "3600000"})
    try:
        assert incremental(wire, "", [("log.segment.bytes", SET, "1024")]) == (ErrorCode.NONE, None)
        assert incremental(wire, "0", [("message.max.bytes", SET, "1500")]) == (ErrorCode.NONE, None)
        assert produce(wire, follower, 2000) == ErrorCode.MESSAGE_TOO_LARGE
        for _ in range(3):
            assert [produce(wire, t, 700) for t in (follower, own)] == [ErrorCode.NONE] * 2
        assert incremental(wire, "", [("log.retention.ms", SET, "1")]) == (ErrorCode.NONE, None)
        deadline = time.monotonic() + 15
        while log_start_offset(wire, follower) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert log_start_offset(wire, follower) == 3  # every record has expired, as in Kafka the active segment too
        assert log_start_offset(wire, own) == 0  # its own retention.ms wins
        before = describe(wire, TOPIC, follower, ["retention.ms", "segment.bytes", "max.message.bytes"])
        assert before["retention.ms"][:2] == ("1", DYNAMIC_DEFAULT)
        assert before["max.message.bytes"][:2] == ("1500", DYNAMIC_BROKER)

        odradek.restart()
        wire = connect(odradek.bootstrap)
        assert describe(wire, TOPIC, follower, ["retention.ms", "segment.bytes", "max.message.bytes"]) == before
        assert produce(wire, follower, 2000) == ErrorCode.MESSAGE_TOO_LARGE
    finally:
        assert alter(wire, "0", {}) == alter(wire, "", {}) == (ErrorCode.NONE, None)
    assert produce(wire, follower, 2000) == ErrorCode.NONE


def test_stored_configs_that_are_not_valid_are_ignored_at_start_up(odradek, connect):
    """As Kafka's fromPersistentProps: a stored key that is not dynamic, or a value that does not parse (a
    hand-edited metadata file, an older version's keys), is dropped with an error; the broker starts."""
    import json

    wire = connect(odradek.bootstrap)
    assert incremental(wire, "", [("log.retention.ms", SET, EIGHT_DAYS)]) == (ErrorCode.NONE, None)
    odradek.stop()
    state_file = odradek.log_dir / "odradek-controller.json"
    state = json.loads(state_file.read_text())
    state["broker_configs"]["<default>"].update({"broker.id": "7", "log.segment.bytes": "lots"})
    state["broker_configs"]["0"] = {"num.io.threads": "-1", "log.retention.bytes": "1000000000000"}
    state_file.write_text(json.dumps(state))
    odradek.start()
    wire = connect(odradek.bootstrap)
    try:
        assert {k: v[0] for k, v in describe(wire, BROKER, "").items()} == {"log.retention.ms": EIGHT_DAYS}
        kept = describe(wire, BROKER, "0", ["log.retention.bytes", "num.io.threads", "broker.id"])
        assert {k: v[:2] for k, v in kept.items()} == {"log.retention.bytes": ("1000000000000", DYNAMIC_BROKER), "num.io.threads": ("8", DEFAULT), "broker.id": ("-1", DEFAULT)}
    finally:
        assert alter(wire, "0", {}) == alter(wire, "", {}) == (ErrorCode.NONE, None)
