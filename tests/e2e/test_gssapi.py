"""SASL/GSSAPI (Kerberos) against a real MIT KDC (tests/kerberos.py), odradek and Kafka 3.9.1 configured
alike: a SASL_PLAINTEXT listener whose GSSAPI accepts with the broker's keytab (``kafka/localhost``), the
ACL authorizer, and ``sasl.kerberos.principal.to.local.rules`` mapping principals to the names ACLs use.
Kafka's Java producer logs in with its own keytab; what it may do shows which principal the broker saw.
Then a cluster whose brokers log in to each other with Kerberos: two odradek brokers and a Kafka broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

import kafka_jvm
from kafka_jvm import free_port
import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic, ResourcePatternType, ResourceType

from odradek import Broker
from tests.kerberos import REALM, Kdc
from tests.polling import wait_for

RULES = f"RULE:[2:$1@$0](.*@{REALM})s/@.*//,DEFAULT"
"""``svc/host@REALM`` becomes ``svc``; ``user@REALM`` (the default realm) becomes ``user``."""
TOPIC = "kerberized"


@pytest.fixture(scope="module")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    kdc = Kdc(tmp_path_factory.mktemp("kdc")).start()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
        env.setenv("KRB5RCACHETYPE", "none")
        env.setenv("JAVA_TOOL_OPTIONS", f"-Djava.security.krb5.conf={kdc.krb5_conf}")
        try:
            yield kdc
        finally:
            kdc.stop()


def settings(kdc: Kdc, plain: int, sasl: int) -> dict[str, str]:
    keytab = kdc.keytab("kafka/localhost")
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://localhost:{sasl}",
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.principal.to.local.rules": RULES,
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
            f'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="{keytab}" principal="kafka/localhost@{REALM}";',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
    }


@pytest.fixture(scope="module")
def brokers(kdc: Kdc, real_kafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[int, int]]]:
    """(PLAINTEXT port, SASL_PLAINTEXT port) of each broker; alice may write the topic, nobody else."""
    ours, theirs = (free_port(), free_port()), (free_port(), free_port())
    kafka = kafka_jvm.KafkaBroker(tmp_path_factory.mktemp("kafka-gssapi"), real_kafka.zookeeper.connect + "/gssapi", settings=settings(kdc, *theirs), port=theirs[0]).start()
    try:
        with Broker(log_dir=tmp_path_factory.mktemp("odradek-gssapi"), subprocess=True, config=settings(kdc, *ours)):
            for plain, _ in (ours, theirs):
                admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
                admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
                for principal in ("User:alice", "User:kafka"):
                    for operation in (AclOperation.WRITE, AclOperation.DESCRIBE):
                        binding = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, principal, "*", operation, AclPermissionType.ALLOW)
                        for done in admin.create_acls([binding]).values():
                            done.result(30)
            yield {"odradek": ours, "kafka": theirs}
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def java_probe(kdc: Kdc) -> Callable[..., tuple[int, dict[str, Any] | str]]:
    """Kafka's own producer (tests/e2e/java_security/SecurityProbe.java): its exit status and what it observed
    (or its last error lines)."""
    programs = kafka_jvm.java_programs(sorted((Path(__file__).parent / "java_security").glob("*.java")), 120)

    def run(port: int, principal: str, topic: str = TOPIC, seconds: int = 1) -> tuple[int, dict[str, Any] | str]:
        """``seconds``: how long it produces after its first acknowledgement, one record each 100 ms."""
        keytab = kdc.keytab(principal)
        jaas = f'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="{keytab}" principal="{principal}@{REALM}";'
        done = programs.run("SecurityProbe", f"localhost:{port}", "SASL_PLAINTEXT", "GSSAPI", jaas, str(seconds), topic, "sasl.kerberos.service.name=kafka", "max.block.ms=15000", "delivery.timeout.ms=15000", "request.timeout.ms=10000", timeout_s=120)
        if done.returncode == 0:
            return 0, json.loads(done.stdout.splitlines()[-1])
        return done.returncode, done.stderr

    return run


@pytest.mark.parametrize("kind", ["odradek", "kafka"])
def test_a_kerberos_user_produces_as_its_short_name(brokers: dict[str, tuple[int, int]], java_probe: Callable[..., Any], kind: str) -> None:
    status, seen = java_probe(brokers[kind][1], "alice")
    assert status == 0, seen
    assert isinstance(seen, dict) and seen["acked"] >= 5 and seen["failed-authentication-total"] == 0


@pytest.mark.parametrize("kind", ["odradek", "kafka"])
def test_a_service_principal_is_mapped_by_the_rules(brokers: dict[str, tuple[int, int]], java_probe: Callable[..., Any], kind: str) -> None:
    """``kafka/client-host@REALM`` is ``User:kafka`` by the RULE, which the ACLs allow."""
    status, seen = java_probe(brokers[kind][1], "kafka/client-host")
    assert status == 0, seen


@pytest.mark.parametrize("kind", ["odradek", "kafka"])
def test_a_kerberos_user_without_an_acl_is_refused_the_topic(brokers: dict[str, tuple[int, int]], java_probe: Callable[..., Any], kind: str) -> None:
    status, seen = java_probe(brokers[kind][1], "carol")
    assert status != 0
    assert "TopicAuthorizationException" in seen and "Not authorized to access topics: [kerberized]" in seen


def test_brokers_log_in_to_each_other_with_kerberos(kdc: Kdc, real_kafka, java_probe: Callable[..., Any], tmp_path: Path) -> None:
    """``sasl.mechanism.inter.broker.protocol=GSSAPI`` (Kafka's default) on the inter-broker listener: the
    controller's requests, the replica fetchers and AlterPartition all log in as ``kafka/localhost``. Two
    odradek brokers and Kafka 3.9.1 replicate a topic of three replicas (every pair follows the other) until
    every ISR is full, and an acks=all producer is acknowledged."""
    connect = real_kafka.zookeeper.connect + "/gssapi-cluster"
    ports = {broker_id: (free_port(), free_port()) for broker_id in (0, 1, 5)}

    def cluster_settings(broker_id: int) -> dict[str, str]:
        base = {k: v for k, v in settings(kdc, *ports[broker_id]).items() if k not in ("authorizer.class.name", "super.users")}
        return {**base, "broker.id": str(broker_id), "zookeeper.connect": connect, "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol": "GSSAPI", "offsets.topic.replication.factor": "1", **kafka_jvm.CLUSTER_STOP_SETTINGS}

    kafka = kafka_jvm.KafkaBroker(tmp_path / "kafka", connect, broker_id=5, settings=cluster_settings(5), port=ports[5][0]).start()
    try:
        with Broker(log_dir=tmp_path / "b0", subprocess=True, config=cluster_settings(0)), Broker(log_dir=tmp_path / "b1", subprocess=True, config=cluster_settings(1)):
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports[0][0]}"})
            wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 3, timeout_s=30, what="three brokers registered")
            topic = "kerberized-cluster"
            admin.create_topics([NewTopic(topic, num_partitions=3, replica_assignment=[[0, 1, 5], [5, 0, 1], [1, 5, 0]])])[topic].result(30)

            def isrs_full() -> bool:
                partitions = admin.list_topics(topic, timeout=5).topics[topic].partitions
                return len(partitions) == 3 and all(len(p.isrs) == 3 for p in partitions.values())

            wait_for(isrs_full, timeout_s=60, what="every ISR full")
            for partition_leader in (0, 1, 5):
                # acks=all here waits for two followers, across both kinds of broker: 3 s, so that five
                # acknowledgements do not ask each round trip for less than 100 ms on a loaded machine.
                status, seen = java_probe(ports[partition_leader][1], "alice", topic, seconds=3)
                assert status == 0, seen
                assert isinstance(seen, dict) and seen["acked"] >= 5
            assert isrs_full()
    finally:
        kafka.stop()


@pytest.mark.parametrize("kind", ["odradek", "kafka"])
def test_odradeks_tools_log_in_with_kerberos(brokers: dict[str, tuple[int, int]], kdc: Kdc, tmp_path: Path, kind: str) -> None:
    """``--command-config`` with Kafka's GSSAPI client properties: the tool logs in as alice with her keytab."""
    import subprocess
    import sys

    config = tmp_path / "client.properties"
    jaas = f'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="{kdc.keytab("alice")}" principal="alice@{REALM}";'
    config.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka\nsasl.jaas.config={jaas}\n")
    done = subprocess.run([sys.executable, "-m", "odradek", "topics", "--bootstrap-server", f"localhost:{brokers[kind][1]}", "--command-config", str(config), "--list"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert TOPIC in done.stdout.split()


@pytest.mark.parametrize("token", [b"", b"\x00" * 7, b"\x60\x82\xff\xff" + b"\x01" * 64], ids=["empty", "zeros", "truncated-der"])
def test_a_garbage_gssapi_token_is_refused_as_kafka_refuses_it(brokers: dict[str, tuple[int, int]], token: bytes) -> None:
    """Bad input gets Kafka's answer (SASL_AUTHENTICATION_FAILED) and the broker goes on serving."""
    from odradek.protocol.api import ApiKey
    from tests.conftest import Wire

    answers = {}
    for kind, (plain, sasl) in brokers.items():
        wire = Wire(f"127.0.0.1:{sasl}")
        assert wire.call(ApiKey.SaslHandshake, 1, {"mechanism": "GSSAPI"}).error_code == 0
        answer = wire.call(ApiKey.SaslAuthenticate, 2, {"auth_bytes": token})
        answers[kind] = (answer.error_code, wire.closed_by_peer())
        wire.close()
        assert Wire.call_once(f"127.0.0.1:{plain}", ApiKey.ApiVersions, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0
    assert answers["odradek"] == answers["kafka"]
    assert answers["kafka"][0] == 58  # SASL_AUTHENTICATION_FAILED


@pytest.mark.parametrize("kind", ["odradek", "kafka"])
def test_a_kafka_0_9_client_logs_in_with_gssapi_tokens_sent_without_a_handshake(brokers: dict[str, tuple[int, int]], kdc: Kdc, kind: str) -> None:
    """Kafka 0.9's clients send their first GSS-API token as the first frame, no SaslHandshake, and the rest
    of the exchange raw (size-prefixed tokens); Kafka 3.9 still serves them where GSSAPI is enabled. Then a
    request is served on the connection, as the authenticated alice."""
    import struct

    from odradek.broker.security.gssapi import KerberosLogin
    from odradek.protocol.api import ApiKey
    from tests.conftest import Wire

    wire = Wire(f"127.0.0.1:{brokers[kind][1]}")
    client = KerberosLogin("kafka", str(kdc.keytab("alice")), f"alice@{REALM}").client("localhost")
    token: bytes | None = client.first()
    while token is not None:
        wire.send(struct.pack(">i", len(token)) + token)
        if client._done:  # the client's choice of layer is the last token: no challenge answers it
            break
        token = client.respond(wire.read_frame())
    answer = wire.call(ApiKey.Metadata, 12, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    assert [t.error_code for t in answer.topics] == [0]  # alice may describe it: her WRITE and DESCRIBE ACLs
    wire.close()
