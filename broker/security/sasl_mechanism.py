"""What every SASL mechanism's server side is (Kafka's ``SaslServer`` as the authenticator uses it), and the
JAAS configuration text the mechanisms read their options from."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol


class SaslAuthenticationError(Exception):
    """Authentication failed, with a message the client may see (Kafka's ``SaslAuthenticationException``)."""


class SaslError(Exception):
    """Authentication failed for a reason the client must not learn (Kafka's ``SaslException``): the client is
    told only that the credentials were invalid for the mechanism."""


class SaslServer(Protocol):
    mechanism: str

    def evaluate(self, token: bytes) -> bytes:
        """The challenge for a client token; raises SaslAuthenticationError or SaslError."""

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user (valid once complete)."""

    @property
    def credential_expiration_ms(self) -> int | None:
        """When the credential stops being valid (an OAuth token's ``exp``), bounding the session."""

    @property
    def token_authenticated(self) -> bool:
        """Logged in as a delegation token (SCRAM only)."""


@dataclass(frozen=True)
class JaasConfig:
    """One JAAS login module entry: ``<module> required key="value" ...;``."""

    login_module: str
    options: dict[str, str] = field(default_factory=dict)


_ENTRY = re.compile(r'\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?)\s*;\s*$', re.S)
_OPTION = re.compile(r'\s*([\w.\-$]+)\s*=\s*("((?:\\.|[^"\\])*)"|[^\s;"]+)')


def parse_jaas(text: str) -> JaasConfig:
    """Kafka's ``sasl.jaas.config`` value (one login module, as Kafka requires for this property)."""
    m = _ENTRY.fullmatch(text.strip())
    if m is None:
        raise ValueError("JAAS config entry not terminated by semi-colon" if not text.strip().endswith(";") else f"Invalid JAAS config: {text!r}")
    options: dict[str, str] = {}
    rest = m.group(3)
    pos = 0
    while pos < len(rest):
        om = _OPTION.match(rest, pos)
        if om is None:
            if rest[pos:].strip():
                raise ValueError(f"Invalid JAAS config option near {rest[pos:pos + 20]!r}")
            break
        value = om.group(3) if om.group(3) is not None else om.group(2)
        options[om.group(1)] = re.sub(r"\\(.)", r"\1", value) if om.group(3) is not None else value
        pos = om.end()
    return JaasConfig(m.group(1), options)
