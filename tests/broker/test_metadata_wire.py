"""Metadata on the wire: what every client's first requests see."""

from __future__ import annotations

import time
import uuid

import pytest

from odradek import Broker
from odradek.broker.authorization import AUTHORIZED_OPERATIONS_OMITTED
from odradek.protocol.api import APIS, ApiKey
from odradek.protocol.errors import ErrorCode


@pytest.fixture(scope="module")
def broker():
    with Broker(config={"num.partitions": "3"}) as b:
        yield b


def metadata(wire, version: int, topics, allow_auto: bool = True, **extra):
    body = {"topics": None if topics is None else [{"name": t} for t in topics], "allow_auto_topic_creation": allow_auto, **extra}
    return wire.call(ApiKey.Metadata, version, body)


def test_unknown_topic_is_auto_created_and_answered_leader_not_available_first(broker, connect):
    wire = connect(broker.bootstrap)
    first = metadata(wire, 12, ["auto-created"]).topics[0]
    assert first.error_code == ErrorCode.LEADER_NOT_AVAILABLE and first.partitions == []
    again = metadata(wire, 12, ["auto-created"]).topics[0]
    assert again.error_code == ErrorCode.NONE
    assert again.topic_id == first.topic_id != uuid.UUID(int=0)
    assert [p.partition_index for p in again.partitions] == [0, 1, 2]  # num.partitions


@pytest.mark.parametrize("version", range(0, 13))
def test_every_version_describes_brokers_and_partitions(broker, connect, version: int):
    wire = connect(broker.bootstrap)
    name = f"meta-v{version}"
    metadata(wire, max(version, 4), [name])
    response = metadata(wire, version, [name])
    (b,) = response.brokers
    host, port = broker.bootstrap.rsplit(":", 1)
    assert (b.host, b.port) == (host, int(port))
    topic = response.topics[0]
    assert topic.error_code == ErrorCode.NONE and topic.name == name
    for p in topic.partitions:
        assert p.leader_id == b.node_id and p.replica_nodes == [b.node_id] and p.isr_nodes == [b.node_id]
        if version >= 7:
            assert p.leader_epoch >= 0  # never the unknown epoch for a live partition
    if version >= 2:
        assert response.cluster_id
    if version >= 1:
        assert response.controller_id == b.node_id


def test_auto_creation_refused_by_the_request(broker, connect):
    wire = connect(broker.bootstrap)
    topic = metadata(wire, 12, ["not-wanted"], allow_auto=False).topics[0]
    assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "not-wanted" not in {t.name for t in metadata(wire, 12, None).topics}


def test_auto_creation_disabled_on_the_broker(tmp_path, connect):
    with Broker(log_dir=tmp_path, config={"auto.create.topics.enable": "false"}) as b:
        wire = connect(b.bootstrap)
        assert metadata(wire, 3, ["nope"]).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # before v4: always asks


@pytest.mark.parametrize("name", ["", "a" * 250, "bad name", "bad/name", ".."])
def test_invalid_topic_names(broker, connect, name: str):
    assert metadata(connect(broker.bootstrap), 12, [name]).topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_topic_lookup_by_id(broker, connect):
    wire = connect(broker.bootstrap)
    metadata(wire, 12, ["by-id"])
    topic_id = metadata(wire, 12, ["by-id"]).topics[0].topic_id
    found = wire.call(ApiKey.Metadata, 12, {"topics": [{"topic_id": topic_id, "name": None}], "allow_auto_topic_creation": False}).topics[0]
    assert (found.error_code, found.name) == (ErrorCode.NONE, "by-id")
    missing = wire.call(ApiKey.Metadata, 12, {"topics": [{"topic_id": uuid.uuid4(), "name": None}], "allow_auto_topic_creation": False}).topics[0]
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_authorized_operations_only_when_asked(broker, connect):
    wire = connect(broker.bootstrap)
    metadata(wire, 8, ["ops"])
    plain = metadata(wire, 8, ["ops"])
    assert plain.cluster_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    assert plain.topics[0].topic_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    asked = metadata(wire, 8, ["ops"], include_cluster_authorized_operations=True, include_topic_authorized_operations=True)
    topic_ops = asked.topics[0].topic_authorized_operations
    assert topic_ops & (1 << 3) and topic_ops & (1 << 4)  # READ, WRITE
    assert asked.cluster_authorized_operations & (1 << 9)  # CLUSTER_ACTION


def test_all_topics_include_internal_ones_marked_internal(broker, connect):
    wire = connect(broker.bootstrap)
    deadline = time.monotonic() + 10
    while wire.call(ApiKey.FindCoordinator, 3, {"key": "some-group", "key_type": 0}).error_code:  # until the offsets topic is made
        assert time.monotonic() < deadline
        time.sleep(0.02)
    topics = {t.name: t for t in metadata(wire, 12, None).topics}
    assert topics["__consumer_offsets"].is_internal is True
    assert all(not t.is_internal for name, t in topics.items() if name != "__consumer_offsets")


def test_metadata_versions_advertised_are_all_of_kafkas(broker, connect):
    response = connect(broker.bootstrap).call(ApiKey.ApiVersions, 3, {"client_software_name": "t", "client_software_version": "1"})
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[ApiKey.Metadata] == (APIS[ApiKey.Metadata].kafka_3_9.low, APIS[ApiKey.Metadata].kafka_3_9.high) == (0, 12)


def test_names_colliding_on_period_and_underscore(broker, connect, caplog):
    wire = connect(broker.bootstrap)
    with caplog.at_level("WARNING", logger="odradek.server"):
        created = wire.call(ApiKey.CreateTopics, 7, {"topics": [{"name": "my.topic", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000})
    assert created.topics[0].error_code == ErrorCode.NONE
    # Kafka warns of period/underscore collisions only in kafka-topics.sh, never in the broker's log.
    assert not any("collide" in r.getMessage() for r in caplog.records)
    clash = wire.call(ApiKey.CreateTopics, 7, {"topics": [{"name": "my_topic", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000})
    assert clash.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "collides" in clash.topics[0].error_message


@pytest.mark.parametrize("version", [10, 11])
@pytest.mark.parametrize("requested", [{"name": "by-id-too-early", "topic_id": uuid.UUID(int=7)}, {"name": None, "topic_id": uuid.UUID(int=7)}], ids=["named", "unnamed"])
def test_topic_ids_before_v12_refused_as_kafka_refuses_them(broker, real_kafka, connect, version: int, requested: dict):
    """v10 and v11 have the topic id field, but KafkaApis refuses the whole request with INVALID_REQUEST
    (MetadataRequest's error response: every requested topic, no brokers, no cluster id, controller -1)."""

    def answer(bootstrap: str) -> dict:
        response = connect(bootstrap).call(ApiKey.Metadata, version, {"topics": [requested], "allow_auto_topic_creation": True})
        return {
            "brokers": response.brokers,
            "cluster_id": response.cluster_id,
            "controller_id": response.controller_id,
            "cluster_authorized_operations": response.cluster_authorized_operations,
            "topics": [(t.error_code, t.name, t.topic_id, t.is_internal, t.partitions, t.topic_authorized_operations) for t in response.topics],
        }

    expected = {
        "brokers": [],
        "cluster_id": None,
        "controller_id": -1,
        "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        "topics": [(ErrorCode.INVALID_REQUEST, requested["name"] or "", requested["topic_id"], False, [], AUTHORIZED_OPERATIONS_OMITTED)],
    }
    assert answer(real_kafka.bootstrap) == expected
    assert answer(broker.bootstrap) == expected


@pytest.mark.parametrize("version", [4, 9, 12])
def test_a_topic_named_many_times_is_answered_once_as_by_kafka(broker, real_kafka, connect, version: int):
    """KafkaApis takes the requested names as a set: each distinct name is answered once (its order past four
    names is Java's hash order, so the answers are compared sorted). Without auto-creation: the real Kafka
    is shared."""
    names = ["never-created-named-twice", "never-created-named-twice", "", "never-created-named-once", "", "never-created-named-twice"]

    def answer(bootstrap: str) -> list:
        response = metadata(connect(bootstrap), version, names, allow_auto=False)
        return sorted((t.name, t.error_code) for t in response.topics)

    expected = [("", ErrorCode.INVALID_TOPIC_EXCEPTION), ("never-created-named-once", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("never-created-named-twice", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert answer(real_kafka.bootstrap) == expected
    assert answer(broker.bootstrap) == expected
