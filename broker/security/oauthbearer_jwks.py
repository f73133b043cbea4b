"""Kafka's secured OAUTHBEARER validator (``OAuthBearerValidatorCallbackHandler``): a signed JWT checked
against the keys of a JWKS (``sasl.oauthbearer.jwks.endpoint.url``), with the claim rules of Kafka's
``ValidatorAccessTokenValidator`` (which delegates them to jose4j's ``JwtConsumer``): any algorithm but
``none``, the key chosen by ``kid``; ``exp`` and ``iat`` required (``exp`` not before ``iat``), ``exp`` and ``nbf`` checked with
``sasl.oauthbearer.clock.skew.seconds`` of leeway; ``aud`` one of ``sasl.oauthbearer.expected.audience``
(and refused when present but none is expected, as jose4j does); ``iss`` equal to
``sasl.oauthbearer.expected.issuer``; the principal from ``sasl.oauthbearer.sub.claim.name``.

A ``file:`` JWKS is read once when the listener starts, as Kafka's ``JwksFileVerificationKeyResolver``. An
``http(s)`` JWKS endpoint is Kafka's ``RefreshingHttpsJwks``: fetched before the broker serves (a failure
refuses the start), fetched again every ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` on a thread of its own,
and at once, off the event loop, when a token names a key id it does not know (at most once a minute per
id): the token is refused, and the client's next attempt finds the rotated key. A failed fetch is retried
with the backoff keys and leaves the keys as they were. HTTPS is verified with the ``ssl.*`` options of the
listener's JAAS entry, as Kafka's ``JaasOptionsUtils`` does."""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import unquote, urlparse

from odradek.broker.security.oauthbearer import InvalidToken, ValidToken, jaas_ssl_context
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
    refresh_ms: int = 3600000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10000
    jaas_options: dict[str, str] = field(default_factory=dict)
    """The listener's JAAS options: an https endpoint's truststore (``ssl.truststore.location``, ...)."""


def jwks_file(url: str) -> Path | None:
    """The JWKS file a ``file:`` URL names (None for an http(s) endpoint), with Kafka's ``ConfigurationUtils``
    checks and messages."""
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
        return None
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
    try:
        return _parse_keys(path.read_bytes())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"The OAuth validator configuration encountered an error when initializing the VerificationKeyResolver: {path}: {exc}"
        ) from None


def _parse_keys(data: bytes) -> list[_Key]:
    import jwt

    keys = json.loads(data)["keys"]
    if not isinstance(keys, list):
        raise TypeError("keys is not a list")
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


class JwksFile:
    """A ``file:`` JWKS, read once."""

    def __init__(self, path: Path) -> None:
        self.keys = _load_keys(path)

    def maybe_expedite_refresh(self, key_id: str) -> None:
        pass


MISSING_KEY_ID_CACHE_MAX_ENTRIES = 16
MISSING_KEY_ID_CACHE_IN_FLIGHT_S = 60.0
MISSING_KEY_ID_MAX_KEY_LENGTH = 1000
FETCH_TIMEOUT_S = 10.0


class RefreshingJwks:
    """An http(s) JWKS endpoint (Kafka's ``RefreshingHttpsJwks``): the keys of the last good fetch, fetched
    again on a schedule and when a token names an unknown key id. Fetches never run on the event loop."""

    def __init__(self, url: str, settings: JwksValidatorSettings, clock: Callable[[], float] = time.monotonic) -> None:
        if settings.refresh_ms <= 0:
            raise ConfigError("JWKS validation key refresh configuration value retryWaitMs value must be positive")
        self.url = url
        self._settings = settings
        self._clock = clock
        self._ssl = jaas_ssl_context(settings.jaas_options) if url.lower().startswith("https:") else None
        self._lock = threading.Lock()
        self._refreshing = False
        self._missing: collections.OrderedDict[str, float] = collections.OrderedDict()
        try:
            self.keys = self._fetch()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"The OAuth validator configuration encountered an error when initializing the VerificationKeyResolver: Could not refresh JWKS from {url}: {exc}") from None
        log.info("JWKS validation key refresh thread started with a refresh interval of %d ms", settings.refresh_ms)
        threading.Thread(target=self._scheduled, name="jwks-refresh", daemon=True).start()

    def _fetch(self) -> list[_Key]:
        import urllib.request

        with urllib.request.urlopen(self.url, timeout=FETCH_TIMEOUT_S, context=self._ssl) as answer:  # noqa: S310 (the operator's URL)
            return _parse_keys(answer.read())

    def _scheduled(self) -> None:
        while True:
            time.sleep(self._settings.refresh_ms / 1000)
            self.refresh()

    def refresh(self) -> None:
        """Kafka's ``refresh`` with its ``Retry``: attempts with doubling waits within retry.backoff.max.ms; on
        failure the keys stay as they were."""
        with self._lock:
            if self._refreshing:
                return
            self._refreshing = True
        try:
            log.info("OAuth JWKS refresh of %s starting", self.url)
            s = self._settings
            end = self._clock() + s.retry_backoff_max_ms / 1000
            attempt = 0
            while True:
                attempt += 1
                try:
                    keys = self._fetch()
                    break
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    wait = min(s.retry_backoff_ms / 1000 * 2 ** (attempt - 1), end - self._clock())
                    if wait <= 0:
                        log.warning("OAuth JWKS refresh of %s encountered an error; not updating local JWKS cache: %s", self.url, exc)
                        return
                    log.warning("Attempt %d to make call resulted in an error; sleeping %d ms before retrying: %s", attempt, wait * 1000, exc)
                    time.sleep(wait)
            with self._lock:
                for key in keys:
                    self._missing.pop(str(key.jwk.get("kid")), None)
                self.keys = keys
            log.info("OAuth JWKS refresh of %s complete", self.url)
        finally:
            with self._lock:
                self._refreshing = False

    def maybe_expedite_refresh(self, key_id: str) -> None:
        """Kafka's ``maybeExpediteRefresh``: a refresh now for a key id not asked about in the last minute."""
        if len(key_id) > MISSING_KEY_ID_MAX_KEY_LENGTH:
            log.warning("Key ID %s (trimmed to first %d characters out of %d total) was too long to cache", key_id[:MISSING_KEY_ID_MAX_KEY_LENGTH], MISSING_KEY_ID_MAX_KEY_LENGTH, len(key_id))
            return
        now = self._clock()
        with self._lock:
            next_check = self._missing.get(key_id)
            if next_check is not None and next_check > now:
                return
            self._missing[key_id] = now + MISSING_KEY_ID_CACHE_IN_FLIGHT_S
            self._missing.move_to_end(key_id)
            while len(self._missing) > MISSING_KEY_ID_CACHE_MAX_ENTRIES:
                self._missing.popitem(last=False)
        threading.Thread(target=self.refresh, name="jwks-refresh-now", daemon=True).start()


log = logging.getLogger("odradek.oauthbearer")


class JwksValidator:
    """Validates one signed token; cheap enough (one signature check) to run on the event loop."""

    def __init__(self, settings: JwksValidatorSettings, clock: Callable[[], float] = time.time) -> None:
        """Raises ModuleNotFoundError (name ``jwt``) without PyJWT: the caller names the extra to install."""
        import jwt

        self._jwt = jwt
        self._settings = settings
        path = jwks_file(settings.jwks_url)
        self._source: JwksFile | RefreshingJwks = JwksFile(path) if path is not None else RefreshingJwks(settings.jwks_url, settings)
        self._clock = clock

    def _key(self, header: dict[str, Any]) -> jwt.PyJWK:
        """jose4j's ``JwksVerificationKeyResolver``: the one key with the token's ``kid`` (any, if it has
        none) that can verify its algorithm."""
        kid = header.get("kid")
        alg = header.get("alg")
        candidates = [
            k.key for k in self._source.keys
            if (kid is None or k.jwk.get("kid") == kid)
            and alg in _ALGORITHMS.get(k.key.key_type or "", ())  # PyJWK refuses a key without kty
            and k.jwk.get("alg", alg) == alg
            and k.jwk.get("use", "sig") == "sig"
        ]
        if len(candidates) != 1:
            if isinstance(kid, str):
                self._source.maybe_expedite_refresh(kid)
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
