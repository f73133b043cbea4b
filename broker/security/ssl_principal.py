"""The principal of a TLS client certificate, as Kafka's ``DefaultKafkaPrincipalBuilder`` names it.

Kafka takes the certificate subject's distinguished name in RFC 2253 form (``X500Principal.getName()``:
the last RDN first, ``CN=client,OU=eng,O=Acme,C=US``) and passes it through ``ssl.principal.mapping.rules``
(``SslPrincipalMapper``): each ``RULE:pattern/replacement/[LU]`` in turn, the first whose pattern matches the
whole name gives the principal's name, ``DEFAULT`` keeps the name as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from odradek.storage.config_types import ConfigError

# X500Principal.getName(RFC2253) writes these attribute types by keyword, others as dotted OIDs.
_RFC2253_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "title": "2.5.4.12", "surname": "2.5.4.4", "givenName": "2.5.4.42"}


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


Subject = tuple[tuple[tuple[str, str], ...], ...]
"""A certificate's subject as ``getpeercert()`` gives it: its RDNs, each a tuple of (attribute, value)."""


def distinguished_name(subject: Subject) -> str:
    """RFC 2253 name of a subject as ``ssl.SSLObject.getpeercert()`` gives it (RDNs in certificate order)."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_RFC2253_KEYWORDS.get(k) or _OIDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if not self.pattern.fullmatch(name):
            return None
        # Java's Matcher.replaceAll on the whole name, with $1 for groups.
        result = self.pattern.sub(lambda m: re.sub(r"\$(\d)", lambda g: m.group(int(g.group(1))) or "", self.replacement), name, count=1)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


_RULE = re.compile(r"\s*((DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?)\s*)\s*(,|$)")


class SslPrincipalMapper:
    def __init__(self, rules: str) -> None:
        self.rules: list[_Rule] = []
        pos = 0
        text = rules.strip()
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ConfigError(f"Invalid rule: {text[pos:]}")
            if m.group(2):
                self.rules.append(_Rule(None))
            else:
                self.rules.append(_Rule(re.compile(m.group(3)), m.group(5), m.group(7)))
            pos = m.end()
        if not self.rules:
            self.rules.append(_Rule(None))

    def principal_name(self, distinguished: str) -> str:
        for rule in self.rules:
            name = rule.apply(distinguished)
            if name is not None:
                return name
        raise ValueError(f"No rules apply to {distinguished}, rules {self.rules}")
