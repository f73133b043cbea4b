"""TLS for SSL and SASL_SSL listeners: the ``SSLContext`` built from Kafka's ``ssl.*`` keys, and one
connection's TLS session over memory buffers (sans-IO, as the connection is).

Keystores and truststores are PEM (``ssl.keystore.type=PEM``, as Kafka 3.x accepts: a file with the key and
its chain at ``ssl.keystore.location``, or the PEM text inline in ``ssl.keystore.certificate.chain`` and
``ssl.keystore.key``), PKCS12 (read with the ``cryptography`` package) or JKS, Kafka's default type (read
with ``pyjks``); both packages are the ``tls`` extra, and the stores are handed to ``ssl`` as PEM. A key
entry's password is ``ssl.key.password``, else the store's password, as in Kafka. ``ssl.client.auth`` is
none/requested/required; a client certificate gives the principal (``ssl_principal.py``), no certificate
``User:ANONYMOUS``.
"""

from __future__ import annotations

import base64
import os
import re
import ssl
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, cast

from odradek.broker.network.request_context import ANONYMOUS, KafkaPrincipal
from odradek.broker.security.ssl_principal import SslPrincipalMapper, Subject, distinguished_name
from odradek.storage.config_types import ConfigError

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3, "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1": ssl.TLSVersion.TLSv1}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


_IANA_SUITE = re.compile(r"TLS_(RSA|DHE_RSA|ECDHE_RSA|ECDHE_ECDSA)_WITH_(?:AES_(128|256)_(GCM|CBC)|(CHACHA20_POLY1305))_(SHA|SHA256|SHA384)")


def _openssl_cipher(name: str) -> str:
    """A TLS 1.2 suite as Kafka (JSSE) names it, ``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``, in OpenSSL's
    spelling, ``ECDHE-RSA-AES128-GCM-SHA256``; any other name is passed to OpenSSL as it is."""
    m = _IANA_SUITE.fullmatch(name)
    if m is None:
        return name
    kx, bits, mode, chacha, mac = m.groups()
    prefix = "" if kx == "RSA" else kx.replace("_", "-") + "-"
    if chacha:
        return prefix + "CHACHA20-POLY1305"
    return f"{prefix}AES{bits}-GCM-{mac}" if mode == "GCM" else f"{prefix}AES{bits}-{mac}"


TlsSetting = Callable[[str], "str | list[str] | None"]
"""A listener's TLS key as configured (listener prefix first): a string, a LIST key's items, or None."""


def server_context(setting: TlsSetting, listener: str) -> ssl.SSLContext:
    """The TLS context of a listener; ``setting(key)`` is the key's value for it (listener prefix first)."""

    def text(key: str) -> str | None:
        value = setting(key)
        return None if value in (None, "") else str(value)

    def items(key: str) -> list[str]:
        value = setting(key) or []
        return [p.strip() for p in (value.split(",") if isinstance(value, str) else value) if p.strip()]

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_keystore(context, text, listener)
    _load_truststore(context, text, listener)
    client_auth = (text("ssl.client.auth") or "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise ConfigError(f"Invalid value {client_auth} for configuration ssl.client.auth: String must be one of: required, requested, none")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    enabled = items("ssl.enabled.protocols")
    unknown = [p for p in enabled if p not in _PROTOCOLS]
    if unknown or not enabled:
        raise ConfigError(f"Listener {listener}: unsupported ssl.enabled.protocols {','.join(unknown) or '(none)'}")
    versions = sorted(_PROTOCOLS[p] for p in enabled)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    suites = items("ssl.cipher.suites")
    tls12 = [_openssl_cipher(s) for s in suites if not s.startswith("TLS_AES_") and not s.startswith("TLS_CHACHA20_")]
    if tls12:
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError as exc:
            raise ConfigError(f"Listener {listener}: no usable cipher in ssl.cipher.suites={','.join(suites)}") from exc
    context.options |= ssl.OP_NO_COMPRESSION
    return context


def client_context(setting: TlsSetting, listener: str) -> ssl.SSLContext:
    """The TLS context of the broker's own connections to a listener (inter-broker): the server verified
    against the truststore, its name checked when ssl.endpoint.identification.algorithm is https (Kafka's
    default), the keystore's certificate offered if one is configured."""
    value = lambda key: None if setting(key) in (None, "") else str(setting(key))  # noqa: E731
    context = ssl.create_default_context()
    _load_truststore(context, value, listener)
    context.check_hostname = (value("ssl.endpoint.identification.algorithm") or "").lower() == "https"
    if value("ssl.keystore.location") is not None or value("ssl.keystore.certificate.chain") is not None:
        _load_keystore(context, value, listener)
    return context


Setting = Callable[[str], "str | None"]
"""A TLS key's value for the listener (listener prefix first), None when unset or empty."""


def _load_keystore(context: ssl.SSLContext, text: Setting, listener: str) -> None:
    """The certificate chain and private key of ``ssl.keystore.*``: a PEM file or inline PEM, or a PKCS12
    or JKS file read into PEM."""
    store_type = (text("ssl.keystore.type") or "JKS").upper()
    location, key_password = text("ssl.keystore.location"), text("ssl.key.password")
    try:
        if store_type in _KEYSTORE_READERS:
            if location is None:
                raise ConfigError(f"Listener {listener}: a {store_type} keystore needs ssl.keystore.location")
            chain, key = _KEYSTORE_READERS[store_type](listener, location, text("ssl.keystore.password"), key_password)
            _load_inline_chain(context, chain, key, None)
        elif store_type != "PEM":
            raise ConfigError(f"Listener {listener}: ssl.keystore.type={store_type} is not supported (odradek reads {', '.join(STORE_TYPES)})")
        elif location is not None:
            context.load_cert_chain(location, password=key_password)
        elif (chain_pem := text("ssl.keystore.certificate.chain")) is not None and (key_pem := text("ssl.keystore.key")) is not None:
            _load_inline_chain(context, chain_pem, key_pem, key_password)
        else:
            raise ConfigError(f"Listener {listener}: an SSL listener needs ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key")
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"Listener {listener}: failed to load the SSL keystore: {exc}") from exc


def _load_truststore(context: ssl.SSLContext, text: Setting, listener: str) -> None:
    """The CA certificates of ``ssl.truststore.*`` (a PEM file or inline PEM, or a PKCS12 or JKS file), if
    any are configured."""
    store_type = (text("ssl.truststore.type") or "JKS").upper()
    location, inline = text("ssl.truststore.location"), text("ssl.truststore.certificates")
    if location is None and inline is None:
        return
    try:
        if store_type in _TRUSTSTORE_READERS and location is not None:
            context.load_verify_locations(cadata=_TRUSTSTORE_READERS[store_type](listener, location, text("ssl.truststore.password")))
        elif store_type not in STORE_TYPES:
            raise ConfigError(f"Listener {listener}: ssl.truststore.type={store_type} is not supported (odradek reads {', '.join(STORE_TYPES)})")
        elif location is not None:
            context.load_verify_locations(cafile=location)
        else:
            context.load_verify_locations(cadata=inline)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"Listener {listener}: failed to load the SSL truststore: {exc}") from exc


def _pkcs12(listener: str, location: str, password: str | None) -> object:
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError(f"Listener {listener}: PKCS12 stores need the cryptography package (pip install 'odradek[tls]')") from None
    try:
        with open(location, "rb") as f:
            return pkcs12.load_pkcs12(f.read(), password.encode() if password else None)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"Listener {listener}: failed to read the PKCS12 store {location}: {exc}") from None


def _pkcs12_key_and_chain(listener: str, location: str, password: str | None, key_password: str | None) -> tuple[str, str]:
    """The PEM chain and unencrypted PEM key of a PKCS12 keystore (its key entry's certificate first); the
    store's password opens its key too (``key_password`` is JKS's)."""
    store = _pkcs12(listener, location, password)  # first: it names the tls extra when cryptography is missing
    from cryptography.hazmat.primitives import serialization

    if store.key is None or store.cert is None:  # type: ignore[attr-defined]
        raise ConfigError(f"Listener {listener}: the PKCS12 keystore {location} holds no private key with its certificate")
    certificates = [store.cert, *store.additional_certs]  # type: ignore[attr-defined]
    chain = "".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode() for c in certificates)
    key = store.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()  # type: ignore[attr-defined]
    return chain, key


def _pkcs12_certificates(listener: str, location: str, password: str | None) -> str:
    """A PKCS12 truststore's certificates, as PEM."""
    store = _pkcs12(listener, location, password)
    from cryptography.hazmat.primitives import serialization

    certificates = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)  # type: ignore[attr-defined]
    if not certificates:
        raise ConfigError(f"Listener {listener}: the PKCS12 truststore {location} holds no certificate")
    return "".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode() for c in certificates)


def _jks(listener: str, location: str, password: str | None) -> Any:
    try:
        import jks
    except ImportError:
        raise ConfigError(f"Listener {listener}: JKS stores need the pyjks package (pip install 'odradek[tls]')") from None
    try:
        return jks.KeyStore.load(location, password or "", try_decrypt_keys=False)
    except (OSError, jks.util.KeystoreException) as exc:
        raise ConfigError(f"Listener {listener}: failed to read the JKS store {location}: {exc or type(exc).__name__}") from None


def _pem(kind: str, der: bytes) -> str:
    body = base64.encodebytes(der).decode().replace("\n", "")
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {kind}-----\n{lines}\n-----END {kind}-----\n"


def _jks_key_and_chain(listener: str, location: str, password: str | None, key_password: str | None) -> tuple[str, str]:
    """The PEM chain and PKCS#8 key of a JKS keystore's key entry, decrypted with ``ssl.key.password`` or
    else the store password (Kafka's rule)."""
    store = _jks(listener, location, password)  # first: it names the tls extra when pyjks is missing
    import jks

    if not store.private_keys:
        raise ConfigError(f"Listener {listener}: the JKS keystore {location} holds no private key entry")
    entry = next(iter(store.private_keys.values()))
    try:
        entry.decrypt(key_password or password or "")
    except jks.util.DecryptionFailureException:
        raise ConfigError(f"Listener {listener}: cannot recover the key of the JKS keystore {location}: wrong ssl.key.password") from None
    return "".join(_pem("CERTIFICATE", der) for _, der in entry.cert_chain), _pem("PRIVATE KEY", entry.pkey_pkcs8)


def _jks_certificates(listener: str, location: str, password: str | None) -> str:
    """A JKS truststore's trusted certificates, as PEM."""
    store = _jks(listener, location, password)
    if not store.certs:
        raise ConfigError(f"Listener {listener}: the JKS truststore {location} holds no certificate")
    return "".join(_pem("CERTIFICATE", entry.cert) for entry in store.certs.values())


_KEYSTORE_READERS: dict[str, Callable[[str, str, "str | None", "str | None"], tuple[str, str]]] = {"PKCS12": _pkcs12_key_and_chain, "JKS": _jks_key_and_chain}
_TRUSTSTORE_READERS: dict[str, Callable[[str, str, "str | None"], str]] = {"PKCS12": _pkcs12_certificates, "JKS": _jks_certificates}
STORE_TYPES = ("PEM", *_KEYSTORE_READERS)
"""``ssl.keystore.type`` / ``ssl.truststore.type`` values odradek reads."""


def _load_inline_chain(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """``load_cert_chain`` reads files only: the inline PEM goes through a private temporary file."""
    fd, path = tempfile.mkstemp(prefix="odradek-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


@dataclass
class TlsSettings:
    """What a TLS listener's connections share."""

    context: ssl.SSLContext
    principal_mapper: SslPrincipalMapper


class TlsSession:
    """One connection's TLS, over memory BIOs: the socket's bytes go in with ``receive``, plaintext comes
    out; plaintext goes in with ``send``, and ``outgoing()`` is what to write to the socket."""

    __slots__ = ("_in", "_out", "_tls", "_settings", "handshake_done", "peer_closed")

    def __init__(self, settings: TlsSettings) -> None:
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = settings.context.wrap_bio(self._in, self._out, server_side=True)
        self._settings = settings
        self.handshake_done = False
        self.peer_closed = False
        """The client sent its close_notify: ours is in ``outgoing()``, and the connection ends."""

    def receive(self, data: bytes | memoryview) -> bytes:
        """Raises ``ssl.SSLError`` on a failed handshake or a damaged record (the connection is closed)."""
        self._in.write(data)
        if not self.handshake_done:
            try:
                self._tls.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            self.handshake_done = True
        chunks = []
        while True:
            try:
                chunk = self._tls.read(256 * 1024)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                chunk = b""
            if not chunk:
                # The client's close_notify (read gives b"" or raises, by Python version): answer with ours,
                # as a client may wait for it (asyncio's SSL transport, 30 s by default).
                self.peer_closed = True
                try:
                    self._tls.unwrap()
                except ssl.SSLError:
                    pass
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def send(self, data: bytes | memoryview) -> None:
        self._tls.write(data)

    def outgoing(self) -> bytes:
        return self._out.read()

    def principal(self) -> KafkaPrincipal:
        """The client certificate's principal after the handshake, ANONYMOUS without one."""
        cert = self._tls.getpeercert()
        if not cert:
            return ANONYMOUS
        return KafkaPrincipal.user(self._settings.principal_mapper.principal_name(distinguished_name(cast(Subject, cert["subject"]))))
