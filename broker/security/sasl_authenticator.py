"""Kafka's ``SaslServerAuthenticator``, sans-IO: the SASL exchange a connection on a SASL listener goes through
before any other request is served, and again to re-authenticate (KIP-368).

First an optional ApiVersions (answered by its handler), then SaslHandshake naming an enabled mechanism;
with SaslHandshake v1+ the mechanism's tokens travel in SaslAuthenticate requests (whose answer carries
``session_lifetime_ms``), with v0 as raw size-prefixed tokens. Any other request during the exchange fails
it. A failure is answered (when Kafka answers it: a refused mechanism, a failed SaslAuthenticate) and the
connection closed after ``connection.failed.authentication.delay.ms``.
"""

from __future__ import annotations

import enum
import re
import struct
import time
from dataclasses import dataclass, field
from typing import Callable

from odradek.broker.network.request_context import KafkaPrincipal
from odradek.broker.security.sasl_mechanism import SaslAuthenticationError, SaslError, SaslServer
from odradek.protocol.api import ApiKey, Request, encode_response
from odradek.protocol.errors import ErrorCode


@dataclass(frozen=True)
class SaslSettings:
    """A SASL listener's mechanisms (in ``sasl.enabled.mechanisms`` order), how to make each one's server,
    each one's ``connections.max.reauth.ms``, and the delay before closing a failed connection."""

    enabled: list[str]
    servers: dict[str, Callable[[], SaslServer]]
    max_reauth_ms: dict[str, int] = field(default_factory=dict)
    failed_delay_ms: int = 100
    max_receive_size: int = 524288
    """``sasl.server.max.receive.size``: the largest frame an unauthenticated client may send."""


class SaslState(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "handshake or versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATE_RAW = "authenticate (v0 raw tokens)"
    REAUTH_BAD_MECHANISM = "re-authentication with another mechanism"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Answer:
    """Send this frame; if the exchange is complete, the connection is authenticated."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Serve:
    """ApiVersions: let its handler answer."""


@dataclass(frozen=True, slots=True)
class Failed:
    """Send ``answer`` (if any) after the delay, then close; ``reason`` is Kafka's log text."""

    reason: str
    answer: bytes | None = None


Step = Answer | Serve | Failed


def kafka_api_name(request: Request) -> str:
    """The API as Kafka's ``ApiKeys`` enum names it in messages (``API_VERSIONS``)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", request.api.name).upper()


def _frame(request: Request, body: dict) -> bytes:
    header = request.header
    data, _ = encode_response(header.api_key, header.api_version, header.correlation_id, body)
    return data


GSSAPI = "GSSAPI"


class SaslServerAuthenticator:
    def __init__(self, settings: SaslSettings, *, reauthenticating: tuple[str, KafkaPrincipal] | None = None, wall_clock_ms: Callable[[], float] = lambda: time.time() * 1000) -> None:
        """``reauthenticating`` is the (mechanism, principal) of the session being renewed: neither may change."""
        self.settings = settings
        self.state = SaslState.HANDSHAKE if reauthenticating else SaslState.HANDSHAKE_OR_VERSIONS
        self.reauthenticating = reauthenticating
        self.mechanism: str | None = None
        self.server: SaslServer | None = None
        self.session_lifetime_ms: int | None = None
        """Set when complete: the session's lifetime if it has one (connections.max.reauth.ms, token expiry)."""
        self._wall_clock_ms = wall_clock_ms
        self._bad_mechanism = ""
        self.client_supports_reauthentication = False
        """Kafka's test: the client sent SaslAuthenticate v1+ (v0 clients know no session lifetime)."""

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def expects_raw_token(self) -> bool:
        return self.state is SaslState.AUTHENTICATE_RAW

    @property
    def principal(self) -> KafkaPrincipal:
        assert self.server is not None and self.server.complete
        return KafkaPrincipal.user(self.server.authorization_id)

    @property
    def token_authenticated(self) -> bool:
        """Logged in as a delegation token (SCRAM's ``tokenauth`` extension)."""
        return self.server is not None and self.server.token_authenticated

    @property
    def text(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    # -- Kafka requests --------------------------------------------------------------------------------------

    def request(self, request: Request) -> Step:
        api_key = request.header.api_key
        if self.state in (SaslState.HANDSHAKE_OR_VERSIONS, SaslState.HANDSHAKE):
            if api_key == ApiKey.ApiVersions and self.state is SaslState.HANDSHAKE_OR_VERSIONS:
                self.state = SaslState.HANDSHAKE
                return Serve()
            if api_key == ApiKey.SaslHandshake:
                return self._handshake(request)
            return self._fail(f"Unexpected Kafka request of type {kafka_api_name(request)} during SASL handshake.")
        if self.state is SaslState.AUTHENTICATE:
            if api_key != ApiKey.SaslAuthenticate:
                reason = f"Unexpected Kafka request of type {kafka_api_name(request)} during SASL authentication."
                return self._fail(reason, _error_answer(request, ErrorCode.ILLEGAL_SASL_STATE, reason))
            return self._authenticate(request)
        if self.state is SaslState.REAUTH_BAD_MECHANISM:
            return self._fail(self._bad_mechanism)
        return self._fail(f"Unexpected Kafka request of type {kafka_api_name(request)} in SASL state {self.state.value}")

    def not_a_request(self, frame: bytes) -> Step:
        """The first frame is no Kafka request: a Kafka 0.9 client's first GSSAPI token, sent without
        SaslHandshake. As Kafka 3.9, served as GSSAPI's raw exchange where GSSAPI is enabled, else refused."""
        if GSSAPI not in self.settings.enabled:
            return self._fail("Exception handling first SASL packet from client, GSSAPI is not supported by server")
        self.mechanism = GSSAPI
        self.server = self.settings.servers[GSSAPI]()
        self.state = SaslState.AUTHENTICATE_RAW
        return self.raw_token(frame)

    def _handshake(self, request: Request) -> Step:
        mechanism = request.body.mechanism
        enabled = self.settings.enabled
        if mechanism not in enabled:
            answer = _frame(request, {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled})
            return self._fail(f"Unsupported SASL mechanism {mechanism}", answer)
        if self.reauthenticating and mechanism != self.reauthenticating[0]:
            # Kafka answers the handshake, then fails the first SaslAuthenticate (REAUTH_BAD_MECHANISM)
            self.state = SaslState.REAUTH_BAD_MECHANISM
            self._bad_mechanism = f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication of mechanism '{self.reauthenticating[0]}'"
        else:
            self.mechanism = mechanism
            self.server = self.settings.servers[mechanism]()
            self.state = SaslState.AUTHENTICATE if request.header.api_version >= 1 else SaslState.AUTHENTICATE_RAW
        return Answer(_frame(request, {"error_code": ErrorCode.NONE, "mechanisms": enabled}))

    def _authenticate(self, request: Request) -> Step:
        assert self.server is not None
        self.client_supports_reauthentication |= request.header.api_version > 0
        try:
            token = self.server.evaluate(bytes(request.body.auth_bytes))
            if self.server.complete:
                self._check_principal()
        except SaslAuthenticationError as exc:
            return self._fail(str(exc), _frame(request, {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": str(exc), "auth_bytes": b""}))
        except SaslError:
            message = f"Authentication failed during {self.text} due to invalid credentials with SASL mechanism {self.mechanism}"
            return self._fail(message, _frame(request, {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": message, "auth_bytes": b""}))
        lifetime = self._complete() if self.server.complete else 0
        return Answer(_frame(request, {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": token, "session_lifetime_ms": lifetime}))

    # -- raw tokens (SaslHandshake v0) -----------------------------------------------------------------------

    def raw_token(self, token: bytes) -> Step:
        assert self.server is not None
        try:
            challenge = self.server.evaluate(token)
            if self.server.complete:
                self._check_principal()
        except (SaslAuthenticationError, SaslError) as exc:
            return self._fail(str(exc))
        if self.server.complete:
            self._complete()
            if self.mechanism == GSSAPI and not challenge:
                return Answer(b"")  # the JDK's GSSAPI server ends with no challenge, and Kafka then sends none
        return Answer(struct.pack(">i", len(challenge)) + challenge)

    # -- outcomes --------------------------------------------------------------------------------------------

    def _check_principal(self) -> None:
        if self.reauthenticating and self.reauthenticating[1] != self.principal:
            before, after = self.reauthenticating[1], self.principal
            raise SaslAuthenticationError(
                f"Cannot change principals during re-authentication from {before.principal_type}.{before.name}: {after.principal_type}.{after.name}"
            )

    def _complete(self) -> int:
        """Kafka's ``calcCompletionTimesAndReturnSessionLifetimeMs``."""
        assert self.server is not None and self.mechanism is not None
        self.state = SaslState.COMPLETE
        max_reauth = self.settings.max_reauth_ms.get(self.mechanism, 0)
        expiration = self.server.credential_expiration_ms
        if expiration is None and max_reauth <= 0:
            self.session_lifetime_ms = None
            return 0
        remaining = None if expiration is None else max(0, int(expiration - self._wall_clock_ms()))
        lifetime = max_reauth if remaining is None else remaining if max_reauth <= 0 else min(remaining, max_reauth)
        self.session_lifetime_ms = max(0, lifetime)
        return self.session_lifetime_ms

    def _fail(self, reason: str, answer: bytes | None = None) -> Failed:
        self.state = SaslState.FAILED
        return Failed(reason, answer)


def _error_answer(request: Request, code: ErrorCode, message: str) -> bytes | None:
    """Kafka's ``getErrorResponse`` of the request, for APIs whose response has a top-level error code."""
    version = request.header.api_version
    fields = request.api.response.fields
    if not any(f.name == "ErrorCode" and version in f.versions for f in fields):
        return None
    body: dict = {"error_code": code}
    if any(f.name == "ErrorMessage" and version in f.versions for f in fields):
        body["error_message"] = message
    return _frame(request, body)
