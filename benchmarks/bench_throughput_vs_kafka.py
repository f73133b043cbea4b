"""Issue 23's throughput comparison: today's ``odradek perf`` workloads against odradek and Apache Kafka 3.9.1.

The same confluent-kafka producer and consumer (``odradek.tools.perf``, what ``odradek perf`` runs: acks=1,
linger 5 ms, 1 MB batches; a consumer reading every record from the start) against one ``odradek serve``
(one process) and one Kafka 3.9.1 broker from the suite's jars (ZooKeeper mode), in the same run, each on a
fresh log directory, one partition per topic:

* 100-byte records: produce records/s and consume records/s, and the broker's CPU (user+system, /proc) to
  produce then consume them;
* 10 KiB records: produce MB/s and consume MB/s, and the broker's CPU per GB each way.

Each broker first produces and consumes the same amounts on other topics, unmeasured: Kafka's JVM (started
with the options of Kafka's own scripts, G1 and full compilation) compiles its hot paths meanwhile.

The broker's CPU is the steadier figure on a shared machine: client and broker compete for two cores, so
throughput moves with whatever else runs. Note ``uptime`` beside the figures.

Run: ``python benchmarks/bench_throughput_vs_kafka.py [rounds] [odradek | kafka ...]`` (default: 1 round
of both, odradek first; the record counts scale with ``ODRADEK_BENCH_SCALE``, default 1.0).
"""

from __future__ import annotations

import contextlib
import os
import sys

from bench_multicore_produce import kafka, odradek

from odradek.tools.perf import consume, produce

SCALE = float(os.environ.get("ODRADEK_BENCH_SCALE", "1.0"))
SMALL = max(10_000, int(500_000 * SCALE))
LARGE = max(1_000, int(50_000 * SCALE))


def _create(bootstrap: str, *topics: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        future.result(60)


def measure(broker: contextlib.AbstractContextManager[tuple[str, list[int]]]) -> dict[str, float]:
    with broker as (bootstrap, pids):
        pid = pids[0]  # one process: odradek with worker.processes=1, or Kafka's broker JVM
        _create(bootstrap, "small", "large", "warm-small", "warm-large")
        # Warm-up: a JVM compiles its hot paths (C2) during its first minute of load, in threads whose CPU
        # would count as the broker's; both brokers get the same warm-up, and only later topics are measured.
        for topic, count, size in (("warm-small", SMALL, 100), ("warm-large", LARGE, 10_240)):
            produce(bootstrap, topic, count, size)
            consume(bootstrap, topic, count)
        small = produce(bootstrap, "small", SMALL, 100, broker_pid=pid)
        small_read = consume(bootstrap, "small", SMALL, broker_pid=pid)
        large = produce(bootstrap, "large", LARGE, 10_240, broker_pid=pid)
        large_read = consume(bootstrap, "large", LARGE, broker_pid=pid)
    assert small_read.records == SMALL and large_read.records == LARGE, "a consumer read fewer records than produced"
    return {
        "produce 100 B, records/s": small.records_per_s,
        "consume 100 B, records/s": small_read.records_per_s,
        f"broker CPU to produce then consume {SMALL:,} × 100 B, s": (small.broker_cpu_s or 0) + (small_read.broker_cpu_s or 0),
        "produce 10 KiB, MB/s": large.mb_per_s,
        "broker CPU per GB produced (10 KiB), s": (large.broker_cpu_s or 0) / (large.bytes / 1e9),
        "consume 10 KiB, MB/s": large_read.mb_per_s,
        "broker CPU per GB consumed (10 KiB), s": (large_read.broker_cpu_s or 0) / (large_read.bytes / 1e9),
    }


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    kinds = sys.argv[2:] or ["odradek", "kafka"]
    for _ in range(rounds):
        for kind in kinds:
            before = os.getloadavg()[0]
            figures = measure(kafka() if kind == "kafka" else odradek(1))
            name = "Apache Kafka 3.9.1" if kind == "kafka" else "odradek (one process)"
            print(f"{name} (load average {before:.1f} → {os.getloadavg()[0]:.1f}):")
            for what, value in figures.items():
                print(f"  {what}: {value:,.2f}")


if __name__ == "__main__":
    main()
