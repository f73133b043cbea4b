"""A real MIT Kerberos KDC for the GSSAPI tests (Debian's ``krb5-kdc`` and ``krb5-admin-server``): its own
realm, database, ``krb5.conf`` and port in a temporary directory, principals with keytabs, stopped and removed
with the test's directory. Nothing outside the directory is touched: every program finds the realm through
``KRB5_CONFIG`` (and Java through ``-Djava.security.krb5.conf``)."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka_jvm import free_port

REALM = "ODRADEK.TEST"


@dataclass
class Kdc:
    root: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def krb5_conf(self) -> Path:
        return self.root / "krb5.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a Kerberos program needs to find this realm (and no replay cache outside the directory)."""
        return {**os.environ, "KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.root / "kdc.conf"), "KRB5RCACHETYPE": "none"}

    def start(self) -> "Kdc":
        self.root.mkdir(parents=True, exist_ok=True)
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {REALM}\n  dns_lookup_kdc = false\n  dns_lookup_realm = false\n  rdns = false\n"
            "  dns_canonicalize_hostname = false\n  udp_preference_limit = 1\n  ignore_acceptor_hostname = true\n"
            "[realms]\n"
            f"  {REALM} = {{\n    kdc = 127.0.0.1:{self.port}\n  }}\n"
            "[domain_realm]\n"
            f"  localhost = {REALM}\n"
        )
        (self.root / "kdc.conf").write_text(
            "[kdcdefaults]\n"
            f"  kdc_tcp_listen = 127.0.0.1:{self.port}\n  kdc_listen = 127.0.0.1:{self.port}\n"
            "[realms]\n"
            f"  {REALM} = {{\n    database_name = {self.root / 'principal'}\n    key_stash_file = {self.root / 'stash'}\n"
            f"    acl_file = {self.root / 'kadm5.acl'}\n    kdc_tcp_listen = 127.0.0.1:{self.port}\n    kdc_listen = 127.0.0.1:{self.port}\n  }}\n"
        )
        self._run("kdb5_util", "create", "-s", "-r", REALM, "-P", "master-password")
        self.process = subprocess.Popen(["krb5kdc", "-n", "-r", REALM, "-P", str(self.root / "kdc.pid")], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                import socket

                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the KDC did not start")

    def keytab(self, principal: str) -> Path:
        """The principal's keytab: made once, with a random key (asking again gives the same file)."""
        path = self.root / (principal.replace("/", "_") + ".keytab")
        if path.exists():
            return path
        self._run("kadmin.local", "-r", REALM, "-q", f"addprinc -randkey {principal}@{REALM}")
        self._run("kadmin.local", "-r", REALM, "-q", f"ktadd -k {path} {principal}@{REALM}")
        return path

    def _run(self, *command: str) -> None:
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
