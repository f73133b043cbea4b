"""odradek's ZooKeeper layout against what Apache Kafka 3.9.1 writes: every znode Kafka created while its
tools made topics and configs is read with odradek's decoders and re-encoded byte for byte.

Kafka's JSON key order comes from its Scala and Java hash maps, so the inputs are chosen to exercise them:
a topic with 40 partitions (its partition map grows twice), a topic with 14 configs (its ``Properties``
grows once), entity configs of every type, and an idempotent producer (a producer-id block).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Callable

import kafka_jvm
import pytest
from confluent_kafka import Producer
from kazoo.client import KazooClient

from odradek.controller import zk_data as zd
from odradek.protocol.kafka_uuid import Uuid

MANY_CONFIGS = {
    "cleanup.policy": "compact",
    "retention.ms": "86400000",
    "segment.bytes": "1048576",
    "min.insync.replicas": "1",
    "max.message.bytes": "2000000",
    "compression.type": "gzip",
    "segment.ms": "3600000",
    "delete.retention.ms": "1000",
    "min.cleanable.dirty.ratio": "0.1",
    "message.timestamp.type": "LogAppendTime",
    "retention.bytes": "123456789",
    "flush.messages": "1000",
    "index.interval.bytes": "2048",
    "file.delete.delay.ms": "5000",
}


def roundtrip(path: str, data: bytes) -> bytes:
    """Re-encode ``data`` read from ``path`` through the decoder and encoder odradek has for that znode."""
    codecs: list[tuple[str, Callable[[re.Match[str]], bytes]]] = [
        (r"/cluster/id", lambda m: zd.encode_cluster_id(zd.decode_cluster_id(data))),
        (r"/controller", lambda m: zd.ControllerRegistration.decode(data).encode()),
        (r"/controller_epoch", lambda m: zd.encode_controller_epoch(zd.decode_controller_epoch(data))),
        (r"/brokers/ids/(\d+)", lambda m: zd.BrokerRegistration.decode(int(m[1]), data).encode()),
        (r"/brokers/topics/[^/]+", lambda m: zd.TopicAssignment.decode(data).encode()),
        (r"/brokers/topics/[^/]+/partitions/\d+/state", lambda m: zd.LeaderIsrAndControllerEpoch.decode(data).encode()),
        (r"/config/(topics|clients|users|brokers)/[^/]+", lambda m: zd.encode_entity_config(zd.decode_entity_config(data))),
        (r"/config/changes/config_change_\d+", lambda m: zd.encode_config_change(*zd.decode_config_change(data))),
        (r"/latest_producer_id_block", lambda m: zd.ProducerIdBlock.decode(data).encode()),
        (r"/feature", lambda m: zd.FeatureZNode.decode(data).encode()),
    ]
    for pattern, codec in codecs:
        if match := re.fullmatch(pattern, path):
            return codec(match)
    raise AssertionError(f"no codec for {path}: {data!r}")


def walk(kazoo: KazooClient, path: str = "/") -> dict[str, bytes | None]:
    data, _ = kazoo.get(path)
    found = {path: data}
    for child in kazoo.get_children(path):
        found.update(walk(kazoo, f"{path.rstrip('/')}/{child}"))
    return found


def run(tool: str, *args: str) -> None:
    done = kafka_jvm.run_tool(tool, *args)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def kafka_layout(zk_kafka: kafka_jvm.KafkaBroker, zookeeper: kafka_jvm.ZooKeeper) -> dict[str, bytes | None]:
    """Every znode under Kafka's chroot after its tools ran, by path."""
    b = zk_kafka.bootstrap
    run("kafka-topics", "--bootstrap-server", b, "--create", "--topic", "layout-many", "--partitions", "40", "--replication-factor", "1")
    configs = [a for k, v in MANY_CONFIGS.items() for a in ("--config", f"{k}={v}")]
    run("kafka-topics", "--bootstrap-server", b, "--create", "--topic", "layout-configs", "--partitions", "1", "--replication-factor", "1", *configs)
    for entity_type, name, config in [("brokers", "0", "log.cleaner.threads=2"), ("clients", "c1", "producer_byte_rate=1024"), ("users", "u1", "consumer_byte_rate=2048,request_percentage=50")]:
        run("kafka-configs", "--bootstrap-server", b, "--alter", "--entity-type", entity_type, "--entity-name", name, "--add-config", config)
    producer = Producer({"bootstrap.servers": b, "enable.idempotence": True})
    producer.produce("layout-configs", b"v")
    assert producer.flush(30) == 0
    client = KazooClient(hosts=zookeeper.connect + "/kafka")
    client.start(timeout=15)
    try:
        return walk(client)
    finally:
        client.stop()
        client.close()


def test_every_znode_kafka_wrote_reencodes_byte_identically(kafka_layout: dict[str, bytes | None]) -> None:
    with_data = {p: d for p, d in kafka_layout.items() if d}
    differing = {p: (d, roundtrip(p, d)) for p, d in with_data.items() if roundtrip(p, d) != d}
    assert differing == {}
    # every kind of znode was there to compare
    for pattern in [r"/brokers/ids/0", r"/controller", r"/cluster/id", r"/feature", r"/latest_producer_id_block", r"/brokers/topics/layout-many/partitions/39/state", r"/config/users/u1", r"/config/changes/config_change_\d+"]:
        assert any(re.fullmatch(pattern, p) for p in with_data), pattern


def test_decoders_read_what_kafka_means(kafka_layout: dict[str, bytes | None], zk_kafka: kafka_jvm.KafkaBroker) -> None:
    broker = zd.BrokerRegistration.decode(0, kafka_layout["/brokers/ids/0"])
    assert broker.endpoints == (zd.EndPoint("PLAINTEXT", "127.0.0.1", zk_kafka.port, "PLAINTEXT"),)
    assert (broker.rack, broker.version, broker.jmx_port) == (zk_kafka.settings["broker.rack"], 5, -1)
    assert zd.ControllerRegistration.decode(kafka_layout["/controller"]).broker_id == 0
    epoch = zd.decode_controller_epoch(kafka_layout["/controller_epoch"])
    assert epoch >= 1

    many = zd.TopicAssignment.decode(kafka_layout["/brokers/topics/layout-many"])
    assert isinstance(many.topic_id, Uuid)
    assert many.partitions == {p: zd.ReplicaAssignment((0,)) for p in range(40)}
    state = zd.LeaderIsrAndControllerEpoch.decode(kafka_layout["/brokers/topics/layout-many/partitions/7/state"])
    assert state == zd.LeaderIsrAndControllerEpoch(leader=0, leader_epoch=0, isr=(0,), controller_epoch=epoch)

    assert zd.decode_entity_config(kafka_layout["/config/topics/layout-configs"]) == MANY_CONFIGS
    assert zd.decode_entity_config(kafka_layout["/config/users/u1"]) == {"consumer_byte_rate": "2048", "request_percentage": "50.0"}  # quotas are doubles
    changes = sorted(p for p in kafka_layout if p.startswith("/config/changes/"))
    # the tools' three changes are the newest when the layout is read (tests before may have written others)
    assert [zd.decode_config_change(kafka_layout[p]) for p in changes][-3:] == [
        (zd.ConfigType.BROKER, "0"), (zd.ConfigType.CLIENT, "c1"), (zd.ConfigType.USER, "u1"),
    ]
    block = zd.ProducerIdBlock.decode(kafka_layout["/latest_producer_id_block"])
    assert block.size == 1000 and block.first % 1000 == 0  # the latest block (another test may have taken one)
    assert zd.FeatureZNode.decode(kafka_layout["/feature"]) == zd.FeatureZNode({}, status=1, version=2)


def test_kafka_creates_the_persistent_paths_odradek_names(kafka_layout: dict[str, bytes | None]) -> None:
    assert set(zd.PERSISTENT_PATHS) <= set(kafka_layout)
    assert all(kafka_layout[p] is None for p in zd.PERSISTENT_PATHS if p != zd.LATEST_PRODUCER_ID_BLOCK)


KAFKA_ENCODERS = """
import java.util.*;
import org.apache.kafka.common.TopicPartition;
import scala.jdk.javaapi.CollectionConverters;

public class Encoders {
    public static void main(String[] args) {
        Set<TopicPartition> partitions = new LinkedHashSet<>(List.of(new TopicPartition("t", 0)));
        System.out.println(new String(kafka.zk.PreferredReplicaElectionZNode.encode(CollectionConverters.asScala(partitions).toSet())));
        System.out.println(new String(kafka.zk.IsrChangeNotificationSequenceZNode.encode(CollectionConverters.asScala(partitions))));
        System.out.println(new String(kafka.zk.LogDirEventNotificationSequenceZNode.encode(3)));
        Map<TopicPartition, scala.collection.Seq<Object>> reassignment = new LinkedHashMap<>();
        reassignment.put(new TopicPartition("t", 1), CollectionConverters.asScala(List.<Object>of(1, 2)).toSeq());
        System.out.println(new String(kafka.zk.ReassignPartitionsZNode.encode(CollectionConverters.asScala(reassignment))));
    }
}
"""


def test_the_notification_znodes_no_tool_of_kafka_39_writes_are_encoded_as_kafkas_own_code_does(tmp_path: Path) -> None:
    """Preferred election, ISR change, log-dir event and legacy reassignment: Kafka's encoders, run from its jar."""
    source = tmp_path / "Encoders.java"
    source.write_text(KAFKA_ENCODERS)
    try:
        cp = kafka_jvm.classpath()
    except kafka_jvm.JvmUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    done = subprocess.run(["java", *kafka_jvm.TOOL_JVM_FLAGS, "-cp", cp, str(source)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        zd.encode_preferred_replica_election([("t", 0)]).decode(),
        zd.encode_isr_change([("t", 0)]).decode(),
        zd.encode_log_dir_event(3).decode(),
        zd.encode_reassignment({("t", 1): [1, 2]}).decode(),
    ]
