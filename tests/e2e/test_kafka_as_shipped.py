"""The Kafka the benchmarks compare odradek with is Kafka as its own scripts start it.

The tests start Kafka with quick-start JVM options (serial GC, the first JIT tier only), which cost it tens of
percent of its peak speed; a benchmark against that Kafka flatters odradek (docs/performance.md, "Issue 23
on a quiet machine"). ``as_shipped`` starts the broker JVM with ``KAFKA_JVM_PERFORMANCE_OPTS`` of Kafka's
bin/kafka-run-class.sh and bin/kafka-server-start.sh's 1 GiB heap, and it serves.
"""

from __future__ import annotations

from pathlib import Path

import kafka_jvm
from confluent_kafka import Producer


def test_a_broker_started_as_shipped_runs_with_kafkas_jvm_options_and_serves(tmp_path: Path) -> None:
    zookeeper = kafka_jvm.ZooKeeper(tmp_path / "zookeeper").start()
    broker = kafka_jvm.KafkaBroker(tmp_path / "kafka", zookeeper.connect)
    try:
        broker.start(heap="1G", as_shipped=True)
        assert broker.process is not None
        with open(f"/proc/{broker.process.pid}/cmdline", "rb") as f:
            options = f.read().split(b"\0")
        assert [b"-Xmx1G", b"-Xms1G", b"-server", b"-XX:+UseG1GC", b"-XX:MaxGCPauseMillis=20"] == options[1:6]
        assert b"-XX:TieredStopAtLevel=1" not in options and b"-XX:+UseSerialGC" not in options
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        delivered = []
        producer.produce("as-shipped", b"v", on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
        assert producer.flush(30) == 0
        assert delivered == [(None, 0)]
    finally:
        broker.stop()
        zookeeper.stop()
