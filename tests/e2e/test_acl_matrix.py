"""The ACL matrix (issue 15): principals authenticated with SASL/PLAIN against a broker running Kafka's
AclAuthorizer. For each API a principal without the permission is refused with Kafka's error and sees
nothing it must not; with it, it succeeds. ``User:admin`` is the super user that sets things up."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka import ElectionType
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic, ResourcePatternType, ResourceType

from kafka_jvm import free_port
from odradek import Broker

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
GRANTED, HIDDEN, DESCRIBED = "matrix-granted", "matrix-hidden", "matrix-described"
"""alice may read and write GRANTED, only describe DESCRIBED, and nothing on HIDDEN, and use the group
matrix-alice; bob may do nothing at all; carol is granted ALTER on the cluster by the test that needs it."""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    port = free_port()
    # The broker logs in to its own inter-broker listener as the super user admin, as a Kafka broker's does.
    users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="{USERS["admin"]}" {users};'
    config = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "offsets.topic.replication.factor": "1",
    }
    with Broker(log_dir=tmp_path_factory.mktemp("acl-matrix"), subprocess=True, config=config) as b:
        admin = AdminClient(client("admin", b))
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in (GRANTED, HIDDEN, DESCRIBED)]).values():
            f.result(10)
        grants = [
            AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW)
            for topic, op in ((GRANTED, AclOperation.READ), (GRANTED, AclOperation.WRITE), (DESCRIBED, AclOperation.DESCRIBE))
        ] + [AclBinding(ResourceType.GROUP, "matrix-alice", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)]
        for f in admin.create_acls(grants).values():
            f.result(10)
        yield b


def client(user: str, broker: Broker, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
        **extra,
    }


@pytest.mark.parametrize("user,visible", [("admin", {GRANTED, HIDDEN, DESCRIBED}), ("alice", {GRANTED, DESCRIBED}), ("bob", set())])
def test_metadata_lists_only_the_topics_a_principal_may_describe(broker, user, visible) -> None:
    topics = AdminClient(client(user, broker)).list_topics(timeout=10).topics
    assert {t for t in topics if t.startswith("matrix-")} == visible


def test_metadata_for_a_named_topic_without_describe_is_refused_without_telling_whether_it_exists(broker) -> None:
    admin = AdminClient(client("bob", broker))
    for name in (HIDDEN, "matrix-does-not-exist"):
        metadata = admin.list_topics(name, timeout=10)
        assert metadata.topics[name].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def produce(user: str, broker: Broker, topic: str) -> KafkaError | None:
    producer = Producer(client(user, broker, **{"message.timeout.ms": 5000, "enable.idempotence": False}))
    outcome: list = []
    producer.produce(topic, b"value", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(10)
    assert len(outcome) == 1
    return outcome[0]


@pytest.mark.parametrize(
    "user,topic,allowed", [("alice", GRANTED, True), ("alice", DESCRIBED, False), ("alice", HIDDEN, False), ("bob", GRANTED, False), ("admin", HIDDEN, True)]
)
def test_produce_needs_write_on_the_topic(broker, user, topic, allowed) -> None:
    error = produce(user, broker, topic)
    if allowed:
        assert error is None
    else:
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.parametrize("user,topic,outcome", [("alice", GRANTED, "read"), ("alice", DESCRIBED, "refused"), ("alice", HIDDEN, "nothing"), ("bob", GRANTED, "nothing")])
def test_fetch_needs_read_on_the_topic(broker, user, topic, outcome) -> None:
    """With DESCRIBE but not READ the fetch is refused with TOPIC_AUTHORIZATION_FAILED; without DESCRIBE the
    client does not even learn where the partition is, and reads nothing."""
    assert produce("admin", broker, topic) is None
    consumer = Consumer(client(user, broker, **{"group.id": f"matrix-{user}", "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = consumer.poll(10 if outcome != "nothing" else 3)
        if outcome == "read":
            assert message is not None and message.error() is None and message.value() == b"value"
        elif outcome == "refused":
            assert message is not None and message.error() is not None and message.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        else:
            assert message is None or message.error() is not None
    finally:
        consumer.close()


def grant(broker: Broker, *bindings: AclBinding) -> None:
    admin = AdminClient(client("admin", broker))
    for f in admin.create_acls(list(bindings)).values():
        f.result(10)


def group_acl(group: str, op: AclOperation) -> AclBinding:
    return AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW)


def test_a_consumer_group_needs_read_on_the_group(broker) -> None:
    """Without READ on the group, joining is refused (GROUP_AUTHORIZATION_FAILED); with it alice consumes
    and commits, and with DESCRIBE on the group sees its offsets."""
    assert produce("admin", broker, GRANTED) is None
    settings = {"enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000}

    refused = Consumer(client("alice", broker, **{"group.id": "matrix-closed", **settings}))
    try:
        refused.subscribe([GRANTED])
        message = refused.poll(10)
        assert message is not None and message.error() is not None and message.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        refused.close()

    grant(broker, group_acl("matrix-open", AclOperation.READ))
    consumer = Consumer(client("alice", broker, **{"group.id": "matrix-open", **settings}))
    try:
        consumer.subscribe([GRANTED])
        message = consumer.poll(15)
        assert message is not None and message.error() is None
        consumer.commit(message, asynchronous=False)
        committed = consumer.committed([TopicPartition(GRANTED, 0)], timeout=10)
        assert committed[0].offset == message.offset() + 1
    finally:
        consumer.close()


def test_groups_are_listed_and_described_only_with_describe(broker) -> None:
    admin = AdminClient(client("admin", broker))
    settings = {"enable.auto.commit": False, "auto.offset.reset": "earliest"}
    consumer = Consumer(client("admin", broker, **{"group.id": "matrix-secret-group", **settings}))
    try:
        consumer.subscribe([GRANTED])
        consumer.poll(10)
        assert "matrix-secret-group" in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
        bob = AdminClient(client("bob", broker))
        assert "matrix-secret-group" not in {g.group_id for g in bob.list_consumer_groups().result(10).valid}
        [future] = bob.describe_consumer_groups(["matrix-secret-group"]).values()
        with pytest.raises(Exception) as refused:
            future.result(10)
        assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_creating_and_deleting_topics_needs_create_and_delete(broker) -> None:
    bob = AdminClient(client("bob", broker))
    [created] = bob.create_topics([NewTopic("matrix-bobs", 1, 1)]).values()
    with pytest.raises(Exception) as refused:
        created.result(10)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [deleted] = bob.delete_topics([GRANTED]).values()
    with pytest.raises(Exception) as refused:
        deleted.result(10)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert GRANTED in AdminClient(client("admin", broker)).list_topics(timeout=10).topics

    grant(broker, AclBinding(ResourceType.TOPIC, "matrix-alices-", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.CREATE, AclPermissionType.ALLOW))
    alice = AdminClient(client("alice", broker))
    [created] = alice.create_topics([NewTopic("matrix-alices-own", 1, 1)]).values()
    created.result(10)
    [refused_elsewhere] = alice.create_topics([NewTopic("matrix-elsewhere", 1, 1)]).values()
    with pytest.raises(Exception) as refused:
        refused_elsewhere.result(10)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_list_offsets_needs_describe(broker) -> None:
    """alice may describe DESCRIBED, so a consumer may look up its offsets; bob may not."""
    assert produce("admin", broker, DESCRIBED) is None
    for user, allowed in (("alice", True), ("bob", False)):
        consumer = Consumer(client(user, broker, **{"group.id": "matrix-alice"}))
        try:
            if allowed:
                low, high = consumer.get_watermark_offsets(TopicPartition(DESCRIBED, 0), timeout=10)
                assert high >= 1
            else:
                with pytest.raises(Exception):
                    consumer.get_watermark_offsets(TopicPartition(DESCRIBED, 0), timeout=5)
        finally:
            consumer.close()


def test_configs_need_describe_configs_and_alter_configs(broker) -> None:
    from confluent_kafka.admin import ConfigResource

    admin, bob = AdminClient(client("admin", broker)), AdminClient(client("bob", broker))
    [described] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, GRANTED)]).values()
    assert "retention.ms" in described.result(10)
    for resource, error in (
        (ConfigResource(ConfigResource.Type.TOPIC, GRANTED), KafkaError.TOPIC_AUTHORIZATION_FAILED),
        (ConfigResource(ConfigResource.Type.BROKER, "0"), KafkaError.CLUSTER_AUTHORIZATION_FAILED),
    ):
        [refused] = bob.describe_configs([resource]).values()
        with pytest.raises(Exception) as raised:
            refused.result(10)
        assert raised.value.args[0].code() == error
    resource = ConfigResource(ConfigResource.Type.TOPIC, GRANTED, set_config={"retention.ms": "1000"})
    [refused] = bob.alter_configs([resource]).values()
    with pytest.raises(Exception) as raised:
        refused.result(10)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_authorized_operations_come_from_the_acls(broker) -> None:
    admin, alice = AdminClient(client("admin", broker)), AdminClient(client("alice", broker))
    everything = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert AclOperation.ALTER in everything.authorized_operations and AclOperation.CLUSTER_ACTION in everything.authorized_operations
    assert not alice.describe_cluster(include_authorized_operations=True).result(10).authorized_operations


def test_a_transactional_producer_needs_write_on_its_transactional_id(broker) -> None:
    settings = {"transactional.id": "matrix-tx", "message.timeout.ms": 5000}
    refused = Producer(client("alice", broker, **settings))
    with pytest.raises(Exception) as raised:
        refused.init_transactions(10)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    grant(broker, AclBinding(ResourceType.TRANSACTIONAL_ID, "matrix-tx", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW))
    producer = Producer(client("alice", broker, **settings))
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(GRANTED, b"in a transaction")
    producer.commit_transaction(10)


def test_an_idempotent_producer_needs_write_on_some_topic(broker) -> None:
    """KIP-679: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic, allows InitProducerId."""
    assert produce("alice", broker, GRANTED) is None  # enable.idempotence=False there
    producer = Producer(client("alice", broker, **{"enable.idempotence": True, "message.timeout.ms": 5000}))
    outcome: list = []
    producer.produce(GRANTED, b"idempotent", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(10)
    assert outcome == [None]


def refusal(future: Any) -> int:
    """The error code a refused admin request's future fails with."""
    with pytest.raises(Exception) as raised:
        future.result(10)
    return raised.value.args[0].code()


def test_delete_records_needs_delete_on_the_topic(broker) -> None:
    """With DESCRIBE alice finds the partition but may not delete its records; with DELETE she may."""
    topic = "matrix-deletable"
    admin = AdminClient(client("admin", broker))
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(10)
    assert [produce("admin", broker, topic) for _ in range(2)] == [None, None]
    on_topic = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    grant(broker, on_topic)
    alice = AdminClient(client("alice", broker))
    [refused] = alice.delete_records([TopicPartition(topic, 0, 1)]).values()
    assert refusal(refused) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    grant(broker, AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.DELETE, AclPermissionType.ALLOW))
    [deleted] = alice.delete_records([TopicPartition(topic, 0, 1)]).values()
    assert deleted.result(10).low_watermark == 1


def test_deleting_a_groups_offsets_needs_delete_on_the_group(broker) -> None:
    """alice commits in a group she may READ; deleting the offset (OffsetDelete, which confluent-kafka cannot
    send: kafka-python's admin client does) needs DELETE on the group too."""
    import kafka
    from kafka.errors import GroupAuthorizationFailedError, NoError

    group = "matrix-offsets"
    grant(broker, group_acl(group, AclOperation.READ))
    consumer = Consumer(client("alice", broker, **{"group.id": group, "enable.auto.commit": False}))
    alice = kafka.KafkaAdminClient(
        bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password=USERS["alice"]
    )
    try:
        consumer.commit(offsets=[TopicPartition(GRANTED, 0, 0)], asynchronous=False)
        with pytest.raises(GroupAuthorizationFailedError):
            alice.delete_group_offsets(group, [kafka.TopicPartition(GRANTED, 0)])
        assert consumer.committed([TopicPartition(GRANTED, 0)], timeout=10)[0].offset == 0

        grant(broker, group_acl(group, AclOperation.DELETE))
        assert alice.delete_group_offsets(group, [kafka.TopicPartition(GRANTED, 0)]) == {kafka.TopicPartition(GRANTED, 0): NoError}
        assert consumer.committed([TopicPartition(GRANTED, 0)], timeout=10)[0].offset < 0
    finally:
        alice.close()
        consumer.close()


def test_electing_leaders_needs_alter_on_the_cluster(broker) -> None:
    """Refused CLUSTER_AUTHORIZATION_FAILED; with ALTER on the cluster the election is made (on one broker the
    preferred leader already leads: ELECTION_NOT_NEEDED)."""
    carol = AdminClient(client("carol", broker))
    partition = TopicPartition(GRANTED, 0)
    assert refusal(carol.elect_leaders(ElectionType.PREFERRED, [partition])) == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    grant(broker, AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:carol", "*", AclOperation.ALTER, AclPermissionType.ALLOW))
    [(elected, error)] = carol.elect_leaders(ElectionType.PREFERRED, [partition]).result(10).items()
    assert (elected.topic, elected.partition, error.code()) == (GRANTED, 0, KafkaError.ELECTION_NOT_NEEDED)
