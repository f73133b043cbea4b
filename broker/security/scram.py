"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ``ScramSaslServer``, and the
credentials it checks: salted, as Kafka stores them (``salt=...,stored_key=...,server_key=...,iterations=N``
under the user's config entity), behind a small :class:`CredentialStore`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from typing import Protocol

from odradek.broker.security.sasl_mechanism import SaslAuthenticationError, SaslError

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
"""Kafka's bounds: AlterUserScramCredentials refuses fewer or more (UNACCEPTABLE_CREDENTIAL)."""


@dataclass(frozen=True)
class ScramMechanism:
    name: str
    hash_name: str
    mechanism_type: int
    """The ``Mechanism`` number of Alter/DescribeUserScramCredentials."""

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()


SCRAM_MECHANISMS = {m.name: m for m in (ScramMechanism("SCRAM-SHA-256", "sha256", 1), ScramMechanism("SCRAM-SHA-512", "sha512", 2))}


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_password(cls, mechanism: ScramMechanism, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None) -> "ScramCredential":
        salt = salt if salt is not None else secrets.token_bytes(16)
        salted = hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)
        return cls.from_salted_password(mechanism, salted, salt, iterations)

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int) -> "ScramCredential":
        client_key = mechanism.hmac(salted, b"Client Key")
        return cls(salt, mechanism.hash(client_key), mechanism.hmac(salted, b"Server Key"), iterations)

    def to_config(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString``."""
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},server_key={b64(self.server_key)},iterations={self.iterations}"

    @classmethod
    def from_config(cls, text: str) -> "ScramCredential":
        fields = dict(item.split("=", 1) for item in text.split(","))
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]), base64.b64decode(fields["server_key"]), int(fields["iterations"]))


class TokenLogins(Protocol):
    """What a SCRAM login as a delegation token asks (the broker's ``DelegationTokenManager``)."""

    def login(self, mechanism: str, token_id: str) -> "tuple[ScramCredential, str, int] | None":
        """The token's credential, its owner's name and its expiry timestamp; None for no such token."""


class CredentialStore(Protocol):
    """Where SCRAM credentials live: the user's config entity (ZooKeeper ``/config/users/<user>`` in
    cluster mode; on a single node, a file in the metadata directory). Beside them, as in Kafka's
    ``CredentialProvider``, the delegation tokens a SCRAM login may name (None when disabled)."""

    @property
    def tokens(self) -> "TokenLogins | None": ...

    def credential(self, mechanism: str, user: str) -> ScramCredential | None: ...

    def credentials(self) -> dict[str, dict[str, ScramCredential]]:
        """user -> mechanism -> credential."""

    def alter(self, upsertions: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]) -> None:
        """Apply (user, mechanism, credential) upsertions and (user, mechanism) deletions at once."""


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in message.split(","):
        key, sep, value = item.partition("=")
        if not sep or len(key) != 1:
            raise SaslError(f"Invalid SCRAM message: {message!r}")
        out.setdefault(key, value)
    return out


def _username(sasl_name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ',' and ``=3D`` is '=' (Kafka's ``ScramFormatter.username``)."""
    return sasl_name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """Two client messages: client-first (gs2 header, user, nonce) answered with server-first (nonce, salt,
    iterations); client-final (channel binding, nonce, proof) answered with the server signature."""

    def __init__(self, mechanism: ScramMechanism, store: CredentialStore) -> None:
        self.mechanism = mechanism.name
        self._mechanism = mechanism
        self._store = store
        self.complete = False
        self.credential_expiration_ms: int | None = None
        """A delegation token's expiry: the session ends with it."""
        self.token_authenticated = False
        self.authorization_id = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self._credential is None:
            return self._client_first(token.decode("utf-8", "replace"))
        return self._client_final(token.decode("utf-8", "replace"))

    def _client_first(self, message: str) -> bytes:
        gs2, sep, bare = message.partition(",")
        authzid_part, sep2, bare = bare.partition(",")
        if not sep or not sep2 or gs2 not in ("n", "y") or (authzid_part and not authzid_part.startswith("a=")):
            raise SaslError(f"Invalid SCRAM client first message {message!r}")
        # after the user and the nonce come the extensions (Kafka's ScramExtensions: ``tokenauth=true``)
        items = bare.split(",")
        extensions = dict(i.split("=", 1) for i in items[2:] if len(i.partition("=")[0]) > 1 and "=" in i)
        attributes = _attributes(",".join(i for i in items if len(i.partition("=")[0]) <= 1))
        if "n" not in attributes or "r" not in attributes:
            raise SaslError(f"Invalid SCRAM client first message {message!r}")
        username = _username(attributes["n"])
        if extensions.get("tokenauth", "").lower() == "true":
            credential, authorization_id = self._token_credential(username)
        else:
            credential, authorization_id = self._store.credential(self.mechanism, username), username
        if credential is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        authzid = authzid_part[2:]
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslError(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} for {self.mechanism}")
        self.authorization_id = authorization_id
        self._credential = credential
        self._client_first_bare = bare
        self._nonce = attributes["r"] + base64.b64encode(os.urandom(18)).decode().replace("/", "-").replace("+", "_")
        self._server_first = f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},i={credential.iterations}"
        return self._server_first.encode()

    def _token_credential(self, token_id: str) -> tuple[ScramCredential | None, str]:
        """A login as a delegation token (Kafka's ``DelegationTokenCredentialCallback``): the token's
        credential, acting as its owner, the session bounded by the token's expiry."""
        tokens = self._store.tokens
        found = tokens.login(self.mechanism, token_id) if tokens is not None else None
        if found is None:
            raise SaslError(f"Token Authentication failed: Invalid tokenId : {token_id}")
        credential, owner, self.credential_expiration_ms = found
        self.token_authenticated = True
        return credential, owner

    def _client_final(self, message: str) -> bytes:
        if self.complete:
            raise SaslError("Unexpected challenge in Sasl server state COMPLETE")
        without_proof, sep, proof_part = message.rpartition(",p=")
        if not sep:
            raise SaslError("Invalid SCRAM client final message")
        attributes = _attributes(without_proof)
        if not attributes.get("r", "").endswith(self._nonce):  # Kafka's check (older librdkafka repeats its own nonce)
            raise SaslError("Invalid client nonce in the final client message.")
        assert self._credential is not None
        m = self._mechanism
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise SaslError("Invalid SCRAM client final message") from None
        signature = m.hmac(self._credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(m.hash(client_key), self._credential.stored_key):
            raise SaslError("Invalid client credentials")
        server_signature = m.hmac(self._credential.server_key, auth_message)
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)
