"""The two systems every scenario runs against: odradek, and a real Apache Kafka 3.9 broker.

Real Kafka comes from ``ODRADEK_COMPAT_KAFKA=host:port`` (a broker already running) or else from Docker
through testcontainers: the official ``apache/kafka`` image as a single KRaft node (broker and controller
in one process). testcontainers-python's ``KafkaContainer`` drives Confluent's start scripts
(``/etc/confluent/docker/*``), which the apache image does not have, so the container is built here from
testcontainers' ``DockerContainer`` the way testcontainers-java's apache ``KafkaContainer`` builds it: the
container waits for a start script, which is written once Docker has mapped the port, exports the
advertised listener with that port and runs the image's own ``/etc/kafka/docker/run``.

The configuration given to the image is all the broker gets (the image drops its defaults once any
``KAFKA_*`` variable is set), so every topic config keeps Kafka's built-in default and DescribeConfigs
answers what it answers for a fresh cluster. odradek is started with the same settings.
"""

from __future__ import annotations

import io
import os
import tarfile
import time
from dataclasses import dataclass
from typing import Any

KAFKA_ENV = "ODRADEK_COMPAT_KAFKA"
KAFKA_IMAGE = "apache/kafka:3.9.1"
KAFKA_PORT = 9092
STARTER_SCRIPT = "/tmp/odradek-compat-start.sh"
STARTUP_TIMEOUT_S = 120

# Broker settings both targets run with; everything else is the Kafka default.
BROKER_SETTINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}

KRAFT_SETTINGS: dict[str, str] = {
    "node.id": "1",
    "process.roles": "broker,controller",
    "listeners": f"PLAINTEXT://0.0.0.0:{KAFKA_PORT},BROKER://0.0.0.0:9093,CONTROLLER://0.0.0.0:9094",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "BROKER",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.voters": "1@localhost:9094",
    "log.dirs": "/var/lib/kafka/data",
}


@dataclass(frozen=True)
class Target:
    name: str  # "odradek" or "kafka"
    bootstrap: str


class KafkaUnavailable(Exception):
    """Neither ODRADEK_COMPAT_KAFKA nor a Docker engine: the Kafka side of the suite skips with this reason."""


def image_environment() -> dict[str, str]:
    """``server.properties`` keys as the apache/kafka image reads them: ``KAFKA_`` + upper case, ``.`` -> ``_``."""
    settings = {**KRAFT_SETTINGS, **BROKER_SETTINGS}
    env = {"KAFKA_" + key.upper().replace(".", "_"): value for key, value in settings.items()}
    env["CLUSTER_ID"] = "b2RyYWRlay1jb21wYXQtMQ"
    return env


def docker_engine_error() -> str | None:
    """Why no Docker engine can be reached, or None if one answers."""
    try:
        import docker
    except ImportError:
        return "the docker package is not installed (pip install -e '.[test]')"
    try:
        client = docker.from_env()
        client.ping()
        client.close()
    except Exception as exc:  # any failure to reach the engine: no socket, no permission, no daemon
        return f"no Docker engine reachable ({type(exc).__name__}: {str(exc)[:120]})"
    return None


class ApacheKafkaContainer:
    """A single-node KRaft Apache Kafka from the official image, reachable on a Docker-mapped port."""

    def __init__(self, image: str = KAFKA_IMAGE) -> None:
        from testcontainers.core.container import DockerContainer

        self.container = DockerContainer(image).with_exposed_ports(KAFKA_PORT)
        for key, value in image_environment().items():
            self.container.with_env(key, value)
        self.container.with_command(["sh", "-c", f"while [ ! -f {STARTER_SCRIPT} ]; do sleep 0.1; done; . {STARTER_SCRIPT}"])

    def start(self) -> str:
        self.container.start()
        host = self.container.get_container_host_ip()
        port = int(self.container.get_exposed_port(KAFKA_PORT))
        script = (
            "#!/bin/bash\n"
            f"export KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://{host}:{port},BROKER://$(hostname -i | cut -d' ' -f1):9093\n"
            "exec /etc/kafka/docker/run\n"
        )
        self._copy_in(script.encode(), STARTER_SCRIPT)
        bootstrap = f"{host}:{port}"
        wait_until_serving(bootstrap, STARTUP_TIMEOUT_S)
        return bootstrap

    def _copy_in(self, content: bytes, path: str) -> None:
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            info = tarfile.TarInfo(os.path.basename(path))
            info.size = len(content)
            info.mode = 0o755
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(content))
        self.container.get_wrapped_container().put_archive(os.path.dirname(path), archive.getvalue())

    def stop(self) -> None:
        self.container.stop()


def wait_until_serving(bootstrap: str, timeout_s: float) -> None:
    """Until the broker answers Metadata with itself in it: KRaft brokers listen before they serve."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            if admin.list_topics(timeout=2).brokers:
                return
        except Exception as exc:  # not up yet
            last = exc
        time.sleep(0.5)
    raise RuntimeError(f"Kafka at {bootstrap} did not start serving within {timeout_s}s: {last}")


def kafka_source() -> tuple[str, str | None]:
    """('env', host:port), ('docker', None), or raises KafkaUnavailable with the reason."""
    address = os.environ.get(KAFKA_ENV, "").strip()
    if address:
        return "env", address
    reason = docker_engine_error()
    if reason is not None:
        raise KafkaUnavailable(f"real Kafka side skipped: {KAFKA_ENV} is unset and {reason}")
    return "docker", None
