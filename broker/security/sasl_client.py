"""The client side of SASL, for the broker's own connections to brokers (inter-broker traffic on a SASL
listener authenticates too) and odradek's tools: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802), as
Kafka's SaslClientAuthenticator drives them over SaslHandshake v1 and SaslAuthenticate."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Protocol

from odradek.broker.security.plain import PLAIN
from odradek.broker.security.scram import SCRAM_MECHANISMS, ScramMechanism


class SaslClientError(Exception):
    """The server's answer cannot be right (a SCRAM server that does not know the password)."""


class SaslClient(Protocol):
    mechanism: str

    def first(self) -> bytes: ...

    def respond(self, challenge: bytes) -> bytes | None:
        """The next token, or None when the exchange is complete."""


@dataclass
class PlainClient:
    username: str
    password: str
    mechanism: str = PLAIN

    def first(self) -> bytes:
        return f"\x00{self.username}\x00{self.password}".encode()

    def respond(self, challenge: bytes) -> bytes | None:
        return None


class ScramClient:
    def __init__(self, mechanism: ScramMechanism, username: str, password: str, token_auth: bool = False) -> None:
        """``token_auth``: log in as a delegation token (Kafka's ``tokenauth=true`` extension)."""
        self.mechanism = mechanism.name
        self._mechanism = mechanism
        self._username = username.replace("=", "=3D").replace(",", "=2C")
        self._password = password
        self._nonce = secrets.token_urlsafe(24)
        self._first_bare = f"n={self._username},r={self._nonce}" + (",tokenauth=true" if token_auth else "")
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if self._server_signature is not None:
            if not hmac.compare_digest(challenge, b"v=" + base64.b64encode(self._server_signature)):
                raise SaslClientError("Invalid server signature in the SCRAM server final message")
            return None
        server_first = challenge.decode()
        attributes = dict(item.split("=", 1) for item in server_first.split(","))
        nonce = attributes.get("r", "")
        if not nonce.startswith(self._nonce) or "s" not in attributes or "i" not in attributes:
            raise SaslClientError(f"Invalid SCRAM server first message {server_first!r}")
        m = self._mechanism
        salted = hashlib.pbkdf2_hmac(m.hash_name, self._password.encode(), base64.b64decode(attributes["s"]), int(attributes["i"]))
        client_key = m.hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        signature = m.hmac(m.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = m.hmac(m.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def sasl_client(mechanism: str, username: str, password: str, token_auth: bool = False) -> SaslClient:
    if mechanism == PLAIN:
        return PlainClient(username, password)
    if mechanism in SCRAM_MECHANISMS:
        return ScramClient(SCRAM_MECHANISMS[mechanism], username, password, token_auth)
    raise ValueError(f"odradek's client does not implement SASL mechanism {mechanism}")
