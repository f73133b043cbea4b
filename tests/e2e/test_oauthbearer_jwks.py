"""OAUTHBEARER with Kafka's secured validator (``OAuthBearerValidatorCallbackHandler``): confluent-kafka
signs in with RS256 tokens this module signs, against odradek and the real Kafka 3.9.1 configured alike
(a ``file:`` JWKS, an expected audience and issuer, the ACL authorizer). Both accept and refuse the same
tokens, and the principal the authorizer sees is the token's ``sub``. Then both fetch the JWKS from an HTTPS
endpoint whose keys rotate."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import jwt
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.hazmat.primitives.asymmetric import rsa

import kafka_jvm
from odradek import Broker
from tests.broker.test_startup import one_line_failure, serve
from tests.e2e.test_security import java_probe  # noqa: F401 (the fixture: Kafka's producer, compiled once)

ISSUER = "https://issuer.test"
AUDIENCE = "kafka"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
TRUSTED = rsa.generate_private_key(public_exponent=65537, key_size=2048)
UNTRUSTED = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def settings(jwks: Path) -> dict[str, str]:
    """The same OAUTHBEARER settings for both brokers; ``port`` listeners are added by each."""
    return {
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:alice;User:ANONYMOUS",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "auto.create.topics.enable": "false",
    }


@pytest.fixture(scope="module")
def jwks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    key = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(TRUSTED.public_key()))
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps({"keys": [{**key, "kid": "trusted", "use": "sig", "alg": "RS256"}]}))
    return path


@pytest.fixture(scope="module")
def brokers(jwks: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The SASL_PLAINTEXT bootstrap of odradek and of the real Kafka, both configured by :func:`settings`."""
    ours, plain = kafka_jvm.free_port(), kafka_jvm.free_port()
    config = {**settings(jwks), "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{ours}"}
    root = tmp_path_factory.mktemp("kafka")
    zk = kafka_jvm.ZooKeeper(root / "zk").start()
    try:
        theirs, their_plain = kafka_jvm.free_port(), kafka_jvm.free_port()
        kafka = kafka_jvm.KafkaBroker(
            root / "kafka", zk.connect, port=their_plain,
            settings={**settings(jwks), "listeners": f"PLAINTEXT://127.0.0.1:{their_plain},SASL_PLAINTEXT://127.0.0.1:{theirs}"},
        )
        kafka.start()
        try:
            with Broker(log_dir=tmp_path_factory.mktemp("odradek"), subprocess=True, config=config):
                yield {"odradek": f"127.0.0.1:{ours}", "kafka": f"127.0.0.1:{theirs}"}
        finally:
            kafka.stop()
    finally:
        zk.stop()


def token(*, sub: str = "alice", key: rsa.RSAPrivateKey = TRUSTED, kid: str = "trusted", **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600, **claims}
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm="RS256", headers={"kid": kid})


def client_conf(bootstrap: str, compact: str, errors: list[KafkaError]) -> dict[str, Any]:
    claims = jwt.decode(compact, options={"verify_signature": False})
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        # librdkafka will not send a token it thinks has expired: the lifetime it is told is not the exp claim
        "oauth_cb": lambda _config: (compact, time.time() + 600, claims.get("sub") or "unknown"),
        "error_cb": errors.append,
        "reconnect.backoff.max.ms": 1000,
    }


def sign_in(bootstrap: str, compact: str) -> str:
    """"ok" when the client gets metadata with this token, else the authentication error it reports."""
    errors: list[KafkaError] = []
    producer = Producer(client_conf(bootstrap, compact, errors))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        producer.poll(0.1)  # serves error_cb
        failures = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if failures:  # "<broker>: SASL authentication error: <message> (after N ms in state AUTH_REQ)"
            return failures[0].str().partition(": ")[2].rpartition(" (after")[0]
        try:
            producer.list_topics(timeout=0.5)
            return "ok"
        except KafkaException:
            continue
    raise AssertionError(f"neither signed in nor refused within 20 s: {errors}")


CASES: dict[str, Callable[[], str]] = {
    "valid": lambda: token(),
    "expired": lambda: token(exp=int(time.time()) - 120),
    "not-before-within-skew": lambda: token(nbf=int(time.time()) + 10),
    "not-yet-valid": lambda: token(nbf=int(time.time()) + 120),
    "untrusted-key": lambda: token(key=UNTRUSTED),
    "unknown-kid": lambda: token(kid="other"),
    "wrong-audience": lambda: token(aud="elsewhere"),
    "no-audience": lambda: token(aud=None),
    "wrong-issuer": lambda: token(iss="https://evil.test"),
    "no-iat": lambda: token(iat=None),
    "issued-after-expiry": lambda: token(iat=int(time.time()) + 900),
    "no-sub": lambda: token(sub=None),
}
ACCEPTED = {"valid", "not-before-within-skew"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_odradek_accepts_and_refuses_tokens_as_kafka_does(brokers: dict[str, str], case: str) -> None:
    compact = CASES[case]()
    outcomes = {name: sign_in(bootstrap, compact) for name, bootstrap in brokers.items()}
    expected = "ok" if case in ACCEPTED else 'SASL authentication error: {"status":"invalid_token"}'
    assert outcomes == {"odradek": expected, "kafka": expected}


def test_the_authorizer_sees_the_sub_claim(brokers: dict[str, str]) -> None:
    """alice (a super user) creates a topic and produces to it; bob, with a valid token, is refused."""
    topic = f"jwks-{uuid.uuid4().hex[:8]}"
    outcomes = {}
    for name, bootstrap in brokers.items():
        admin = AdminClient(client_conf(bootstrap, token(sub="alice"), []))
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
        results: dict[str, str] = {}
        for user in ("alice", "bob"):
            producer = Producer(client_conf(bootstrap, token(sub=user), []))
            try:
                producer.produce(topic, b"v", on_delivery=lambda err, _msg, user=user: results.__setitem__(user, err.name() if err else "delivered"))
            except KafkaException as refused:  # librdkafka had the topic's refusal already: it raises it at once
                results[user] = refused.args[0].name()
            producer.flush(30)
        outcomes[name] = results
    assert outcomes["odradek"] == {"alice": "delivered", "bob": "TOPIC_AUTHORIZATION_FAILED"}, outcomes
    assert outcomes["odradek"] == outcomes["kafka"]


@pytest.mark.parametrize(
    "url, message",
    [
        ("https://127.0.0.1:1/jwks", "Could not refresh JWKS from https://127.0.0.1:1/jwks"),
        ("ftp://idp.test/jwks", 'contains an invalid protocol (ftp); only "http", "https", and "file" protocol are supported'),
        ("file:///nonexistent/jwks.json", "contains a file (/nonexistent/jwks.json) that doesn't exist"),
    ],
    ids=["https-unreachable", "ftp", "missing-file"],
)
def test_a_jwks_url_odradek_cannot_read_refuses_the_start(jwks: Path, tmp_path: Path, url: str, message: str) -> None:
    config = {**settings(jwks), "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.oauthbearer.jwks.endpoint.url": url, "log.dirs": str(tmp_path)}
    line = one_line_failure(serve(*(f"{k}={v}" for k, v in config.items())))
    assert message in line
    assert not (tmp_path / "meta.properties").exists()


def test_the_java_client_signs_in_with_a_token_from_a_file(brokers: dict[str, str], java_probe: Callable[..., dict[str, Any]], tmp_path: Path) -> None:  # noqa: F811 (java_probe is the fixture imported above)
    """Kafka's own producer with its secured login handler reading a signed token from a file: URL
    (``sasl.oauthbearer.token.endpoint.url``) is acknowledged by both brokers."""
    topic = f"jwks-java-{uuid.uuid4().hex[:8]}"
    token_file = tmp_path / "token.jwt"
    token_file.write_text(token(sub="alice"))
    jaas = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"
    acked = {}
    for name, bootstrap in brokers.items():
        admin = AdminClient(client_conf(bootstrap, token(sub="alice"), []))
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
        seen = java_probe(
            bootstrap, "SASL_PLAINTEXT", "OAUTHBEARER", jaas, "0", topic,
            "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
            f"sasl.oauthbearer.token.endpoint.url={token_file.as_uri()}",
        )
        # one authentication per connection: the bootstrap's and the leader's
        acked[name] = (seen["acked"], seen["successful-authentication-total"] >= 1, seen["failed-authentication-total"])
    assert acked == {"odradek": (1, True, 0), "kafka": (1, True, 0)}


ROTATED = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    return {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())), "kid": kid, "use": "sig", "alg": "RS256"}


class JwksEndpoint:
    """An HTTPS JWKS endpoint (the test's CA signed its certificate) whose document the test changes."""

    def __init__(self, root: Path) -> None:
        import http.server
        import ssl
        import threading

        from tests.certificates import make_pki

        self.pki = make_pki(root)
        self.document = {"keys": [jwk(TRUSTED, "trusted")]}
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = json.dumps(endpoint.document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                """The client credentials grant: alice's client gets a token for alice."""
                form = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
                expected = "Basic " + base64.b64encode(b"alice-client:alice-secret").decode()
                if self.path != "/token" or self.headers.get("Authorization") != expected or "grant_type=client_credentials" not in form:
                    self.send_response(401)
                    self.end_headers()
                    return
                body = json.dumps({"access_token": token(sub="alice"), "token_type": "bearer", "expires_in": 600}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.pki.keystore("broker"))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"https://localhost:{self.server.server_address[1]}/jwks"

    def settings(self) -> dict[str, str]:
        jaas = f'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker" ssl.truststore.type="PEM" ssl.truststore.location="{self.pki.ca}";'
        return {"sasl.oauthbearer.jwks.endpoint.url": self.url, "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": jaas}


@pytest.fixture(scope="module")
def rotating(jwks: Path, real_kafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JwksEndpoint, dict[str, str]]]:
    """odradek and Kafka 3.9.1 validating against one HTTPS JWKS endpoint (refreshed hourly)."""
    endpoint = JwksEndpoint(tmp_path_factory.mktemp("jwks-https"))
    ours, plain, theirs, their_plain = (kafka_jvm.free_port() for _ in range(4))
    common = {**settings(jwks), **endpoint.settings()}
    kafka = kafka_jvm.KafkaBroker(
        tmp_path_factory.mktemp("kafka-https-jwks"), real_kafka.zookeeper.connect + "/https-jwks", port=their_plain,
        settings={**common, "listeners": f"PLAINTEXT://127.0.0.1:{their_plain},SASL_PLAINTEXT://127.0.0.1:{theirs}"},
    ).start()
    try:
        with Broker(log_dir=tmp_path_factory.mktemp("odradek-https-jwks"), subprocess=True, config={**common, "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{ours}"}):
            yield endpoint, {"odradek": f"127.0.0.1:{ours}", "kafka": f"127.0.0.1:{theirs}"}
    finally:
        kafka.stop()
        endpoint.server.shutdown()


def test_keys_from_an_https_endpoint_and_a_rotated_key_found_at_the_clients_next_attempt(rotating: tuple[JwksEndpoint, dict[str, str]]) -> None:
    """A token signed by a key the endpoint did not have at the start is refused once, the refusal has the
    broker fetch the JWKS again at once (not at the hourly refresh), and the client's next attempt signs in:
    the same on both brokers."""
    endpoint, brokers = rotating
    assert {name: sign_in(bootstrap, token()) for name, bootstrap in brokers.items()} == {"odradek": "ok", "kafka": "ok"}
    endpoint.document = {"keys": [jwk(TRUSTED, "trusted"), jwk(ROTATED, "rotated")]}
    rotated = token(key=ROTATED, kid="rotated")
    refused = 'SASL authentication error: {"status":"invalid_token"}'
    assert {name: sign_in(bootstrap, rotated) for name, bootstrap in brokers.items()} == {"odradek": refused, "kafka": refused}
    time.sleep(2)
    assert {name: sign_in(bootstrap, rotated) for name, bootstrap in brokers.items()} == {"odradek": "ok", "kafka": "ok"}
    assert {name: sign_in(bootstrap, token(key=UNTRUSTED, kid="unknown")) for name, bootstrap in brokers.items()} == {"odradek": refused, "kafka": refused}


@pytest.mark.parametrize("secret, listed", [("alice-secret", True), ("wrong-secret", False)])
def test_odradeks_tools_get_a_token_from_an_https_token_endpoint(rotating: tuple[JwksEndpoint, dict[str, str]], tmp_path: Path, secret: str, listed: bool) -> None:
    """Kafka's secured login handler in ``--command-config``: the client credentials grant at the HTTPS
    token endpoint, and the token it gets accepted by both brokers; a wrong secret gets no token."""
    endpoint, brokers = rotating
    jaas = (
        f'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="alice-client" clientSecret="{secret}" '
        f'scope="kafka" ssl.truststore.type="PEM" ssl.truststore.location="{endpoint.pki.ca}";'
    )
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        f"sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n"
        f"sasl.oauthbearer.token.endpoint.url={endpoint.url.replace('/jwks', '/token')}\nsasl.jaas.config={jaas}\n"
    )
    for bootstrap in brokers.values():
        done = subprocess.run([sys.executable, "-m", "odradek", "topics", "--bootstrap-server", bootstrap, "--command-config", str(config), "--list"], capture_output=True, text=True, timeout=60)
        assert (done.returncode == 0) == listed, done.stdout + done.stderr
        if not listed:
            assert "Could not get an OAUTHBEARER token" in done.stdout + done.stderr and "401" in done.stdout + done.stderr
