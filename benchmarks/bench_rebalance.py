"""Rebalance time of a consumer group, classic protocol against the consumer group protocol (KIP-848), on
odradek and on Apache Kafka 4.4 (KRaft, one node), with the Java client 4.4.

Two idle members of a group over a 6-partition topic (tests/e2e/java44/GroupMember.java, one JVM each):

- **join**: from the moment the second member has subscribed (its JVM is up) until each member owns three
  partitions;
- **leave**: from the moment the first member is told to leave (it closes its consumer) until the second
  owns all six.

Each figure is the median of ``ROUNDS`` groups. The classic protocol runs with the clients' defaults (eager
range assignment) and ``group.initial.rebalance.delay.ms=0``, as the tests' brokers do; the consumer
protocol with the brokers' defaults (``uniform``, heartbeats every 5 s). Run as a script:
``python benchmarks/bench_rebalance.py`` (needs a JDK and ``make jvm-deps``).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "jvm"))

import kafka44_jvm  # noqa: E402
import kafka_jvm  # noqa: E402
from group_members import Member, wait_until  # noqa: E402

ROUNDS = 3
PARTITIONS = 6


def create_topic(bootstrap: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"rebalance-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(60)
    return name


def one_round(java44: kafka44_jvm.JavaPrograms, bootstrap: str, protocol: str, logs: Path) -> tuple[float, float]:
    topic = create_topic(bootstrap)
    group = f"g-{topic}"
    first = Member(java44, bootstrap, topic, group, logs / f"{group}-1.log", protocol=protocol)
    second = None
    try:
        wait_until(lambda: len(first.owned()) == PARTITIONS, 120, "the first member's partitions")
        second = Member(java44, bootstrap, topic, group, logs / f"{group}-2.log", protocol=protocol)
        wait_until(lambda: any(e["event"] == "subscribed" for e in second.snapshot()), 120, "the second member's JVM")
        start = time.monotonic()
        wait_until(lambda: len(first.owned()) == len(second.owned()) == PARTITIONS // 2, 120, "the join rebalance")
        join = time.monotonic() - start
        start = time.monotonic()
        first.leave()
        wait_until(lambda: len(second.owned()) == PARTITIONS, 120, "the leave rebalance")
        leave = time.monotonic() - start
        second.leave()
        return join, leave
    finally:
        first.stop()
        if second is not None:
            second.stop()


def measure(java44: kafka44_jvm.JavaPrograms, name: str, bootstrap: str, logs: Path) -> None:
    for protocol in ("classic", "consumer"):
        rounds = [one_round(java44, bootstrap, protocol, logs) for _ in range(ROUNDS)]
        join = statistics.median(r[0] for r in rounds)
        leave = statistics.median(r[1] for r in rounds)
        print(f"| {name} | {protocol} | {join:.1f} s | {leave:.1f} s |", flush=True)


def main() -> None:
    from odradek import Broker

    logs = Path(tempfile.mkdtemp(prefix="bench-rebalance-"))
    java44 = kafka44_jvm.JavaPrograms.compile(sorted((ROOT / "tests" / "e2e" / "java44").glob("*.java")), logs / "classes")
    print(f"load average {os.getloadavg()[0]:.1f}; median of {ROUNDS} groups each")
    print("| broker | group.protocol | join | leave |\n| --- | --- | --- | --- |")
    with Broker(log_dir=logs / "odradek", subprocess=True, config={"broker.id": "0", **kafka_jvm.BROKER_SETTINGS}) as broker:
        measure(java44, "odradek", broker.bootstrap, logs)
    # Not the tests' shared node, which heartbeats every second (kafka44_jvm.CONSUMER_GROUP_SETTINGS): Kafka's defaults.
    node = kafka44_jvm.KRaftNode(logs / "kafka44", 1, kafka44_jvm.new_cluster_id(), kafka_jvm.free_port(), kafka_jvm.free_port(), settings=dict(kafka44_jvm.SINGLE_NODE_SETTINGS))
    node.start()
    try:
        measure(java44, "Kafka 4.4", node.bootstrap, logs)
    finally:
        node.stop()
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
