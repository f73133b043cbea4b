"""TLS sessions without sockets: a real handshake between Python's ssl client and the broker's TlsSession
over memory buffers, and the principal Kafka's rules give a client certificate."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

from odradek.broker.config import BrokerConfig
from odradek.broker.network.request_context import ANONYMOUS, KafkaPrincipal
from odradek.broker.security.ssl_principal import SslPrincipalMapper, distinguished_name
from odradek.broker.security.tls import TlsSession, TlsSettings, server_context
from odradek.storage.config_types import ConfigError
from tests.certificates import Pki, jks_stores, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    pki.issue("alice", "/C=US/O=Acme, Inc./OU=eng/CN=alice")
    return pki


def settings(pki: Pki, rules: str = "DEFAULT", **extra: str) -> TlsSettings:
    props = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.keystore("broker")), "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca), **extra}
    config = BrokerConfig(props)
    return TlsSettings(server_context(lambda key: config.for_listener("SSL", key), "SSL"), SslPrincipalMapper(rules))


def handshake(session: TlsSession, client: ssl.SSLObject, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO) -> None:
    for _ in range(10):
        try:
            client.do_handshake()
            done = True
        except ssl.SSLWantReadError:
            done = False
        session.receive(outgoing.read())
        incoming.write(session.outgoing())
        if done and session.handshake_done:
            return
    raise AssertionError("handshake did not finish")


def client(pki: Pki, name: str | None) -> tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO]:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if name is not None:
        context.load_cert_chain(pki.cert(name), pki.key(name))
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    return context.wrap_bio(incoming, outgoing, server_hostname="localhost"), incoming, outgoing


def test_bytes_cross_a_real_tls_session_and_the_client_certificate_gives_the_principal(pki) -> None:
    session = TlsSession(settings(pki, **{"ssl.client.auth": "required"}))
    tls, incoming, outgoing = client(pki, "alice")
    handshake(session, tls, incoming, outgoing)
    # Kafka's DefaultKafkaPrincipalBuilder: the subject in RFC 2253 order (last RDN first), escaped
    assert session.principal() == KafkaPrincipal("User", "CN=alice,OU=eng,O=Acme\\, Inc.,C=US")
    tls.write(b"\x00\x00\x00\x04ping")
    assert session.receive(outgoing.read()) == b"\x00\x00\x00\x04ping"
    session.send(b"pong")
    incoming.write(session.outgoing())
    assert tls.read() == b"pong"


def test_without_a_client_certificate_the_principal_is_anonymous(pki) -> None:
    session = TlsSession(settings(pki, **{"ssl.client.auth": "requested"}))
    handshake(session, *client(pki, None))
    assert session.principal() == ANONYMOUS


def test_a_required_client_certificate_that_is_missing_fails_the_handshake(pki) -> None:
    session = TlsSession(settings(pki, **{"ssl.client.auth": "required"}))
    tls, incoming, outgoing = client(pki, None)
    with pytest.raises(ssl.SSLError):
        handshake(session, tls, incoming, outgoing)
        tls.write(b"x")
        session.receive(outgoing.read())


def test_ssl_principal_mapping_rules_as_kafka_applies_them(pki) -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?).*$/$1@$2/L, DEFAULT")
    assert mapper.principal_name("CN=kafka-svc,OU=ServiceUsers,O=Acme,C=US") == "kafka-svc"
    assert mapper.principal_name("CN=Alice,OU=ENG,O=Acme,C=US") == "alice@eng"
    assert mapper.principal_name("OU=nobody") == "OU=nobody"
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$1/U").principal_name("CN=bob") == "BOB"
    with pytest.raises(ConfigError):
        SslPrincipalMapper("RULE:broken")


def test_distinguished_names_are_rfc_2253_as_java_writes_them() -> None:
    subject = ((("countryName", "GB"),), (("organizationName", "A+B"),), (("commonName", " lead"),))
    assert distinguished_name(subject) == "CN=\\ lead,O=A\\+B,C=GB"


def test_an_encrypted_key_needs_ssl_key_password(pki, tmp_path: Path) -> None:
    keystore = pki.issue("locked", "/CN=localhost", server=True, key_password="hunter2")
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore)}
    server_context(lambda key: BrokerConfig({**base, "ssl.key.password": "hunter2"})[key], "SSL")
    with pytest.raises(ConfigError, match="failed to load the SSL keystore"):
        server_context(lambda key: BrokerConfig({**base, "ssl.key.password": "wrong"})[key], "SSL")


def test_an_inline_pem_keystore_is_accepted(pki) -> None:
    props = {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": pki.cert("broker").read_text(), "ssl.keystore.key": pki.key("broker").read_text()}
    session = TlsSession(TlsSettings(server_context(lambda key: BrokerConfig(props)[key], "SSL"), SslPrincipalMapper("DEFAULT")))
    handshake(session, *client(pki, None))
    assert session.handshake_done


def test_a_client_close_notify_is_answered_with_ours(pki) -> None:
    """asyncio's TLS transport waits up to 30 s for the server's close_notify when it closes (aiokafka's
    producer.stop() took 30 s until the broker answered it)."""
    session = TlsSession(settings(pki))
    tls, incoming, outgoing = client(pki, None)
    handshake(session, tls, incoming, outgoing)
    with pytest.raises(ssl.SSLWantReadError):
        tls.unwrap()  # sends the client's close_notify, then waits for the server's
    assert session.receive(outgoing.read()) == b"" and session.peer_closed
    incoming.write(session.outgoing())
    tls.unwrap()  # completes: the server's close_notify arrived


def test_pkcs12_keystore_and_truststore(pki, tmp_path: Path) -> None:
    """Kafka's ssl.keystore.type=PKCS12 and ssl.truststore.type=PKCS12 (as keytool and openssl write them)."""
    keystore, truststore = tmp_path / "broker.p12", tmp_path / "trust.p12"
    subprocess.run(["openssl", "pkcs12", "-export", "-in", str(pki.cert("broker")), "-inkey", str(pki.key("broker")), "-certfile", str(pki.ca), "-out", str(keystore), "-passout", "pass:changeit"], check=True, capture_output=True)
    subprocess.run(["openssl", "pkcs12", "-export", "-nokeys", "-in", str(pki.ca), "-out", str(truststore), "-passout", "pass:changeit"], check=True, capture_output=True)
    props = {
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(keystore), "ssl.keystore.password": "changeit",
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(truststore), "ssl.truststore.password": "changeit",
        "ssl.client.auth": "required",
    }
    config = BrokerConfig(props)
    session = TlsSession(TlsSettings(server_context(lambda key: config.for_listener("SSL", key), "SSL"), SslPrincipalMapper("DEFAULT")))
    handshake(session, *client(pki, "alice"))  # the client certificate verified against the PKCS12 truststore
    assert session.principal().name.startswith("CN=alice")
    wrong = BrokerConfig({**props, "ssl.keystore.password": "wrong"})
    with pytest.raises(ConfigError, match="failed to read the PKCS12 store"):
        server_context(lambda key: wrong.for_listener("SSL", key), "SSL")


@pytest.mark.parametrize("key_password", [None, "key-secret"], ids=["store-password", "own-key-password"])
def test_jks_keystore_and_truststore(pki, key_password: str | None) -> None:
    """Kafka's default store type, JKS, as keytool writes it: the key entry opened with ssl.key.password, or
    the store's password when it has none of its own (Kafka's rule)."""
    keystore, truststore = jks_stores(pki, "broker", "changeit", key_password=key_password)
    props = {
        "ssl.keystore.location": str(keystore), "ssl.keystore.password": "changeit",
        "ssl.truststore.location": str(truststore), "ssl.truststore.password": "changeit", "ssl.client.auth": "required",
        **({"ssl.key.password": key_password} if key_password else {}),
    }
    config = BrokerConfig(props)  # ssl.keystore.type and ssl.truststore.type left at Kafka's default, JKS
    session = TlsSession(TlsSettings(server_context(lambda key: config.for_listener("SSL", key), "SSL"), SslPrincipalMapper("DEFAULT")))
    handshake(session, *client(pki, "alice"))  # the broker's JKS chain verified by the client, alice's by the JKS truststore
    assert session.principal().name.startswith("CN=alice")
    wrong = BrokerConfig({**props, "ssl.keystore.password": "wrong"})
    with pytest.raises(ConfigError, match="failed to read the JKS store"):
        server_context(lambda key: wrong.for_listener("SSL", key), "SSL")
    if key_password:
        without = BrokerConfig({k: v for k, v in props.items() if k != "ssl.key.password"})
        with pytest.raises(ConfigError, match="wrong ssl.key.password"):
            server_context(lambda key: without.for_listener("SSL", key), "SSL")
