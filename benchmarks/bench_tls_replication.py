"""Replication over a TLS inter-broker listener: what the followers' fetches cost when the leader cannot
``sendfile`` them (docs/performance.md, "Fetch over TLS").

Three odradek brokers on a real ZooKeeper (tests/jvm), each with two listeners: CLIENT (PLAINTEXT) for the
producer, and INTERNAL, the inter-broker listener, once PLAINTEXT and once SASL_SSL (PLAIN login, TLS 1.3);
only the replication path differs between the two runs. One producer sends 10 KiB records with acks=all to
a one-partition topic of rf 3 (``min.insync.replicas`` 2). Reported: MB/s acknowledged, and the three
brokers' CPU time per GB produced (leader and followers together).
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from run import Result

from odradek import Broker
from odradek.tools.perf import process_cpu_seconds, produce

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "jvm"))
sys.path.insert(0, str(REPO))

import kafka_jvm  # noqa: E402

from tests.certificates import Pki, make_pki  # noqa: E402

SCALE = float(os.environ.get("ODRADEK_BENCH_SCALE", "1.0"))
RECORD_SIZE = 10_240
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret";'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(broker_id: int, client_port: int, internal_port: int, zookeeper_connect: str, protocol: str, pki: Pki) -> dict[str, str]:
    config = {
        "broker.id": str(broker_id),
        "zookeeper.connect": zookeeper_connect,
        "listeners": f"CLIENT://127.0.0.1:{client_port},INTERNAL://127.0.0.1:{internal_port}",
        "listener.security.protocol.map": f"CLIENT:PLAINTEXT,INTERNAL:{protocol}",
        "inter.broker.listener.name": "INTERNAL",
        "offsets.topic.replication.factor": "1",
    }
    if protocol == "SASL_SSL":
        config |= {
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config": JAAS,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.keystore("broker")),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca),
        }
    return config


def _replicated_topic(bootstrap: str) -> str:
    topic = f"tls-replication-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        partition = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(0)
        if partition is not None and partition.leader >= 0 and len(partition.isrs) == 3:
            return topic
        time.sleep(0.2)
    raise TimeoutError(f"{topic}: replicas not in sync within 60 s")


def _measure(zookeeper: kafka_jvm.ZooKeeper, root: Path, protocol: str, pki: Pki, records: int) -> list[Result]:
    chroot = f"/bench-tls-replication-{protocol.lower()}-{uuid.uuid4().hex[:6]}"
    ports = {b: (_free_port(), _free_port()) for b in range(3)}
    brokers: list[Broker] = []
    try:
        for broker_id, (client, internal) in ports.items():
            config = _config(broker_id, client, internal, zookeeper.connect + chroot, protocol, pki)
            brokers.append(Broker(root / f"{protocol}-{broker_id}", config=config, subprocess=True).start())
            kafka_jvm.wait_until_serving(f"127.0.0.1:{client}", kafka_jvm.STARTUP_TIMEOUT_S)  # knows the controller
        bootstrap = ",".join(f"127.0.0.1:{client}" for client, _ in ports.values())
        topic = _replicated_topic(bootstrap)
        cpu_before = sum(process_cpu_seconds(b.pid) for b in brokers)
        result = produce(bootstrap, topic, records, RECORD_SIZE, acks="all", linger_ms=5, batch_size=1_000_000)
        cpu_s = sum(process_cpu_seconds(b.pid) for b in brokers) - cpu_before
    finally:
        for broker in brokers:
            broker.kill()
    name = f"rf 3 acks=all, inter-broker {protocol}"
    return [
        Result(f"produce 10 KiB records, {name}", result.bytes / 1e6 / result.seconds, "MB/s"),
        Result(f"3 brokers' CPU per GB produced, {name}", cpu_s / (result.bytes / 1e9), "s/GB (lower is better)"),
    ]


def run() -> list[Result]:
    records = max(1000, int(30_000 * SCALE))
    with tempfile.TemporaryDirectory(prefix="bench-tls-replication-") as d:
        root = Path(d)
        pki = make_pki(root / "pki")
        zookeeper = kafka_jvm.ZooKeeper(root / "zookeeper").start()
        try:
            return [r for protocol in ("PLAINTEXT", "SASL_SSL") for r in _measure(zookeeper, root, protocol, pki, records)]
        finally:
            zookeeper.stop()


if __name__ == "__main__":
    for r in run():
        print(f"{r.name:60} {r.value:10.3f} {r.unit}")
