"""confluent-kafka's AdminClient (librdkafka) against a real odradek broker: topics, partitions, configs,
cluster, records."""

from __future__ import annotations

import itertools

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from odradek import Broker

TIMEOUT = 10
_names = itertools.count()


@pytest.fixture(scope="module")
def broker():
    with Broker(config={"log.segment.bytes": "536870912"}) as b:
        yield b


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(admin: AdminClient, partitions: int = 1, config: dict[str, str] | None = None) -> str:
    name = f"admin-confluent-{next(_names)}"
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(TIMEOUT)
    return name


def topic_configs(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


def partition_count(admin: AdminClient, name: str) -> int:
    return len(admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions)


def test_describe_topic_configs_values_sources_and_synonyms(admin):
    name = create(admin, config={"cleanup.policy": "compact", "retention.ms": "3600000"})
    configs = topic_configs(admin, name)
    policy = configs["cleanup.policy"]
    assert (policy.value, policy.source, policy.is_default, policy.is_read_only) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False, False)
    assert {n: s.value for n, s in policy.synonyms.items()} == {"cleanup.policy": "compact", "log.cleanup.policy": "delete"}
    assert configs["retention.ms"].value == "3600000"
    assert configs["segment.bytes"].value == "536870912"
    assert configs["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value and configs["max.message.bytes"].is_default


def test_describe_broker_configs(admin):
    resource = ConfigResource(ResourceType.BROKER, "0")
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert configs["log.segment.bytes"].value == "536870912"
    assert configs["log.segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["num.partitions"].value == "1" and configs["num.partitions"].is_default
    assert configs["auto.create.topics.enable"].value == "true"


def test_describe_configs_of_a_missing_topic_fails(admin):
    resource = ConfigResource(ResourceType.TOPIC, "admin-confluent-missing")
    with pytest.raises(KafkaException) as exc:
        admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert exc.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"


def test_incremental_alter_configs(admin):
    name = create(admin, config={"retention.ms": "3600000"})
    resource = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("segment.ms", "60000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    assert admin.incremental_alter_configs([resource])[resource].result(TIMEOUT) is None
    configs = topic_configs(admin, name)
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["retention.ms"].value == "604800000" and configs["retention.ms"].is_default
    assert configs["segment.ms"].value == "60000"
    bad = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as exc:
        admin.incremental_alter_configs([bad])[bad].result(TIMEOUT)
    assert exc.value.args[0].name() == "INVALID_CONFIG"


def test_alter_configs_replaces_overrides(admin):
    name = create(admin, config={"cleanup.policy": "compact"})
    resource = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "7200000"})
    admin.alter_configs([resource])[resource].result(TIMEOUT)
    configs = topic_configs(admin, name)
    assert configs["retention.ms"].value == "7200000"
    assert configs["cleanup.policy"].value == "delete"


def test_create_partitions(admin):
    name = create(admin, partitions=2)
    admin.create_partitions([NewPartitions(name, 5)], validate_only=True)[name].result(TIMEOUT)
    assert partition_count(admin, name) == 2
    admin.create_partitions([NewPartitions(name, 5)])[name].result(TIMEOUT)
    assert partition_count(admin, name) == 5
    with pytest.raises(KafkaException) as exc:
        admin.create_partitions([NewPartitions(name, 3)])[name].result(TIMEOUT)
    assert exc.value.args[0].name() == "INVALID_PARTITIONS"


def test_delete_topics(admin):
    name = create(admin)
    futures = admin.delete_topics([name, "admin-confluent-missing"])
    assert futures[name].result(TIMEOUT) is None
    with pytest.raises(KafkaException) as exc:
        futures["admin-confluent-missing"].result(TIMEOUT)
    assert exc.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"
    with pytest.raises(KafkaException) as exc:
        admin.describe_topics(TopicCollection([name]))[name].result(TIMEOUT)
    assert exc.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"


def test_describe_cluster(admin, broker):
    cluster = admin.describe_cluster().result(TIMEOUT)
    host, port = broker.bootstrap.rsplit(":", 1)
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, host, int(port))]
    assert cluster.controller.id == 0
    assert cluster.cluster_id == broker.server.metadata.cluster_id


def test_delete_records_then_consumers_start_at_the_low_watermark(admin, broker):
    name = create(admin)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(name, value=b"m%d" % i)
    assert producer.flush(TIMEOUT) == 0
    [(_, future)] = admin.delete_records([TopicPartition(name, 0, 4)]).items()
    assert future.result(TIMEOUT).low_watermark == 4
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{name}", "auto.offset.reset": "earliest"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=TIMEOUT)
        assert (low, high) == (4, 10)
        consumer.assign([TopicPartition(name, 0)])
        message = consumer.poll(TIMEOUT)
        assert message is not None and message.error() is None
        assert (message.offset(), message.value()) == (4, b"m4")
    finally:
        consumer.close()
