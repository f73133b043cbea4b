"""SASL/GSSAPI (Kerberos, RFC 4752) as Kafka's broker serves it through the JDK's ``GssKrb5Server``: the
client's GSS-API tokens accepted with the broker's keytab, then the security-layer negotiation (the broker
offers no layer beyond authentication, ``auth``, as Kafka's default ``qop``), and the client's Kerberos
principal mapped to a short name by ``sasl.kerberos.principal.to.local.rules`` (Kafka's
``KerberosShortNamer``).

The GSS-API is MIT Kerberos's own library (``libgssapi_krb5``, which Debian's Kerberos packages and most
systems have), called through :mod:`ctypes`: no Python package is needed, and a broker without a GSSAPI
listener never loads it. The realm's configuration is the system's (``/etc/krb5.conf`` or ``KRB5_CONFIG``),
as for the JVM's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import struct
from dataclasses import dataclass
from typing import Any, Callable

from odradek.broker.security.sasl_mechanism import SaslError

GSSAPI = "GSSAPI"

OM_uint32 = ctypes.c_uint32
GSS_C_ACCEPT = 2
GSS_S_COMPLETE = 0
GSS_S_CONTINUE_NEEDED = 1
ERROR_MASK = 0xFFFF0000
"""A major status with any calling or routine error bit set is a failure."""
GSS_C_GSS_CODE, GSS_C_MECH_CODE = 1, 2
NO_SECURITY_LAYER = 0x01
"""RFC 4752's only layer Kafka offers (``javax.security.sasl.qop=auth``)."""
MAX_BUFFER = 0xFFFFFF


class _Buffer(ctypes.Structure):
    _fields_ = [("length", ctypes.c_size_t), ("value", ctypes.c_void_p)]


class _KeyValue(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_char_p)]


class _KeyValueSet(ctypes.Structure):
    _fields_ = [("count", OM_uint32), ("elements", ctypes.POINTER(_KeyValue))]


class _Library:
    """The few GSS-API calls an acceptor makes, typed once."""

    def __init__(self) -> None:
        path = ctypes.util.find_library("gssapi_krb5") or "libgssapi_krb5.so.2"
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as exc:
            raise OSError(f"SASL mechanism GSSAPI needs MIT Kerberos's GSS-API library (libgssapi_krb5): {exc}") from None
        p, vp, buf = ctypes.POINTER, ctypes.c_void_p, ctypes.POINTER(_Buffer)
        self._sign("gss_acquire_cred_from", [p(OM_uint32), vp, OM_uint32, vp, ctypes.c_int, p(_KeyValueSet), p(vp), vp, p(OM_uint32)])
        self._sign("gss_accept_sec_context", [p(OM_uint32), p(vp), vp, buf, vp, p(vp), vp, buf, p(OM_uint32), p(OM_uint32), vp])
        self._sign("gss_display_name", [p(OM_uint32), vp, buf, vp])
        self._sign("gss_wrap", [p(OM_uint32), vp, ctypes.c_int, OM_uint32, buf, p(ctypes.c_int), buf])
        self._sign("gss_unwrap", [p(OM_uint32), vp, buf, buf, p(ctypes.c_int), p(OM_uint32)])
        self._sign("gss_release_buffer", [p(OM_uint32), buf])
        self._sign("gss_release_name", [p(OM_uint32), p(vp)])
        self._sign("gss_delete_sec_context", [p(OM_uint32), p(vp), vp])
        self._sign("gss_release_cred", [p(OM_uint32), p(vp)])
        self._sign("gss_import_name", [p(OM_uint32), buf, vp, p(vp)])
        self._sign("gss_init_sec_context", [p(OM_uint32), vp, p(vp), vp, vp, OM_uint32, OM_uint32, vp, buf, p(vp), buf, p(OM_uint32), p(OM_uint32)])
        self._sign("gss_display_status", [p(OM_uint32), OM_uint32, ctypes.c_int, vp, p(OM_uint32), buf])

    def _sign(self, name: str, argtypes: list[Any]) -> None:
        function = getattr(self.lib, name)
        function.argtypes = argtypes
        function.restype = OM_uint32

    def take(self, buffer: _Buffer) -> bytes:
        """The buffer's bytes, the buffer released."""
        data = ctypes.string_at(buffer.value, buffer.length) if buffer.length else b""
        minor = OM_uint32()
        self.lib.gss_release_buffer(ctypes.byref(minor), ctypes.byref(buffer))
        return data

    def status(self, major: int, minor: int) -> str:
        """The library's words for a failure (``gss_display_status`` of both codes)."""
        words = []
        for code, kind in ((major, GSS_C_GSS_CODE), (minor, GSS_C_MECH_CODE)):
            context = OM_uint32(0)
            while True:
                out, m = _Buffer(), OM_uint32()
                self.lib.gss_display_status(ctypes.byref(m), code, kind, None, ctypes.byref(context), ctypes.byref(out))
                text = self.take(out).decode("utf-8", "replace")
                if text:
                    words.append(text)
                if not context.value:
                    break
        return "; ".join(words)

    def oid(self, name: str) -> ctypes.c_void_p:
        """One of the library's exported name-type OIDs (``GSS_C_NT_HOSTBASED_SERVICE``, ...)."""
        return ctypes.c_void_p.in_dll(self.lib, name)

    def name(self, text: str, name_type: str) -> ctypes.c_void_p:
        data = text.encode()
        buffer = _Buffer(len(data), ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p))
        minor, imported = OM_uint32(), ctypes.c_void_p()
        self.check(f"import of the name {text}", self.lib.gss_import_name(ctypes.byref(minor), ctypes.byref(buffer), self.oid(name_type), ctypes.byref(imported)), minor)
        return imported

    def wrap(self, context: ctypes.c_void_p, data: bytes) -> bytes:
        """``gss_wrap`` without confidentiality: RFC 4752's security-layer messages are only integrity-protected."""
        return self._transform(context, data, unwrap=False)

    def unwrap(self, context: ctypes.c_void_p, data: bytes) -> bytes:
        return self._transform(context, data, unwrap=True)

    def _transform(self, context: ctypes.c_void_p, data: bytes, *, unwrap: bool) -> bytes:
        minor, out = OM_uint32(), _Buffer()
        incoming = _Buffer(len(data), ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p))
        if unwrap:
            major = self.lib.gss_unwrap(ctypes.byref(minor), context, ctypes.byref(incoming), ctypes.byref(out), None, None)
        else:
            major = self.lib.gss_wrap(ctypes.byref(minor), context, 0, 0, ctypes.byref(incoming), None, ctypes.byref(out))
        result = self.take(out)
        self.check("unwrap" if unwrap else "wrap", major, minor)
        return result

    def check(self, what: str, major: int, minor: OM_uint32) -> None:
        if major & ERROR_MASK:
            raise SaslError(f"GSSAPI {what} failed: {self.status(major, minor.value)}")


_library: _Library | None = None


def library() -> _Library:
    global _library
    if _library is None:
        _library = _Library()
    return _library


@dataclass(frozen=True)
class Acceptor:
    """The broker's Kerberos identity: the keytab and principal of the listener's ``Krb5LoginModule`` JAAS entry."""

    keytab: str
    principal: str

    def credential(self) -> ctypes.c_void_p:
        """Acceptor credentials from the keytab (for any of its keys: clients ask for the broker's principal)."""
        lib = library()
        element = _KeyValue(b"keytab", self.keytab.encode())
        store = _KeyValueSet(1, ctypes.pointer(element))
        minor, cred = OM_uint32(), ctypes.c_void_p()
        major = lib.lib.gss_acquire_cred_from(ctypes.byref(minor), None, 0, None, GSS_C_ACCEPT, ctypes.byref(store), ctypes.byref(cred), None, None)
        lib.check(f"credentials from keytab {self.keytab}", major, minor)
        return cred

    def check(self) -> None:
        """The keytab readable and holding keys."""
        cred, minor = self.credential(), OM_uint32()
        library().lib.gss_release_cred(ctypes.byref(minor), ctypes.byref(cred))


@dataclass(frozen=True)
class KerberosLogin:
    """How a client logs in (Kafka's ``Krb5LoginModule`` JAAS entry): with its keytab and principal, or, with
    neither, the default ticket cache (``kinit``); it asks for ``<service name>/<broker host>``."""

    service_name: str
    keytab: str | None = None
    principal: str | None = None

    def client(self, host: str) -> "GssapiClient":
        return GssapiClient(self, host)


GSS_C_INITIATE = 1
GSS_C_MUTUAL_FLAG, GSS_C_SEQUENCE_FLAG, GSS_C_INTEG_FLAG = 2, 8, 32


class GssapiClient:
    """The client side of RFC 4752 (the JDK's ``GssKrb5Client``): GSS-API tokens until the context is made,
    then the broker's wrapped offer answered with "no security layer"."""

    mechanism = GSSAPI

    def __init__(self, login: KerberosLogin, host: str) -> None:
        self._login = login
        self._host = host
        self._lib = library()
        self._cred = ctypes.c_void_p()
        self._target = ctypes.c_void_p()
        self._context = ctypes.c_void_p()
        self._established = False
        self._done = False

    def first(self) -> bytes:
        lib = self._lib
        if self._login.keytab is not None and self._login.principal is not None:
            # initial credentials from the keytab, kept in this client's own memory cache
            elements = (_KeyValue * 2)(_KeyValue(b"client_keytab", self._login.keytab.encode()), _KeyValue(b"ccache", f"MEMORY:odradek-{id(self)}".encode()))
            store = _KeyValueSet(2, elements)
            desired = lib.name(self._login.principal, "GSS_KRB5_NT_PRINCIPAL_NAME")
            minor = OM_uint32()
            major = lib.lib.gss_acquire_cred_from(ctypes.byref(minor), desired, 0, None, GSS_C_INITIATE, ctypes.byref(store), ctypes.byref(self._cred), None, None)
            lib.lib.gss_release_name(ctypes.byref(OM_uint32()), ctypes.byref(desired))
            self._check(f"credentials of {self._login.principal} from keytab {self._login.keytab}", major, minor)
        self._target = lib.name(f"{self._login.service_name}@{self._host}", "GSS_C_NT_HOSTBASED_SERVICE")
        return self._step(b"")

    def respond(self, challenge: bytes) -> bytes | None:
        if self._done:
            return None
        if not self._established:
            return self._step(challenge)
        # the broker's offer: the layers it supports (a bit mask) and its largest buffer
        offer = self._security_layer(self._lib.unwrap, challenge)
        if len(offer) != 4 or not offer[0] & NO_SECURITY_LAYER:
            self.close()
            raise _client_error(f"the broker offers no authentication-only layer ({offer[:1].hex()})")
        self._done = True
        answer = self._security_layer(self._lib.wrap, struct.pack(">B", NO_SECURITY_LAYER) + b"\x00\x00\x00")
        self.close()
        return answer

    def _step(self, token: bytes) -> bytes:
        lib, minor, out = self._lib, OM_uint32(), _Buffer()
        incoming = _Buffer(len(token), ctypes.cast(ctypes.c_char_p(token), ctypes.c_void_p))
        major = lib.lib.gss_init_sec_context(
            ctypes.byref(minor), self._cred or None, ctypes.byref(self._context), self._target, None,
            GSS_C_MUTUAL_FLAG | GSS_C_SEQUENCE_FLAG | GSS_C_INTEG_FLAG, 0, None, ctypes.byref(incoming) if token else None,
            None, ctypes.byref(out), None, None,
        )
        reply = lib.take(out)
        self._check("init_sec_context", major, minor)
        self._established = major == GSS_S_COMPLETE
        return reply

    def _security_layer(self, transform: "Callable[[ctypes.c_void_p, bytes], bytes]", data: bytes) -> bytes:
        try:
            return transform(self._context, data)
        except SaslError as exc:
            self.close()
            raise _client_error(str(exc)) from None

    def _check(self, what: str, major: int, minor: OM_uint32) -> None:
        try:
            self._lib.check(what, major, minor)
        except SaslError as exc:
            self.close()
            raise _client_error(str(exc)) from None

    def close(self) -> None:
        minor = OM_uint32()
        for handle, release in ((self._context, "gss_delete_sec_context"), (self._target, "gss_release_name"), (self._cred, "gss_release_cred")):
            if handle.value:
                if release == "gss_delete_sec_context":
                    self._lib.lib.gss_delete_sec_context(ctypes.byref(minor), ctypes.byref(handle), None)
                else:
                    getattr(self._lib.lib, release)(ctypes.byref(minor), ctypes.byref(handle))


def _client_error(message: str) -> Exception:
    from odradek.broker.security.sasl_client import SaslClientError

    return SaslClientError(message)


# -- Kafka's KerberosName and KerberosShortNamer -------------------------------------------------------------

_NAME = re.compile(r"([^/@]+)(/([^/@]+))?(@([^/@]+))?")
_RULE = re.compile(r"\s*((DEFAULT)|(RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?))")


@dataclass(frozen=True)
class KerberosName:
    service: str
    host: str | None
    realm: str | None

    @classmethod
    def parse(cls, text: str) -> "KerberosName":
        match = _NAME.fullmatch(text)
        if match is None:
            if "@" in text:
                raise ValueError(f"Malformed Kerberos name: {text}")
            return cls(text, None, None)
        return cls(match.group(1), match.group(3), match.group(5))


@dataclass(frozen=True)
class _Rule:
    default: bool
    components: int = 0
    format: str = ""
    match: re.Pattern[str] | None = None
    substitution: tuple[re.Pattern[str], str, bool] | None = None
    case: str | None = None

    def apply(self, name: KerberosName, default_realm: str) -> str | None:
        if self.default:
            return name.service if name.realm == default_realm else None
        parts = [name.realm or "", name.service] + ([name.host] if name.host is not None else [])
        if len(parts) - 1 != self.components:
            return None
        try:
            base = re.sub(r"\$(\d+)", lambda m: parts[int(m.group(1))], self.format)
        except IndexError:
            return None
        if self.match is not None and not self.match.fullmatch(base):
            return None
        if self.substitution is not None:
            pattern, replacement, every = self.substitution
            base = pattern.sub(replacement.replace("$", "\\"), base, count=0 if every else 1)
        if "@" in base or "/" in base:
            raise SaslError(f"Non-simple name {base} after auth_to_local rule {self}")
        return base.lower() if self.case == "L" else base.upper() if self.case == "U" else base


def parse_rules(rules: list[str]) -> list[_Rule]:
    """``sasl.kerberos.principal.to.local.rules`` (Kafka's ``KerberosRule`` syntax: ``DEFAULT`` and
    ``RULE:[n:format](regex)s/pattern/replacement/g/L``)."""
    parsed = []
    for text in rules:
        match = _RULE.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"Invalid rule: {text}")
        if match.group(2):
            parsed.append(_Rule(True))
            continue
        substitution = (re.compile(match.group(9)), match.group(10), match.group(11) == "g") if match.group(8) else None
        parsed.append(_Rule(False, int(match.group(4) or 0), match.group(5), re.compile(match.group(7)) if match.group(6) else None, substitution, match.group(12)))
    return parsed


def short_name(principal: str, rules: list[_Rule], default_realm: str) -> str:
    """Kafka's ``KerberosShortNamer.shortName``: the first rule that applies; a name without a realm as is."""
    name = KerberosName.parse(principal)
    if name.host is None and name.realm is None:
        return name.service
    for rule in rules:
        result = rule.apply(name, default_realm)
        if result is not None:
            return result
    raise SaslError(f"No rules apply to {principal}, rules {rules}")


def default_realm() -> str:
    """The realm of the Kerberos configuration (``krb5_get_default_realm``)."""
    krb5 = ctypes.CDLL(ctypes.util.find_library("krb5") or "libkrb5.so.3")
    context, realm = ctypes.c_void_p(), ctypes.c_char_p()
    if krb5.krb5_init_context(ctypes.byref(context)) != 0:
        return ""
    try:
        if krb5.krb5_get_default_realm(context, ctypes.byref(realm)) != 0 or realm.value is None:
            return ""
        value = realm.value.decode()
        krb5.krb5_free_default_realm(context, realm)
        return value
    finally:
        krb5.krb5_free_context(context)


# -- the SASL server ------------------------------------------------------------------------------------------


class GssapiServer:
    """One client's exchange: GSS-API tokens until the context is established, then the security-layer offer
    (wrapped) and the client's choice (wrapped), as the JDK's ``GssKrb5Server``."""

    mechanism = GSSAPI
    credential_expiration_ms = None
    token_authenticated = False

    def __init__(self, acceptor: Acceptor, rules: list[_Rule], realm: str) -> None:
        self._acceptor = acceptor
        self._rules = rules
        self._realm = realm
        self._lib = library()
        self._cred = acceptor.credential()
        self._context = ctypes.c_void_p()
        self._stage = 0
        self._peer = ""
        self.complete = False
        self.authorization_id = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._stage == 0:
                return self._accept(token)
            if self._stage == 1:
                if token:
                    raise SaslError("Handshake expecting no response data from server")
                return self._offer()
            return self._choice(token)
        except SaslError:
            self.close()
            raise

    def _accept(self, token: bytes) -> bytes:
        if not token:  # the JDK's acceptor: "Defective token detected"; MIT's would wait for one
            raise SaslError("GSSAPI accept_sec_context failed: Defective token detected")
        lib = self._lib
        minor, flags, source = OM_uint32(), OM_uint32(), ctypes.c_void_p()
        incoming = _Buffer(len(token), ctypes.cast(ctypes.c_char_p(token), ctypes.c_void_p))
        out = _Buffer()
        major = lib.lib.gss_accept_sec_context(
            ctypes.byref(minor), ctypes.byref(self._context), self._cred, ctypes.byref(incoming), None,
            ctypes.byref(source), None, ctypes.byref(out), ctypes.byref(flags), None, None,
        )
        reply = lib.take(out)
        lib.check("accept_sec_context", major, minor)
        if major == GSS_S_CONTINUE_NEEDED:
            return reply
        shown, m = _Buffer(), OM_uint32()
        lib.check("display_name", lib.lib.gss_display_name(ctypes.byref(m), source, ctypes.byref(shown), None), m)
        self._peer = lib.take(shown).decode()
        lib.lib.gss_release_name(ctypes.byref(m), ctypes.byref(source))
        self._stage = 1
        return reply if reply else self._offer()

    def _offer(self) -> bytes:
        """The layers the broker supports (authentication only) and its largest buffer, wrapped."""
        self._stage = 2
        return self._lib.wrap(self._context, struct.pack(">B", NO_SECURITY_LAYER) + MAX_BUFFER.to_bytes(3, "big"))

    def _choice(self, token: bytes) -> bytes:
        data = self._lib.unwrap(self._context, token)
        if len(data) < 4:
            raise SaslError("Final handshake message should be at least 4 bytes")
        if data[0] & NO_SECURITY_LAYER == 0:
            raise SaslError(f"Client selected unsupported protection: {data[0]}")
        # Kafka's callback authorizes the authenticated principal, whatever authorization id the client names
        self.authorization_id = short_name(self._peer, self._rules, self._realm)
        self.complete = True
        self.close()
        return b""


    def close(self) -> None:
        minor = OM_uint32()
        if self._context.value:
            self._lib.lib.gss_delete_sec_context(ctypes.byref(minor), ctypes.byref(self._context), None)
        if self._cred.value:
            self._lib.lib.gss_release_cred(ctypes.byref(minor), ctypes.byref(self._cred))
