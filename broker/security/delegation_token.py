"""Delegation tokens (KIP-48), as Kafka 3.9's ``DelegationTokenManager``: a client authenticated by other
means asks for a token, and its jobs log in with SCRAM as the token (user name the token id, password the
token's HMAC, the ``tokenauth=true`` extension), acting as the token's owner.

A token is its :class:`TokenInformation`; its HMAC is never stored, but recomputed from the token id with
the cluster's ``delegation.token.secret.key`` (HMAC-SHA512), so every broker with the same secret knows every
token's password. Where tokens are kept is a :class:`TokenStore`: ZooKeeper's ``/delegation_token`` in a
cluster (:mod:`.delegation_token_zk`), a file beside the embedded controller's metadata on a single node.

The manager is sans-IO apart from its store: the clock is handed in, and its answers are Kafka's error
codes, so the handlers only translate.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from odradek.broker.network.request_context import KafkaPrincipal
from odradek.broker.quotas import desanitize, sanitize
from odradek.broker.security.scram import MIN_ITERATIONS, SCRAM_MECHANISMS, ScramCredential
from odradek.protocol.errors import ErrorCode
from odradek.storage.checkpoints import write_atomically

TOKEN_INFO_VERSION = 3
"""The version of the JSON a token is stored as (Kafka's ``DelegationTokenManagerZk.CurrentVersion``)."""
ERROR_TIMESTAMP = -1
DELEGATION_TOKENS_FILE = "odradek-delegation-tokens.json"
"""On a single node, in the first log directory, beside the embedded controller's metadata."""


def parse_principal(text: str) -> KafkaPrincipal:
    """Kafka's ``SecurityUtils.parseKafkaPrincipal``: ``type:name``."""
    principal_type, sep, name = text.partition(":")
    if not sep or not principal_type:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    return KafkaPrincipal(principal_type, name)


@dataclass(frozen=True)
class TokenInformation:
    token_id: str
    owner: KafkaPrincipal
    token_requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        """Who may describe the token without an ACL (Kafka's ``TokenInformation.ownerOrRenewer``)."""
        return principal in (self.owner, self.token_requester) or principal in self.renewers

    def may_renew(self, principal: KafkaPrincipal) -> bool:
        """Who may renew or expire it (Kafka's ``allowedToRenew``): its owner and renewers, not its requester."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms

    def to_json(self) -> bytes:
        """As Kafka writes ``/delegation_token/tokens/<id>`` (``DelegationTokenManagerZk.toJsonCompatibleMap``)."""
        return json.dumps({
            "version": TOKEN_INFO_VERSION,
            "owner": sanitize(str(self.owner)),
            "tokenRequester": sanitize(str(self.token_requester)),
            "renewers": [sanitize(str(r)) for r in self.renewers],
            "issueTimestamp": self.issue_timestamp,
            "maxTimestamp": self.max_timestamp,
            "expiryTimestamp": self.expiry_timestamp,
            "tokenId": self.token_id,
        }, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "TokenInformation":
        js = json.loads(data)
        version = js["version"]
        if not 0 < version <= TOKEN_INFO_VERSION:
            raise ValueError(f"unknown delegation token version {version}")
        principal = lambda text: parse_principal(desanitize(text) or "")  # noqa: E731
        owner = principal(js["owner"])
        return cls(
            js["tokenId"], owner, principal(js["tokenRequester"]) if version >= 3 else owner, tuple(principal(r) for r in js["renewers"]),
            js["issueTimestamp"], js["maxTimestamp"], js["expiryTimestamp"],
        )


def random_token_id() -> str:
    """Kafka's ``CoreUtils.generateUuidAsBase64``: a random (version 4) UUID's 16 bytes, base64url unpadded."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


def token_hmac(token_id: str, secret: str) -> bytes:
    """Kafka's ``DelegationTokenManager.createHmac``: HMAC-SHA512 of the token id, keyed by the secret."""
    return hmac.new(secret.encode(), token_id.encode(), hashlib.sha512).digest()


class TokenStore(Protocol):
    """Where the tokens live, shared by every broker of the cluster."""

    def load(self) -> list[TokenInformation]: ...

    def write(self, token: TokenInformation) -> None: ...

    def delete(self, token_id: str) -> None: ...


class FileTokenStore:
    """A single node's tokens: one JSON file of the tokens' ZooKeeper form, rewritten atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> list[TokenInformation]:
        if not self.path.exists():
            return []
        return [TokenInformation.from_json(json.dumps(t).encode()) for t in json.loads(self.path.read_text())]

    def _save(self, tokens: Iterable[TokenInformation]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, b"[" + b",".join(t.to_json() for t in sorted(tokens, key=lambda t: t.token_id)) + b"]")

    def write(self, token: TokenInformation) -> None:
        self._save([*(t for t in self.load() if t.token_id != token.token_id), token])

    def delete(self, token_id: str) -> None:
        self._save(t for t in self.load() if t.token_id != token_id)


@dataclass
class _Cached:
    info: TokenInformation
    hmac: bytes
    credentials: dict[str, ScramCredential] = field(default_factory=dict)
    """Per SCRAM mechanism, made at the token's first login (Kafka makes them as it caches the token)."""


@dataclass(frozen=True)
class Created:
    error: ErrorCode
    info: TokenInformation | None = None
    hmac: bytes = b""


class DelegationTokenManager:
    """The tokens this broker knows (Kafka's ``DelegationTokenCache``) and the four operations on them."""

    def __init__(self, secret: str | None, max_lifetime_ms: int, expiry_time_ms: int, store: TokenStore | None, clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.secret = secret or None
        self.max_lifetime_ms = max_lifetime_ms
        self.expiry_time_ms = expiry_time_ms
        self.store = store
        """None until a cluster's broker has its ZooKeeper session (then :class:`~.delegation_token_zk.ZkTokenStore`)."""
        self.clock_ms = clock_ms
        self._tokens: dict[str, _Cached] = {}
        self._by_hmac: dict[bytes, str] = {}
        self._lock = threading.Lock()
        """Stores call :meth:`updated` from their own threads (ZooKeeper's watches)."""

    @property
    def enabled(self) -> bool:
        """Kafka's ``tokenAuthEnabled``: a non-empty secret key."""
        return self.secret is not None

    def start(self) -> None:
        """Every stored token into the cache (Kafka's ``loadCache``)."""
        if self.enabled:
            for token in self._store().load():
                self.updated(token.token_id, token)

    # -- the cache, as the store says ------------------------------------------------------------------------

    def updated(self, token_id: str, token: TokenInformation | None) -> None:
        """The store's word on a token: its information, or None once it is gone."""
        assert self.secret is not None
        with self._lock:
            old = self._tokens.pop(token_id, None)
            if old is not None:
                self._by_hmac.pop(old.hmac, None)
            if token is not None:
                digest = old.hmac if old is not None else token_hmac(token_id, self.secret)
                self._tokens[token_id] = _Cached(token, digest, old.credentials if old is not None else {})
                self._by_hmac[digest] = token_id

    def token(self, token_id: str) -> TokenInformation | None:
        cached = self._tokens.get(token_id)
        return cached.info if cached is not None else None

    def login(self, mechanism: str, token_id: str) -> tuple[ScramCredential, str, int] | None:
        """What a SCRAM login as the token is checked against (its password is the HMAC in base64), the
        owner it acts as (Kafka's ``DelegationTokenCache.owner``: the name, as a ``User``) and when it expires."""
        cached = self._tokens.get(token_id)
        if cached is None or mechanism not in SCRAM_MECHANISMS:
            return None
        credential = cached.credentials.get(mechanism)
        if credential is None:
            password = base64.b64encode(cached.hmac).decode()
            credential = cached.credentials[mechanism] = ScramCredential.from_password(SCRAM_MECHANISMS[mechanism], password, MIN_ITERATIONS)
        return credential, cached.info.owner.name, cached.info.expiry_timestamp

    # -- the operations --------------------------------------------------------------------------------------

    def create(self, owner: KafkaPrincipal, requester: KafkaPrincipal, renewers: list[KafkaPrincipal], max_lifetime_ms: int) -> Created:
        """Kafka's ``createToken``: the lifetime asked, capped by ``delegation.token.max.lifetime.ms``; the first
        expiry after ``delegation.token.expiry.time.ms``."""
        if self.secret is None:
            return Created(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        now = self.clock_ms()
        lifetime = self.max_lifetime_ms if max_lifetime_ms <= 0 else min(max_lifetime_ms, self.max_lifetime_ms)
        max_timestamp = now + lifetime
        token = TokenInformation(random_token_id(), owner, requester, tuple(renewers), now, max_timestamp, min(max_timestamp, now + self.expiry_time_ms))
        self._store().write(token)
        self.updated(token.token_id, token)
        return Created(ErrorCode.NONE, token, self._tokens[token.token_id].hmac)

    def _find(self, digest: bytes) -> TokenInformation | None:
        token_id = self._by_hmac.get(bytes(digest))
        return self.token(token_id) if token_id is not None else None

    def _renewable(self, principal: KafkaPrincipal, digest: bytes) -> TokenInformation | ErrorCode:
        """The token the HMAC names, if ``principal`` may renew or expire it; else why not."""
        if self.secret is None:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        token = self._find(digest)
        if token is None:
            return ErrorCode.DELEGATION_TOKEN_NOT_FOUND
        if not token.may_renew(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        return token

    def renew(self, principal: KafkaPrincipal, digest: bytes, renew_period_ms: int) -> tuple[ErrorCode, int]:
        """Kafka's ``renewToken``: the new expiry timestamp, never past the token's maximum."""
        token = self._renewable(principal, digest)
        if isinstance(token, ErrorCode):
            return token, ERROR_TIMESTAMP
        now = self.clock_ms()
        if token.expired(now):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
        expiry = min(token.max_timestamp, now + (self.expiry_time_ms if renew_period_ms < 0 else renew_period_ms))
        self._write(replace(token, expiry_timestamp=expiry))
        return ErrorCode.NONE, expiry

    def expire(self, principal: KafkaPrincipal, digest: bytes, expiry_period_ms: int) -> tuple[ErrorCode, int]:
        """Kafka's ``expireToken``: a negative period removes the token now; else its expiry moves to
        ``now + period``, never past its maximum."""
        token = self._renewable(principal, digest)
        if isinstance(token, ErrorCode):
            return token, ERROR_TIMESTAMP
        now = self.clock_ms()
        if expiry_period_ms < 0:
            self._remove(token.token_id)
            return ErrorCode.NONE, now
        if token.expired(now):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
        expiry = min(token.max_timestamp, now + expiry_period_ms)
        self._write(replace(token, expiry_timestamp=expiry))
        return ErrorCode.NONE, expiry

    def tokens(self, eligible: Callable[[TokenInformation], bool]) -> list[tuple[TokenInformation, bytes]]:
        """The tokens ``eligible`` keeps, with their HMACs (DescribeDelegationToken)."""
        return [(c.info, c.hmac) for c in list(self._tokens.values()) if eligible(c.info)]

    def expire_tokens(self) -> list[str]:
        """Kafka's ``expireTokens``, every ``delegation.token.expiry.check.interval.ms``: the ids removed."""
        now = self.clock_ms()
        gone = [c.info.token_id for c in list(self._tokens.values()) if c.info.expired(now)]
        for token_id in gone:
            self._remove(token_id)
        return gone

    def _store(self) -> TokenStore:
        assert self.store is not None, "the token store is bound before the broker serves"
        return self.store

    def _write(self, token: TokenInformation) -> None:
        self._store().write(token)
        self.updated(token.token_id, token)

    def _remove(self, token_id: str) -> None:
        self._store().delete(token_id)
        self.updated(token_id, None)


def describe_filter(requester: KafkaPrincipal, owners: list[KafkaPrincipal] | None, may_describe_token: Callable[[str], bool], may_describe_owner: Callable[[KafkaPrincipal], bool]) -> Callable[[TokenInformation], bool]:
    """Kafka's ``DelegationTokenManager.filterToken``: of the owners asked for (all if None), the tokens the
    requester owns, requested or renews, or may describe (DESCRIBE on the token, or DESCRIBE_TOKENS on its
    owner)."""

    def eligible(token: TokenInformation) -> bool:
        if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
            return False
        return token.owner_or_renewer(requester) or may_describe_token(token.token_id) or may_describe_owner(token.owner)

    return eligible


def token_manager(config: Any, store: TokenStore | None) -> DelegationTokenManager:
    """The broker's manager from its configuration (``delegation.token.master.key`` read when the secret is unset)."""
    secret = config["delegation.token.secret.key"] or config["delegation.token.master.key"]
    return DelegationTokenManager(secret, config["delegation.token.max.lifetime.ms"], config["delegation.token.expiry.time.ms"], store)
