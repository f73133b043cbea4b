"""Real clients over TLS and SASL (issue 15): confluent-kafka, kafka-python, aiokafka, kcat and Kafka's own
tools against one odradek broker with a listener per security protocol. Certificates are made by the tests
(tests/certificates.py); SCRAM users are created with Kafka's ``kafka-configs.sh``, as an operator would.
The SASL exchange itself is unit-tested without sockets in tests/broker/test_sasl_connection.py."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import kafka_jvm
from kafka_jvm import free_port
import pytest

from odradek import Broker
from odradek.protocol.api import ApiKey, decode_response, encode_request
from odradek.protocol.errors import ErrorCode
from tests.certificates import Pki, make_pki

PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret"}
SCRAM_USERS = {"SCRAM-SHA-256": ("sam", "sam-secret"), "SCRAM-SHA-512": ("sue", "sue-secret")}
LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", "REAUTH")
REAUTH_MS = 2000


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    pki.issue("client", "/O=Acme/OU=eng/CN=client-app")
    return pki


@pytest.fixture(scope="module")
def ports() -> dict[str, int]:
    return {name: free_port() for name in LISTENERS}


@pytest.fixture(scope="module")
def secured(pki: Pki, ports: dict[str, int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    plain_jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items()) + ";"
    oauth_jaas = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";'
    config = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,REAUTH:SASL_PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.keystore("broker")),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        # broker-wide, it applies to the SSL listener only: SASL_SSL clients send no certificate (Kafka's rule)
        "ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.reauth.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.reauth.plain.connections.max.reauth.ms": str(REAUTH_MS),
        "listener.name.reauth.scram-sha-256.connections.max.reauth.ms": str(REAUTH_MS),
        "log.retention.ms": "-1",
    }
    for listener in ("sasl_plaintext", "sasl_ssl", "reauth"):
        config[f"listener.name.{listener}.plain.sasl.jaas.config"] = plain_jaas
        config[f"listener.name.{listener}.oauthbearer.sasl.jaas.config"] = oauth_jaas
    with Broker(log_dir=tmp_path_factory.mktemp("secured"), subprocess=True, config=config) as broker:
        for mechanism, (user, password) in SCRAM_USERS.items():
            done = kafka_jvm.run_tool(
                "kafka-configs", "--bootstrap-server", f"127.0.0.1:{ports['PLAINTEXT']}",
                "--alter", "--add-config", f"{mechanism}=[iterations=8192,password={password}]", "--entity-type", "users", "--entity-name", user,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            assert f"Completed updating config for user {user}." in done.stdout
        yield broker


def security(client: str, protocol: str, pki: Pki, mechanism: str | None = None, user: str | None = None, password: str | None = None) -> dict[str, Any]:
    """The client library's settings for a security protocol (and SASL mechanism), in its own words."""
    tls = protocol in ("SSL", "SASL_SSL")
    if client == "confluent":
        conf: dict[str, Any] = {"security.protocol": protocol}
        if tls:
            conf["ssl.ca.location"] = str(pki.ca)
            if protocol == "SSL":
                conf.update({"ssl.certificate.location": str(pki.cert("client")), "ssl.key.location": str(pki.key("client"))})
        if mechanism == "OAUTHBEARER":
            conf.update({"sasl.mechanism": mechanism, "enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": f"principal={user}"})
        elif mechanism:
            conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
        return conf
    conf = {"security_protocol": protocol}
    if tls:
        if client == "kafka-python":
            conf.update({"ssl_cafile": str(pki.ca)})
            if protocol == "SSL":
                conf.update({"ssl_certfile": str(pki.cert("client")), "ssl_keyfile": str(pki.key("client"))})
        else:
            from aiokafka.helpers import create_ssl_context

            extra = {"certfile": str(pki.cert("client")), "keyfile": str(pki.key("client"))} if protocol == "SSL" else {}
            conf["ssl_context"] = create_ssl_context(cafile=str(pki.ca), **extra)
    if mechanism == "OAUTHBEARER":
        conf.update({"sasl_mechanism": mechanism, "sasl_oauth_token_provider": _token_provider(client, user)})
    elif mechanism:
        conf.update({"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password})
    return conf


def unsecured_jwt(subject: str, lifetime_s: float = 3600) -> str:
    """An unsigned token as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes them."""
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    now = time.time()
    return f"{enc({'alg': 'none'})}.{enc({'sub': subject, 'iat': now, 'exp': now + lifetime_s})}."


def _token_provider(client: str, subject: str) -> Any:
    if client == "kafka-python":
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Provider(AbstractTokenProvider):
            def token(self) -> str:
                return unsecured_jwt(subject)

        return Provider()
    from aiokafka.abc import AbstractTokenProvider as AsyncTokenProvider

    class AsyncProvider(AsyncTokenProvider):
        async def token(self) -> str:
            return unsecured_jwt(subject)

    return AsyncProvider()


SCENARIOS = [
    ("SSL", None),
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SASL_PLAINTEXT", "OAUTHBEARER"),
    ("SASL_SSL", "PLAIN"),
    ("SASL_SSL", "SCRAM-SHA-512"),
]


def credentials_for(mechanism: str | None) -> tuple[str | None, str | None]:
    if mechanism is None:
        return None, None
    if mechanism in SCRAM_USERS:
        return SCRAM_USERS[mechanism]
    return "alice", PLAIN_USERS["alice"]


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
@pytest.mark.parametrize("protocol, mechanism", SCENARIOS, ids=[f"{p}-{m or 'cert'}" for p, m in SCENARIOS])
def test_records_round_trip_over_every_security_protocol(secured, pki, ports, clients, client, protocol, mechanism) -> None:
    """Produce and consume through the listener of the protocol: the client is told that listener's
    address in Metadata (not the first listener's), so every connection it makes is secured."""
    user, password = credentials_for(mechanism)
    conf = security(client, protocol, pki, mechanism, user, password)
    topic = f"sec-{client}-{protocol}-{mechanism or 'cert'}".lower().replace("_", "-")
    bootstrap = f"127.0.0.1:{ports[protocol]}"
    records = [(f"k{i}".encode(), f"v{i}".encode() * 50) for i in range(50)]
    acked = clients[client].produce(bootstrap, topic, records, **conf)
    assert [a.offset for a in acked] == list(range(50))
    received = clients[client].consume(bootstrap, topic, 50, **conf)
    assert [(r.key, r.value) for r in received] == records


def confluent_errors(conf: dict[str, Any], seconds: float = 3.0) -> list[Any]:
    """The errors a confluent-kafka producer reports (error_cb, served by poll) while it tries to connect."""
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({**conf, "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not errors:
        producer.poll(0.2)
    producer.flush(0)
    return errors


def test_a_wrong_password_fails_with_kafkas_message_in_the_client(secured, pki, ports) -> None:
    conf = security("confluent", "SASL_PLAINTEXT", pki, "PLAIN", "alice", "not-her-password")
    errors = confluent_errors({"bootstrap.servers": f"127.0.0.1:{ports['SASL_PLAINTEXT']}", **conf})
    assert any("Authentication failed: Invalid username or password" in e.str() for e in errors), errors


def test_a_wrong_scram_password_fails_with_kafkas_generic_message(secured, pki, ports) -> None:
    """Kafka does not tell a SCRAM client whether the user exists: one message for every failure."""
    for user in ("sam", "nobody"):
        conf = security("confluent", "SASL_PLAINTEXT", pki, "SCRAM-SHA-256", user, "wrong")
        errors = confluent_errors({"bootstrap.servers": f"127.0.0.1:{ports['SASL_PLAINTEXT']}", **conf})
        message = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
        assert any(message in e.str() for e in errors), errors


def test_a_plaintext_client_on_the_ssl_listener_is_closed(secured, ports) -> None:
    with socket.create_connection(("127.0.0.1", ports["SSL"]), timeout=10) as sock:
        with pytest.raises((ConnectionError, OSError)):
            call(sock, ApiKey.ApiVersions, 3, {"client_software_name": "x", "client_software_version": "1"}, 1)


def test_a_client_without_a_certificate_is_refused_where_ssl_client_auth_is_required(secured, pki, ports) -> None:
    errors = confluent_errors({"bootstrap.servers": f"127.0.0.1:{ports['SSL']}", "security.protocol": "SSL", "ssl.ca.location": str(pki.ca)})
    assert errors, "the broker accepted a client without a certificate"


def test_kcat_over_ssl_and_sasl_ssl(secured, pki, ports, tmp_path: Path) -> None:
    topic = "sec-kcat"
    ssl = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca}", "-X", f"ssl.certificate.location={pki.cert('client')}", "-X", f"ssl.key.location={pki.key('client')}"]
    produced = subprocess.run(["kcat", "-b", f"127.0.0.1:{ports['SSL']}", *ssl, "-P", "-t", topic], input="one\ntwo\n", capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    sasl_ssl = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={pki.ca}", "-X", "sasl.mechanism=SCRAM-SHA-256", "-X", "sasl.username=sam", "-X", "sasl.password=sam-secret"]
    consumed = subprocess.run(["kcat", "-b", f"127.0.0.1:{ports['SASL_SSL']}", *sasl_ssl, "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e"], capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["one", "two"]


def test_kafka_configs_describes_the_scram_users_it_created(secured, ports) -> None:
    done = kafka_jvm.run_tool("kafka-configs", "--bootstrap-server", f"127.0.0.1:{ports['PLAINTEXT']}", "--describe", "--entity-type", "users", "--entity-name", "sam")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SCRAM-SHA-256=iterations=8192" in done.stdout


def test_an_ssl_client_without_the_ca_cannot_connect(secured, ports) -> None:
    errors = confluent_errors({"bootstrap.servers": f"127.0.0.1:{ports['SSL']}", "security.protocol": "SSL"})
    assert any("certificate verify failed" in e.str() for e in errors), errors


def call(sock: socket.socket, api: ApiKey, version: int, body: dict, correlation_id: int) -> Any:
    sock.sendall(encode_request(api, version, correlation_id, body))
    size = int.from_bytes(_read(sock, 4), "big")
    return decode_response(api, version, _read(sock, size))[1]


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def test_a_client_that_does_not_re_authenticate_is_disconnected_when_its_session_expires(secured, ports) -> None:
    """KIP-368 on the REAUTH listener (connections.max.reauth.ms=2000): the SaslAuthenticate answer gives the
    session's lifetime; a request after it, without re-authenticating, closes the connection."""
    with socket.create_connection(("127.0.0.1", ports["REAUTH"]), timeout=10) as sock:
        assert call(sock, ApiKey.SaslHandshake, 1, {"mechanism": "PLAIN"}, 1).error_code == ErrorCode.NONE
        answer = call(sock, ApiKey.SaslAuthenticate, 2, {"auth_bytes": b"\x00alice\x00alice-secret"}, 2)
        assert answer.error_code == ErrorCode.NONE and answer.session_lifetime_ms == REAUTH_MS
        metadata = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        assert call(sock, ApiKey.Metadata, 12, metadata, 3).brokers[0].port == ports["REAUTH"]
        time.sleep(REAUTH_MS / 1000 + 0.5)
        with pytest.raises(ConnectionError):
            call(sock, ApiKey.Metadata, 12, metadata, 4)


def test_requests_before_authentication_close_the_connection(secured, ports) -> None:
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        metadata = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        with pytest.raises(ConnectionError):
            call(sock, ApiKey.Metadata, 12, metadata, 1)


def test_sasl_handshake_on_a_plaintext_listener_is_an_illegal_sasl_state(secured, ports) -> None:
    with socket.create_connection(("127.0.0.1", ports["PLAINTEXT"]), timeout=10) as sock:
        assert call(sock, ApiKey.SaslHandshake, 1, {"mechanism": "PLAIN"}, 1).error_code == ErrorCode.ILLEGAL_SASL_STATE


@pytest.fixture(scope="module")
def java_probe() -> Callable[..., dict[str, Any]]:
    """``java_probe(bootstrap, protocol, mechanism, jaas, seconds, topic)``: Kafka's own producer
    (tests/e2e/java_security/SecurityProbe.java) and what it observed."""
    sources = Path(__file__).parent / "java_security"
    programs = kafka_jvm.java_programs(sorted(sources.glob("*.java")), 120)

    def run(*args: str) -> dict[str, Any]:
        done = programs.run("SecurityProbe", *args, timeout_s=120, lasting=True)
        assert done.returncode == 0, done.stderr[-4000:]
        return json.loads(done.stdout.splitlines()[-1])

    return run


def test_the_java_client_re_authenticates_and_keeps_its_connection(secured, ports, java_probe) -> None:
    """connections.max.reauth.ms=2000 on the REAUTH listener: for 6 s Kafka's producer re-authenticates its
    connections (KIP-368) instead of being disconnected, and every record is acknowledged."""
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="sam" password="sam-secret";'
    seen = java_probe(f"127.0.0.1:{ports['REAUTH']}", "SASL_PLAINTEXT", "SCRAM-SHA-256", jaas, "6", "sec-java-reauth")
    assert seen["acked"] > 30
    assert seen["successful-reauthentication-total"] >= 2
    assert seen["failed-reauthentication-total"] == 0
    assert seen["connection-creation-total"] <= 2  # the bootstrap connection and the leader's: never re-made


def test_the_java_client_with_oauthbearer(secured, ports, java_probe) -> None:
    jaas = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";'
    seen = java_probe(f"127.0.0.1:{ports['SASL_PLAINTEXT']}", "SASL_PLAINTEXT", "OAUTHBEARER", jaas, "1", "sec-java-oauth")
    assert seen["acked"] >= 5 and seen["failed-authentication-total"] == 0


@pytest.fixture(scope="module")
def kafka_with_sasl(real_kafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Kafka 3.9 with the same SASL_PLAINTEXT listener as ``secured`` (PLAIN users, SCRAM enabled), on
    the shared ZooKeeper under a chroot of its own; yields its SASL listener's address."""
    assert real_kafka.zookeeper is not None, "needs the ZooKeeper this test run started"
    plain, sasl = free_port(), free_port()
    plain_jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items()) + ";"
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    }
    kafka = kafka_jvm.KafkaBroker(tmp_path_factory.mktemp("kafka-sasl"), real_kafka.zookeeper.connect + "/sasl-compare", settings=settings, port=plain).start()
    try:
        yield f"127.0.0.1:{sasl}"
    finally:
        kafka.stop()


@pytest.mark.parametrize("mechanism, user", [("PLAIN", "alice"), ("PLAIN", "nobody"), ("SCRAM-SHA-256", "nobody")])
def test_authentication_failures_read_as_the_real_kafkas(secured, ports, pki, kafka_with_sasl, mechanism, user) -> None:
    def failure(bootstrap: str) -> list[str]:
        conf = security("confluent", "SASL_PLAINTEXT", pki, mechanism, user, "wrong-password")
        errors = confluent_errors({"bootstrap.servers": bootstrap, **conf})
        # librdkafka's text after the broker's message names the address and timing: compare the message
        return sorted({e.str().split("SASL authentication error: ", 1)[-1].split(" (after ")[0] for e in errors if "SASL authentication error" in e.str()})

    kafka = failure(kafka_with_sasl)
    assert kafka, "the real Kafka refused nothing"
    assert failure(f"127.0.0.1:{ports['SASL_PLAINTEXT']}") == kafka


def test_a_request_before_authentication_is_refused_as_by_the_real_kafka(secured, ports, kafka_with_sasl) -> None:
    metadata = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    for address in (kafka_with_sasl, f"127.0.0.1:{ports['SASL_PLAINTEXT']}"):
        host, port = address.split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            with pytest.raises(ConnectionError):
                call(sock, ApiKey.Metadata, 12, metadata, 1)


@pytest.fixture(scope="module")
def authorizing(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    """A broker with Kafka's ACL authorizer whose super users are a client certificate's principal and a
    SASL user: what the principal on the request context decides. Yields its listeners' ports."""
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT")}
    config = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.keystore("broker")),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": "requested",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items()) + ";",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:CN=client-app,OU=eng,O=Acme;User:admin",
    }
    with Broker(log_dir=tmp_path_factory.mktemp("authorizing"), subprocess=True, config=config):
        yield ports


@pytest.mark.parametrize(
    "protocol, identity, allowed",
    [("SSL", "certificate", True), ("SSL", None, False), ("SASL_PLAINTEXT", "admin", True), ("SASL_PLAINTEXT", "alice", False)],
    ids=["ssl-super-user-certificate", "ssl-anonymous", "sasl-super-user", "sasl-other-user"],
)
def test_the_authenticated_principal_is_what_the_authorizer_sees(authorizing, pki, clients, protocol, identity, allowed) -> None:
    """super.users names the certificate's subject as Kafka writes it (User:CN=client-app,OU=eng,O=Acme)
    and the SASL user admin: they produce; a client without a certificate (User:ANONYMOUS) or another SASL
    user is refused, as no ACL allows them."""
    if protocol == "SSL":
        conf = security("confluent", "SSL", pki)
        if identity is None:
            conf = {k: v for k, v in conf.items() if k not in ("ssl.certificate.location", "ssl.key.location")}
    else:
        conf = security("confluent", "SASL_PLAINTEXT", pki, "PLAIN", identity, PLAIN_USERS[identity])
    bootstrap = f"127.0.0.1:{authorizing[protocol]}"
    if allowed:
        assert [a.offset for a in clients["confluent"].produce(bootstrap, f"authz-{identity}", [(b"k", b"v")], **conf)] == [0]
    else:
        with pytest.raises(AssertionError, match="TOPIC_AUTHORIZATION_FAILED|Topic authorization failed"):
            clients["confluent"].produce(bootstrap, f"authz-{identity}", [(b"k", b"v")], **{**conf, "message.timeout.ms": 5000})


def inter_broker_config(pki: Pki, port: int, protocol: str, mechanism: str, user: str, password: str) -> Any:
    """A broker configuration whose inter-broker listener is the secured broker's ``protocol`` listener."""
    from odradek.broker.config import BrokerConfig

    module = "scram.ScramLoginModule" if mechanism.startswith("SCRAM") else "plain.PlainLoginModule"
    return BrokerConfig({
        "listeners": f"{protocol}://127.0.0.1:{port}",
        "security.inter.broker.protocol": protocol,
        "sasl.enabled.mechanisms": mechanism,
        "sasl.mechanism.inter.broker.protocol": mechanism,
        f"listener.name.{protocol.lower()}.{mechanism.lower()}.sasl.jaas.config": f'org.apache.kafka.common.security.{module} required username="{user}" password="{password}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
    })


@pytest.mark.parametrize("protocol, mechanism, user, password", [("SASL_SSL", "SCRAM-SHA-512", "sue", "sue-secret"), ("SASL_PLAINTEXT", "PLAIN", "admin", "admin-secret")])
def test_the_brokers_own_client_authenticates_as_the_inter_broker_listener_says(secured, pki, ports, protocol, mechanism, user, password) -> None:
    """Inter-broker traffic authenticates too: odradek's client (broker/network/kafka_client.py, which brokers use to
    reach each other) connects with TLS and SASL from the inter-broker settings of a broker's configuration."""
    import anyio

    from odradek.broker.network.kafka_client import KafkaClient, ResponseError
    from odradek.broker.security.client import inter_broker_security

    async def brokers(password: str) -> list[tuple[str, int]]:
        security = inter_broker_security(inter_broker_config(pki, ports[protocol], protocol, mechanism, user, password))
        async with KafkaClient(f"127.0.0.1:{ports[protocol]}", security=security) as client:
            return [(n.host, n.port) for n in client.nodes.values()]

    assert anyio.run(brokers, password) == [("127.0.0.1", ports[protocol])]
    with pytest.raises(ResponseError, match="SASL_AUTHENTICATION_FAILED"):
        anyio.run(brokers, "wrong")


def test_the_brokers_own_client_offers_its_keystore_certificate_where_the_listener_requires_one(secured, pki, ports) -> None:
    """On an SSL inter-broker listener with ``ssl.client.auth=required`` a broker is known by its certificate:
    odradek's client offers the keystore's; without a keystore the broker refuses the connection."""
    import anyio

    from odradek.broker.config import BrokerConfig
    from odradek.broker.network.kafka_client import DisconnectedError, KafkaClient
    from odradek.broker.security.client import inter_broker_security

    trust = {"listeners": f"SSL://127.0.0.1:{ports['SSL']}", "security.inter.broker.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca)}
    keystore = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.keystore("broker"))}

    async def brokers(config: dict[str, str]) -> list[int]:
        async with KafkaClient(f"127.0.0.1:{ports['SSL']}", security=inter_broker_security(BrokerConfig(config))) as client:
            return list(client.nodes)

    assert anyio.run(brokers, {**trust, **keystore}) == [0]
    with pytest.raises(DisconnectedError):
        anyio.run(brokers, trust)


@pytest.mark.parametrize("protocol, mechanism, jaas", [
    ("SSL", "", ""),
    ("SASL_SSL", "SCRAM-SHA-512", 'org.apache.kafka.common.security.scram.ScramLoginModule required username="sue" password="sue-secret";'),
    ("SASL_PLAINTEXT", "PLAIN", 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";'),
])
def test_the_java_client_over_tls_and_sasl(secured, ports, pki, java_probe, protocol, mechanism, jaas) -> None:
    """Kafka's producer with PEM stores (ssl.keystore.type=PEM for its certificate on the SSL listener, which
    requires one)."""
    tls = ["ssl.truststore.type=PEM", f"ssl.truststore.location={pki.ca}"] if "SSL" in protocol else []
    if protocol == "SSL":
        keystore = pki.root / "client.java.pem"
        keystore.write_text(pki.key("client").read_text() + pki.cert("client").read_text())
        tls += ["ssl.keystore.type=PEM", f"ssl.keystore.location={keystore}"]
    seen = java_probe(f"127.0.0.1:{ports[protocol]}", protocol, mechanism, jaas, "1", f"sec-java-{protocol.lower()}", *tls)
    assert seen["acked"] >= 5 and seen["failed-authentication-total"] == 0


def command_config(path: Path, pki: Pki, mechanism: str, user: str, password: str) -> Path:
    """A Kafka client properties file for SASL_SSL, as an operator writes one for Kafka's tools."""
    module = "scram.ScramLoginModule" if mechanism in SCRAM_USERS else "plain.PlainLoginModule"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={mechanism}\n"
        f'sasl.jaas.config=org.apache.kafka.common.security.{module} required username="{user}" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki.ca}\n"
    )
    return path


ODRADEK_CLI = str(Path(sys.executable).with_name("odradek"))


def test_admin_commands_reach_a_sasl_ssl_broker_with_the_command_config_kafkas_tools_read(secured, pki, ports, tmp_path: Path) -> None:
    """One properties file serves Kafka's kafka-topics.sh and odradek's commands over SASL_SSL with SCRAM."""
    bootstrap = f"127.0.0.1:{ports['SASL_SSL']}"
    config = str(command_config(tmp_path / "client.properties", pki, "SCRAM-SHA-512", *SCRAM_USERS["SCRAM-SHA-512"]))

    def odradek(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([ODRADEK_CLI, *args, "--bootstrap-server", bootstrap, "--command-config", config], capture_output=True, text=True, timeout=60)

    created = odradek("topics", "--create", "--topic", "sec-admin", "--partitions", "2")
    assert (created.returncode, created.stdout) == (0, "Created topic sec-admin.\n"), created.stderr
    listed = kafka_jvm.run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--command-config", config, "--list", "--topic", "sec-admin")
    assert (listed.returncode, listed.stdout) == (0, "sec-admin\n"), listed.stderr
    described = odradek("configs", "--describe", "--entity-type", "topics", "--entity-name", "sec-admin")
    assert described.returncode == 0 and "Dynamic configs for topic sec-admin are:" in described.stdout, described.stdout + described.stderr
    offsets = odradek("offsets", "--topic", "sec-admin")
    assert (offsets.returncode, offsets.stdout) == (0, "sec-admin:0:0\nsec-admin:1:0\n"), offsets.stderr
    groups = odradek("groups", "--list")
    assert groups.returncode == 0, groups.stdout + groups.stderr


def test_admin_commands_with_a_wrong_password_in_the_command_config_fail(secured, pki, ports, tmp_path: Path) -> None:
    config = command_config(tmp_path / "client.properties", pki, "PLAIN", "alice", "wrong")
    done = subprocess.run(
        [ODRADEK_CLI, "topics", "--list", "--bootstrap-server", f"127.0.0.1:{ports['SASL_SSL']}", "--command-config", str(config)],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 1
    assert "Authentication failed: Invalid username or password" in done.stdout, done.stdout + done.stderr


def test_admin_commands_without_the_command_config_do_not_reach_a_sasl_ssl_broker(secured, ports) -> None:
    done = subprocess.run([ODRADEK_CLI, "topics", "--list", "--bootstrap-server", f"127.0.0.1:{ports['SASL_SSL']}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout.startswith("Error while executing topic command"), done.stdout + done.stderr
