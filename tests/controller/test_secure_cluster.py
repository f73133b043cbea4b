"""Inter-broker traffic authenticates too (issue 15): three odradek brokers on a real ZooKeeper whose only
listener is SASL_SSL (certificates made by the test), with the ACL authorizer on. Every connection a broker
opens to another (the controller's LeaderAndIsr/UpdateMetadata, the replica fetchers, AlterPartition to the
controller) goes over TLS and logs in with SCRAM-SHA-512 as ``User:broker``, the super user, whose
credential an operator made in ZooKeeper with Kafka's ``kafka-configs.sh --zookeeper`` before the first
start; a client logs in with PLAIN and its own credentials. A fourth broker whose inter-broker password is
wrong registers, but the leaders refuse its fetches: it never joins the ISR, and its log says why.

A real Kafka broker with the same settings joins too: Kafka and odradek log in to each other. The cluster
lives for the module; the test that kills a leader runs last.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import kafka_jvm
from kafka_jvm import free_port
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from odradek import Broker
from odradek.controller import zk_data as zd
from tests.polling import wait_for
from tests.certificates import Pki, make_pki

CHROOT = "/odradek-secure"
BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
CLIENT_USER, CLIENT_PASSWORD = "admin", "admin-secret"
INTER_BROKER_MECHANISM = "SCRAM-SHA-512"
TOPIC = "secured"
PARTITIONS = 3
RECORDS = 30


def broker_config(broker_id: int, port: int, zookeeper_connect: str, pki: Pki, inter_broker_password: str = BROKER_PASSWORD) -> dict[str, Any]:
    """A broker whose one listener is SASL_SSL: PLAIN users for clients, SCRAM (credentials in ZooKeeper)
    for the brokers, and its own SCRAM login (``username``/``password``) for the connections it opens to the
    other brokers."""
    return {
        "broker.id": broker_id,
        "zookeeper.connect": zookeeper_connect,
        "zookeeper.session.timeout.ms": 6000,
        "listeners": f"SASL_SSL://127.0.0.1:{port}",
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.enabled.mechanisms": f"PLAIN,{INTER_BROKER_MECHANISM}",
        "sasl.mechanism.inter.broker.protocol": INTER_BROKER_MECHANISM,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{CLIENT_USER}="{CLIENT_PASSWORD}";',
        f"listener.name.sasl_ssl.{INTER_BROKER_MECHANISM.lower()}.sasl.jaas.config":
            f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{BROKER_USER}" password="{inter_broker_password}";',
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.keystore("broker")),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{BROKER_USER};User:{CLIENT_USER}",
        "replica.lag.time.max.ms": 4000,
        "offsets.topic.replication.factor": 3,
        "offsets.topic.num.partitions": 1,
    }


def client_config(pki: Pki, bootstrap: str, password: str = CLIENT_PASSWORD) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": CLIENT_USER,
        "sasl.password": password,
        "ssl.ca.location": str(pki.ca),
    }


class SecureCluster:
    def __init__(self, zookeeper: kafka_jvm.ZooKeeper, root: Path) -> None:
        self.chroot = f"{CHROOT}-{uuid.uuid4().hex[:6]}"
        self.connect = zookeeper.connect + self.chroot
        self.zookeeper = zookeeper
        self.root = root
        self.pki = make_pki(root / "pki")
        self.brokers: dict[int, Broker] = {}
        self.ports: dict[int, int] = {}
        self.zk = KazooClient(hosts=self.connect)

    def create_broker_credential(self) -> None:
        """As Kafka's documentation has operators do before the first start: the brokers' SCRAM user made in
        ZooKeeper with ``kafka-configs.sh --zookeeper`` (the chroot made first, as a broker would)."""
        base = KazooClient(hosts=self.zookeeper.connect)
        base.start(timeout=15)
        try:
            base.ensure_path(self.chroot)
        finally:
            base.stop()
            base.close()
        done = kafka_jvm.run_tool(
            "kafka-configs", "--zookeeper", self.connect, "--alter", "--add-config", f"{INTER_BROKER_MECHANISM}=[iterations=4096,password={BROKER_PASSWORD}]",
            "--entity-type", "users", "--entity-name", BROKER_USER,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def start(self, broker_id: int, **config: Any) -> Broker:
        port = self.ports.setdefault(broker_id, free_port())
        settings = broker_config(broker_id, port, self.connect, self.pki, **config)
        broker = Broker(self.root / f"broker-{broker_id}", config=settings, subprocess=True).start()
        self.brokers[broker_id] = broker
        return broker

    def admin(self) -> AdminClient:
        """An admin client (PLAIN login) once the metadata it got names the controller and every broker
        started: the controller has told the brokers (UpdateMetadata over SASL_SSL). librdkafka sends
        CreateTopics to the controller, and one that learned of none waits for it at its own pace."""
        admin = AdminClient(client_config(self.pki, self.bootstrap))
        brokers = set(self.brokers)
        wait_for(lambda: (md := admin.list_topics(timeout=5)).controller_id >= 0 and brokers <= set(md.brokers), what="metadata naming the controller and every broker")
        return admin

    def kill(self, broker_id: int) -> None:
        self.brokers.pop(broker_id).kill()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[b]}" for b in sorted(self.brokers))

    def state(self, topic: str, partition: int) -> zd.LeaderIsrAndControllerEpoch:
        state = zd.LeaderIsrAndControllerEpoch.decode(self.zk.get(zd.partition_state_path(topic, partition))[0])
        assert state is not None
        return state

    def isr_full(self, topic: str, partitions: int, replicas: int) -> bool:
        try:
            return all(len(self.state(topic, p).isr) == replicas for p in range(partitions))
        except NoNodeError:  # the controller has not written the partition's state yet
            return False

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()
        for broker in self.brokers.values():
            with contextlib.suppress(RuntimeError):
                broker.kill()


@pytest.fixture(scope="module")
def cluster(zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    cluster = SecureCluster(zookeeper, tmp_path_factory.mktemp("secure-cluster"))
    try:
        cluster.create_broker_credential()
        for broker_id in range(3):
            cluster.start(broker_id)
        cluster.zk.start(timeout=15)
        wait_for(lambda: cluster.zk.exists(zd.BROKER_IDS) and len(cluster.zk.get_children(zd.BROKER_IDS)) == 3, what="three brokers registered")
        yield cluster
    finally:
        cluster.close()


def produce(pki: Pki, bootstrap: str, topic: str, values: list[bytes], partition: int) -> None:
    producer = Producer({**client_config(pki, bootstrap), "acks": "all", "enable.idempotence": True, "message.timeout.ms": 30000})
    failures: list[str] = []
    for value in values:
        producer.produce(topic, value, partition=partition, on_delivery=lambda err, msg: err and failures.append(str(err)))
    assert producer.flush(40) == 0
    assert failures == []


def consume(pki: Pki, bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = Consumer({**client_config(pki, bootstrap), "group.id": f"secure-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got


def segments(broker: Broker, topic: str, partition: int) -> dict[str, bytes]:
    directory = broker.log_dir / f"{topic}-{partition}"
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.log"))}


def test_an_rf3_topic_replicates_over_sasl_ssl_and_a_client_with_its_credentials_produces_and_consumes(cluster: SecureCluster) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    wait_for(lambda: cluster.isr_full(TOPIC, PARTITIONS, 3), what="every partition's ISR full")
    values = [f"record-{n}".encode() for n in range(RECORDS)]
    produce(cluster.pki, cluster.bootstrap, TOPIC, values, 0)
    assert consume(cluster.pki, cluster.bootstrap, TOPIC, 0, RECORDS) == values
    leader = cluster.state(TOPIC, 0).leader
    expected = segments(cluster.brokers[leader], TOPIC, 0)
    assert sum(map(len, expected.values())) > 0
    for broker_id in range(3):
        wait_for(lambda: segments(cluster.brokers[broker_id], TOPIC, 0) == expected, what=f"broker {broker_id}'s segments equal to the leader's")


def test_a_client_with_a_wrong_password_is_refused(cluster: SecureCluster) -> None:
    errors: list[KafkaError] = []
    producer = Producer({**client_config(cluster.pki, cluster.bootstrap, password="wrong"), "error_cb": errors.append})
    wait_for(lambda: producer.poll(0.1) is not None and errors, timeout_s=10, what="the client told of its refused login")
    assert errors[0].code() == KafkaError._AUTHENTICATION
    assert "Invalid username or password" in errors[0].str()


def test_a_broker_with_a_wrong_inter_broker_password_never_joins_the_isr(cluster: SecureCluster) -> None:
    """Broker 3 logs in to the others as ``User:broker`` with a wrong password: the controller's requests
    reach it (the controller's own login is right), so it is told to follow, but the leader refuses its
    fetches. It stays out of the ISR of its partition, and its log names the refusal."""
    topic = "wrong-password"
    outsider = cluster.start(3, inter_broker_password="wrong")
    try:
        wait_for(lambda: len(cluster.zk.get_children(zd.BROKER_IDS)) == 4, what="broker 3 registered")
        admin = cluster.admin()
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[0, 3]])])[topic].result(30)
        refusals = lambda: [line for line in outsider.output if "failed authentication due to" in line and f"invalid credentials with SASL mechanism {INTER_BROKER_MECHANISM}" in line]  # noqa: E731
        wait_for(refusals, what="broker 3's log naming the refused login")
        first = time.monotonic()
        produce(cluster.pki, cluster.bootstrap, topic, [b"x"] * 5, 0)  # acks=all: done once broker 3 is out of the ISR
        assert len(refusals()) <= time.monotonic() - first + 2  # it logs in again about once a second, not in a loop
        assert cluster.state(topic, 0).isr == (0,)
        assert not (outsider.log_dir / f"{topic}-0").exists() or segments(outsider, topic, 0) in ({}, {"00000000000000000000.log": b""})
    finally:
        cluster.kill(3)


def test_a_real_kafka_broker_joins_the_secure_cluster(cluster: SecureCluster) -> None:
    """Apache Kafka 3.9.1 with the same settings logs in to the odradek brokers and they to it: the odradek
    controller's LeaderAndIsr reaches it, it follows an odradek leader and an odradek broker follows it, all
    over SASL_SSL; both partitions' ISRs fill, and a client produces with acks=all to each."""
    topic = "with-kafka"
    kafka_id = 5
    port = cluster.ports.setdefault(kafka_id, free_port())
    settings = {k: str(v) for k, v in broker_config(kafka_id, port, cluster.connect, cluster.pki).items()}
    kafka = kafka_jvm.KafkaBroker(cluster.root / "kafka", cluster.connect, broker_id=kafka_id, settings=settings, port=port)
    process = kafka.launch()
    try:
        wait_for(lambda: str(kafka_id) in cluster.zk.get_children(zd.BROKER_IDS), timeout_s=60, what="Kafka registered")
        admin = cluster.admin()
        admin.create_topics([NewTopic(topic, num_partitions=2, replica_assignment=[[kafka_id, 0], [1, kafka_id]])])[topic].result(30)
        wait_for(lambda: cluster.isr_full(topic, 2, 2) and cluster.state(topic, 0).leader == kafka_id, timeout_s=40, what="both ISRs full, Kafka leading partition 0")
        for partition in range(2):
            values = [f"{partition}-{n}".encode() for n in range(10)]
            produce(cluster.pki, f"127.0.0.1:{port}," + cluster.bootstrap, topic, values, partition)
            assert consume(cluster.pki, cluster.bootstrap, topic, partition, 10) == values
        assert cluster.isr_full(topic, 2, 2)
    finally:
        process.kill()


def test_leadership_moves_when_a_broker_is_killed_and_it_catches_up_when_restarted(cluster: SecureCluster) -> None:
    before = cluster.state(TOPIC, 0)
    cluster.kill(before.leader)
    after = wait_for(lambda: (s := cluster.state(TOPIC, 0)).leader not in (before.leader, -1) and s, what="another leader elected")
    assert after.leader_epoch > before.leader_epoch
    values = [f"after-{n}".encode() for n in range(RECORDS)]
    produce(cluster.pki, cluster.bootstrap, TOPIC, values, 0)
    assert consume(cluster.pki, cluster.bootstrap, TOPIC, 0, 2 * RECORDS)[RECORDS:] == values
    restarted = cluster.start(before.leader)
    try:
        wait_for(lambda: cluster.isr_full(TOPIC, 1, 3), timeout_s=40, what=f"broker {before.leader} back in the ISR")
    except AssertionError as missing:
        leader = cluster.brokers[cluster.state(TOPIC, 0).leader]
        raise AssertionError(f"{missing}; {cluster.state(TOPIC, 0)}\nrestarted:\n{''.join(list(restarted.output)[-60:])}\nleader:\n{''.join(list(leader.output)[-60:])}") from None


def test_a_broker_stopped_gracefully_hands_its_leadership_over_through_the_controller_first(cluster: SecureCluster) -> None:
    """SIGTERM: the broker asks the controller (ControlledShutdown over SASL_SSL, authorized as the brokers'
    super user) to move its leaderships before it stops, and the controller answers with none remaining.
    Broker 2: no replica of the topic the Kafka broker (gone) shares."""
    broker = cluster.brokers.pop(2)
    broker.stop()
    assert any("Controlled shutdown request returned successfully" in line for line in broker.output), "".join(broker.output)[-3000:]
    assert all(cluster.state(TOPIC, p).leader not in (2, -1) for p in range(PARTITIONS))
