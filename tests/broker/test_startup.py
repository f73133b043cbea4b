"""What a user sees when ``odradek serve`` starts, or cannot: one clear line and a non-zero exit for every
start-up failure (as Kafka prints its fatal start-up errors), never a traceback; a start banner that
reports the time since launch; no silent plaintext on a listener configured for SSL or SASL (issue 15)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import kafka_jvm
import pytest
from confluent_kafka.admin import AdminClient

from odradek.storage.checkpoints import write_properties


def serve(*overrides: str, properties: Path | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    """``odradek serve`` expected to exit by itself; its stdout and stderr together."""
    cmd = [sys.executable, "-m", "odradek", "serve"]
    if properties is not None:
        cmd.append(str(properties))
    for item in overrides:
        cmd += ["--override", item]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def one_line_failure(result: subprocess.CompletedProcess) -> str:
    """The one line saying why (INFO and WARNING lines of what happened before may precede it)."""
    assert result.returncode == 1, result.stdout
    lines = [line for line in result.stdout.splitlines() if " INFO " not in line and " WARNING " not in line]
    assert len(lines) == 1, result.stdout
    assert "Traceback" not in result.stdout
    return lines[0]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["listeners=SASL_PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol=SASL_PLAINTEXT"], "Listener SASL_PLAINTEXT: no JAAS configuration for SASL mechanism GSSAPI"),
        (
            ["listeners=SASL_PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol=SASL_PLAINTEXT",
             "listener.name.sasl_plaintext.gssapi.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab=\"/nonexistent.keytab\" principal=\"kafka/h@R\";"],
            "Listener SASL_PLAINTEXT: GSSAPI credentials from keytab /nonexistent.keytab failed",
        ),
        (["listeners=SASL_PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol=SASL_PLAINTEXT", "sasl.enabled.mechanisms=SCRAM-SHA-1", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-1"], "Listener SASL_PLAINTEXT: SASL mechanism SCRAM-SHA-1 is not implemented by odradek"),
        (
            ["listeners=SASL_SSL://127.0.0.1:0", "security.inter.broker.protocol=SASL_SSL", "sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=PLAIN", "ssl.keystore.type=PEM", "ssl.keystore.location=/nonexistent.pem"],
            "Listener SASL_SSL: failed to load the SSL keystore",
        ),
        (
            ["listeners=SASL_PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol=SASL_PLAINTEXT", "sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=PLAIN"],
            "Listener SASL_PLAINTEXT: no JAAS configuration for SASL mechanism PLAIN",
        ),
        (
            ["listeners=SASL_PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol=SASL_PLAINTEXT", "sasl.enabled.mechanisms=PLAIN"],
            "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for inter-broker communication",
        ),
        (["listeners=SSL://127.0.0.1:0", "security.inter.broker.protocol=SSL"], "Listener SSL: a JKS keystore needs ssl.keystore.location"),
        (["listeners=SSL://127.0.0.1:0", "security.inter.broker.protocol=SSL", "ssl.keystore.type=PEM"], "Listener SSL: an SSL listener needs ssl.keystore.location"),
        (
            ["listeners=PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:SSL", "listener.name.external.ssl.keystore.type=PKCS12"],
            "Listener EXTERNAL: a PKCS12 keystore needs ssl.keystore.location",
        ),
    ],
)
def test_a_listener_that_cannot_be_secured_as_configured_refuses_to_start(tmp_path, overrides, message) -> None:
    line = one_line_failure(serve(*overrides, f"log.dirs={tmp_path}"))
    assert message in line
    assert not (tmp_path / "meta.properties").exists()  # refused before touching storage


def test_advertised_listeners_must_be_among_the_listeners_as_kafka_requires(tmp_path) -> None:
    line = one_line_failure(serve("listeners=PLAINTEXT://127.0.0.1:0", "advertised.listeners=PLAINTEXT://127.0.0.1:9092,OTHER://127.0.0.1:9093", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:SSL", f"log.dirs={tmp_path}"))
    assert line.endswith(
        "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners. "
        "Found PLAINTEXT,OTHER. The valid options based on the current configuration are PLAINTEXT (odradek)"
    )


def test_without_a_plaintext_listener_the_inter_broker_listener_must_be_named_as_kafka_requires(tmp_path) -> None:
    line = one_line_failure(serve("listeners=SSL://127.0.0.1:0", f"log.dirs={tmp_path}"))
    assert line.endswith(
        "inter.broker.listener.name must be a listener name defined in advertised.listeners. "
        "The valid options based on currently configured listeners are SSL (odradek)"
    )


def test_a_listener_name_without_a_security_protocol_is_refused_as_kafka_does(tmp_path) -> None:
    line = one_line_failure(serve("listeners=INTERNAL://127.0.0.1:0", f"log.dirs={tmp_path}"))
    assert line.endswith("No security protocol defined for listener INTERNAL (odradek)")


def test_a_port_in_use_is_one_line_naming_the_address_as_kafka_does(tmp_path, real_kafka) -> None:
    assert real_kafka.zookeeper is not None, "needs the ZooKeeper this test run started"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        kafka_log = kafka_refusing_to_start(tmp_path / "kafka", real_kafka.zookeeper.connect, port)
        line = one_line_failure(serve(f"listeners=PLAINTEXT://127.0.0.1:{port}", f"log.dirs={tmp_path / 'odradek'}"))
    wait_until_alone(real_kafka.bootstrap)
    message = f"Socket server failed to bind to 127.0.0.1:{port}: Address already in use."
    assert message in kafka_log and message in line


def kafka_refusing_to_start(root: Path, zookeeper_connect: str, port: int) -> str:
    """Start Apache Kafka (broker 1, beside the session's real one on the same ZooKeeper) where it must
    refuse to start; what it logged."""
    process = kafka_jvm.KafkaBroker(root, zookeeper_connect, broker_id=1, port=port).launch(heap="256m")
    try:
        assert process.proc.wait(kafka_jvm.STARTUP_TIMEOUT_S) == 1
    finally:
        process.kill()
    return (root / "server.log").read_text()


def wait_until_alone(bootstrap: str) -> None:
    """Kafka binds a fixed port only after registering in ZooKeeper: the session's Kafka must see broker 1
    gone again before other tests create topics (they could be placed on it)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while len(admin.list_topics(timeout=10).brokers) > 1:
        assert time.monotonic() < deadline, "the refused Kafka broker stayed registered"
        time.sleep(0.2)


def test_another_brokers_meta_properties_is_kafkas_one_line(tmp_path, real_kafka) -> None:
    assert real_kafka.zookeeper is not None, "needs the ZooKeeper this test run started"
    kafka_dir = tmp_path / "kafka" / "kafka-logs"
    kafka_dir.mkdir(parents=True)
    write_properties(kafka_dir / "meta.properties", {"version": "0", "broker.id": "5"})
    kafka_log = kafka_refusing_to_start(tmp_path / "kafka", real_kafka.zookeeper.connect, kafka_jvm.free_port())
    write_properties(tmp_path / "meta.properties", {"version": "0", "broker.id": "5"})
    line = one_line_failure(serve("listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={tmp_path}", "broker.id=1"))
    for log_line, directory in ((kafka_log, kafka_dir), (line, tmp_path)):
        assert f"Stored node id 5 doesn't match previous node id 1 in {directory / 'meta.properties'}. If you moved your data" in log_line


def test_a_log_dir_that_is_a_file_is_one_line(tmp_path) -> None:
    not_a_dir = tmp_path / "logs"
    not_a_dir.write_text("")
    line = one_line_failure(serve("listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={not_a_dir}"))
    assert f"{not_a_dir} is not a readable log directory." in line


def test_the_same_partition_in_two_log_dirs_is_one_line(tmp_path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    (first / "orders-0").mkdir(parents=True)
    (second / "orders-0").mkdir(parents=True)
    line = one_line_failure(serve("listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={first},{second}"))
    assert f"Duplicate log directories for orders-0 are found in both {first} and {second}" in line


def test_a_bad_value_and_a_missing_properties_file_are_one_line(tmp_path) -> None:
    line = one_line_failure(serve("listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={tmp_path}", "num.partitions=many"))
    assert "num.partitions" in line and "many" in line
    line = one_line_failure(serve(properties=tmp_path / "missing.properties"))
    assert line == f"odradek: cannot read {tmp_path / 'missing.properties'}: No such file or directory"


def serving(log_dir: Path) -> subprocess.Popen:
    """``odradek serve`` on a free port and ``log_dir``, left running; its stdout and stderr together."""
    return subprocess.Popen(
        [sys.executable, "-m", "odradek", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={log_dir}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_the_banner_reports_the_time_since_launch(tmp_path) -> None:
    launched = time.monotonic()
    proc = serving(tmp_path)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if " started in " in line:
                waited_ms = (time.monotonic() - launched) * 1000
                break
        else:
            pytest.fail("no start banner")
    finally:
        proc.terminate()
        proc.wait(30)
    reported_ms = int(line.split(" started in ")[1].split(" ms")[0])
    # The interpreter and imports take most of it: the banner must count them (a /proc tick is 10 ms).
    assert waited_ms / 2 <= reported_ms <= waited_ms + 20, (reported_ms, waited_ms)


def test_signals_during_the_shutdown_do_not_cut_it_short(tmp_path) -> None:
    """``make serve`` stopped by Ctrl-C or a SIGTERM to its process group: make forwards the signal it gets to
    the broker, which so gets two, the second while it shuts down. Kafka's JVM ignores signals while its
    shutdown hook runs; the broker must likewise finish its shutdown and exit 0, not die of the second."""
    proc = serving(tmp_path)
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if " started in " in line:
                break
        else:
            pytest.fail("no start banner:\n" + "".join(lines))
        proc.send_signal(signal.SIGTERM)
        for line in proc.stdout:
            lines.append(line)
            if "shutting down (SIGTERM)" in line:
                break
        for _ in range(5):
            proc.send_signal(signal.SIGTERM)
            proc.send_signal(signal.SIGINT)
        lines += proc.stdout.readlines()
        assert proc.wait(30) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert any("shut down completed" in line for line in lines), "".join(lines)


def test_the_log_lines_waiting_are_written_before_a_halt() -> None:
    """serve's log lines are written by a thread of their own, every few milliseconds. A broker whose log
    directories have all failed halts (``os._exit``, as Kafka's ``Exit.halt``) right after
    ``logging.shutdown``: every line logged until then is written first, in order."""
    code = (
        "import logging, os, sys\n"
        "from odradek.broker.serve_command import QueuedLogHandler\n"
        "logging.basicConfig(level='INFO', handlers=[QueuedLogHandler(logging.StreamHandler(sys.stdout))])\n"
        "for i in range(2000): logging.getLogger('odradek').warning('line %d', i)\n"
        "logging.shutdown()\n"
        "os._exit(1)\n"
    )
    halted = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert halted.returncode == 1, halted.stderr
    assert halted.stdout.splitlines() == [f"line {i}" for i in range(2000)]
