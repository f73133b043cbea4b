"""The delegation token manager without a broker: Kafka 3.9's rules for lifetimes, renewals, expiry and who
may do what, on a clock the test moves, with the single node's file store (the broker-level behaviour is
compared with Kafka's in tests/e2e/test_delegation_tokens.py)."""

from __future__ import annotations

from pathlib import Path

from odradek.broker.network.request_context import KafkaPrincipal
from odradek.broker.security.delegation_token import DelegationTokenManager, FileTokenStore, TokenInformation, describe_filter, token_hmac
from odradek.protocol.errors import ErrorCode

ALICE, ADMIN, BOB = KafkaPrincipal.user("alice"), KafkaPrincipal.user("admin"), KafkaPrincipal.user("bob")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def manager(tmp_path: Path, clock: Clock, secret: str | None = "s3cret") -> DelegationTokenManager:
    tokens = DelegationTokenManager(secret, max_lifetime_ms=10_000, expiry_time_ms=4_000, store=FileTokenStore(tmp_path / "tokens.json"), clock_ms=clock)
    tokens.start()
    return tokens


def test_lifetimes_renewals_and_expiry_follow_kafkas_rules(tmp_path: Path) -> None:
    clock = Clock()
    tokens = manager(tmp_path, clock)
    made = tokens.create(ALICE, ALICE, [ADMIN], max_lifetime_ms=-1)
    assert made.error == ErrorCode.NONE and made.info is not None
    token = made.info
    assert (token.expiry_timestamp - clock.now, token.max_timestamp - clock.now) == (4_000, 10_000)
    assert made.hmac == token_hmac(token.token_id, "s3cret") and len(made.hmac) == 64
    assert tokens.renew(BOB, made.hmac, 1_000) == (ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, -1)
    clock.now += 3_000
    assert tokens.renew(ADMIN, made.hmac, 50_000) == (ErrorCode.NONE, token.max_timestamp)  # never past the maximum
    assert tokens.renew(ALICE, made.hmac, -1) == (ErrorCode.NONE, clock.now + 4_000)  # a negative period: the default
    clock.now = token.max_timestamp + 1
    assert tokens.renew(ALICE, made.hmac, 1_000) == (ErrorCode.DELEGATION_TOKEN_EXPIRED, -1)
    assert tokens.login("SCRAM-SHA-256", token.token_id) is not None  # until the expiry check removes it
    assert tokens.expire_tokens() == [token.token_id]
    assert tokens.login("SCRAM-SHA-256", token.token_id) is None
    assert tokens.renew(ALICE, made.hmac, 1_000) == (ErrorCode.DELEGATION_TOKEN_NOT_FOUND, -1)


def test_a_shorter_lifetime_asked_is_kept_and_a_longer_one_capped(tmp_path: Path) -> None:
    clock = Clock()
    tokens = manager(tmp_path, clock)
    short, long = tokens.create(ALICE, ALICE, [], 2_000).info, tokens.create(ALICE, ALICE, [], 99_000).info
    assert short is not None and long is not None
    assert (short.max_timestamp - clock.now, short.expiry_timestamp - clock.now) == (2_000, 2_000)
    assert long.max_timestamp - clock.now == 10_000


def test_the_store_keeps_tokens_in_kafkas_json_and_a_new_manager_reads_them(tmp_path: Path) -> None:
    clock = Clock()
    made = manager(tmp_path, clock).create(KafkaPrincipal.user("a:b c"), ALICE, [BOB], -1)
    assert made.info is not None
    again = manager(tmp_path, clock)
    found = again.login("SCRAM-SHA-512", made.info.token_id)
    assert found is not None and found[1:] == ("a:b c", made.info.expiry_timestamp)
    stored = (tmp_path / "tokens.json").read_text()
    assert '"owner":"User%3Aa%3Ab%20c"' in stored and '"version":3' in stored and "hmac" not in stored.lower()
    assert TokenInformation.from_json(made.info.to_json()) == made.info
    assert manager(tmp_path, clock, secret=None).login("SCRAM-SHA-256", made.info.token_id) is None


def test_expire_now_removes_and_expire_later_moves_the_expiry(tmp_path: Path) -> None:
    clock = Clock()
    tokens = manager(tmp_path, clock)
    made = tokens.create(ALICE, ALICE, [], -1)
    assert tokens.expire(ALICE, made.hmac, 1_000) == (ErrorCode.NONE, clock.now + 1_000)
    assert tokens.expire(ALICE, made.hmac, -1) == (ErrorCode.NONE, clock.now)
    assert tokens.tokens(lambda token: True) == []


def test_describe_sees_its_own_tokens_and_those_it_may_describe() -> None:
    token = TokenInformation("id", ALICE, ADMIN, (BOB,), 0, 10, 5)
    never = lambda _: False  # noqa: E731
    assert describe_filter(BOB, None, never, never)(token)  # a renewer
    assert describe_filter(ADMIN, None, never, never)(token)  # the requester
    assert not describe_filter(KafkaPrincipal.user("eve"), None, never, never)(token)
    assert describe_filter(KafkaPrincipal.user("eve"), None, lambda token_id: token_id == "id", never)(token)
    assert not describe_filter(ALICE, [KafkaPrincipal.user("eve")], never, never)(token)  # owners not asked for


def test_without_a_secret_every_operation_is_disabled(tmp_path: Path) -> None:
    tokens = manager(tmp_path, Clock(), secret=None)
    assert not tokens.enabled
    assert tokens.create(ALICE, ALICE, [], -1).error == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    assert tokens.renew(ALICE, b"x", 1) == (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, -1)
    assert tokens.expire(ALICE, b"x", 1) == (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, -1)
