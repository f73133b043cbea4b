"""The admin APIs on the wire, at every version the broker advertises, against a real broker over a socket.

Client libraries pick one version each; these tests send every version and check the fields a client of
that version reads, and the error codes Kafka answers with.
"""

from __future__ import annotations

import itertools
import time
import uuid

import pytest

from odradek import Broker
from odradek.broker.kafka_apis import HANDLERS
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import build_batch

TOPIC, BROKER = 2, 4
TOPIC_SOURCE, STATIC_SOURCE, DEFAULT_SOURCE = 1, 4, 5
LIST_TYPE, LONG_TYPE = 7, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
BROKER_CONFIG = {"log.segment.bytes": "536870912", "log.retention.hours": "24"}


@pytest.fixture(scope="module")
def broker():
    with Broker(config=BROKER_CONFIG) as b:
        yield b


@pytest.fixture
def wire(broker, connect):
    return connect(broker.bootstrap)


_names = itertools.count()


def new_topic(wire, partitions: int = 1, configs: dict[str, str] | None = None, name: str | None = None) -> str:
    name = name or f"admin-wire-{next(_names)}"
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        "timeout_ms": 5000,
    }
    result = wire.call(ApiKey.CreateTopics, 4, body).topics[0]
    assert result.error_code == ErrorCode.NONE, result
    return name


def versions(api: ApiKey) -> range:
    """Every version the broker serves (and advertises), not every one declared: those include Kafka 4.4's."""
    return range(HANDLERS[api].min_version, HANDLERS[api].max_version + 1)


def describe(wire, version: int, resource_type: int, name: str, keys=None, synonyms=False, docs=False):
    body = {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": synonyms,
        "include_documentation": docs,
    }
    return wire.call(ApiKey.DescribeConfigs, version, body).results[0]


def by_name(result) -> dict:
    return {c.name: c for c in result.configs}


def synonyms_of(entry) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


# -- ApiVersions --------------------------------------------------------------------------------------------


def test_api_versions_advertise_every_admin_version(wire):
    ranges = {k.api_key: (k.min_version, k.max_version) for k in wire.call(ApiKey.ApiVersions, 3, {"client_software_name": "t", "client_software_version": "1"}).api_keys}
    expected = {
        ApiKey.DeleteTopics: (0, 6),
        ApiKey.DeleteRecords: (0, 2),
        ApiKey.DescribeConfigs: (0, 4),
        ApiKey.AlterConfigs: (0, 2),
        ApiKey.DescribeLogDirs: (0, 4),
        ApiKey.CreatePartitions: (0, 3),
        ApiKey.IncrementalAlterConfigs: (0, 1),
        ApiKey.DescribeCluster: (0, 1),
        ApiKey.DescribeProducers: (0, 0),
    }
    assert {k: ranges[k] for k in expected} == expected


# -- DescribeConfigs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.DescribeConfigs))
def test_describe_topic_configs_report_real_values_and_sources(wire, version):
    name = new_topic(wire, configs={"cleanup.policy": "compact"})
    result = describe(wire, version, TOPIC, name)
    assert result.error_code == ErrorCode.NONE
    configs = by_name(result)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "86400000"  # log.retention.hours=24 on the broker
    assert configs["segment.bytes"].value == "536870912"
    assert configs["max.message.bytes"].value == "1048588"
    assert not configs["cleanup.policy"].read_only and not configs["cleanup.policy"].is_sensitive
    if version == 0:
        assert not configs["cleanup.policy"].is_default
        assert configs["max.message.bytes"].is_default
    else:
        assert configs["cleanup.policy"].config_source == TOPIC_SOURCE
        assert configs["segment.bytes"].config_source == STATIC_SOURCE
        assert configs["max.message.bytes"].config_source == DEFAULT_SOURCE


@pytest.mark.parametrize("version", range(1, 5))
def test_describe_topic_configs_synonyms(wire, version):
    name = new_topic(wire, configs={"cleanup.policy": "compact", "segment.bytes": "1048576"})
    configs = by_name(describe(wire, version, TOPIC, name, synonyms=True))
    assert synonyms_of(configs["cleanup.policy"]) == [("cleanup.policy", "compact", TOPIC_SOURCE), ("log.cleanup.policy", "delete", DEFAULT_SOURCE)]
    assert synonyms_of(configs["segment.bytes"]) == [
        ("segment.bytes", "1048576", TOPIC_SOURCE),
        ("log.segment.bytes", "536870912", STATIC_SOURCE),
        ("log.segment.bytes", "1073741824", DEFAULT_SOURCE),
    ]
    assert synonyms_of(configs["segment.ms"]) == []  # Kafka lists from the primary key log.roll.ms, unset
    assert configs["segment.ms"].config_source == DEFAULT_SOURCE
    # Kafka's quirk: log.retention.ms (the primary synonym) is unset, so log.retention.hours is not listed
    assert synonyms_of(configs["retention.ms"]) == []
    assert configs["retention.ms"].config_source == DEFAULT_SOURCE
    without = by_name(describe(wire, version, TOPIC, name, synonyms=False))
    assert synonyms_of(without["cleanup.policy"]) == []


@pytest.mark.parametrize("version", range(3, 5))
def test_describe_configs_types_and_documentation(wire, version):
    name = new_topic(wire)
    configs = by_name(describe(wire, version, TOPIC, name, docs=True))
    assert configs["cleanup.policy"].config_type == LIST_TYPE
    assert configs["retention.ms"].config_type == LONG_TYPE
    assert "retention policy" in configs["cleanup.policy"].documentation
    undocumented = by_name(describe(wire, version, TOPIC, name, docs=False))
    assert undocumented["cleanup.policy"].documentation is None


@pytest.mark.parametrize("version", versions(ApiKey.DescribeConfigs))
def test_describe_configs_keys_filter_and_topic_errors(wire, version):
    name = new_topic(wire)
    only = describe(wire, version, TOPIC, name, keys=["cleanup.policy", "no.such.key"])
    assert [c.name for c in only.configs] == ["cleanup.policy"]
    assert describe(wire, version, TOPIC, "admin-wire-missing").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert describe(wire, version, TOPIC, "bad/name").error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


@pytest.mark.parametrize("version", versions(ApiKey.DescribeConfigs))
def test_describe_broker_configs(wire, version, broker):
    result = describe(wire, version, BROKER, "0", synonyms=True)
    assert result.error_code == ErrorCode.NONE
    configs = by_name(result)
    assert configs["log.segment.bytes"].value == "536870912"
    assert configs["num.partitions"].value == "1"
    assert configs["auto.create.topics.enable"].value == "true"
    assert configs["log.dirs"].value == str(broker.log_dir)
    assert configs["log.retention.ms"].value is None
    # Read-only unless AlterConfigs may change it at run time (Kafka's DynamicBrokerConfig.AllDynamicConfigs).
    assert [configs[k].read_only for k in ("log.segment.bytes", "log.retention.ms", "log.retention.hours", "broker.id", "log.dirs")] == [False, False, True, True, True]
    if version == 0:
        assert not configs["log.segment.bytes"].is_default and configs["num.partitions"].is_default
    else:
        assert configs["log.segment.bytes"].config_source == STATIC_SOURCE
        assert configs["num.partitions"].config_source == DEFAULT_SOURCE
        assert synonyms_of(configs["log.retention.hours"]) == [("log.retention.hours", "24", STATIC_SOURCE), ("log.retention.hours", "168", DEFAULT_SOURCE)]
        assert synonyms_of(configs["log.retention.ms"]) == []


@pytest.mark.parametrize("version", versions(ApiKey.DescribeConfigs))
def test_describe_broker_resource_names(wire, version):
    default = describe(wire, version, BROKER, "")
    assert (default.error_code, list(default.configs)) == (ErrorCode.NONE, [])  # no dynamic cluster defaults
    assert describe(wire, version, BROKER, "7").error_code == ErrorCode.INVALID_REQUEST
    assert describe(wire, version, BROKER, "seven").error_code == ErrorCode.INVALID_REQUEST


# -- AlterConfigs and IncrementalAlterConfigs ---------------------------------------------------------------


def alter(wire, version: int, resource_type: int, name: str, configs: dict[str, str | None], validate_only=False):
    body = {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "validate_only": validate_only,
    }
    return wire.call(ApiKey.AlterConfigs, version, body).responses[0]


def incremental(wire, version: int, name: str, ops: list[tuple[str, int, str | None]], validate_only=False, resource_type=TOPIC):
    body = {
        "resources": [
            {"resource_type": resource_type, "resource_name": name, "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}
        ],
        "validate_only": validate_only,
    }
    return wire.call(ApiKey.IncrementalAlterConfigs, version, body).responses[0]


def topic_value(wire, name: str, key: str) -> tuple[str | None, int]:
    entry = by_name(describe(wire, 4, TOPIC, name, keys=[key]))[key]
    return entry.value, entry.config_source


@pytest.mark.parametrize("version", versions(ApiKey.AlterConfigs))
def test_alter_configs_replaces_all_overrides(wire, version):
    name = new_topic(wire, configs={"cleanup.policy": "compact", "retention.ms": "1000"})
    result = alter(wire, version, TOPIC, name, {"retention.ms": "5000"})
    assert (result.error_code, result.resource_name, result.resource_type) == (ErrorCode.NONE, name, TOPIC)
    assert topic_value(wire, name, "retention.ms") == ("5000", TOPIC_SOURCE)
    assert topic_value(wire, name, "cleanup.policy") == ("delete", DEFAULT_SOURCE)  # left out: back to default


@pytest.mark.parametrize("version", versions(ApiKey.AlterConfigs))
def test_alter_configs_validate_only_and_errors(wire, version):
    name = new_topic(wire)
    assert alter(wire, version, TOPIC, name, {"cleanup.policy": "compact"}, validate_only=True).error_code == ErrorCode.NONE
    assert topic_value(wire, name, "cleanup.policy") == ("delete", DEFAULT_SOURCE)
    assert alter(wire, version, TOPIC, name, {"retention.ms": "soon"}).error_code == ErrorCode.INVALID_CONFIG
    assert alter(wire, version, TOPIC, name, {"cleanup.policy": "shred"}).error_code == ErrorCode.INVALID_CONFIG
    assert alter(wire, version, TOPIC, name, {"no.such.config": "1"}).error_code == ErrorCode.INVALID_CONFIG
    assert alter(wire, version, TOPIC, name, {"retention.ms": None}).error_code == ErrorCode.INVALID_REQUEST
    assert alter(wire, version, TOPIC, "admin-wire-missing", {"retention.ms": "1"}).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert alter(wire, version, TOPIC, "", {"retention.ms": "1"}).error_code == ErrorCode.INVALID_REQUEST
    assert topic_value(wire, name, "retention.ms") == ("86400000", DEFAULT_SOURCE)


@pytest.mark.parametrize("version", versions(ApiKey.AlterConfigs))
def test_alter_broker_configs_refuses_keys_that_are_not_dynamic(wire, version):
    refused = alter(wire, version, BROKER, "0", {"log.retention.hours": "1"})
    assert (refused.error_code, refused.error_message) == (ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.retention.hours)")
    assert alter(wire, version, BROKER, "", {}).error_code == ErrorCode.NONE
    assert alter(wire, version, BROKER, "3", {}).error_code == ErrorCode.INVALID_REQUEST


def test_alter_configs_rejects_a_resource_named_twice(wire):
    name = new_topic(wire)
    resource = {"resource_type": TOPIC, "resource_name": name, "configs": [{"name": "retention.ms", "value": "1"}]}
    responses = wire.call(ApiKey.AlterConfigs, 2, {"resources": [resource, resource], "validate_only": False}).responses
    assert [r.error_code for r in responses] == [ErrorCode.INVALID_REQUEST] * 2
    assert topic_value(wire, name, "retention.ms")[1] == DEFAULT_SOURCE


@pytest.mark.parametrize("version", versions(ApiKey.IncrementalAlterConfigs))
def test_incremental_alter_configs_operations(wire, version):
    name = new_topic(wire, configs={"retention.ms": "1000"})
    assert incremental(wire, version, name, [("cleanup.policy", APPEND, "compact")]).error_code == ErrorCode.NONE
    assert topic_value(wire, name, "cleanup.policy") == ("delete,compact", TOPIC_SOURCE)
    assert topic_value(wire, name, "retention.ms") == ("1000", TOPIC_SOURCE)  # untouched
    assert incremental(wire, version, name, [("cleanup.policy", APPEND, "compact")]).error_code == ErrorCode.NONE
    assert topic_value(wire, name, "cleanup.policy") == ("delete,compact", TOPIC_SOURCE)  # no duplicates
    assert incremental(wire, version, name, [("cleanup.policy", SUBTRACT, "delete"), ("retention.ms", DELETE, None)]).error_code == ErrorCode.NONE
    assert topic_value(wire, name, "cleanup.policy") == ("compact", TOPIC_SOURCE)
    assert topic_value(wire, name, "retention.ms") == ("86400000", DEFAULT_SOURCE)
    assert incremental(wire, version, name, [("segment.ms", SET, "60000")]).error_code == ErrorCode.NONE
    assert topic_value(wire, name, "segment.ms") == ("60000", TOPIC_SOURCE)


@pytest.mark.parametrize("version", versions(ApiKey.IncrementalAlterConfigs))
def test_incremental_alter_configs_errors(wire, version):
    name = new_topic(wire)
    assert incremental(wire, version, name, [("retention.ms", APPEND, "5")]).error_code == ErrorCode.INVALID_CONFIG
    assert incremental(wire, version, name, [("retention.ms", SET, "x")]).error_code == ErrorCode.INVALID_CONFIG
    assert incremental(wire, version, name, [("retention.ms", SET, None)]).error_code == ErrorCode.INVALID_REQUEST
    dupes = [("retention.ms", SET, "5"), ("retention.ms", DELETE, None)]
    assert incremental(wire, version, name, dupes).error_code == ErrorCode.INVALID_REQUEST
    assert incremental(wire, version, name, [("retention.ms", 9, "5")]).error_code == ErrorCode.INVALID_REQUEST
    assert incremental(wire, version, name, [("retention.ms", SET, "5")], validate_only=True).error_code == ErrorCode.NONE
    assert topic_value(wire, name, "retention.ms") == ("86400000", DEFAULT_SOURCE)
    assert incremental(wire, version, "admin-wire-missing", [("retention.ms", SET, "5")]).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert incremental(wire, version, "0", [("log.retention.ms", SET, "soon")], resource_type=BROKER).error_code == ErrorCode.INVALID_REQUEST


def test_config_changes_reach_the_running_log(wire):
    name = new_topic(wire)
    produce(wire, name, 20)
    assert incremental(wire, 1, name, [("max.message.bytes", SET, "1000")]).error_code == ErrorCode.NONE
    records = build_batch([(None, b"v" * 100)] * 20)
    body = {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": name, "partition_data": [{"index": 0, "records": records}]}]}
    assert wire.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert alter(wire, 2, TOPIC, name, {}).error_code == ErrorCode.NONE
    assert wire.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0].error_code == ErrorCode.NONE


# -- DeleteTopics and CreatePartitions ----------------------------------------------------------------------


def metadata_topics(wire) -> dict[str, int]:
    response = wire.call(ApiKey.Metadata, 12, {"topics": None, "allow_auto_topic_creation": False})
    return {t.name: len(t.partitions) for t in response.topics}


@pytest.mark.parametrize("version", versions(ApiKey.DeleteTopics))
def test_delete_topics_by_name(wire, version):
    name = new_topic(wire)
    body = {"topic_names": [name, "admin-wire-missing"], "topics": [{"name": name}, {"name": "admin-wire-missing"}], "timeout_ms": 5000}
    responses = {r.name: r.error_code for r in wire.call(ApiKey.DeleteTopics, version, body).responses}
    assert responses == {name: ErrorCode.NONE, "admin-wire-missing": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert name not in metadata_topics(wire)
    log_dirs = wire.call(ApiKey.DescribeLogDirs, 4, {"topics": None}).results
    assert name not in {t.name for d in log_dirs for t in d.topics}


def test_delete_topics_by_id(wire):
    name = new_topic(wire)
    topic_id = wire.call(ApiKey.Metadata, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False}).topics[0].topic_id
    unknown = uuid.uuid4()
    body = {"topics": [{"name": None, "topic_id": topic_id}, {"name": None, "topic_id": unknown}], "timeout_ms": 5000}
    responses = wire.call(ApiKey.DeleteTopics, 6, body).responses
    assert [(r.name, r.topic_id, r.error_code) for r in responses] == [
        (name, topic_id, ErrorCode.NONE),
        (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID),
    ]
    assert name not in metadata_topics(wire)
    both = {"topics": [{"name": "x", "topic_id": unknown}], "timeout_ms": 5000}
    assert wire.call(ApiKey.DeleteTopics, 6, both).responses[0].error_code == ErrorCode.INVALID_REQUEST


def test_delete_topics_without_waiting_answers_request_timed_out_but_deletes(wire):
    name = new_topic(wire)
    response = wire.call(ApiKey.DeleteTopics, 5, {"topic_names": [name], "timeout_ms": 0}).responses[0]
    assert response.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert name not in metadata_topics(wire)


def test_delete_topics_disabled(tmp_path, connect):
    with Broker(log_dir=tmp_path, config={"delete.topic.enable": "false"}) as b:
        w = connect(b.bootstrap)
        name = new_topic(w)
        for version, code in ((2, ErrorCode.INVALID_REQUEST), (3, ErrorCode.TOPIC_DELETION_DISABLED), (6, ErrorCode.TOPIC_DELETION_DISABLED)):
            body = {"topic_names": [name], "topics": [{"name": name}], "timeout_ms": 5000}
            assert w.call(ApiKey.DeleteTopics, version, body).responses[0].error_code == code
        assert name in metadata_topics(w)


def test_delete_topics_does_not_protect_internal_topics(tmp_path, connect):
    """Kafka's broker deletes __consumer_offsets when asked (only its kafka-topics tool refuses)."""
    with Broker(log_dir=tmp_path, config={"offsets.topic.num.partitions": "1"}) as b:
        w = connect(b.bootstrap)
        find = w.call(ApiKey.FindCoordinator, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        assert find.coordinators[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE  # Kafka's first answer: it creates the topic
        deadline = time.monotonic() + 10
        while "__consumer_offsets" not in metadata_topics(w):  # made in the background, published when made
            assert time.monotonic() < deadline
            time.sleep(0.02)
        response = w.call(ApiKey.DeleteTopics, 6, {"topics": [{"name": "__consumer_offsets"}], "timeout_ms": 5000}).responses[0]
        assert response.error_code == ErrorCode.NONE
        assert "__consumer_offsets" not in metadata_topics(w)


def create_partitions(wire, version: int, name: str, count: int, assignments=None, validate_only=False, timeout_ms=5000):
    topics = [{"name": name, "count": count, "assignments": None if assignments is None else [{"broker_ids": a} for a in assignments]}]
    body = {"topics": topics, "timeout_ms": timeout_ms, "validate_only": validate_only}
    return wire.call(ApiKey.CreatePartitions, version, body).results[0]


@pytest.mark.parametrize("version", versions(ApiKey.CreatePartitions))
def test_create_partitions(wire, version):
    name = new_topic(wire, partitions=2)
    assert create_partitions(wire, version, name, 5, validate_only=True).error_code == ErrorCode.NONE
    assert metadata_topics(wire)[name] == 2
    assert create_partitions(wire, version, name, 3).error_code == ErrorCode.NONE
    assert create_partitions(wire, version, name, 5, assignments=[[0], [0]]).error_code == ErrorCode.NONE
    assert metadata_topics(wire)[name] == 5
    for count, code in ((5, ErrorCode.INVALID_PARTITIONS), (4, ErrorCode.INVALID_PARTITIONS)):
        assert create_partitions(wire, version, name, count).error_code == code
    assert create_partitions(wire, version, name, 6, assignments=[[9]]).error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert create_partitions(wire, version, name, 7, assignments=[[0]]).error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert create_partitions(wire, version, "admin-wire-missing", 2).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert metadata_topics(wire)[name] == 5


def test_create_partitions_without_waiting(wire):
    name = new_topic(wire)
    assert create_partitions(wire, 3, name, 2, timeout_ms=0).error_code == ErrorCode.REQUEST_TIMED_OUT
    assert metadata_topics(wire)[name] == 2


# -- DescribeCluster ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.DescribeCluster))
def test_describe_cluster(wire, broker, version):
    response = wire.call(ApiKey.DescribeCluster, version, {"include_cluster_authorized_operations": True})
    assert response.error_code == ErrorCode.NONE
    host, port = broker.bootstrap.rsplit(":", 1)
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(0, host, int(port))]
    assert response.controller_id == 0
    assert len(response.cluster_id) == 22
    assert response.cluster_authorized_operations == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
    plain = wire.call(ApiKey.DescribeCluster, version, {"include_cluster_authorized_operations": False})
    assert plain.cluster_authorized_operations == -(2**31)
    assert plain.cluster_id == response.cluster_id


def test_describe_cluster_endpoint_types(wire):
    assert wire.call(ApiKey.DescribeCluster, 1, {"endpoint_type": 2}).error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
    assert wire.call(ApiKey.DescribeCluster, 1, {"endpoint_type": 9}).error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


# -- Produce helper, DeleteRecords, DescribeLogDirs, DescribeProducers --------------------------------------


def produce(wire, name: str, count: int, partition: int = 0, producer_id: int = -1, sequence: int = -1) -> int:
    records = build_batch([(None, b"v" * 100)] * count, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1, base_sequence=sequence)
    body = {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": name, "partition_data": [{"index": partition, "records": records}]}]}
    part = wire.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.NONE, part
    return part.base_offset


def list_offset(wire, name: str, timestamp: int) -> int:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": name, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]}
    return wire.call(ApiKey.ListOffsets, 7, body).topics[0].partitions[0].offset


def delete_records(wire, version: int, name: str, offsets: dict[int, int]):
    body = {"topics": [{"name": name, "partitions": [{"partition_index": p, "offset": o} for p, o in offsets.items()]}], "timeout_ms": 5000}
    return {p.partition_index: (p.error_code, p.low_watermark) for p in wire.call(ApiKey.DeleteRecords, version, body).topics[0].partitions}


@pytest.mark.parametrize("version", versions(ApiKey.DeleteRecords))
def test_delete_records(wire, version):
    name = new_topic(wire, partitions=2)
    produce(wire, name, 10)
    assert delete_records(wire, version, name, {0: 4, 1: 0}) == {0: (ErrorCode.NONE, 4), 1: (ErrorCode.NONE, 0)}
    assert list_offset(wire, name, -2) == 4
    assert delete_records(wire, version, name, {0: 2}) == {0: (ErrorCode.NONE, 4)}  # never backwards
    assert delete_records(wire, version, name, {0: 11}) == {0: (ErrorCode.OFFSET_OUT_OF_RANGE, -1)}
    assert delete_records(wire, version, name, {0: -1}) == {0: (ErrorCode.NONE, 10)}  # -1: the high watermark
    assert delete_records(wire, version, name, {7: 0}) == {7: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)}


def test_delete_records_refused_by_policy_and_for_unknown_topics(wire):
    name = new_topic(wire, configs={"cleanup.policy": "compact"})
    assert delete_records(wire, 2, name, {0: 0}) == {0: (ErrorCode.POLICY_VIOLATION, -1)}
    assert delete_records(wire, 2, "admin-wire-missing", {0: 0}) == {0: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)}


@pytest.mark.parametrize("version", versions(ApiKey.DescribeLogDirs))
def test_describe_log_dirs(wire, broker, version):
    name = new_topic(wire, partitions=2)
    produce(wire, name, 5)
    response = wire.call(ApiKey.DescribeLogDirs, version, {"topics": None})
    assert response.error_code == ErrorCode.NONE
    [result] = response.results
    assert (result.error_code, result.log_dir) == (ErrorCode.NONE, str(broker.log_dir.absolute()))
    partitions = {p.partition_index: p for t in result.topics if t.name == name for p in t.partitions}
    assert sorted(partitions) == [0, 1]
    assert partitions[0].partition_size > 500 and partitions[1].partition_size == 0
    assert all(p.offset_lag == 0 and not p.is_future_key for p in partitions.values())
    if version >= 4:
        assert result.total_bytes > 0 and 0 < result.usable_bytes <= result.total_bytes
    only = wire.call(ApiKey.DescribeLogDirs, version, {"topics": [{"topic": name, "partitions": [1]}]}).results[0]
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in only.topics] == [(name, [1])]


def test_describe_producers(wire):
    name = new_topic(wire)
    producer_id = wire.call(ApiKey.InitProducerId, 4, {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}).producer_id
    produce(wire, name, 3, producer_id=producer_id, sequence=0)
    produce(wire, name, 2, producer_id=producer_id, sequence=3)
    body = {"topics": [{"name": name, "partition_indexes": [0, 4]}, {"name": "admin-wire-missing", "partition_indexes": [0]}]}
    topics = wire.call(ApiKey.DescribeProducers, 0, body).topics
    [state] = topics[0].partitions[0].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence, state.current_txn_start_offset) == (producer_id, 0, 4, -1)
    assert state.last_timestamp > 0
    assert topics[0].partitions[1].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert topics[1].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("kind", ["odradek", "kafka"])
def test_describe_producers_lists_them_as_kafkas_hash_map_iterates(kind, broker, real_kafka, connect):
    """Kafka lists a partition's producers as its HashMap of them iterates: by bucket (the id modulo 16 for
    small ids), so 16 comes before 1 and 15 whatever order they wrote in (tests/storage/test_hash_map_order.py
    checks the model against Java's HashMap). Idempotent producers' ids are not checked against the ones
    handed out, so the test picks them; the real Kafka 3.9.1 answers the same."""
    wire = connect(broker.bootstrap if kind == "odradek" else real_kafka.bootstrap)
    name = new_topic(wire, name=f"admin-wire-producers-{uuid.uuid4().hex[:8]}")  # the real Kafka is shared
    for producer_id in (15, 1, 16):
        produce(wire, name, 1, producer_id=producer_id, sequence=0)
    body = {"topics": [{"name": name, "partition_indexes": [0]}]}
    states = wire.call(ApiKey.DescribeProducers, 0, body).topics[0].partitions[0].active_producers
    assert [state.producer_id for state in states] == [16, 1, 15]
