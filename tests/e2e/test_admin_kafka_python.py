"""kafka-python's KafkaAdminClient against a real odradek broker: topics, partitions, configs, cluster,
log dirs, records and producers."""

from __future__ import annotations

import itertools

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import InvalidPartitionsError, UnknownTopicOrPartitionError

from odradek import Broker

_names = itertools.count()


@pytest.fixture(scope="module")
def broker():
    with Broker(config={"log.segment.bytes": "536870912"}) as b:
        yield b


@pytest.fixture
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


def create(admin: KafkaAdminClient, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    name = f"admin-kafka-python-{next(_names)}"
    result = admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1, "configs": configs or {}}})
    assert result["topics"][0]["error_code"] == 0
    return name


def topic_configs(admin: KafkaAdminClient, name: str) -> dict[str, dict]:
    resource = ConfigResource(ConfigResourceType.TOPIC, name)
    return admin.describe_configs([resource], include_synonyms=True, config_filter="all")["topic"][name]


def partition_count(admin: KafkaAdminClient, name: str) -> int:
    [topic] = admin.describe_topics([name])
    return len(topic["partitions"])


def test_describe_topic_configs(admin):
    name = create(admin, configs={"cleanup.policy": "compact"})
    configs = topic_configs(admin, name)
    policy = configs["cleanup.policy"]
    assert (policy["value"], policy["config_source"], policy["config_type"], policy["read_only"]) == ("compact", "DYNAMIC_TOPIC_CONFIG", "LIST", False)
    assert [(s["name"], s["value"], s["source"]) for s in policy["synonyms"]] == [
        ("cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG"),
        ("log.cleanup.policy", "delete", "DEFAULT_CONFIG"),
    ]
    segment = configs["segment.bytes"]
    assert (segment["value"], segment["config_source"]) == ("536870912", "STATIC_BROKER_CONFIG")
    assert [(s["value"], s["source"]) for s in segment["synonyms"]] == [("536870912", "STATIC_BROKER_CONFIG"), ("1073741824", "DEFAULT_CONFIG")]
    assert configs["retention.ms"]["value"] == "604800000"


def test_describe_broker_configs(admin, broker):
    resource = ConfigResource(ConfigResourceType.BROKER, "0")
    configs = admin.describe_configs([resource], config_filter="all")["broker"]["0"]
    assert (configs["log.segment.bytes"]["value"], configs["log.segment.bytes"]["config_source"]) == ("536870912", "STATIC_BROKER_CONFIG")
    assert (configs["num.partitions"]["value"], configs["num.partitions"]["config_source"]) == ("1", "DEFAULT_CONFIG")
    assert configs["log.dirs"]["value"] == str(broker.log_dir)


def test_alter_configs_incremental_and_whole(admin):
    name = create(admin, configs={"cleanup.policy": "compact"})
    resource = ConfigResource(ConfigResourceType.TOPIC, name, configs={"cleanup.policy": ("APPEND", "delete"), "retention.ms": "3600000"})
    assert admin.alter_configs([resource], incremental=True) == {"topic": {name: "OK"}}
    configs = topic_configs(admin, name)
    assert configs["cleanup.policy"]["value"] == "compact,delete"
    assert configs["retention.ms"]["value"] == "3600000"
    whole = ConfigResource(ConfigResourceType.TOPIC, name, configs={"segment.ms": "60000"})
    assert admin.alter_configs([whole], incremental=False, raise_on_unknown=False) == {"topic": {name: "OK"}}
    configs = topic_configs(admin, name)
    assert configs["segment.ms"]["value"] == "60000"
    # AlterConfigs replaces every override; the client re-sends the ones it read as DYNAMIC_TOPIC_CONFIG
    assert (configs["cleanup.policy"]["value"], configs["retention.ms"]["value"]) == ("compact,delete", "3600000")


def test_create_partitions(admin):
    name = create(admin, partitions=1)
    admin.create_partitions({name: 3})
    assert partition_count(admin, name) == 3
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({name: 2})
    assert partition_count(admin, name) == 3


def test_delete_topics(admin):
    name = create(admin)
    result = admin.delete_topics([name])
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(name, 0)]
    assert name not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics([name])


def test_describe_cluster(admin, broker):
    cluster = admin.describe_cluster()
    host, port = broker.bootstrap.rsplit(":", 1)
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(0, host, int(port))]
    assert cluster["controller_id"] == 0
    assert cluster["cluster_id"] == broker.server.metadata.cluster_id


def test_describe_log_dirs(admin, broker):
    name = create(admin, partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(5):
        producer.send(name, b"x%d" % i, partition=0)
    producer.flush()
    producer.close()
    [entry] = admin.describe_log_dirs({name: [0, 1]})
    [log_dir] = entry["log_dirs"]
    assert (entry["broker"], log_dir["error_code"], log_dir["log_dir"]) == (0, 0, str(broker.log_dir))
    partitions = {p["partition_index"]: p for t in log_dir["topics"] if t["name"] == name for p in t["partitions"]}
    assert partitions[0]["partition_size"] > 0 and partitions[1]["partition_size"] == 0
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0


def test_delete_records_then_consumers_start_at_the_low_watermark(admin, broker):
    name = create(admin)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        producer.send(name, b"m%d" % i, partition=0)
    producer.flush()
    producer.close()
    tp = TopicPartition(name, 0)
    assert admin.delete_records({tp: 6})[tp]["low_watermark"] == 6
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        consumer.assign([tp])
        assert consumer.beginning_offsets([tp]) == {tp: 6}
        records = consumer.poll(timeout_ms=10000)[tp]
        assert [(r.offset, r.value) for r in records] == [(i, b"m%d" % i) for i in range(6, 10)]
    finally:
        consumer.close()


def test_describe_producers(admin, broker):
    name = create(admin)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
    for i in range(4):
        producer.send(name, b"x%d" % i, partition=0).get(timeout=10)
    producer.close()
    tp = TopicPartition(name, 0)
    [state] = admin.describe_producers([tp])[tp].active_producers
    assert (state.producer_epoch, state.last_sequence, state.current_transaction_start_offset) == (0, 3, -1)
    assert state.producer_id >= 0 and state.last_timestamp > 0
