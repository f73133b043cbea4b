"""The broker under load from confluent-kafka, on one host: issue 4's figures.

Each figure runs against a broker in its own process (``Broker(subprocess=True)``), so that the broker's
CPU time (user+sys, from /proc) is measured apart from the client's: the figure that says how much work
the broker does per record. ``ODRADEK_BENCH_SCALE`` (default 1.0) scales record counts for quick runs.

Targets (2 cores, client and broker on one host): ≥ 600k records/s for 100-byte records (acks=1,
linger 5 ms, 1 MB batches); ≥ 200 MB/s with 10 KiB records, also with acks=all; ≥ 1 GB/s consumed with
10 KiB records; broker CPU ≤ 0.5 s to produce then consume a million 100-byte records; p99 end-to-end
latency ≤ 5 ms at 10k records/s; RSS ≤ 200 MB with 1,000 partitions. Start-up is bench_startup.py's.
"""

from __future__ import annotations

import os
import tempfile
import time

from run import Result

from odradek import Broker
from odradek.tools.perf import consume, process_cpu_seconds, produce

SCALE = float(os.environ.get("ODRADEK_BENCH_SCALE", "1.0"))


def _n(count: int) -> int:
    return max(1000, int(count * SCALE))


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def small_records() -> list[Result]:
    n = _n(1_000_000)
    with Broker(subprocess=True) as broker:
        pid = broker.pid
        produced = produce(broker.bootstrap, "small", n, 100, acks="1", linger_ms=5, batch_size=1_000_000, broker_pid=pid)
        consumed = consume(broker.bootstrap, "small", n, broker_pid=pid)
    assert consumed.records == n, f"consumed {consumed.records} of {n}"
    cpu = (produced.broker_cpu_s or 0) + (consumed.broker_cpu_s or 0)
    return [
        Result("produce 100 B records, acks=1, 1 partition", produced.records_per_s, "records/s"),
        Result("produce 100 B records: p99 ack latency", produced.percentile(99), "ms (lower is better)"),
        Result("consume 100 B records", consumed.records_per_s, "records/s"),
        Result(f"broker CPU to produce then consume {n:,} 100 B records", cpu, "s (lower is better)"),
    ]


def large_records() -> list[Result]:
    n = _n(100_000)
    out = []
    with Broker(subprocess=True) as broker:
        pid = broker.pid
        for acks in ("1", "all"):
            r = produce(broker.bootstrap, f"large-{acks}", n, 10240, acks=acks, linger_ms=5, batch_size=1_000_000, broker_pid=pid)
            out.append(Result(f"produce 10 KiB records, acks={acks}", r.mb_per_s, "MB/s"))
            out.append(Result(f"broker CPU per GB produced, acks={acks}", (r.broker_cpu_s or 0) / (r.bytes / 1e9), "s/GB (lower is better)"))
        c = consume(broker.bootstrap, "large-1", n, broker_pid=pid)
        out.append(Result("consume 10 KiB records", c.mb_per_s, "MB/s"))
        out.append(Result("broker CPU per GB consumed", (c.broker_cpu_s or 0) / max(c.bytes / 1e9, 1e-9), "s/GB (lower is better)"))
    return out


_LATENCY_CONSUMER = """
import json, sys, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, count = sys.argv[1], int(sys.argv[2])
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "latency", "enable.auto.commit": False, "fetch.wait.max.ms": 100})
consumer.assign([TopicPartition(sys.argv[3], 0, 0)])
print("ready", flush=True)
latencies, deadline = [], time.time() + 120
while len(latencies) < count and time.time() < deadline:
    msg = consumer.poll(0.1)  # returns each record as it arrives (consume(n, timeout) would batch them)
    if msg is not None and not msg.error():
        latencies.append((time.time_ns() - int(msg.value())) / 1e6)
print(json.dumps(latencies), flush=True)
"""


def end_to_end_latency() -> list[Result]:
    """Produce at 10k records/s, sleeping to each record's time (the timer's slack sends a few at a time, at
    the same rate); a consumer in another process (so the two do not share a GIL) notes when each record
    arrives. With linger.ms=0 every record is its own produce request; with linger.ms=1 the
    client groups the ~10 records of each millisecond."""
    import json
    import subprocess
    import sys

    from confluent_kafka import Producer

    n = _n(50_000)
    rate = 10_000
    out = []
    with Broker(subprocess=True) as broker:
        for linger in (1, 0):
            topic = f"latency-{linger}"
            producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": linger, "acks": "1"})
            producer.produce(topic, str(time.time_ns()).encode())
            producer.flush(10)
            reader = subprocess.Popen([sys.executable, "-c", _LATENCY_CONSUMER, broker.bootstrap, str(n + 1), topic], stdout=subprocess.PIPE, text=True)
            assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
            time.sleep(1)
            start = time.perf_counter()
            for i in range(n):
                # Sleep to each record's time (a busy wait took ~60% of one of the two cores from the broker)
                if (wait := start + i / rate - time.perf_counter()) > 0:
                    time.sleep(wait)
                producer.produce(topic, str(time.time_ns()).encode())
                producer.poll(0)
            producer.flush(10)
            latencies = sorted(json.loads(reader.stdout.readline())[1:])
            reader.wait(30)
            for name, q in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)):
                out.append(Result(f"end-to-end latency at 10k records/s, linger.ms={linger}: {name}", latencies[int(len(latencies) * q)], "ms (lower is better)"))
    return out


def many_partitions() -> list[Result]:
    """RSS with 1,000 partitions that all hold data, before and after a restart that opens them lazily."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with tempfile.TemporaryDirectory() as d:
        broker = Broker(log_dir=d, subprocess=True).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(f"many-{i}", 100, 1) for i in range(10)])["many-9"].result(30)
            time.sleep(1)
            producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
            payload = b"x" * 1000
            for i in range(10):
                for p in range(100):
                    for _ in range(20):
                        producer.produce(f"many-{i}", payload, partition=p)
                producer.poll(0)
            producer.flush(60)
            loaded = _rss_mb(broker.pid)
            started = time.perf_counter()
            broker.restart()
            restart = time.perf_counter() - started
            restarted = _rss_mb(broker.pid)
            cpu = process_cpu_seconds(broker.pid)
        finally:
            broker.stop()
    return [
        Result("broker RSS with 1,000 partitions holding data", loaded, "MB (lower is better)"),
        Result("broker RSS after a clean restart with 1,000 partitions", restarted, "MB (lower is better)"),
        Result("clean restart with 1,000 partitions (stop + start)", restart * 1000, "ms (lower is better)"),
        Result("broker CPU for that restart", cpu, "s (lower is better)"),
    ]


def run() -> list[Result]:
    return small_records() + large_records() + end_to_end_latency() + many_partitions()


if __name__ == "__main__":
    for result in run():
        print(f"{result.name}: {result.value:,.2f} {result.unit}")
