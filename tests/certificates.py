"""Certificates for TLS tests, made with the ``openssl`` command: a CA, a broker certificate for
127.0.0.1/localhost, and client certificates with a subject of the test's choosing."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@dataclass(frozen=True)
class Pki:
    root: Path

    @property
    def ca(self) -> Path:
        return self.root / "ca.pem"

    def keystore(self, name: str) -> Path:
        """``name``'s key and certificate chain in one PEM file (Kafka's ssl.keystore.type=PEM)."""
        return self.root / f"{name}.keystore.pem"

    def key(self, name: str) -> Path:
        return self.root / f"{name}.key"

    def cert(self, name: str) -> Path:
        return self.root / f"{name}.pem"

    def issue(self, name: str, subject: str, *, server: bool = False, key_password: str | None = None) -> Path:
        """A certificate signed by the CA (subject as ``/CN=x/OU=y``); returns the keystore PEM."""
        root = self.root
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=root)
        extensions = root / f"{name}.ext"
        extensions.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n" if server else "extendedKeyUsage=clientAuth\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", extensions.name, cwd=root)
        key = self.key(name)
        if key_password is not None:
            _openssl("pkcs8", "-topk8", "-in", f"{name}.key", "-out", f"{name}.enc.key", "-passout", f"pass:{key_password}", cwd=root)
            key = root / f"{name}.enc.key"
        keystore = self.keystore(name)
        keystore.write_text(key.read_text() + self.cert(name).read_text() + self.ca.read_text())
        return keystore


def jks_stores(pki: Pki, name: str, password: str, *, key_password: str | None = None) -> tuple[Path, Path]:
    """``name``'s key and chain in a JKS keystore, and the CA in a JKS truststore, as Java's ``keytool``
    writes them (through PKCS12, which keytool imports from); ``key_password``: the key entry's own."""
    p12, keystore, truststore = pki.root / f"{name}.p12", pki.root / f"{name}.keystore.jks", pki.root / f"{name}.truststore.jks"
    for made in (p12, keystore, truststore):  # keytool adds to a store that exists: start afresh
        made.unlink(missing_ok=True)
    _openssl("pkcs12", "-export", "-in", str(pki.cert(name)), "-inkey", str(pki.key(name)), "-certfile", str(pki.ca), "-name", name, "-out", p12.name, "-passout", f"pass:{password}", cwd=pki.root)
    keytool = ["keytool", "-importkeystore", "-srckeystore", p12.name, "-srcstoretype", "PKCS12", "-srcstorepass", password, "-destkeystore", keystore.name, "-deststoretype", "JKS", "-deststorepass", password, "-noprompt"]
    subprocess.run(keytool + (["-destkeypass", key_password, "-alias", name] if key_password else []), cwd=pki.root, check=True, capture_output=True)
    subprocess.run(["keytool", "-importcert", "-alias", "ca", "-file", pki.ca.name, "-keystore", truststore.name, "-storetype", "JKS", "-storepass", password, "-noprompt"], cwd=pki.root, check=True, capture_output=True)
    return keystore, truststore


def make_pki(root: Path) -> Pki:
    root.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=odradek-test-ca", cwd=root)
    pki = Pki(root)
    pki.issue("broker", "/CN=localhost/OU=brokers", server=True)
    return pki
