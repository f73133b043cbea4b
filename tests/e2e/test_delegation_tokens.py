"""Delegation tokens (KIP-48) against odradek and a real Kafka 3.9.1 side by side: both brokers in ZooKeeper
mode with the same listeners (PLAINTEXT, and SASL_PLAINTEXT with PLAIN users and SCRAM) and the same
``delegation.token.secret.key``. The same requests go to both over raw sockets, and the answers must agree;
then Kafka's own producer logs in as a token made on each, and tokens expire as Kafka's do. A single node
keeps its tokens in a file beside its metadata: they survive a restart there."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import kafka_jvm
from kafka_jvm import free_port
import pytest

from odradek import Broker
from odradek.broker.security.sasl_client import sasl_client
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.conftest import Wire
from tests.polling import wait_for

PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret", "bob": "bob-secret"}
SECRET = "the-token-secret"
DAY_MS, WEEK_MS = 86_400_000, 604_800_000


def broker_settings(plain: int, sasl: int, secret: str | None = SECRET) -> dict[str, str]:
    plain_jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items()) + ";"
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "delegation.token.expiry.check.interval.ms": "1000",
    }
    if secret is not None:
        settings["delegation.token.secret.key"] = secret
    return settings


class Endpoints:
    def __init__(self, plain: int, sasl: int) -> None:
        self.plain, self.sasl = plain, sasl


@pytest.fixture(scope="module")
def brokers(real_kafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Endpoints]]:
    """odradek and Kafka 3.9.1, each alone in a ZooKeeper chroot of the run's ZooKeeper."""
    assert real_kafka.zookeeper is not None
    connect = real_kafka.zookeeper.connect
    ours, theirs = Endpoints(free_port(), free_port()), Endpoints(free_port(), free_port())
    kafka = kafka_jvm.KafkaBroker(tmp_path_factory.mktemp("kafka-tokens"), connect + "/tokens-kafka", settings=broker_settings(theirs.plain, theirs.sasl), port=theirs.plain).start()
    try:
        config = {**broker_settings(ours.plain, ours.sasl), "zookeeper.connect": connect + "/tokens-odradek", "offsets.topic.replication.factor": "1"}
        with Broker(log_dir=tmp_path_factory.mktemp("odradek-tokens"), subprocess=True, config=config):
            yield {"odradek": ours, "kafka": theirs}
    finally:
        kafka.stop()


# -- a raw client ---------------------------------------------------------------------------------------------


class Session(Wire):
    """One connection, logged in with ``mechanism`` unless None (PLAINTEXT)."""

    def __init__(self, port: int, mechanism: str | None = None, user: str = "", password: str = "", token: bool = False) -> None:
        super().__init__(f"127.0.0.1:{port}")
        if mechanism is None:
            return
        assert self.call(ApiKey.SaslHandshake, 1, {"mechanism": mechanism}).error_code == ErrorCode.NONE
        client = sasl_client(mechanism, user, password, token_auth=token)
        answer = self.call(ApiKey.SaslAuthenticate, 2, {"auth_bytes": client.first()})
        while answer.error_code == ErrorCode.NONE:
            reply = client.respond(bytes(answer.auth_bytes))
            if reply is None:
                return
            answer = self.call(ApiKey.SaslAuthenticate, 2, {"auth_bytes": reply})
        raise PermissionError(answer.error_message)

    def create(self, version: int = 3, owner: tuple[str, str] | None = None, renewers: tuple[tuple[str, str], ...] = (), max_lifetime_ms: int = -1) -> Any:
        body: dict[str, Any] = {"renewers": [{"principal_type": t, "principal_name": n} for t, n in renewers], "max_lifetime_ms": max_lifetime_ms}
        if version >= 3:
            body["owner_principal_type"], body["owner_principal_name"] = owner if owner else (None, None)
        return self.call(ApiKey.CreateDelegationToken, version, body)

    def renew(self, hmac: bytes, period_ms: int) -> Any:
        return self.call(ApiKey.RenewDelegationToken, 2, {"hmac": hmac, "renew_period_ms": period_ms})

    def expire(self, hmac: bytes, period_ms: int) -> Any:
        return self.call(ApiKey.ExpireDelegationToken, 2, {"hmac": hmac, "expiry_time_period_ms": period_ms})

    def describe(self, owners: list[tuple[str, str]] | None = None, version: int = 3) -> Any:
        body = {"owners": None if owners is None else [{"principal_type": t, "principal_name": n} for t, n in owners]}
        return self.call(ApiKey.DescribeDelegationToken, version, body)



def login(endpoints: Endpoints, user: str) -> Session:
    return Session(endpoints.sasl, "PLAIN", user, PLAIN_USERS[user])


def token_login(endpoints: Endpoints, token_id: str, hmac: bytes, mechanism: str = "SCRAM-SHA-256") -> Session:
    import base64

    return Session(endpoints.sasl, mechanism, token_id, base64.b64encode(hmac).decode(), token=True)


# -- the requests, compared ----------------------------------------------------------------------------------


def scenario(endpoints: Endpoints) -> list[Any]:
    """The same requests to one broker, each answer reduced to what does not depend on the broker's clock or
    randomness (its relations to the clock are checked here)."""
    seen: list[Any] = []
    plaintext = Session(endpoints.plain)
    refused = plaintext.create()
    seen.append(("plaintext create", refused.error_code, refused.principal_type, refused.principal_name, refused.token_id, bytes(refused.hmac), refused.issue_timestamp_ms))
    seen.append(("plaintext describe", plaintext.describe().error_code))
    plaintext.close()

    alice, admin, bob = login(endpoints, "alice"), login(endpoints, "admin"), login(endpoints, "bob")
    before = int(time.time() * 1000)
    made = alice.create(renewers=(("User", "admin"),))
    after = int(time.time() * 1000)
    assert made.error_code == ErrorCode.NONE
    assert before - 2000 <= made.issue_timestamp_ms <= after + 2000
    seen.append((
        "create", made.principal_type, made.principal_name, made.token_requester_principal_type, made.token_requester_principal_name,
        made.expiry_timestamp_ms - made.issue_timestamp_ms, made.max_timestamp_ms - made.issue_timestamp_ms, len(made.token_id), len(made.hmac),
    ))
    for_bob = alice.create(owner=("User", "bob"), max_lifetime_ms=3_600_000)
    seen.append(("create for bob", for_bob.error_code, for_bob.principal_name, for_bob.token_requester_principal_name, for_bob.max_timestamp_ms - for_bob.issue_timestamp_ms, for_bob.expiry_timestamp_ms - for_bob.issue_timestamp_ms))
    group = alice.create(renewers=(("Group", "ops"),))
    seen.append(("create, a group renewing", group.error_code, group.principal_name, group.expiry_timestamp_ms, group.token_id))
    old = alice.create(version=1)
    seen.append(("create v1", old.error_code, old.principal_name, old.max_timestamp_ms - old.issue_timestamp_ms))

    described = alice.describe()
    mine = {t.token_id: t for t in described.tokens}
    assert {made.token_id, for_bob.token_id, old.token_id} <= set(mine)
    token = mine[made.token_id]
    seen.append(("describe", described.error_code, token.principal_name, token.token_requester_principal_name, bytes(token.hmac) == bytes(made.hmac), [(r.principal_type, r.principal_name) for r in token.renewers]))
    seen.append(("describe bob's", sorted(t.token_id == for_bob.token_id for t in alice.describe([("User", "bob")]).tokens)))
    seen.append(("describe none", alice.describe([]).error_code, len(alice.describe([]).tokens)))
    seen.append(("describe v0, requester fields absent", alice.describe(version=0).error_code))

    seen.append(("renew by a stranger", *_expiry(bob.renew(bytes(made.hmac), 60_000))))
    renewed = admin.renew(bytes(made.hmac), 60_000)
    assert renewed.error_code == ErrorCode.NONE and abs(renewed.expiry_timestamp_ms - (int(time.time() * 1000) + 60_000)) < 5_000
    seen.append(("renew by the renewer", renewed.error_code))
    seen.append(("renew an unknown token", *_expiry(alice.renew(b"\x00" * 64, 60_000))))
    seen.append(("renewed, described", [t.expiry_timestamp for t in alice.describe([("User", "alice")]).tokens if t.token_id == made.token_id] == [renewed.expiry_timestamp_ms]))
    moved = alice.expire(bytes(made.hmac), 30_000)
    assert moved.error_code == ErrorCode.NONE and moved.expiry_timestamp_ms < renewed.expiry_timestamp_ms
    seen.append(("expire later", moved.error_code))
    gone = alice.expire(bytes(made.hmac), -1)
    assert abs(gone.expiry_timestamp_ms - int(time.time() * 1000)) < 5_000
    seen.append(("expire now", gone.error_code))
    seen.append(("expired, renewed", *_expiry(alice.renew(bytes(made.hmac), 60_000))))
    seen.append(("expired, described", made.token_id in {t.token_id for t in alice.describe().tokens}))
    for session in (alice, admin, bob):
        session.close()
    return seen


def _expiry(answer: Any) -> tuple[int, int]:
    return answer.error_code, answer.expiry_timestamp_ms


def test_token_requests_are_answered_as_kafkas(brokers: dict[str, Endpoints]) -> None:
    theirs = scenario(brokers["kafka"])
    ours = scenario(brokers["odradek"])
    assert ours == theirs
    assert theirs[0][1] == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    assert theirs[2][1:] == ("User", "alice", "User", "alice", DAY_MS, WEEK_MS, 22, 64)


@pytest.mark.parametrize("kind", ["odradek", "kafka"])
def test_a_token_logs_in_as_its_owner_and_may_not_ask_for_tokens(brokers: dict[str, Endpoints], kind: str) -> None:
    """A SCRAM login as the token (both mechanisms) acts as its owner; that connection's token requests are
    refused, and a login as a token that does not exist fails."""
    endpoints = brokers[kind]
    alice = login(endpoints, "alice")
    made = alice.create()
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        as_token = token_login(endpoints, made.token_id, bytes(made.hmac), mechanism)
        assert as_token.create().error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert as_token.describe().error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        as_token.close()
    with pytest.raises(PermissionError, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        token_login(endpoints, "no-such-token", bytes(made.hmac))
    with pytest.raises(PermissionError):
        token_login(endpoints, made.token_id, b"\x01" * 64)
    alice.close()


@pytest.fixture(scope="module")
def java_probe() -> Callable[..., dict[str, Any]]:
    """Kafka's own producer (tests/e2e/java_security/SecurityProbe.java) and what it observed."""
    programs = kafka_jvm.java_programs(sorted((Path(__file__).parent / "java_security").glob("*.java")), 120)

    def run(*args: str) -> dict[str, Any]:
        done = programs.run("SecurityProbe", *args, timeout_s=120, lasting=True)
        assert done.returncode == 0, done.stderr[-4000:]
        return json.loads(done.stdout.splitlines()[-1])

    return run


@pytest.mark.parametrize("kind", ["odradek", "kafka"])
def test_kafkas_producer_logs_in_with_a_token_until_it_expires(brokers: dict[str, Endpoints], java_probe: Callable[..., dict[str, Any]], kind: str) -> None:
    """The Java client's ``ScramLoginModule ... tokenauth="true"`` produces; then the token is set to expire
    in a second, is removed by the expiry check (every second here), and the same login is refused."""
    endpoints = brokers[kind]
    import base64

    alice = login(endpoints, "alice")
    made = alice.create()
    jaas = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{made.token_id}" password="{base64.b64encode(bytes(made.hmac)).decode()}" tokenauth="true";'
    seen = java_probe(f"127.0.0.1:{endpoints.sasl}", "SASL_PLAINTEXT", "SCRAM-SHA-512", jaas, "1", f"tokens-{kind}")
    assert seen["acked"] >= 5 and seen["failed-authentication-total"] == 0
    assert alice.expire(bytes(made.hmac), 1000).error_code == ErrorCode.NONE
    wait_for(lambda: made.token_id not in {t.token_id for t in alice.describe().tokens}, timeout_s=15, what="the token removed once expired")
    with pytest.raises(PermissionError):
        token_login(endpoints, made.token_id, bytes(made.hmac))
    alice.close()


def test_a_single_node_keeps_its_tokens_over_a_restart_and_one_without_a_secret_has_none(tmp_path: Path) -> None:
    plain, sasl = free_port(), free_port()
    endpoints = Endpoints(plain, sasl)
    with Broker(log_dir=tmp_path / "node", subprocess=True, config=broker_settings(plain, sasl)):
        alice = login(endpoints, "alice")
        made = alice.create()
        assert made.error_code == ErrorCode.NONE
        alice.close()
    with Broker(log_dir=tmp_path / "node", subprocess=True, config=broker_settings(plain, sasl)):
        token_login(endpoints, made.token_id, bytes(made.hmac)).close()
        alice = login(endpoints, "alice")
        assert [t.token_id for t in alice.describe().tokens] == [made.token_id]
        alice.close()
    with Broker(log_dir=tmp_path / "node", subprocess=True, config=broker_settings(plain, sasl, secret=None)):
        alice = login(endpoints, "alice")
        assert alice.create().error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        assert alice.describe().error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        assert _expiry(alice.renew(bytes(made.hmac), 1000)) == (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, -1)
        alice.close()
        with pytest.raises(PermissionError):
            token_login(endpoints, made.token_id, bytes(made.hmac))


@pytest.fixture(scope="module")
def mixed(real_kafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Endpoints]]:
    """One ZooKeeper cluster of Kafka 3.9.1 (broker 0) and odradek (broker 1) sharing the secret."""
    connect = real_kafka.zookeeper.connect + "/tokens-mixed"
    ours, theirs = Endpoints(free_port(), free_port()), Endpoints(free_port(), free_port())
    kafka = kafka_jvm.KafkaBroker(tmp_path_factory.mktemp("kafka-mixed"), connect, settings=broker_settings(theirs.plain, theirs.sasl), port=theirs.plain).start()
    try:
        config = {**broker_settings(ours.plain, ours.sasl), "broker.id": "1", "zookeeper.connect": connect}
        with Broker(log_dir=tmp_path_factory.mktemp("odradek-mixed"), subprocess=True, config=config):
            yield {"odradek": ours, "kafka": theirs}
    finally:
        kafka.stop()


@pytest.mark.parametrize("maker, user", [("kafka", "odradek"), ("odradek", "kafka")])
def test_a_token_made_at_one_broker_logs_in_at_the_other(mixed: dict[str, Endpoints], maker: str, user: str) -> None:
    """Tokens live in ZooKeeper in Kafka's form and each change is announced: a token made through Kafka
    logs in at odradek and the other way round, a renewal made at one is what the other describes, and once
    expired at one the other refuses it."""
    owner = login(mixed[maker], "alice")
    made = owner.create(renewers=(("User", "admin"),))
    assert made.error_code == ErrorCode.NONE
    wait_for(lambda: _logs_in(mixed[user], made), timeout_s=15, what=f"the token made at {maker} logging in at {user}")
    admin = login(mixed[user], "admin")
    renewed = admin.renew(bytes(made.hmac), 120_000)
    assert renewed.error_code == ErrorCode.NONE
    wait_for(lambda: [t.expiry_timestamp for t in owner.describe().tokens if t.token_id == made.token_id] == [renewed.expiry_timestamp_ms], timeout_s=15, what="the renewal seen where the token was made")
    assert admin.expire(bytes(made.hmac), -1).error_code == ErrorCode.NONE
    wait_for(lambda: not _logs_in(mixed[maker], made), timeout_s=15, what="the expired token refused where it was made")
    owner.close()
    admin.close()


def _logs_in(endpoints: Endpoints, made: Any) -> bool:
    try:
        token_login(endpoints, made.token_id, bytes(made.hmac)).close()
    except PermissionError:
        return False
    return True
