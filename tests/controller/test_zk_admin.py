"""Topics odradek writes to ZooKeeper (as ``AdminZkClient``), served by a real Kafka 3.9.1 broker whose
controller reads them: Kafka's tools describe the assignment odradek chose, with odradek's topic id and
config, and partitions odradek adds come online. Refusals (in a ZooKeeper of their own, with one
registered broker and no controller) carry Kafka's errors."""

from __future__ import annotations

import time
import uuid
from typing import Iterator

import kafka_jvm
import pytest
from confluent_kafka import Producer

from odradek.controller import zk_admin
from odradek.controller import zk_data as zd
from odradek.controller.replica_assignment import BrokerMetadata
from odradek.controller.zk_client import ZkClient
from odradek.protocol.errors import ErrorCode, KafkaError


@pytest.fixture
def zk(zk_kafka: kafka_jvm.KafkaBroker, zookeeper: kafka_jvm.ZooKeeper) -> Iterator[ZkClient]:
    """A session in the cluster of the Kafka broker (the controller)."""
    client = ZkClient(zookeeper.connect + "/kafka")
    try:
        yield client
    finally:
        client.close()


def describe(bootstrap: str, topic: str) -> str:
    deadline = time.monotonic() + 30
    while True:
        done = kafka_jvm.run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
        if done.returncode == 0 and f"Topic: {topic}\t" in done.stdout or time.monotonic() > deadline:
            return done.stdout + done.stderr
        time.sleep(0.5)


def test_kafka_serves_a_topic_odradek_created_and_grew(zk: ZkClient, zk_kafka: kafka_jvm.KafkaBroker) -> None:
    assert zk_admin.broker_metadatas(zk) == [BrokerMetadata(0, zk_kafka.settings["broker.rack"])]
    assignment = zk_admin.create_topic(zk, "odradek.made", 3, 1, {"cleanup.policy": "compact"})
    assert assignment == {0: [0], 1: [0], 2: [0]}
    topic_id = zk.topic_assignment("odradek.made")[0].topic_id
    described = describe(zk_kafka.bootstrap, "odradek.made")
    assert f"TopicId: {zd.encode_uuid(topic_id)}\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: cleanup.policy=compact" in described, described
    producer = Producer({"bootstrap.servers": zk_kafka.bootstrap})
    producer.produce("odradek.made", key=b"k", value=b"v", partition=2)
    assert producer.flush(30) == 0

    assert zk_admin.add_partitions(zk, "odradek.made", 5) == {3: [0], 4: [0]}
    deadline = time.monotonic() + 30
    while "PartitionCount: 5" not in (described := describe(zk_kafka.bootstrap, "odradek.made")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert f"TopicId: {zd.encode_uuid(topic_id)}\tPartitionCount: 5" in described
    assert "Partition: 4\tLeader: 0\tReplicas: 0\tIsr: 0" in described


@pytest.fixture(scope="module")
def bare(zookeeper: kafka_jvm.ZooKeeper) -> Iterator[ZkClient]:
    """A chroot with broker 0 registered and topic ``odradek.made`` (5 partitions), and no controller."""
    client = ZkClient(f"{zookeeper.connect}/admin-{uuid.uuid4().hex[:6]}")
    try:
        client.create_top_level_paths()
        client.keep_registered(zd.BrokerRegistration(0, (zd.EndPoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),)))
        zk_admin.create_topic(client, "odradek.made", 5, 1, {})
        yield client
    finally:
        client.close()


@pytest.mark.parametrize(
    ("call", "code", "message"),
    [
        (lambda zk: zk_admin.create_topic(zk, "odradek.made", 1, 1, {}), ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'odradek.made' already exists."),
        (lambda zk: zk_admin.create_topic(zk, "odradek_made", 1, 1, {}), ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic 'odradek_made' collides with existing topics: odradek.made"),
        (lambda zk: zk_admin.create_topic(zk, "bad name", 1, 1, {}), ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: 'bad name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
        (lambda zk: zk_admin.create_topic(zk, "too-wide", 1, 2, {}), ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor: 2 larger than available brokers: 1."),
        (lambda zk: zk_admin.create_topic_with_assignment(zk, "gappy", {}, {0: [0], 2: [0]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"),
        (lambda zk: zk_admin.add_partitions(zk, "odradek.made", 2), ErrorCode.INVALID_PARTITIONS, "The number of partitions for a topic can only be increased. Topic odradek.made currently has 5 partitions, 2 would not be an increase."),
        (lambda zk: zk_admin.add_partitions(zk, "odradek.made", 6, {5: [9]}), ErrorCode.BROKER_NOT_AVAILABLE, "Some brokers specified for partition id 5 are not available. Specified brokers: 9, available brokers: 0."),
    ],
    ids=["exists", "collision", "invalid-name", "replication-factor", "gaps", "no-increase", "unknown-broker"],
)
def test_refusals_carry_kafkas_errors(bare: ZkClient, call, code: ErrorCode, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaError) as refused:
        call(bare)
    assert (refused.value.code, refused.value.message) == (code, message)


def test_a_topic_marked_for_deletion_cannot_be_created_again(bare: ZkClient) -> None:
    bare.kazoo.create(zd.delete_topic_path("marked"))  # the controller has not got to it yet
    with pytest.raises(KafkaError) as refused:
        zk_admin.create_topic(bare, "marked", 1, 1, {})
    assert (refused.value.code, refused.value.message) == (ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'marked' is marked for deletion.")


def test_a_config_change_odradek_writes_reaches_the_kafka_broker(zk: ZkClient, zk_kafka: kafka_jvm.KafkaBroker) -> None:
    """The override and its /config/changes notification, which Kafka's brokers watch and apply."""
    zk.change_entity_config(zd.ConfigType.BROKER, "0", {**zk.entity_config(zd.ConfigType.BROKER, "0"), "log.cleaner.backoff.ms": "2500"})
    applied = "log.cleaner.backoff.ms=2500 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.backoff.ms=2500"
    deadline = time.monotonic() + 30
    while True:  # the synonym shows the override before the broker has applied it: wait for the value in force
        done = kafka_jvm.run_tool("kafka-configs", "--bootstrap-server", zk_kafka.bootstrap, "--describe", "--entity-type", "brokers", "--entity-name", "0")
        if applied in done.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert applied in done.stdout, done.stdout + done.stderr


def test_odradek_takes_the_producer_id_block_after_kafkas(zk: ZkClient, zk_kafka: kafka_jvm.KafkaBroker) -> None:
    producer = Producer({"bootstrap.servers": zk_kafka.bootstrap, "enable.idempotence": True})
    producer.produce("odradek.made", value=b"idempotent", partition=0)  # Kafka's controller hands out a block
    assert producer.flush(30) == 0
    kafkas = zd.ProducerIdBlock.decode(zk.kazoo.get(zd.LATEST_PRODUCER_ID_BLOCK)[0])
    ours = zk.new_producer_id_block(7)
    assert (ours.broker_id, ours.first, ours.last) == (7, kafkas.last + 1, kafkas.last + 1000)
    assert zk.kazoo.get(zd.LATEST_PRODUCER_ID_BLOCK)[0] == ours.encode()
