"""DeleteTopics naming one topic several times, in one request and in requests racing on several
connections: every entry is answered, as the real Kafka answers it, and the broker stays up -- odradek on
a single node and in ZooKeeper mode.

Kafka (``KafkaApis.handleDeleteTopicsRequest``) answers each entry of a request; a name repeated gets NONE
each time (its one deletion's result is set on the first entry, so with ``timeout_ms`` 0 only that one is
REQUEST_TIMED_OUT). A request racing another's deletion of the same topic gets NONE while the topic is
being deleted (``TopicAlreadyMarkedForDeletionException`` is swallowed), UNKNOWN_TOPIC_OR_PARTITION once
it is gone.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Iterator

import kafka_jvm
import pytest

from odradek import Broker
from odradek.protocol.api import ApiKey, decode_response, encode_request
from odradek.protocol.errors import ErrorCode
from tests.conftest import Wire
from tests.polling import wait_for

CONNECTIONS = 8


@pytest.fixture(scope="module")
def odradek_in_zookeeper(real_kafka, tmp_path_factory) -> Iterator[Broker]:
    """odradek in ZooKeeper mode (its own chroot in the run's ZooKeeper): there a deletion is a mark the
    controller acts on, and the answer waits for the topic to leave the metadata."""
    if real_kafka.zookeeper is None:
        pytest.fail("a ZooKeeper of this run is needed (ODRADEK_COMPAT_KAFKA points at a Kafka this run did not start)", pytrace=False)
    config = {"broker.id": "0", "zookeeper.connect": f"{real_kafka.zookeeper.connect}/delete-races-{uuid.uuid4().hex[:8]}", **kafka_jvm.BROKER_SETTINGS}
    with Broker(log_dir=tmp_path_factory.mktemp("delete-races-zk"), subprocess=True, config=config) as broker:
        # Serving as soon as it listens; the controller (which alone takes CreateTopics) a moment later.
        wait_for(lambda: Wire.call_once(broker.bootstrap, ApiKey.Metadata, 1, {"topics": []}).controller_id == 0, 30, "broker 0 as controller")
        yield broker


@pytest.fixture(params=["odradek", "odradek-zookeeper", "kafka"])
def bootstrap(request, real_kafka) -> str:
    if request.param == "kafka":
        return real_kafka.bootstrap
    return request.getfixturevalue("odradek_as_kafka" if request.param == "odradek" else "odradek_in_zookeeper").bootstrap


def create_topics(wire, count: int) -> list[str]:
    names = [f"delete-race-{uuid.uuid4().hex[:8]}" for _ in range(count)]
    topics = [{"name": n, "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []} for n in names]
    response = wire.call(ApiKey.CreateTopics, 5, {"topics": topics, "timeout_ms": 30000, "validate_only": False})
    assert [t.error_code for t in response.topics] == [ErrorCode.NONE] * count
    return names


def remaining(wire, names: list[str]) -> list[str]:
    body = {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": False}
    response = wire.call(ApiKey.Metadata, 4, body)
    return [t.name for t in response.topics if t.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


@pytest.mark.parametrize(("version", "timeout_ms", "expected"), [
    (5, 30000, [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NONE, ErrorCode.NONE]),
    (1, 30000, [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NONE, ErrorCode.NONE]),
    (5, 0, [ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NONE, ErrorCode.NONE]),
])
def test_a_name_repeated_in_one_request_is_answered_per_entry(bootstrap, connect, version, timeout_ms, expected):
    wire = connect(bootstrap)
    [name] = create_topics(wire, 1)
    missing = f"delete-race-missing-{uuid.uuid4().hex[:8]}"
    response = wire.call(ApiKey.DeleteTopics, version, {"topic_names": [name, missing, name, name], "timeout_ms": timeout_ms})
    assert [(r.name, r.error_code) for r in response.responses] == list(zip([name, missing, name, name], expected))
    if timeout_ms:
        assert remaining(wire, [name]) == []


def test_a_name_repeated_by_name_and_by_id_is_answered_per_entry(bootstrap, connect):
    wire = connect(bootstrap)
    [name] = create_topics(wire, 1)
    [topic] = wire.call(ApiKey.Metadata, 12, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}).topics
    entries = [{"name": name, "topic_id": uuid.UUID(int=0)}, {"name": None, "topic_id": topic.topic_id}, {"name": name, "topic_id": uuid.UUID(int=0)}]
    response = wire.call(ApiKey.DeleteTopics, 6, {"topics": entries, "timeout_ms": 30000})
    assert [(r.name, r.error_code) for r in response.responses] == [(name, ErrorCode.NONE)] * 3
    assert remaining(wire, [name]) == []


def test_deletions_racing_on_many_connections_are_each_answered(bootstrap, connect):
    """The same topics (each named twice) deleted by requests sent at once on several connections: every
    connection gets its answer, each entry NONE (deleted, or being deleted by a racing request) or
    UNKNOWN_TOPIC_OR_PARTITION (already gone when the request looked), and the topics are gone."""
    setup = connect(bootstrap)
    for _ in range(3):
        names = create_topics(setup, 5)
        wires = [connect(bootstrap) for _ in range(CONNECTIONS)]
        body = {"topic_names": names + names, "timeout_ms": 30000}
        for correlation_id, wire in zip(itertools.count(1), wires):
            wire.send(encode_request(ApiKey.DeleteTopics, 5, correlation_id, body, client_id="delete-race"))
        answers = []
        for correlation_id, wire in zip(itertools.count(1), wires):
            got, response = decode_response(ApiKey.DeleteTopics, 5, wire.read_frame())
            assert got == correlation_id
            assert [r.name for r in response.responses] == names + names
            answers += [r.error_code for r in response.responses]
        assert set(answers) <= {ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert ErrorCode.NONE in answers
        assert remaining(setup, names) == []
