"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer``, with users from the JAAS options ``user_<name>=
"<password>"`` (Kafka's ``PlainServerCallbackHandler``)."""

from __future__ import annotations

import hmac

from odradek.broker.security.sasl_mechanism import SaslAuthenticationError

PLAIN = "PLAIN"
_USER_PREFIX = "user_"


class PlainServer:
    mechanism = PLAIN
    credential_expiration_ms = None
    token_authenticated = False

    def __init__(self, jaas_options: dict[str, str]) -> None:
        self._options = jaas_options
        self.complete = False
        self.authorization_id = ""

    def evaluate(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", "replace").split("\x00", 3)
        if len(parts) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._options.get(_USER_PREFIX + username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""
