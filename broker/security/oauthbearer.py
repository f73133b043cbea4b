"""SASL/OAUTHBEARER (RFC 7628) as Kafka's ``OAuthBearerSaslServer``: the client's Bearer token is handed to
a validator (Kafka's ``sasl.server.callback.handler.class``), which gives the principal and the token's
``exp`` that bounds the session. An invalid token is answered with RFC 7628's JSON error as a challenge; the
client's ``%x01`` reply then fails the authentication with that JSON as the message.

The default validator is Kafka's unsecured JWS validator (``OAuthBearerUnsecuredValidatorCallbackHandler``):
an unsigned JWT (``alg: none``) whose principal claim (``sub`` unless ``unsecuredValidatorPrincipalClaimName``)
names the user; signed tokens are checked by :mod:`odradek.broker.security.oauthbearer_jwks`."""

from __future__ import annotations

import base64
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from odradek.broker.security.sasl_mechanism import SaslAuthenticationError, SaslError

OAUTHBEARER = "OAUTHBEARER"
_SEPARATOR = "\x01"

log = logging.getLogger("odradek.security")


class InvalidToken(Exception):
    """The token is refused; the message says why (logged, as Kafka logs it: the client only sees
    ``{"status":"invalid_token"}``)."""


@dataclass(frozen=True)
class ValidToken:
    principal: str
    expiration_ms: int


TokenValidator = Callable[[str], ValidToken]


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


class OAuthBearerServer:
    mechanism = OAUTHBEARER

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self.complete = False
        self.authorization_id = ""
        self.credential_expiration_ms: int | None = None
        self.token_authenticated = False
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error is not None:
            raise SaslAuthenticationError(self._error)
        self._error = None
        text = token.decode("utf-8", "replace")
        gs2, sep, rest = text.partition(_SEPARATOR)
        header = gs2.split(",")
        if not sep or len(header) < 2 or header[0] not in ("n", "y") or not rest.endswith(_SEPARATOR + _SEPARATOR):
            raise SaslError("Invalid OAUTHBEARER client first message")
        authzid = header[1][2:] if header[1].startswith("a=") else ""
        pairs = dict(kv.split("=", 1) for kv in rest.split(_SEPARATOR) if "=" in kv)
        auth = pairs.get("auth", "")
        if not auth.startswith("Bearer "):
            raise SaslError("Invalid OAUTHBEARER client first message: no Bearer token")
        try:
            valid = self._validator(auth[len("Bearer ") :].strip())
        except InvalidToken as exc:
            log.warning("OAUTHBEARER token refused: %s", exc)
            self._error = json.dumps({"status": "invalid_token"}, separators=(",", ":"))
            return self._error.encode()
        principal = valid.principal
        if authzid and authzid != principal:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different from the token's principal name ({principal})"
            )
        self.authorization_id = principal
        self.credential_expiration_ms = valid.expiration_ms
        self.complete = True
        return b""


class UnsecuredValidator:
    """Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``, configured by its JAAS options."""

    def __init__(self, jaas_options: dict[str, str]) -> None:
        self._principal_claim = (jaas_options.get("unsecuredValidatorPrincipalClaimName") or "sub").strip()
        self._scope_claim = (jaas_options.get("unsecuredValidatorScopeClaimName") or "scope").strip()
        self._required_scope = (jaas_options.get("unsecuredValidatorRequiredScope") or "").split()
        self._skew_ms = int((jaas_options.get("unsecuredValidatorAllowableClockSkewMs") or "0").strip())

    def __call__(self, compact: str) -> ValidToken:
        parts = compact.split(".")
        if len(parts) != 3 or parts[2]:
            raise InvalidToken("not an unsecured JWS: three sections, the last (signature) empty")
        try:
            header: Any = json.loads(_b64url(parts[0]))
            claims: Any = json.loads(_b64url(parts[1]))
        except ValueError:
            raise InvalidToken("not a JSON JWT") from None
        if not isinstance(header, dict) or header.get("alg") != "none" or not isinstance(claims, dict):
            raise InvalidToken('not an unsecured JWS: the header must say "alg": "none"')
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise InvalidToken(f"no principal: the {self._principal_claim} claim is missing or blank")
        now_ms = time.time() * 1000
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)) or now_ms - self._skew_ms >= exp * 1000:
            raise InvalidToken("the exp claim is missing or past")
        iat = claims.get("iat")
        if iat is not None and (not isinstance(iat, (int, float)) or iat * 1000 > now_ms + self._skew_ms or iat > exp):
            raise InvalidToken("the iat claim is not a time before now and exp")
        scope = claims.get(self._scope_claim, [])
        scopes = scope.split() if isinstance(scope, str) else scope if isinstance(scope, list) else []
        if any(s not in scopes for s in self._required_scope):
            raise InvalidToken(f"the scope lacks one of {self._required_scope}")
        return ValidToken(principal, int(exp * 1000))


# -- the client side (Kafka's OAuthBearerLoginModule and OAuthBearerSaslClient) --------------------------------

LOGIN_HANDLER_CLASSES = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
)
_UNSECURED = "unsecuredLogin"


@dataclass(frozen=True)
class OAuthBearerLogin:
    """How a client gets its token: with Kafka's secured login handler, from its token endpoint -- a ``file:``
    URL's token (read at each login, Kafka's ``FileTokenRetriever``) or an http(s) endpoint's answer to the
    client credentials grant of the JAAS ``clientId``/``clientSecret``/``scope`` (``HttpAccessTokenRetriever``);
    else an unsecured JWT (``alg: none``) made from the JAAS entry's ``unsecuredLogin*`` options, as Kafka's
    ``OAuthBearerUnsecuredLoginCallbackHandler``."""

    jaas_options: tuple[tuple[str, str], ...]
    token_file: str | None = None
    token_endpoint: str | None = None
    """An http(s) token endpoint (the client credentials grant)."""

    def token(self) -> str:
        if self.token_file is not None:
            with open(self.token_file) as f:
                return f.read().strip()
        options = dict(self.jaas_options)
        if self.token_endpoint is not None:
            return _client_credentials_token(self.token_endpoint, options)
        principal_claim = options.get(f"{_UNSECURED}PrincipalClaimName", "").strip() or "sub"
        now = time.time()
        claims: dict[str, Any] = {"exp": int(now + int(options.get(f"{_UNSECURED}LifetimeSeconds", "3600"))), "iat": now}
        for key, value in options.items():
            for kind in ("StringClaim_", "NumberClaim_", "ListClaim_"):
                if key.startswith(_UNSECURED + kind):
                    name = key[len(_UNSECURED + kind):]
                    claims[name] = value if kind == "StringClaim_" else float(value) if kind == "NumberClaim_" else [v for v in value[1:].split(value[:1]) if v]
        if not isinstance(claims.get(principal_claim), str) or not claims[principal_claim].strip():
            raise ValueError(f"No principal name in JWT claim: {principal_claim}")
        encode = lambda document: base64.urlsafe_b64encode(json.dumps(document, separators=(",", ":")).encode()).rstrip(b"=").decode()  # noqa: E731
        return f"{encode({'alg': 'none'})}.{encode(claims)}."

    def client(self) -> "OAuthBearerClient":
        return OAuthBearerClient(self)


class OAuthBearerClient:
    """RFC 7628's client: the Bearer token in the first message; an error challenge answered with ``%x01``,
    after which the server refuses the login with its message."""

    mechanism = OAUTHBEARER

    def __init__(self, login: OAuthBearerLogin) -> None:
        self._login = login

    def first(self) -> bytes:
        try:
            token = self._login.token()
        except (OSError, ValueError) as exc:  # an unreachable or refusing token endpoint, a bad answer
            from odradek.broker.security.sasl_client import SaslClientError

            raise SaslClientError(f"Could not get an OAUTHBEARER token: {exc}") from None
        return f"n,,{_SEPARATOR}auth=Bearer {token}{_SEPARATOR}{_SEPARATOR}".encode()

    def respond(self, challenge: bytes) -> bytes | None:
        return _SEPARATOR.encode() if challenge else None


def _client_credentials_token(url: str, options: dict[str, str]) -> str:
    """Kafka's ``HttpAccessTokenRetriever``: a POST of ``grant_type=client_credentials`` (and ``scope``) with
    the client's id and secret as HTTP Basic authentication; the answer's ``access_token``. An https endpoint
    is verified with the JAAS entry's ``ssl.*`` options."""
    import urllib.parse
    import urllib.request

    client_id, client_secret = options.get("clientId", ""), options.get("clientSecret", "")
    if not client_id or not client_secret:
        raise ValueError("The OAuth configuration option clientId and clientSecret must be provided for the token endpoint")
    body = "grant_type=client_credentials"
    if options.get("scope", "").strip():
        body += "&scope=" + urllib.parse.quote_plus(options["scope"].strip())
    credentials = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
    request = urllib.request.Request(url, data=body.encode(), method="POST", headers={
        "Authorization": f"Basic {credentials}", "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json", "Cache-Control": "no-cache",
    })
    context = jaas_ssl_context(options) if url.lower().startswith("https:") else None
    with urllib.request.urlopen(request, timeout=10, context=context) as answer:  # noqa: S310 (the operator's URL)
        document = json.loads(answer.read())
    token = document.get("access_token") if isinstance(document, dict) else None
    if not isinstance(token, str) or not token.strip():
        raise ValueError("The token endpoint response did not contain an access_token value")
    return token.strip()


def jaas_ssl_context(options: dict[str, str]) -> Any:
    """Kafka's ``JaasOptionsUtils.createSSLSocketFactory``: the client TLS settings among an OAUTHBEARER JAAS
    entry's options, with Kafka's client defaults (the server's name checked), for its https endpoints."""
    from odradek.broker.security.tls import client_context

    defaults = {"ssl.endpoint.identification.algorithm": "https", "ssl.truststore.type": "JKS", "ssl.keystore.type": "JKS"}
    return client_context(lambda key: options.get(key, defaults.get(key)), "JWKS endpoint")
