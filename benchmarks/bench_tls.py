"""Fetch over TLS: record data cannot go from the page cache to the socket with sendfile (the kernel would
send it unencrypted; kernel TLS is not used), so the broker reads each fetch slice into memory in 256 KiB
chunks and encrypts it through the connection's TLS session. This measures what that costs against the
plaintext sendfile path: the same 10 KiB records consumed by confluent-kafka over PLAINTEXT and over SSL
from one broker, with the broker's CPU time per GB."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

from run import Result

from odradek import Broker
from odradek.tools.perf import consume, produce
from odradek.tests.certificates import make_pki

SCALE = float(os.environ.get("ODRADEK_BENCH_SCALE", "1.0"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run() -> list[Result]:
    n = max(1000, int(100_000 * SCALE))
    with tempfile.TemporaryDirectory() as d:
        pki = make_pki(Path(d) / "pki")
        plain, tls = _free_port(), _free_port()
        config = {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.keystore("broker")),
        }
        with Broker(log_dir=Path(d) / "logs", subprocess=True, config=config) as broker:
            produce(f"127.0.0.1:{plain}", "tls", n, 10_240, acks="1", linger_ms=5, batch_size=1_000_000)
            results = []
            for name, port, extra in (("PLAINTEXT (sendfile)", plain, {}), ("SSL (read + encrypt)", tls, {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)})):
                consumed = consume(f"127.0.0.1:{port}", "tls", n, broker_pid=broker.pid, extra=extra)
                results.append(Result(f"consume 10 KiB records over {name}", consumed.mb_per_s, "MB/s"))
                if consumed.broker_cpu_s is not None:
                    results.append(Result(f"broker CPU per GB consumed over {name}", consumed.broker_cpu_s / (consumed.bytes / 1e9), "s/GB (lower is better)"))
            return results
