"""What a user installs: every source package is listed in pyproject.toml (the package list is explicit, and a
package missing from it works in the editable checkout but is absent from an installed wheel), and the
README's first command works on a fresh clone with nothing but the plain install."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("protocol", "storage", "broker", "controller", "tools")


def source_packages() -> dict[str, str]:
    """Dotted package name -> its directory, for every directory under a layer holding ``__init__.py``."""
    found = {"odradek": "."}
    for layer in LAYERS:
        for init in sorted((ROOT / layer).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT)
            found[".".join(("odradek", *rel.parts))] = rel.as_posix()
    return found


def test_every_package_is_listed_and_mapped() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = source_packages()
    assert len(packages) > len(LAYERS)
    assert sorted(setuptools["packages"]) == sorted(packages)
    assert setuptools["package-dir"] == packages


# -- the README's first command on a fresh clone ------------------------------------------------------------

DEFAULT_BOOTSTRAP = ("127.0.0.1", 9092)
"""Where ``odradek serve`` listens with no configuration (Kafka's default listener)."""
DEFAULT_LOG_DIR = Path("/tmp/kafka-logs")
"""Kafka's default ``log.dir``: the broker's data when nothing is configured."""
EXTRAS = ("pytest", "confluent-kafka", "cryptography", "pyjks", "pyjwt", "pyspark")
"""Packages of the optional extras (test, tls, spark) that a plain install must not bring."""
BANNER = re.compile(r"started in \d+ ms: listeners PLAINTEXT://([^:,\s]+):(\d+)")


def base_python() -> str:
    """The interpreter the suite's virtual environment was made from (the README's ``BASE_PYTHON``): the
    clone's environment is made from it, as ``make`` would make it on this machine."""
    return str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")


def plain_environment() -> dict[str, str]:
    """This process's environment without what ties a child to the suite's environment or to an outer make."""
    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "MAKEFLAGS", "MAKELEVEL", "MFLAGS")}


def port_free(address: tuple[str, int]) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError:
            return False
    return True


class Output:
    """A child's merged stdout and stderr, read on a thread so that waiting for a line has a deadline."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise AssertionError("exited before its banner:\n" + "".join(self.seen[-40:]))
            self.seen.append(line)
            if match := pattern.search(line):
                return match
        raise AssertionError(f"no {pattern.pattern!r} within {timeout} s:\n" + "".join(self.seen[-40:]))


def stop_group(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM to the command's process group (make and the broker it started, as Ctrl-C would reach them),
    then wait until every process of the group is gone; SIGKILL whatever is left at the deadline."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.poll()
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def produce_and_read_back(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """Records produced by librdkafka (acks=all), then read back from the beginning by a consumer group."""
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    delivered: list[Any] = []
    for i in range(count):
        producer.produce(topic, f"record-{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None] * count
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "readme", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


@pytest.fixture
def own_default_log_dir(tmp_path: Path) -> Iterator[list[str]]:
    """A command prefix running its command in a mount namespace of its own where the default data directory,
    /tmp/kafka-logs, is a fresh directory of this test: the machine's own /tmp/kafka-logs, if any, is neither
    read nor changed (the tests run as root). The mount point is made if missing, and removed afterwards."""
    made = not DEFAULT_LOG_DIR.exists()
    DEFAULT_LOG_DIR.mkdir(exist_ok=True)
    data = tmp_path / "kafka-logs"
    data.mkdir()
    script = 'mount --bind "$0" /tmp/kafka-logs && exec "$@"'
    try:
        yield ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(data)]
    finally:
        if made:
            DEFAULT_LOG_DIR.rmdir()


def test_make_serve_on_a_fresh_clone(tmp_path: Path, own_default_log_dir: list[str]) -> None:
    """The README's first command on a fresh clone of the committed HEAD: ``make serve`` makes ``.venv`` holding
    nothing but the plain install (``pip install -e .``, no extras) and starts the broker on its defaults
    (PLAINTEXT://127.0.0.1:9092, data in /tmp/kafka-logs); a real client produces and reads back; SIGTERM
    stops it cleanly. Only if something else on this machine holds 127.0.0.1:9092 is the broker started
    from the same install on a free port instead (``make install``, then ``odradek serve --override``).

    Then what the plain install lacks is refused by name at start-up: a TLS listener with a PKCS12 keystore
    and the secured OAUTHBEARER validator name the ``tls`` extra, in one line, instead of a traceback."""
    clone = tmp_path / "odradek"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=60)
    env = plain_environment()
    make = ["make", "--no-print-directory", "-C", str(clone), f"BASE_PYTHON={base_python()}"]
    if port_free(DEFAULT_BOOTSTRAP):
        command = [*own_default_log_dir, *make, "serve"]
    else:
        subprocess.run([*make, "install"], env=env, check=True, timeout=300, capture_output=True)
        command = [*own_default_log_dir, str(clone / ".venv/bin/odradek"), "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output = Output(proc)
        host, port = output.wait_for(BANNER, timeout=300).groups()
        installed = json.loads(subprocess.run([str(clone / ".venv/bin/python"), "-m", "pip", "list", "--format=json"], env=env, capture_output=True, text=True, check=True, timeout=60).stdout)
        names = {p["name"].lower() for p in installed}
        assert "odradek" in names and "kazoo" in names
        assert names.isdisjoint(EXTRAS), names & set(EXTRAS)
        values = produce_and_read_back(f"{host}:{port}", "readme", 10)
        assert values == [f"record-{i}".encode() for i in range(10)]
        stop_group(proc)
        output.wait_for(re.compile("shut down completed"), timeout=10)
        assert (tmp_path / "kafka-logs" / "readme-0" / "00000000000000000000.log").stat().st_size > 0

        odradek = [str(clone / ".venv/bin/odradek"), "serve", "--override", f"log.dirs={tmp_path / 'refused'}"]
        pkcs12 = ["listeners=SSL://127.0.0.1:0", "security.inter.broker.protocol=SSL", "ssl.keystore.type=PKCS12", f"ssl.keystore.location={tmp_path / 'server.p12'}"]
        jwks = [
            "listeners=SASL_PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol=SASL_PLAINTEXT", "sasl.enabled.mechanisms=OAUTHBEARER",
            "sasl.mechanism.inter.broker.protocol=OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            f"sasl.oauthbearer.jwks.endpoint.url={(tmp_path / 'jwks.json').as_uri()}",
        ]
        for overrides, package in ((pkcs12, "cryptography"), (jwks, "PyJWT")):
            refused = subprocess.run([*odradek, *(a for o in overrides for a in ("--override", o))], env=env, capture_output=True, text=True, timeout=60)
            assert refused.returncode == 1, refused.stdout + refused.stderr
            assert "Traceback" not in refused.stdout + refused.stderr
            assert f"the {package} package (pip install 'odradek[tls]')" in refused.stdout + refused.stderr
    finally:
        stop_group(proc)
        shutil.rmtree(clone, ignore_errors=True)
