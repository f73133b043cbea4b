"""TLS for SSL and SASL_SSL listeners: the ``SSLContext`` built from Kafka's ``ssl.*`` keys, and one
connection's TLS session over memory buffers (sans-IO, as the connection is).

Keystores and truststores are PEM (``ssl.keystore.type=PEM``, as Kafka 3.x accepts: a file with the key and
its chain at ``ssl.keystore.location``, or the PEM text inline in ``ssl.keystore.certificate.chain`` and
``ssl.keystore.key``) or PKCS12 (read with the ``cryptography`` package, the ``tls`` extra, and handed to
``ssl`` as PEM). JKS is refused at start-up with a message saying so: no Python library reads it well. ``ssl.client.auth`` is none/requested/required; a client certificate gives the principal
(``ssl_principal.py``), no certificate ``User:ANONYMOUS``.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from dataclasses import dataclass
from typing import Callable

from odradek.broker.request_context import ANONYMOUS, KafkaPrincipal
from odradek.broker.security.ssl_principal import SslPrincipalMapper, distinguished_name
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


def server_context(setting: Callable[[str], object], listener: str) -> ssl.SSLContext:
    """The TLS context of a listener; ``setting(key)`` is the key's value for it (listener prefix first)."""

    def text(key: str) -> str | None:
        value = setting(key)
        return None if value in (None, "") else str(value)

    def items(key: str) -> list[str]:
        value = setting(key) or []
        return [p.strip() for p in (value.split(",") if isinstance(value, str) else value) if p.strip()]

    keystore_type = (text("ssl.keystore.type") or "JKS").upper()
    if keystore_type not in _STORE_TYPES:
        raise ConfigError(
            f"Listener {listener}: ssl.keystore.type={keystore_type} is not supported (odradek reads PEM and PKCS12): "
            "convert the keystore (keytool -importkeystore -deststoretype PKCS12) and set ssl.keystore.type"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    password = text("ssl.key.password")
    location, chain, key = text("ssl.keystore.location"), text("ssl.keystore.certificate.chain"), text("ssl.keystore.key")
    try:
        if keystore_type == "PKCS12":
            if location is None:
                raise ConfigError(f"Listener {listener}: a PKCS12 keystore needs ssl.keystore.location")
            chain, key = _pkcs12_key_and_chain(listener, location, text("ssl.keystore.password"))
            _load_inline_chain(context, chain, key, None)
        elif location is not None:
            context.load_cert_chain(location, password=password)
        elif chain is not None and key is not None:
            _load_inline_chain(context, chain, key, password)
        else:
            raise ConfigError(f"Listener {listener}: an SSL listener needs ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key")
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"Listener {listener}: failed to load the SSL keystore: {exc}") from exc
    truststore_type = (text("ssl.truststore.type") or "JKS").upper()
    trust_location, trust_inline = text("ssl.truststore.location"), text("ssl.truststore.certificates")
    if trust_location is not None or trust_inline is not None:
        if truststore_type not in _STORE_TYPES:
            raise ConfigError(f"Listener {listener}: ssl.truststore.type={truststore_type} is not supported (odradek reads PEM and PKCS12): convert it and set ssl.truststore.type")
        try:
            if truststore_type == "PKCS12" and trust_location is not None:
                context.load_verify_locations(cadata=_pkcs12_certificates(listener, trust_location, text("ssl.truststore.password")))
            elif trust_location is not None:
                context.load_verify_locations(cafile=trust_location)
            else:
                context.load_verify_locations(cadata=trust_inline)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"Listener {listener}: failed to load the SSL truststore: {exc}") from exc
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


_STORE_TYPES = ("PEM", "PKCS12")


def client_context(setting: Callable[[str], object], listener: str) -> ssl.SSLContext:
    """The TLS context of the broker's own connections to a listener (inter-broker): the server verified
    against the truststore, its name checked when ssl.endpoint.identification.algorithm is https (Kafka's
    default), the keystore's certificate offered if one is configured."""
    value = lambda key: None if setting(key) in (None, "") else str(setting(key))  # noqa: E731
    context = ssl.create_default_context()
    trust_type = (value("ssl.truststore.type") or "JKS").upper()
    location, inline = value("ssl.truststore.location"), value("ssl.truststore.certificates")
    if trust_type == "PKCS12" and location is not None:
        context.load_verify_locations(cadata=_pkcs12_certificates(listener, location, value("ssl.truststore.password")))
    elif location is not None:
        context.load_verify_locations(cafile=location)
    elif inline is not None:
        context.load_verify_locations(cadata=inline)
    context.check_hostname = (value("ssl.endpoint.identification.algorithm") or "").lower() == "https"
    keystore = value("ssl.keystore.location")
    if keystore is not None:
        if (value("ssl.keystore.type") or "JKS").upper() == "PKCS12":
            chain, key = _pkcs12_key_and_chain(listener, keystore, value("ssl.keystore.password"))
            _load_inline_chain(context, chain, key, None)
        else:
            context.load_cert_chain(keystore, password=value("ssl.key.password"))
    return context


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


def _pkcs12_key_and_chain(listener: str, location: str, password: str | None) -> tuple[str, str]:
    """The PEM chain and unencrypted PEM key of a PKCS12 keystore (its key entry's certificate first)."""
    from cryptography.hazmat.primitives import serialization

    store = _pkcs12(listener, location, password)
    if store.key is None or store.cert is None:  # type: ignore[attr-defined]
        raise ConfigError(f"Listener {listener}: the PKCS12 keystore {location} holds no private key with its certificate")
    certificates = [store.cert, *store.additional_certs]  # type: ignore[attr-defined]
    chain = "".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode() for c in certificates)
    key = store.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()  # type: ignore[attr-defined]
    return chain, key


def _pkcs12_certificates(listener: str, location: str, password: str | None) -> str:
    """A PKCS12 truststore's certificates, as PEM."""
    from cryptography.hazmat.primitives import serialization

    store = _pkcs12(listener, location, password)
    certificates = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)  # type: ignore[attr-defined]
    if not certificates:
        raise ConfigError(f"Listener {listener}: the PKCS12 truststore {location} holds no certificate")
    return "".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode() for c in certificates)


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
        return KafkaPrincipal.user(self._settings.principal_mapper.principal_name(distinguished_name(cert["subject"])))
