"""odradek's ZooKeeper-mode controller and a real Apache Kafka 3.9.1 broker in one cluster, both ways round:

- odradek's controller leads and a Kafka broker joins: the Kafka broker serves only once the controller's
  UpdateMetadata (v8) reached it, Kafka's own tools create a topic through it (Kafka's CreateTopics waits for
  the controller's metadata), and the partitions' leadership comes from odradek's LeaderAndIsr (v7): a
  client produces to and consumes from the Kafka broker.
- Kafka's controller leads and odradek registers: Kafka's Metadata lists the odradek broker, and the topics
  Kafka's tools create read back through odradek's ZooKeeper client as Kafka describes them.
"""

from __future__ import annotations

import time
import uuid
from typing import Iterator

import kafka_jvm
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from odradek.broker.controller_channel import ControllerChannelManager
from odradek.controller import zk_data as zd
from odradek.controller.embedded_controller import new_cluster_id
from odradek.controller.zk_client import ZkClient
from odradek.controller.zk_controller import ZkController
from odradek.controller.zk_controller_state import Leadership
from odradek.protocol.kafka_uuid import Uuid
from tests.polling import wait_for


def run(tool: str, *args: str) -> str:
    done = kafka_jvm.run_tool(tool, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def odradek_led(zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ZkController, kafka_jvm.KafkaBroker]]:
    """odradek's controller (as broker 1, first, so it is elected) and then a Kafka broker 0, under a chroot
    of their own."""
    connect = f"{zookeeper.connect}/odradek-led-{uuid.uuid4().hex[:6]}"
    zk = ZkClient(connect)
    channel = ControllerChannelManager(1)
    controller = ZkController(zk, 1, channel)
    # a short ZooKeeper session, so that a killed Kafka broker's registration goes within seconds; stopped
    # last, it leads partitions whose other replica is gone (kafka_jvm.CLUSTER_STOP_SETTINGS)
    kafka = kafka_jvm.KafkaBroker(tmp_path_factory.mktemp("kafka-peer"), connect, broker_id=0, settings={"zookeeper.session.timeout.ms": "6000", **kafka_jvm.CLUSTER_STOP_SETTINGS})
    try:
        zk.create_top_level_paths()
        zk.create_or_get_cluster_id(new_cluster_id())
        # broker 1's registration: the controller's own address (nothing serves it in this test)
        zk.keep_registered(zd.BrokerRegistration(1, (zd.EndPoint("PLAINTEXT", "127.0.0.1", kafka_jvm.free_port(), "PLAINTEXT"),)))
        controller.startup()
        wait_for(lambda: controller.active, what="odradek's controller elected")
        kafka.start()  # serves only once odradek's UpdateMetadata told it about itself
        yield controller, kafka
    finally:
        kafka.stop()
        controller.shutdown()
        channel.close()
        zk.close()


def test_a_kafka_broker_joins_the_cluster_odradek_controls(odradek_led: tuple[ZkController, kafka_jvm.KafkaBroker]) -> None:
    controller, kafka = odradek_led
    metadata = AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10)
    assert sorted(metadata.brokers) == [0, 1]
    assert metadata.controller_id == 1
    wait_for(lambda: 0 in controller.context.live_brokers, what="Kafka broker 0 live in odradek's controller")


def test_a_topic_odradek_creates_is_led_by_the_kafka_broker_as_odradeks_controller_decides(odradek_led: tuple[ZkController, kafka_jvm.KafkaBroker]) -> None:
    """Written to ZooKeeper as odradek's CreateTopics does (Kafka's tools would send CreateTopics to the
    controller, broker 1, which no process serves here)."""
    controller, kafka = odradek_led
    topic_id = uuid.uuid4()
    assignment = zd.TopicAssignment(topic_id, {p: zd.ReplicaAssignment((0,)) for p in range(3)})
    controller.zk.create_topic("peer-topic", assignment, {"retention.ms": "3600000"})
    wait_for(lambda: ("peer-topic", 2) in controller.context.leadership, what="odradek's controller saw the topic")
    for p in range(3):
        state, version = controller.zk.partition_state("peer-topic", p)
        assert (state.leader, state.leader_epoch, state.isr, state.controller_epoch, version) == (0, 0, (0,), controller.context.epoch, 0)

    def kafkas_view() -> dict[int, tuple[int, list[int], list[int]]]:
        topic = AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics("peer-topic", timeout=10).topics["peer-topic"]
        return {p.id: (p.leader, p.replicas, p.isrs) for p in topic.partitions.values()}

    wait_for(lambda: kafkas_view() == {p: (0, [0], [0]) for p in range(3)}, what="Kafka's metadata shows the leaders")
    # LeaderAndIsr carried the topic id: Kafka wrote it into each new log's partition.metadata
    for p in range(3):
        assert f"topic_id: {zd.encode_uuid(topic_id)}" in (kafka.log_dir / f"peer-topic-{p}" / "partition.metadata").read_text()

    producer = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})
    for p in range(3):
        producer.produce("peer-topic", value=f"v{p}".encode(), partition=p)
    assert producer.flush(30) == 0
    # No consumer group: its coordinator may be on broker 1, which no process serves here.
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("peer-topic", p, OFFSET_BEGINNING) for p in range(3)])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 30
        while len(seen) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(message.value())
        assert seen == {b"v0", b"v1", b"v2"}
    finally:
        consumer.close()


def test_odradek_registers_in_a_cluster_kafka_controls(zk_kafka: kafka_jvm.KafkaBroker, zookeeper: kafka_jvm.ZooKeeper) -> None:
    zk = ZkClient(zookeeper.connect + "/kafka")
    controller = ZkController(zk, 7, ControllerChannelManager(7))
    try:
        kafka_cluster_id = zd.decode_cluster_id(zk.kazoo.get(zd.CLUSTER_ID)[0])
        assert zk.create_or_get_cluster_id(new_cluster_id()) == kafka_cluster_id
        zk.keep_registered(zd.BrokerRegistration(7, (zd.EndPoint("PLAINTEXT", "127.0.0.1", kafka_jvm.free_port(), "PLAINTEXT"),), rack="rack-b"))
        controller.startup()
        admin = AdminClient({"bootstrap.servers": zk_kafka.bootstrap})
        wait_for(lambda: 7 in admin.list_topics(timeout=10).brokers, what="Kafka's metadata lists odradek's broker 7")
        assert admin.list_topics(timeout=10).controller_id == 0
        wait_for(lambda: controller.active_controller_id == 0, what="odradek sees Kafka's controller")
        assert not controller.active

        run("kafka-topics", "--bootstrap-server", zk_kafka.bootstrap, "--create", "--topic", "kafka-led", "--partitions", "4", "--replication-factor", "1")
        assignment, _ = zk.topic_assignment("kafka-led")
        assert isinstance(assignment.topic_id, Uuid)
        described = run("kafka-topics", "--bootstrap-server", zk_kafka.bootstrap, "--describe", "--topic", "kafka-led")
        assert f"TopicId: {zd.encode_uuid(assignment.topic_id)}" in described
        for p, replicas in assignment.partitions.items():
            state, _ = zk.partition_state("kafka-led", p)
            assert f"Partition: {p}\tLeader: {state.leader}\tReplicas: {','.join(map(str, replicas.replicas))}\tIsr: {','.join(map(str, state.isr))}" in described
        assert {tuple(a.replicas) for a in assignment.partitions.values()} <= {(0,), (7,)}
    finally:
        controller.shutdown()
        controller.channel.close()  # type: ignore[attr-defined]
        zk.close()


def expire_session(client: ZkClient, hosts: str) -> None:
    """End ``client``'s ZooKeeper session as an expiry would: another connection with its id closes it."""
    session_id, password = client.kazoo.client_id
    thief = KazooClient(hosts=hosts, client_id=(session_id, password))
    thief.start(timeout=15)
    thief.stop()
    thief.close()


def test_a_failed_broker_loses_its_leaderships_to_the_kafka_broker(odradek_led: tuple[ZkController, kafka_jvm.KafkaBroker], zookeeper: kafka_jvm.ZooKeeper) -> None:
    controller, kafka = odradek_led
    connect = zookeeper.connect + controller.zk.kazoo.chroot
    broker2 = ZkClient(connect)
    try:
        broker2.keep_registered(zd.BrokerRegistration(2, (zd.EndPoint("PLAINTEXT", "127.0.0.1", kafka_jvm.free_port(), "PLAINTEXT"),)))
        wait_for(lambda: 2 in controller.context.live_brokers, what="broker 2 live")
        assignment = zd.TopicAssignment(uuid.uuid4(), {0: zd.ReplicaAssignment((2, 0)), 1: zd.ReplicaAssignment((0, 2))})
        controller.zk.create_topic("failover-topic", assignment, {})
        wait_for(lambda: ("failover-topic", 1) in controller.context.leadership, what="the topic's partitions online")
        before = {p: controller.zk.partition_state("failover-topic", p)[0] for p in (0, 1)}
        assert {p: (s.leader, s.leader_epoch, s.isr) for p, s in before.items()} == {0: (2, 0, (2, 0)), 1: (0, 0, (0, 2))}
    finally:
        broker2.close()  # broker 2 fails: its session and registration end

    def states() -> dict[int, tuple[int, int, tuple[int, ...]]]:
        return {p: (s.leader, s.leader_epoch, s.isr) for p in (0, 1) for s in [controller.zk.partition_state("failover-topic", p)[0]]}

    # partition 0: the first live ISR member in assignment order leads; partition 1: broker 2 leaves the ISR
    wait_for(lambda: states() == {0: (0, 1, (0,)), 1: (0, 1, (0,))}, what="leadership moved off broker 2")

    def kafkas_view() -> dict[int, tuple[int, list[int]]]:
        topic = AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics("failover-topic", timeout=10).topics["failover-topic"]
        return {p.id: (p.leader, p.isrs) for p in topic.partitions.values()}

    wait_for(lambda: kafkas_view() == {0: (0, [0]), 1: (0, [0])}, what="Kafka's metadata agrees")
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})
    producer.produce("failover-topic", value=b"after", partition=0)
    assert producer.flush(30) == 0


def leaders_in_kafka(kafka: kafka_jvm.KafkaBroker, topic: str) -> dict[int, tuple[int, list[int]]]:
    """Partition -> (leader, ISR) as the Kafka broker's Metadata answers (what the controller told it)."""
    metadata = AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(topic, timeout=10).topics[topic]
    return {p.id: (p.leader, p.isrs) for p in metadata.partitions.values()} if metadata.error is None else {}


def test_partitions_added_to_a_topic_come_online(odradek_led: tuple[ZkController, kafka_jvm.KafkaBroker]) -> None:
    controller, kafka = odradek_led
    controller.zk.create_topic("growing", zd.TopicAssignment(uuid.uuid4(), {0: zd.ReplicaAssignment((0,))}), {})
    wait_for(lambda: leaders_in_kafka(kafka, "growing") == {0: (0, [0])}, what="partition 0 online")
    assignment, version = controller.zk.topic_assignment("growing")
    grown = zd.TopicAssignment(assignment.topic_id, {**assignment.partitions, 1: zd.ReplicaAssignment((0,)), 2: zd.ReplicaAssignment((0,))})
    assert controller.zk.set_topic_assignment("growing", grown, version)[0]  # as CreatePartitions writes it
    wait_for(lambda: leaders_in_kafka(kafka, "growing") == {p: (0, [0]) for p in range(3)}, what="the new partitions online")
    assert (kafka.log_dir / "growing-2").is_dir()


def test_a_deleted_topic_is_stopped_and_deleted_on_the_kafka_broker(odradek_led: tuple[ZkController, kafka_jvm.KafkaBroker]) -> None:
    controller, kafka = odradek_led
    controller.zk.create_topic("doomed", zd.TopicAssignment(uuid.uuid4(), {0: zd.ReplicaAssignment((0,)), 1: zd.ReplicaAssignment((0,))}), {"retention.ms": "1000"})
    wait_for(lambda: (kafka.log_dir / "doomed-1").is_dir(), what="Kafka made the topic's logs")
    controller.zk.mark_topic_for_deletion("doomed")  # what DeleteTopics writes
    # StopReplica (delete) reached Kafka: it renames the logs for deletion; UpdateMetadata dropped the topic
    wait_for(lambda: not (kafka.log_dir / "doomed-0").exists() and not (kafka.log_dir / "doomed-1").exists(), what="Kafka deleted the logs")
    wait_for(lambda: "doomed" not in AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10).topics, what="Kafka forgot the topic")
    # As Kafka's completeDeleteTopic, three deletions one after the other: the topic, its config, the mark.
    znodes = (zd.topic_path("doomed"), zd.config_entity_path(zd.ConfigType.TOPIC, "doomed"), zd.delete_topic_path("doomed"))
    wait_for(lambda: not any(controller.zk.kazoo.exists(path) for path in znodes), what="the topic's znodes deleted")
    assert ("doomed", 0) not in controller.context.assignments


def test_a_killed_kafka_broker_goes_offline_and_leads_again_when_it_returns(odradek_led: tuple[ZkController, kafka_jvm.KafkaBroker]) -> None:
    controller, kafka = odradek_led
    controller.zk.create_topic("phoenix", zd.TopicAssignment(uuid.uuid4(), {0: zd.ReplicaAssignment((0,))}), {})
    wait_for(lambda: leaders_in_kafka(kafka, "phoenix") == {0: (0, [0])}, what="phoenix online")
    kafka.kill()
    # its only replica is gone: no leader, the ISR keeps the last member, the epoch moves on
    wait_for(lambda: controller.zk.partition_state("phoenix", 0)[0] == zd.LeaderIsrAndControllerEpoch(-1, 1, (0,), controller.context.epoch), what="phoenix offline")
    kafka.start()
    wait_for(lambda: controller.zk.partition_state("phoenix", 0)[0] == zd.LeaderIsrAndControllerEpoch(0, 2, (0,), controller.context.epoch), what="phoenix led again")
    wait_for(lambda: leaders_in_kafka(kafka, "phoenix") == {0: (0, [0])}, what="Kafka leads phoenix again")
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})
    producer.produce("phoenix", value=b"back", partition=0)
    assert producer.flush(30) == 0


def test_a_preferred_replica_election_request_makes_the_kafka_broker_leader(odradek_led: tuple[ZkController, kafka_jvm.KafkaBroker], zookeeper: kafka_jvm.ZooKeeper) -> None:
    controller, kafka = odradek_led
    broker4 = ZkClient(zookeeper.connect + controller.zk.kazoo.chroot)
    try:
        broker4.keep_registered(zd.BrokerRegistration(4, (zd.EndPoint("PLAINTEXT", "127.0.0.1", kafka_jvm.free_port(), "PLAINTEXT"),)))
        wait_for(lambda: 4 in controller.context.live_brokers, what="broker 4 live")
        epoch = controller.context.epoch
        # Kafka (broker 0) is the preferred replica and in sync, but broker 4 leads: the state is there first,
        # then the assignment, as after leadership moved away
        controller.zk.create_recursive(zd.partition_state_path("preferred", 0), zd.LeaderIsrAndControllerEpoch(4, 2, (4, 0), epoch).encode())
        controller.zk.kazoo.set(zd.topic_path("preferred"), zd.TopicAssignment(uuid.uuid4(), {0: zd.ReplicaAssignment((0, 4))}).encode())
        wait_for(lambda: ("preferred", 0) in controller.context.assignments, what="the controller read the topic")
        controller.zk.kazoo.create(zd.PREFERRED_REPLICA_ELECTION, zd.encode_preferred_replica_election([("preferred", 0)]))
        wait_for(lambda: controller.zk.partition_state("preferred", 0) == (zd.LeaderIsrAndControllerEpoch(0, 3, (4, 0), epoch), 1), what="broker 0 elected")
        wait_for(lambda: not controller.zk.kazoo.exists(zd.PREFERRED_REPLICA_ELECTION), what="the request deleted")
        wait_for(lambda: leaders_in_kafka(kafka, "preferred") == {0: (0, [4, 0])}, what="Kafka leads as the controller said")
    finally:
        broker4.close()


def test_the_controllers_session_expires_and_a_new_election_bumps_the_epoch(odradek_led: tuple[ZkController, kafka_jvm.KafkaBroker], zookeeper: kafka_jvm.ZooKeeper) -> None:
    controller, kafka = odradek_led
    connect = zookeeper.connect + controller.zk.kazoo.chroot
    standby_zk = ZkClient(connect)
    standby_channel = ControllerChannelManager(3)
    standby = ZkController(standby_zk, 3, standby_channel)
    try:
        standby_zk.keep_registered(zd.BrokerRegistration(3, (zd.EndPoint("PLAINTEXT", "127.0.0.1", kafka_jvm.free_port(), "PLAINTEXT"),)))
        standby.startup()
        wait_for(lambda: standby.active_controller_id == 1, what="the standby sees controller 1")
        epoch, leadership = controller.context.epoch, dict(controller.context.leadership)
        expire_session(controller.zk, connect)
        # Every broker runs for /controller -- broker 1 again from its new session, broker 3, and the Kafka
        # broker 0 too: one wins, with the next epoch, and every other one follows it.
        wait_for(lambda: standby_zk.controller_id() is not None and standby_zk.controller_epoch()[0] == epoch + 1, what="a new election")
        winner = standby_zk.controller_id()
        odradeks = {1: controller, 3: standby}
        if winner in odradeks:
            wait_for(lambda: odradeks[winner].active, what=f"broker {winner} active")
            assert odradeks[winner].context.epoch == epoch + 1
            # Read back from ZooKeeper: as it was, but for the partitions of a broker not registered at the
            # failover (broker 1 between its sessions), which Kafka's replica state machine takes offline.
            in_zookeeper = lambda: {tp: Leadership(*standby_zk.partition_state(*tp)) for tp in leadership}  # noqa: E731
            wait_for(lambda: odradeks[winner].context.leadership == in_zookeeper(), what="the new controller's partition states equal ZooKeeper's")
            assert set(odradeks[winner].context.leadership) == set(leadership)
            for tp, now in odradeks[winner].context.leadership.items():  # what changed, the new controller wrote
                before = leadership[tp]
                assert now == before or (now.state.controller_epoch == epoch + 1 and now.state.leader_epoch >= before.state.leader_epoch), (tp, before, now)
        for broker_id, other in odradeks.items():
            if broker_id != winner:
                wait_for(lambda other=other: not other.active and other.active_controller_id == winner, what=f"broker {broker_id} follows {winner}")
        named = lambda: AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10).controller_id  # noqa: E731
        wait_for(lambda: named() == winner, what="Kafka's metadata names the new controller")
    finally:
        standby.shutdown()
        standby_channel.close()
        standby_zk.close()
