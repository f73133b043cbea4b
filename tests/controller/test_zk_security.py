"""ACLs, SCRAM credentials and client quotas in a ZooKeeper-mode cluster (issue 15): three odradek brokers and
one Apache Kafka 3.9.1 broker on one ZooKeeper, every broker with Kafka's ``AclAuthorizer``.

Whatever one broker is told (CreateAcls, AlterUserScramCredentials, AlterClientQuotas, sent over a bare
connection to exactly that broker) is decided on by the others: real clients are refused and then served
by another broker, log in at another broker, are throttled by another broker. Kafka's broker reading what
odradek wrote, and the reverse, is the proof that the znodes are Kafka's; their bytes are compared with
what Kafka writes for the same ACLs.

Each broker has a PLAINTEXT listener (inter-broker traffic and the tests' admin requests: ``User:ANONYMOUS``,
a super user) and a SASL_PLAINTEXT one with SCRAM-SHA-256 for the users.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterator

import kafka_jvm
import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from odradek import Broker
from odradek.controller.zk_client import ZkClient
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.polling import wait_for
from tests.controller.zk_brokers import zk_session

CHROOT = "/odradek-security"
ODRADEK_IDS = (0, 1, 2)
KAFKA_ID = 10
SCRAM = "SCRAM-SHA-256"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
SECURITY = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "sasl.enabled.mechanisms": SCRAM,
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
}
TOPIC = "guarded"
FRANK = "frank@corp"
"""A user whose name ZooKeeper keeps sanitized."""
# wire codes (Kafka's ResourceType, PatternType, AclOperation, AclPermissionType)
TOPIC_TYPE, GROUP_TYPE, LITERAL, PREFIXED = 2, 3, 3, 4
ANY_TYPE, ANY_PATTERN, ANY_OP, ANY_PERMISSION = 1, 1, 1, 1
ALL, WRITE, DESCRIBE, READ = 2, 4, 8, 3
DENY, ALLOW = 2, 3
WAIT_S = 10.0
"""How long a change made on one broker may take to reach another (notifications are watched: well under this)."""


class Node:
    """One broker's two listeners (and an odradek broker's process)."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.plaintext = f"127.0.0.1:{kafka_jvm.free_port()}"
        self.sasl = f"127.0.0.1:{kafka_jvm.free_port()}"
        self.broker: Broker | None = None

    def start(self, log_dir: Path, zookeeper_connect: str) -> None:
        config = {"zookeeper.connect": zookeeper_connect, "broker.id": self.broker_id, "listeners": self.listeners, **SECURITY}
        self.broker = Broker(log_dir, config=config, subprocess=True).start()
        kafka_jvm.wait_until_serving(self.plaintext, kafka_jvm.STARTUP_TIMEOUT_S)  # as KafkaBroker.start waits

    @property
    def listeners(self) -> str:
        return f"PLAINTEXT://{self.plaintext},SASL_PLAINTEXT://{self.sasl}"


@pytest.fixture(scope="module")
def cluster(zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Node]]:
    """The three odradek brokers (the first is the controller), then Kafka's; all stopped after the module."""
    nodes = {i: Node(i) for i in (*ODRADEK_IDS, KAFKA_ID)}
    connect = zookeeper.connect + CHROOT
    kafka: kafka_jvm.KafkaBroker | None = None
    try:
        for i in ODRADEK_IDS:
            nodes[i].start(Path(tmp_path_factory.mktemp(f"zk-security-{i}")), connect)
        kafka = kafka_jvm.KafkaBroker(
            tmp_path_factory.mktemp("zk-security-kafka"), connect, broker_id=KAFKA_ID, port=int(nodes[KAFKA_ID].plaintext.rsplit(":", 1)[1]),
            settings={"listeners": nodes[KAFKA_ID].listeners, **SECURITY},
        )
        try:
            kafka.start()
        except kafka_jvm.JvmUnavailable as exc:
            pytest.fail(str(exc), pytrace=False)
        yield nodes
    finally:
        if kafka is not None:
            kafka.stop()
        for node in nodes.values():
            if node.broker is not None:
                with contextlib.suppress(RuntimeError):  # one a test stopped is down already
                    node.broker.kill()


@pytest.fixture(scope="module")
def zk(zookeeper: kafka_jvm.ZooKeeper, cluster: dict[int, Node]) -> Iterator[KazooClient]:
    with zk_session(zookeeper.connect + CHROOT) as client:
        yield client


def acl(resource_type: int, name: str, principal: str, operation: int, permission: int, pattern: int = LITERAL) -> dict[str, Any]:
    return {
        "resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
        "principal": principal, "host": "*", "operation": operation, "permission_type": permission,
    }


def create_acls(connect: Callable[..., Any], node: Node, *acls: dict[str, Any]) -> None:
    response = connect(node.plaintext).call(ApiKey.CreateAcls, 3, {"creations": list(acls)})
    assert [r.error_code for r in response.results] == [ErrorCode.NONE] * len(acls), response


def delete_acls(connect: Callable[..., Any], node: Node, resource_type: int, name: str, principal: str, operation: int, pattern: int = LITERAL) -> int:
    response = connect(node.plaintext).call(ApiKey.DeleteAcls, 3, {"filters": [{
        "resource_type_filter": resource_type, "resource_name_filter": name, "pattern_type_filter": pattern,
        "principal_filter": principal, "host_filter": None, "operation": operation, "permission_type": ANY_PERMISSION,
    }]})
    (result,) = response.filter_results
    assert result.error_code == ErrorCode.NONE
    return len(result.matching_acls)


def described_acls(connect: Callable[..., Any], node: Node, name: str) -> set[tuple[str, int, str, int, int]]:
    """(resource name, pattern type, principal, operation, permission) of every ACL on ``name``."""
    response = connect(node.plaintext).call(ApiKey.DescribeAcls, 3, {
        "resource_type_filter": ANY_TYPE, "resource_name_filter": name, "pattern_type_filter": ANY_PATTERN,
        "principal_filter": None, "host_filter": None, "operation": ANY_OP, "permission_type": ANY_PERMISSION,
    })
    assert response.error_code == ErrorCode.NONE
    return {(r.resource_name, r.pattern_type, a.principal, a.operation, a.permission_type) for r in response.resources for a in r.acls}


def alter_scram_user(connect: Callable[..., Any], node: Node, user: str, password: str) -> tuple[int, str | None]:
    """AlterUserScramCredentials as Kafka's Admin client sends it (the client salts the password): the
    user's (error code, message)."""
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 4096)
    response = connect(node.plaintext).call(ApiKey.AlterUserScramCredentials, 0, {
        "deletions": [], "upsertions": [{"name": user, "mechanism": 1, "iterations": 4096, "salt": salt, "salted_password": salted}],
    })
    (result,) = response.results
    assert result.user == user
    return result.error_code, result.error_message


def controller(connect: Callable[..., Any], nodes: dict[int, Node]) -> Node:
    """The active controller's broker, as Metadata says."""
    return nodes[connect(nodes[0].plaintext).call(ApiKey.Metadata, 12, {"topics": [], "allow_auto_topic_creation": False}).controller_id]


def add_scram_user(connect: Callable[..., Any], nodes: dict[int, Node], user: str, password: str) -> None:
    """Through the controller, which alone serves AlterUserScramCredentials in a ZooKeeper cluster."""
    assert alter_scram_user(connect, controller(connect, nodes), user, password) == (ErrorCode.NONE, None)


def sasl(user: str, password: str) -> dict[str, Any]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": SCRAM, "sasl.username": user, "sasl.password": password}


def logs_in(node: Node, user: str, password: str, timeout_s: float = 5.0) -> bool:
    """Whether ``user`` gets in at ``node``'s SASL listener: the only broker the admin client knows before
    its first Metadata answer, which it needs that connection for. (A refused login shows as a transport
    failure, with Kafka's brokers as with odradek's.)"""
    admin = AdminClient({"bootstrap.servers": node.sasl, "log_level": 0, **sasl(user, password)})
    try:
        admin.list_topics(timeout=timeout_s)
        return True
    except KafkaException:
        return False


def produce_error(nodes: dict[int, Node], user: str, password: str, partition: int) -> str | None:
    """Produce one record to ``partition`` of :data:`TOPIC` as ``user``: None or the error's name."""
    outcome: list[str | None] = []
    producer = Producer({
        "bootstrap.servers": ",".join(nodes[i].sasl for i in ODRADEK_IDS), "log_level": 0, "message.timeout.ms": 5000,
        "enable.idempotence": False, "acks": 1, **sasl(user, password),
    })
    producer.produce(TOPIC, b"x", partition=partition, on_delivery=lambda err, msg: outcome.append(err.name() if err else None))
    producer.flush(10)
    assert outcome, "no delivery report"
    return outcome[0]


@pytest.fixture(scope="module")
def guarded(cluster: dict[int, Node]) -> None:
    """:data:`TOPIC`, partition i on odradek broker i alone: a record to partition i is broker i's to accept."""
    admin = AdminClient({"bootstrap.servers": cluster[0].plaintext, "log_level": 0})
    admin.create_topics([NewTopic(TOPIC, num_partitions=len(ODRADEK_IDS), replica_assignment=[[i] for i in ODRADEK_IDS])])[TOPIC].result(30)

    def everywhere() -> bool:
        for i in ODRADEK_IDS:
            metadata = AdminClient({"bootstrap.servers": cluster[i].plaintext, "log_level": 0}).list_topics(TOPIC, timeout=5)
            partitions = metadata.topics[TOPIC].partitions
            if len(partitions) != len(ODRADEK_IDS) or any(partitions[p].leader != p for p in partitions):
                return False
        return True

    wait_for(everywhere, 30, "every broker's metadata showing the topic led as assigned")


def test_acl_created_on_one_broker_decides_on_the_others(cluster: dict[int, Node], guarded: None, connect: Callable[..., Any]) -> None:
    """alice may see the topic everywhere (DESCRIBE); WRITE granted through broker 0 lets her produce to
    brokers 1 and 2; revoked through broker 0, brokers 1 and 2 refuse her."""
    add_scram_user(connect, cluster, "alice", "alice-secret")
    create_acls(connect, cluster[0], acl(TOPIC_TYPE, TOPIC, "User:alice", DESCRIBE, ALLOW))
    wait_for(lambda: all(logs_in(cluster[i], "alice", "alice-secret") for i in ODRADEK_IDS), WAIT_S, "alice logging in everywhere")
    assert produce_error(cluster, "alice", "alice-secret", 1) == "TOPIC_AUTHORIZATION_FAILED"

    create_acls(connect, cluster[0], acl(TOPIC_TYPE, TOPIC, "User:alice", WRITE, ALLOW))
    for partition in (1, 2):
        wait_for(lambda: produce_error(cluster, "alice", "alice-secret", partition) is None, WAIT_S, f"broker {partition} accepting alice's records")

    assert delete_acls(connect, cluster[0], TOPIC_TYPE, TOPIC, "User:alice", WRITE) == 1
    for partition in (1, 2):
        wait_for(lambda: produce_error(cluster, "alice", "alice-secret", partition) == "TOPIC_AUTHORIZATION_FAILED", WAIT_S, f"broker {partition} refusing alice")


def test_prefixed_deny_from_one_broker_wins_on_another(cluster: dict[int, Node], guarded: None, connect: Callable[..., Any]) -> None:
    """A prefixed DENY added through broker 2 overrides a literal ALLOW added through broker 1, on broker 0."""
    add_scram_user(connect, cluster, "bob", "bob-secret")
    create_acls(connect, cluster[1], acl(TOPIC_TYPE, TOPIC, "User:bob", ALL, ALLOW))
    wait_for(lambda: produce_error(cluster, "bob", "bob-secret", 0) is None, WAIT_S, "broker 0 accepting bob's records")
    create_acls(connect, cluster[2], acl(TOPIC_TYPE, "guard", "User:bob", WRITE, DENY, PREFIXED))
    wait_for(lambda: produce_error(cluster, "bob", "bob-secret", 0) == "TOPIC_AUTHORIZATION_FAILED", WAIT_S, "broker 0 refusing bob")
    assert described_acls(connect, cluster[0], "guard") == {("guard", PREFIXED, "User:bob", WRITE, DENY)}


def test_acl_znodes_are_kafkas(cluster: dict[int, Node], zk: KazooClient, connect: Callable[..., Any]) -> None:
    """The same ACLs created through odradek and through Kafka: the same znode bytes, the same notifications."""
    for suffix, node in (("o", cluster[1]), ("k", cluster[KAFKA_ID])):
        create_acls(
            connect, node,
            acl(TOPIC_TYPE, f"layout-{suffix}", "User:carol", READ, ALLOW),
            acl(GROUP_TYPE, f"team-{suffix}", "User:carol", ALL, DENY, PREFIXED),
        )
    for path in ("/kafka-acl/Topic/layout-", "/kafka-acl-extended/prefixed/Group/team-"):
        ours, _ = zk.get(path + "o")
        kafkas, _ = zk.get(path + "k")
        assert ours == kafkas.replace(b"-k", b"-o")
    assert ours == b'{"acls":[{"principal":"User:carol","permissionType":"Deny","host":"*","operation":"All"}],"version":1}'

    def notifications(path: str) -> set[bytes]:
        return {zk.get(f"{path}/{child}")[0] for child in zk.get_children(path)}

    assert {b"TOPIC:layout-o", b"TOPIC:layout-k"} <= notifications("/kafka-acl-changes")
    extended = {b'{"version":1,"resourceType":"GROUP","name":"team-%s","patternType":"PREFIXED"}' % s for s in (b"o", b"k")}
    assert extended <= notifications("/kafka-acl-extended-changes")
    assert sorted(zk.get_children("/kafka-acl")) == ["Cluster", "DelegationToken", "Group", "Topic", "TransactionalId", "User"]


def test_kafka_and_odradek_read_each_others_writes(zookeeper: kafka_jvm.ZooKeeper, cluster: dict[int, Node], guarded: None, connect: Callable[..., Any]) -> None:
    """Kafka's DescribeAcls lists what odradek wrote; an ACL written by Kafka is listed and enforced by odradek,
    and a user Kafka's ``kafka-configs --zookeeper`` made (its code writing ZooKeeper) logs in at odradek."""
    create_acls(connect, cluster[2], acl(TOPIC_TYPE, "shared-o", "User:dan", READ, ALLOW))
    wait_for(lambda: described_acls(connect, cluster[KAFKA_ID], "shared-o") == {("shared-o", LITERAL, "User:dan", READ, ALLOW)}, WAIT_S, "Kafka listing odradek's ACL")

    made = kafka_jvm.run_tool(
        "kafka-configs", "--zookeeper", zookeeper.connect + CHROOT, "--alter", "--add-config", f"{SCRAM}=[password=erin-secret]", "--entity-type", "users", "--entity-name", "erin",
    )
    assert made.returncode == 0, made.stdout + made.stderr
    wait_for(lambda: logs_in(cluster[0], "erin", "erin-secret"), WAIT_S, "erin (made by Kafka's own code) logging in at odradek")
    assert produce_error(cluster, "erin", "erin-secret", 2) == "TOPIC_AUTHORIZATION_FAILED"
    create_acls(connect, cluster[KAFKA_ID], acl(TOPIC_TYPE, TOPIC, "User:erin", WRITE, ALLOW))
    wait_for(lambda: described_acls(connect, cluster[1], TOPIC) >= {(TOPIC, LITERAL, "User:erin", WRITE, ALLOW)}, WAIT_S, "odradek listing Kafka's ACL")
    wait_for(lambda: produce_error(cluster, "erin", "erin-secret", 2) is None, WAIT_S, "broker 2 accepting erin's records")


def test_scram_user_made_on_one_broker_logs_in_at_another(cluster: dict[int, Node], zk: KazooClient, connect: Callable[..., Any]) -> None:
    """Made through the controller's broker, a user logs in at every other broker, Kafka's included; the
    other brokers refuse to make users, as Kafka's do (the admin client then asks the controller)."""
    active = controller(connect, cluster)
    for node in cluster.values():
        if node is not active:
            assert alter_scram_user(connect, node, FRANK, "frank-secret") == (ErrorCode.NOT_CONTROLLER, None)
    add_scram_user(connect, cluster, FRANK, "frank-secret")
    assert zk.exists("/config/users/frank%40corp")  # the name sanitized, as Kafka's Sanitizer does
    others = [node for i, node in cluster.items() if node is not active]
    for node in others:
        wait_for(lambda: logs_in(node, FRANK, "frank-secret"), WAIT_S, f"{FRANK} logging in at broker {node.broker_id}")
    assert not logs_in(others[0], FRANK, "wrong", timeout_s=2)

    add_scram_user(connect, cluster, FRANK, "new-secret")
    wait_for(lambda: logs_in(others[-1], FRANK, "new-secret"), WAIT_S, "the new password taking effect at another broker")
    assert not logs_in(others[-1], FRANK, "frank-secret", timeout_s=2)

    assert described_credentials(connect, others[-1], FRANK) == (ErrorCode.NONE, [(1, 4096)])
    deleted = connect(controller(connect, cluster).plaintext).call(ApiKey.AlterUserScramCredentials, 0, {"deletions": [{"name": FRANK, "mechanism": 1}], "upsertions": []})
    assert [(r.user, r.error_code) for r in deleted.results] == [(FRANK, ErrorCode.NONE)]
    wait_for(lambda: described_credentials(connect, others[-1], FRANK) == (ErrorCode.RESOURCE_NOT_FOUND, []), WAIT_S, "the deletion reaching another broker")


def described_credentials(connect: Callable[..., Any], node: Node, user: str) -> tuple[int, list[tuple[int, int]]]:
    """DescribeUserScramCredentials of one user: (error code, [(mechanism, iterations)])."""
    (result,) = connect(node.plaintext).call(ApiKey.DescribeUserScramCredentials, 0, {"users": [{"name": user}]}).results
    return result.error_code, [(c.mechanism, c.iterations) for c in result.credential_infos]


def test_scram_credentials_and_quotas_share_the_user_znode(cluster: dict[int, Node], zk: KazooClient, connect: Callable[..., Any]) -> None:
    """A quota set on a user with credentials keeps them (and the reverse): one ``/config/users/<user>`` config."""
    add_scram_user(connect, cluster, "gina", "gina-secret")
    alter_quota(connect, cluster[1], [{"entity_type": "user", "entity_name": "gina"}], "producer_byte_rate", 4096.0)
    add_scram_user(connect, cluster, "gina", "gina-secret-2")
    data, _ = zk.get("/config/users/gina")
    assert b'"producer_byte_rate":"4096"' in data and b'"SCRAM-SHA-256":"salt=' in data
    wait_for(lambda: logs_in(cluster[0], "gina", "gina-secret-2"), WAIT_S, "gina's new password taking effect at broker 0")
    assert wait_for(lambda: described_quotas(connect, cluster[0], "user", "gina"), WAIT_S, "broker 0 describing gina's quota") == {"producer_byte_rate": 4096.0}


def alter_quota(connect: Callable[..., Any], node: Node, entity: list[dict[str, Any]], key: str, value: float) -> None:
    response = connect(node.plaintext).call(ApiKey.AlterClientQuotas, 1, {
        "entries": [{"entity": entity, "ops": [{"key": key, "value": value, "remove": False}]}], "validate_only": False,
    })
    assert [e.error_code for e in response.entries] == [ErrorCode.NONE]


def described_quotas(connect: Callable[..., Any], node: Node, entity_type: str, name: str) -> dict[str, float]:
    response = connect(node.plaintext).call(ApiKey.DescribeClientQuotas, 1, {
        "components": [{"entity_type": entity_type, "match_type": 0, "match": name}], "strict": False,
    })
    assert response.error_code == ErrorCode.NONE
    return {v.key: v.value for e in response.entries or () for v in e["values"]}


def test_quota_set_on_one_broker_throttles_on_another(cluster: dict[int, Node], guarded: None, connect: Callable[..., Any]) -> None:
    """``producer_byte_rate`` for client id ``slowpoke`` set through broker 2: broker 0 throttles its produce
    and says so (throttle_time_ms), and Kafka and every odradek broker describe the quota."""
    alter_quota(connect, cluster[2], [{"entity_type": "client-id", "entity_name": "slowpoke"}], "producer_byte_rate", 1024.0)
    for i in (0, 1, KAFKA_ID):
        assert wait_for(lambda: described_quotas(connect, cluster[i], "client-id", "slowpoke"), WAIT_S, f"broker {i} describing the quota") == {"producer_byte_rate": 1024.0}
    throttles: list[tuple[int, float]] = []
    producer = Producer({
        "bootstrap.servers": cluster[0].plaintext, "client.id": "slowpoke", "log_level": 0, "linger.ms": 0,
        "throttle_cb": lambda event: throttles.append((event.broker_id, event.throttle_time)),
    })
    for _ in range(20):
        producer.produce(TOPIC, b"v" * 4096, partition=0)
        producer.flush(10)
        producer.poll(0)
        if throttles:
            break
    assert throttles and throttles[0][0] == 0 and throttles[0][1] > 0, throttles


def test_kafka_configs_makes_a_user_through_any_broker(cluster: dict[int, Node], connect: Callable[..., Any]) -> None:
    """``kafka-configs.sh --bootstrap-server`` pointed at a broker that is not the controller: told
    NOT_CONTROLLER, Kafka's admin client asks the controller, and the user logs in everywhere."""
    active = controller(connect, cluster)
    other = next(node for i, node in cluster.items() if i in ODRADEK_IDS and node is not active)
    made = kafka_jvm.run_tool(
        "kafka-configs", "--bootstrap-server", other.plaintext, "--alter", "--add-config", f"{SCRAM}=[password=hank-secret]", "--entity-type", "users", "--entity-name", "hank",
    )
    assert made.returncode == 0, made.stdout + made.stderr
    assert "Completed updating config for user hank." in made.stdout
    for i in ODRADEK_IDS:
        wait_for(lambda: logs_in(cluster[i], "hank", "hank-secret"), WAIT_S, f"hank logging in at broker {i}")


def test_brokers_adding_acls_to_one_resource_at_once_lose_none(cluster: dict[int, Node], zk: KazooClient, connect: Callable[..., Any]) -> None:
    """Three brokers add an ACL each to the same resource at the same moment: the writes are conditional on
    the version each read, so those that lose the race read again and retry; all three ACLs stay."""
    principals = [f"User:racer-{i}" for i in ODRADEK_IDS]
    wires = [connect(cluster[i].plaintext) for i in ODRADEK_IDS]
    with concurrent.futures.ThreadPoolExecutor(len(wires)) as pool:
        answers = list(pool.map(
            lambda job: job[0].call(ApiKey.CreateAcls, 3, {"creations": [acl(TOPIC_TYPE, "contested", job[1], READ, ALLOW)]}),
            zip(wires, principals),
        ))
    assert [r.error_code for a in answers for r in a.results] == [ErrorCode.NONE] * len(wires)
    data, _ = zk.get("/kafka-acl/Topic/contested")
    assert {e["principal"] for e in json.loads(data)["acls"]} == set(principals)
    expected = {("contested", LITERAL, p, READ, ALLOW) for p in principals}
    for i in (*ODRADEK_IDS, KAFKA_ID):
        wait_for(lambda: described_acls(connect, cluster[i], "contested") == expected, WAIT_S, f"broker {i} listing every racer's ACL")


def test_a_restarted_broker_reads_acls_credentials_and_quotas_from_zookeeper(zookeeper: kafka_jvm.ZooKeeper, cluster: dict[int, Node], connect: Callable[..., Any]) -> None:
    """What was made while a broker was down is in ZooKeeper only: it is read when the broker starts again."""
    node = cluster[2]
    assert node.broker is not None
    log_dir = node.broker.log_dir
    node.broker.stop()
    node.broker = None
    while_down = next(n for i, n in cluster.items() if i in ODRADEK_IDS and i != 2)
    add_scram_user(connect, cluster, "ivan", "ivan-secret")
    create_acls(connect, while_down, acl(TOPIC_TYPE, "made-while-down", "User:ivan", WRITE, DENY))
    alter_quota(connect, while_down, [{"entity_type": "user", "entity_name": "ivan"}, {"entity_type": "client-id", "entity_name": "tool"}], "request_percentage", 25.0)
    node.start(log_dir, zookeeper.connect + CHROOT)
    assert logs_in(node, "ivan", "ivan-secret")
    assert described_acls(connect, node, "made-while-down") == {("made-while-down", LITERAL, "User:ivan", WRITE, DENY)}
    response = connect(node.plaintext).call(ApiKey.DescribeClientQuotas, 1, {
        "components": [{"entity_type": "user", "match_type": 0, "match": "ivan"}, {"entity_type": "client-id", "match_type": 0, "match": "tool"}], "strict": True,
    })
    assert [{v.key: v.value for v in e["values"]} for e in response.entries] == [{"request_percentage": 25.0}]


def test_change_notifications_are_purged_once_expired(zookeeper: kafka_jvm.ZooKeeper, cluster: dict[int, Node], zk: KazooClient) -> None:
    """Kafka's listeners delete notifications older than 15 minutes; younger ones stay for brokers that have
    not read them yet."""
    client = ZkClient(zookeeper.connect + CHROOT)
    try:
        path = "/purge-test"
        for _ in range(3):
            zk.create(f"{path}/acl_changes_", b"TOPIC:x", sequence=True, makepath=True)
        children = zk.get_children(path)
        client.purge_obsolete_notifications(path, children)
        assert sorted(zk.get_children(path)) == sorted(children)
        client.purge_obsolete_notifications(path, children, expiration_ms=0)
        assert zk.get_children(path) == []
    finally:
        client.close()
