"""The SASL exchange of a connection, without sockets: frames in, Kafka's answers and state changes out
(Kafka's SaslServerAuthenticator). Real clients over real sockets are in tests/e2e/test_security.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import struct
import time

import pytest

from odradek.broker.network.connection import AnswerReady, ConnectionEnded, ConnectionState, Endpoint, KafkaConnection, RequestReceived
from odradek.broker.kafka_apis import HANDLERS, unsupported_api_versions_response
from odradek.broker.network.memory_pool import MemoryPool
from odradek.broker.network.request_context import KafkaPrincipal
from odradek.broker.security.oauthbearer import OAuthBearerServer, UnsecuredValidator
from odradek.broker.security.plain import PlainServer
from odradek.broker.security.sasl_authenticator import SaslSettings
from odradek.broker.security.sasl_mechanism import parse_jaas
from odradek.broker.security.credential_file import FileCredentialStore
from odradek.broker.security.scram import SCRAM_MECHANISMS, ScramCredential, ScramServer
from odradek.protocol.api import ApiKey, decode_response, encode_request
from odradek.protocol.errors import ErrorCode

ENDPOINT = Endpoint("SASL_PLAINTEXT", "SASL_PLAINTEXT", "127.0.0.1", 9093, "10.0.0.9", 40000)
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice \\"secret\\"";'


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path) -> FileCredentialStore:
    store = FileCredentialStore(tmp_path / "credentials.json")
    store.alter([("bob", "SCRAM-SHA-256", ScramCredential.from_password(SCRAM_MECHANISMS["SCRAM-SHA-256"], "bob-secret"))], [])
    return store


def connection(store: FileCredentialStore, clock: Clock | None = None, reauth_ms: int = 0) -> KafkaConnection:
    options = parse_jaas(JAAS).options
    oauth_options = parse_jaas('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="x";').options
    settings = SaslSettings(
        ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"],
        {
            "PLAIN": lambda: PlainServer(options),
            "SCRAM-SHA-256": lambda: ScramServer(SCRAM_MECHANISMS["SCRAM-SHA-256"], store),
            "OAUTHBEARER": lambda: OAuthBearerServer(UnsecuredValidator(oauth_options)),
        },
        {"PLAIN": reauth_ms, "SCRAM-SHA-256": reauth_ms, "OAUTHBEARER": reauth_ms},
        failed_delay_ms=250,
    )
    return KafkaConnection(ENDPOINT, 1, HANDLERS, unsupported_api_versions_response, max_request_size=1 << 20, max_queued=10, pool=MemoryPool(1 << 20), sasl=settings, clock=clock or time.monotonic)


def handshake(conn: KafkaConnection, mechanism: str, version: int = 1) -> list[str]:
    [event] = conn.feed(encode_request(ApiKey.SaslHandshake, version, 1, {"mechanism": mechanism}))
    assert isinstance(event, AnswerReady)
    _, body = decode_response(ApiKey.SaslHandshake, version, event.data[4:])
    assert body.error_code == ErrorCode.NONE
    return list(body.mechanisms)


def authenticate(conn: KafkaConnection, token: bytes, version: int = 2):
    [event] = conn.feed(encode_request(ApiKey.SaslAuthenticate, version, 2, {"auth_bytes": token}))
    data = event.data if isinstance(event, AnswerReady) else event.answer
    return event, decode_response(ApiKey.SaslAuthenticate, version, data[4:])[1]


def metadata_request() -> bytes:
    return encode_request(ApiKey.Metadata, 12, 9, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})


def test_plain_authenticates_then_requests_carry_the_user_principal(store) -> None:
    conn = connection(store)
    [versions] = conn.feed(encode_request(ApiKey.ApiVersions, 3, 0, {"client_software_name": "t", "client_software_version": "1"}))
    assert isinstance(versions, RequestReceived)  # ApiVersions is served before authentication
    assert handshake(conn, "PLAIN") == ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"]
    event, body = authenticate(conn, b"\x00alice\x00alice \"secret\"")
    assert isinstance(event, AnswerReady) and body.error_code == ErrorCode.NONE and body.session_lifetime_ms == 0
    [request] = conn.feed(metadata_request())
    assert isinstance(request, RequestReceived)
    assert request.request.context.principal == KafkaPrincipal("User", "alice")


def test_a_wrong_password_is_answered_with_kafkas_message_after_the_delay_then_closed(store) -> None:
    conn = connection(store)
    handshake(conn, "PLAIN")
    event, body = authenticate(conn, b"\x00alice\x00nope")
    assert isinstance(event, ConnectionEnded) and event.delay_s == 0.25 and event.authentication_failed
    assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert body.error_message == "Authentication failed: Invalid username or password"
    assert conn.state is ConnectionState.CLOSED


def test_nothing_but_api_versions_and_sasl_handshake_is_served_before_authentication(store) -> None:
    conn = connection(store)
    [event] = conn.feed(metadata_request())
    assert isinstance(event, ConnectionEnded) and event.answer is None
    assert "Unexpected Kafka request of type METADATA during SASL handshake." in event.reason


def test_an_unknown_mechanism_gets_unsupported_sasl_mechanism_with_the_enabled_ones(store) -> None:
    conn = connection(store)
    [event] = conn.feed(encode_request(ApiKey.SaslHandshake, 1, 1, {"mechanism": "GSSAPI"}))
    assert isinstance(event, ConnectionEnded)
    _, body = decode_response(ApiKey.SaslHandshake, 1, event.answer[4:])
    assert body.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and list(body.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"]


def test_sasl_handshake_v0_is_followed_by_raw_tokens(store) -> None:
    conn = connection(store)
    handshake(conn, "PLAIN", version=0)
    token = b"\x00admin\x00admin-secret"
    [event] = conn.feed(struct.pack(">i", len(token)) + token)
    assert isinstance(event, AnswerReady) and event.data == b"\x00\x00\x00\x00"  # an empty challenge, framed
    [request] = conn.feed(metadata_request())
    assert request.request.context.principal == KafkaPrincipal("User", "admin")


def scram_client_final(password: str, client_first_bare: str, server_first: str) -> tuple[str, bytes]:
    """RFC 5802's client side (what every real client computes)."""
    attrs = dict(item.split("=", 1) for item in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    return f"{without_proof},p={base64.b64encode(proof).decode()}", hmac.new(server_key, auth_message, "sha256").digest()


@pytest.mark.parametrize("password, ok", [("bob-secret", True), ("wrong", False)])
def test_scram_sha_256_exchange(store, password: str, ok: bool) -> None:
    conn = connection(store)
    handshake(conn, "SCRAM-SHA-256")
    first_bare = "n=bob,r=clientnonce123"
    _, body = authenticate(conn, f"n,,{first_bare}".encode())
    server_first = bytes(body.auth_bytes).decode()
    assert server_first.startswith("r=clientnonce123") and ",i=4096" in server_first
    final, expected_signature = scram_client_final(password, first_bare, server_first)
    event, body = authenticate(conn, final.encode())
    if ok:
        assert body.error_code == ErrorCode.NONE
        assert bytes(body.auth_bytes) == b"v=" + base64.b64encode(expected_signature)
        assert conn.principal == KafkaPrincipal("User", "bob")
    else:
        assert isinstance(event, ConnectionEnded)
        assert body.error_message == "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"


def test_scram_for_an_unknown_user_fails_with_the_generic_message(store) -> None:
    conn = connection(store)
    handshake(conn, "SCRAM-SHA-256")
    event, body = authenticate(conn, b"n,,n=mallory,r=abc")
    assert isinstance(event, ConnectionEnded) and body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert body.error_message == "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"


def jwt(claims: dict) -> str:
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{enc({'alg': 'none'})}.{enc(claims)}."


def test_oauthbearer_unsecured_token_gives_its_subject_and_bounds_the_session(store) -> None:
    clock = Clock()
    conn = connection(store, clock, reauth_ms=3_600_000)
    handshake(conn, "OAUTHBEARER")
    exp = time.time() + 60
    event, body = authenticate(conn, f"n,,\x01auth=Bearer {jwt({'sub': 'carol', 'exp': exp, 'iat': time.time()})}\x01\x01".encode())
    assert body.error_code == ErrorCode.NONE
    assert 55_000 < body.session_lifetime_ms <= 60_000  # the token's expiry, sooner than connections.max.reauth.ms
    assert conn.principal == KafkaPrincipal("User", "carol")


def test_an_expired_oauth_token_is_answered_with_rfc_7628s_error_then_fails(store) -> None:
    conn = connection(store)
    handshake(conn, "OAUTHBEARER")
    _, body = authenticate(conn, f"n,,\x01auth=Bearer {jwt({'sub': 'carol', 'exp': time.time() - 10})}\x01\x01".encode())
    assert body.error_code == ErrorCode.NONE and json.loads(bytes(body.auth_bytes)) == {"status": "invalid_token"}
    event, body = authenticate(conn, b"\x01")
    assert isinstance(event, ConnectionEnded) and body.error_message == '{"status":"invalid_token"}'


def test_an_expired_session_is_closed_unless_the_client_re_authenticates(store) -> None:
    clock = Clock()
    conn = connection(store, clock, reauth_ms=10_000)
    handshake(conn, "PLAIN")
    _, body = authenticate(conn, b"\x00alice\x00alice \"secret\"")
    assert body.session_lifetime_ms == 10_000
    clock.now += 9
    assert isinstance(conn.feed(metadata_request())[0], RequestReceived)
    clock.now += 5  # past the session: a re-authentication (KIP-368) renews it
    handshake(conn, "PLAIN")
    _, body = authenticate(conn, b"\x00alice\x00alice \"secret\"")
    assert body.error_code == ErrorCode.NONE and body.session_lifetime_ms == 10_000
    assert isinstance(conn.feed(metadata_request())[0], RequestReceived)
    clock.now += 11  # past it again, without re-authenticating: closed
    [event] = conn.feed(metadata_request())
    assert isinstance(event, ConnectionEnded) and "expired" in event.reason


def test_re_authentication_cannot_change_the_principal(store) -> None:
    conn = connection(store, reauth_ms=10_000)
    handshake(conn, "PLAIN")
    authenticate(conn, b"\x00alice\x00alice \"secret\"")
    handshake(conn, "PLAIN")
    event, body = authenticate(conn, b"\x00admin\x00admin-secret")
    assert isinstance(event, ConnectionEnded)
    assert body.error_message == "Cannot change principals during re-authentication from User.alice: User.admin"


def test_jaas_config_parsing() -> None:
    jaas = parse_jaas(JAAS)
    assert jaas.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert jaas.options == {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": 'alice "secret"'}
    with pytest.raises(ValueError, match="semi-colon"):
        parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b"')


def test_before_authentication_frames_are_bounded_by_sasl_server_max_receive_size(store) -> None:
    """Kafka's sasl.server.max.receive.size (512 KiB): an unauthenticated client cannot make the broker hold a
    large request; once authenticated, socket.request.max.bytes applies again."""
    conn = connection(store)
    [event] = conn.feed(struct.pack(">i", 600_000) + b"x" * 100)
    assert isinstance(event, ConnectionEnded) and event.authentication_failed
    assert "Failing SASL authentication due to invalid receive size" in event.reason
    conn = connection(store)
    handshake(conn, "PLAIN")
    authenticate(conn, b"\x00alice\x00alice \"secret\"")
    assert conn.feed(struct.pack(">i", 600_000) + b"x" * 100) == []  # waits for the rest: within socket.request.max.bytes


def test_a_client_that_authenticated_with_sasl_authenticate_v0_cannot_re_authenticate(store) -> None:
    """Kafka begins a re-authentication only for clients that sent SaslAuthenticate v1+ (KIP-368); a later
    SaslHandshake goes to its handler, which answers ILLEGAL_SASL_STATE."""
    conn = connection(store, reauth_ms=10_000)
    handshake(conn, "PLAIN")
    authenticate(conn, b"\x00alice\x00alice \"secret\"", version=0)
    [event] = conn.feed(encode_request(ApiKey.SaslHandshake, 1, 5, {"mechanism": "PLAIN"}))
    assert isinstance(event, RequestReceived) and conn.state is ConnectionState.READY
