"""Kafka's secured OAUTHBEARER validator (``OAuthBearerValidatorCallbackHandler``): a signed JWT checked
against the keys of a JWKS (``sasl.oauthbearer.jwks.endpoint.url``), with the claim rules of Kafka's
``ValidatorAccessTokenValidator`` (which delegates them to jose4j's ``JwtConsumer``): any algorithm but
``none``, the key chosen by ``kid``; ``exp`` and ``iat`` required (``exp`` not before ``iat``), ``exp`` and ``nbf`` checked with
``sasl.oauthbearer.clock.skew.seconds`` of leeway; ``aud`` one of ``sasl.oauthbearer.expected.audience``
(and refused when present but none is expected, as jose4j does); ``iss`` equal to
``sasl.oauthbearer.expected.issuer``; the principal from ``sasl.oauthbearer.sub.claim.name``.

Only ``file:`` JWKS URLs are implemented: Kafka reads that file once when the listener starts
(``JwksFileVerificationKeyResolver``), and so does this module, before the broker serves. An ``http(s)``
JWKS endpoint is refused at start-up."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import unquote, urlparse

from odradek.broker.security.oauthbearer import InvalidToken, ValidToken
from odradek.storage.config_types import ConfigError

if TYPE_CHECKING:
    import jwt  # PyJWT, of the tls extra: imported when a JwksValidator is made, not with this module

VALIDATOR_CLASSES = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
JWKS_URL = "sasl.oauthbearer.jwks.endpoint.url"

# The algorithms a key of each JWK type verifies (jose4j allows every one but "none").
_ALGORITHMS = {
    "RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    "EC": ("ES256", "ES384", "ES512"),
    "OKP": ("EdDSA",),
}


@dataclass(frozen=True)
class JwksValidatorSettings:
    """The OAUTHBEARER keys of one listener, as Kafka's ``AccessTokenValidatorFactory`` reads them."""

    jwks_url: str
    clock_skew_seconds: int
    expected_audience: tuple[str, ...]
    expected_issuer: str | None
    scope_claim_name: str
    sub_claim_name: str


def jwks_file(url: str) -> Path:
    """The JWKS file a ``file:`` URL names, with Kafka's ``ConfigurationUtils`` checks and messages."""
    parsed = urlparse(url)
    scheme = parsed.scheme.lower()
    if not scheme:
        raise ConfigError(f"The OAuth configuration option {JWKS_URL} contains a URL ({url}) that is missing the protocol")
    if scheme not in ("http", "https", "file"):
        raise ConfigError(
            f"The OAuth configuration option {JWKS_URL} contains a URL ({url}) that contains an invalid protocol ({scheme}); "
            'only "http", "https", and "file" protocol are supported'
        )
    if scheme != "file":
        raise ConfigError(f"{JWKS_URL}={url}: odradek reads the JWKS from a file: URL only (an HTTP(S) JWKS endpoint is not implemented)")
    path = Path(unquote(parsed.path))
    if not path.exists():
        raise ConfigError(f"The OAuth configuration option {JWKS_URL} contains a file ({path}) that doesn't exist")
    if path.is_dir():
        raise ConfigError(f"The OAuth configuration option {JWKS_URL} references a directory ({path}), not a file")
    return path


@dataclass(frozen=True)
class _Key:
    jwk: dict[str, Any]
    key: jwt.PyJWK


def _load_keys(path: Path) -> list[_Key]:
    """The usable keys of a JWKS file; a file that is not a JWKS stops the start, as Kafka's ``init`` does."""
    import jwt
    try:
        document = json.loads(path.read_text())
        keys = document["keys"]
        if not isinstance(keys, list):
            raise TypeError("keys is not a list")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"The OAuth validator configuration encountered an error when initializing the VerificationKeyResolver: {path}: {exc}"
        ) from None
    usable: list[_Key] = []
    for entry in keys:
        try:
            usable.append(_Key(entry, jwt.PyJWK(entry)))
        except (jwt.PyJWKError, jwt.InvalidKeyError):
            continue  # jose4j's JsonWebKeySet skips keys it cannot use, too
    return usable


def _claim_time(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"Could not extract the '{name}' claim from the access token")
    return float(value)


def _string_claim(claims: dict[str, Any], name: str) -> str:
    """Kafka's ``ClaimValidationUtils.validateString``: present, a string, not blank; trimmed."""
    value = claims.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidToken(f"Could not extract the '{name}' claim from the access token")
    if value is None:
        raise InvalidToken(f"{name} value must be non-null")
    if not value.strip():
        raise InvalidToken(f"{name} value must be non-empty" if not value else f"{name} value must not contain only whitespace")
    return value.strip()


class JwksValidator:
    """Validates one signed token; cheap enough (one signature check) to run on the event loop."""

    def __init__(self, settings: JwksValidatorSettings, clock: Callable[[], float] = time.time) -> None:
        """Raises ModuleNotFoundError (name ``jwt``) without PyJWT: the caller names the extra to install."""
        import jwt

        self._jwt = jwt
        self._settings = settings
        self._keys = _load_keys(jwks_file(settings.jwks_url))
        self._clock = clock

    def _key(self, header: dict[str, Any]) -> jwt.PyJWK:
        """jose4j's ``JwksVerificationKeyResolver``: the one key with the token's ``kid`` (any, if it has
        none) that can verify its algorithm."""
        kid = header.get("kid")
        alg = header.get("alg")
        candidates = [
            k.key for k in self._keys
            if (kid is None or k.jwk.get("kid") == kid)
            and alg in _ALGORITHMS.get(k.key.key_type or "", ())  # PyJWK refuses a key without kty
            and k.jwk.get("alg", alg) == alg
            and k.jwk.get("use", "sig") == "sig"
        ]
        if len(candidates) != 1:
            raise InvalidToken(f"Could not validate the access token: Unable to find a suitable verification key for JWS w/ header {json.dumps(header)}")
        return candidates[0]

    def __call__(self, compact: str) -> ValidToken:
        jwt = self._jwt
        sections = compact.split(".")
        if len(sections) != 3 or not all(sections):
            raise InvalidToken(f"Malformed JWT provided; expected three sections (header, payload, and signature), but {len(sections)} sections provided")
        try:
            header = jwt.get_unverified_header(compact)
        except jwt.DecodeError as exc:
            raise InvalidToken(f"Could not validate the access token: {exc}") from None
        if header.get("alg") in (None, "none"):
            raise InvalidToken("Could not validate the access token: 'none' algorithm is not permitted")
        key = self._key(header)
        try:
            claims = jwt.api_jws.PyJWS().decode(compact, key.key, algorithms=[header["alg"]])
            payload: Any = json.loads(claims)
        except (jwt.InvalidTokenError, ValueError) as exc:
            raise InvalidToken(f"Could not validate the access token: {exc}") from None
        if not isinstance(payload, dict):
            raise InvalidToken("Could not validate the access token: the payload is not a JSON object")
        return self._check_claims(payload)

    def _check_claims(self, claims: dict[str, Any]) -> ValidToken:
        s = self._settings
        now = self._clock()
        exp, iat, nbf = (_claim_time(claims, name) for name in ("exp", "iat", "nbf"))
        if exp is None:
            raise InvalidToken("Could not validate the access token: No Expiration Time (exp) claim present.")
        if iat is None:
            raise InvalidToken("Could not validate the access token: No Issued At (iat) claim present.")
        if now >= exp + s.clock_skew_seconds:
            raise InvalidToken(f"Could not validate the access token: The JWT is no longer valid - the evaluation time {now:.0f} is on or after the Expiration Time (exp={exp:.0f})")
        if exp < iat:
            raise InvalidToken(f"Could not validate the access token: The Expiration Time (exp={exp:.0f}) claim value cannot be before the Issued At (iat={iat:.0f}) claim value")
        if nbf is not None and now + s.clock_skew_seconds < nbf:
            raise InvalidToken(f"Could not validate the access token: The JWT is not yet valid as the evaluation time {now:.0f} is before the Not Before (nbf={nbf:.0f})")
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else None
        if audience is not None and audiences is None:
            raise InvalidToken("Could not extract the 'aud' claim from the access token")
        if s.expected_audience and audiences is None:
            raise InvalidToken("Could not validate the access token: No Audience (aud) claim present.")
        if audiences is not None and not s.expected_audience:
            raise InvalidToken(f"Could not validate the access token: Audience (aud) claim {audiences} present in the JWT but no expected audience value(s) were provided")
        if audiences is not None and not set(audiences) & set(s.expected_audience):
            raise InvalidToken(f"Could not validate the access token: Audience (aud) claim {audiences} doesn't contain an acceptable identifier. Expected {list(s.expected_audience)}")
        if s.expected_issuer is not None and claims.get("iss") != s.expected_issuer:
            raise InvalidToken(f"Could not validate the access token: Issuer (iss) claim value ({claims.get('iss')}) doesn't match expected value of {s.expected_issuer}")
        scope = claims.get(s.scope_claim_name)
        scopes = [scope] if isinstance(scope, str) else scope if isinstance(scope, list) else []
        for item in scopes:
            if not isinstance(item, str) or not item.strip():
                raise InvalidToken(f"{s.scope_claim_name} value must be non-empty strings")
        if len({item.strip() for item in scopes}) != len(scopes):
            raise InvalidToken(f"{s.scope_claim_name} value must not contain duplicates")
        principal = _string_claim(claims, s.sub_claim_name)
        if exp < 0 or iat < 0:
            raise InvalidToken("exp and iat values must be non-negative")
        return ValidToken(principal, int(exp * 1000))
