"""``odradek perf produce|consume``: load generators in the manner of kafka-producer-perf-test and
kafka-consumer-perf-test, using confluent-kafka (librdkafka), against any Kafka-compatible broker.

They print records/s, MB/s and latency percentiles; with ``--broker-pid`` they also print the broker
process's CPU time (user+sys) spent during the run: the figure that says how much work the broker does,
whatever the client costs.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class PerfResult:
    records: int
    bytes: int
    seconds: float
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    broker_cpu_s: float | None = None

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    def summary(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "latencies_ms"}
        out.update(records_per_s=round(self.records_per_s), mb_per_s=round(self.mb_per_s, 2))
        if self.latencies_ms:
            out.update(
                latency_avg_ms=round(sum(self.latencies_ms) / len(self.latencies_ms), 3),
                latency_p50_ms=round(self.percentile(50), 3),
                latency_p99_ms=round(self.percentile(99), 3),
                latency_p999_ms=round(self.percentile(99.9), 3),
            )
        return out


def process_cpu_seconds(pid: int) -> float:
    """user+sys CPU time of a process, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def produce(bootstrap: str, topic: str, num_records: int, record_size: int, *, acks: str = "1", linger_ms: int = 5, batch_size: int = 1_000_000, throughput: int = -1, compression: str = "none", broker_pid: int | None = None, extra: dict[str, Any] | None = None) -> PerfResult:
    from confluent_kafka import Producer

    conf = {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": linger_ms,
        "batch.size": batch_size,
        "batch.num.messages": 1_000_000,
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 2_097_151,
        "compression.type": compression,
        "message.max.bytes": max(batch_size + 1024, 1_000_000),
    }
    conf.update(extra or {})
    producer = Producer(conf)
    payload = os.urandom(record_size)
    latencies: list[float] = []
    sample_every = max(1, num_records // 100_000)

    errors: list[Any] = []

    def timed(sent: float) -> Any:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            latencies.append((time.perf_counter() - sent) * 1000)

        return on_delivery

    cpu_before = process_cpu_seconds(broker_pid) if broker_pid else None
    start = time.perf_counter()
    interval = 1.0 / throughput if throughput > 0 else 0.0
    for i in range(num_records):
        if interval:
            target = start + i * interval
            while time.perf_counter() < target:
                producer.poll(0)
        callback = timed(time.perf_counter()) if i % sample_every == 0 else None
        while True:
            try:
                producer.produce(topic, payload, on_delivery=callback)
                break
            except BufferError:
                producer.poll(0.001)
        if i % 10_000 == 0:
            producer.poll(0)
    undelivered = producer.flush(120)
    seconds = time.perf_counter() - start
    # Delivery reports are requested for a sample only (a Python callback per record would cost more than
    # the broker's work per record); every record must still have left the queue, acknowledged.
    if undelivered:
        raise RuntimeError(f"{undelivered} records were not acknowledged within 120 s")
    if errors:
        raise RuntimeError(f"{len(errors)} sampled deliveries failed, first: {errors[0]}")
    cpu = process_cpu_seconds(broker_pid) - cpu_before if broker_pid and cpu_before is not None else None
    return PerfResult(num_records, num_records * record_size, seconds, latencies, cpu)


def consume(bootstrap: str, topic: str, num_records: int, *, fetch_max_bytes: int = 52_428_800, broker_pid: int | None = None, timeout_s: float = 120.0) -> PerfResult:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"odradek-perf-{os.getpid()}-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": fetch_max_bytes,
            "max.partition.fetch.bytes": fetch_max_bytes,
            "fetch.wait.max.ms": 100,
            "queued.max.messages.kbytes": 1_000_000,
        }
    )
    metadata = consumer.list_topics(topic, timeout=10)
    consumer.assign([TopicPartition(topic, p, 0) for p in metadata.topics[topic].partitions])
    cpu_before = process_cpu_seconds(broker_pid) if broker_pid else None
    count = 0
    size = 0
    start = time.perf_counter()
    deadline = start + timeout_s
    while count < num_records and time.perf_counter() < deadline:
        for msg in consumer.consume(10_000, 0.5):
            if msg.error():
                raise RuntimeError(f"consume failed: {msg.error()}")
            count += 1
            size += len(msg.value() or b"")
    seconds = time.perf_counter() - start
    consumer.close()
    if count < num_records:
        raise RuntimeError(f"consumed {count} of {num_records} records within {timeout_s:.0f} s")
    cpu = process_cpu_seconds(broker_pid) - cpu_before if broker_pid and cpu_before is not None else None
    return PerfResult(count, size, seconds, [], cpu)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="mode", required=True)
    for mode in ("produce", "consume"):
        p = sub.add_parser(mode)
        p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
        p.add_argument("--topic", required=True)
        p.add_argument("--num-records", type=int, required=True)
        p.add_argument("--broker-pid", type=int, help="report this process's CPU time during the run")
        p.add_argument("--json", action="store_true", help="print one JSON object")
        if mode == "produce":
            p.add_argument("--record-size", type=int, default=100)
            p.add_argument("--acks", default="1")
            p.add_argument("--linger-ms", type=int, default=5)
            p.add_argument("--batch-size", type=int, default=1_000_000)
            p.add_argument("--throughput", type=int, default=-1, help="records/s to aim for; -1 = as fast as possible")
            p.add_argument("--compression", default="none")


def main(args: argparse.Namespace) -> int:
    if args.mode == "produce":
        result = produce(args.bootstrap_server, args.topic, args.num_records, args.record_size, acks=args.acks, linger_ms=args.linger_ms, batch_size=args.batch_size, throughput=args.throughput, compression=args.compression, broker_pid=args.broker_pid)
    else:
        result = consume(args.bootstrap_server, args.topic, args.num_records, broker_pid=args.broker_pid)
    summary = result.summary()
    if args.json:
        print(json.dumps(summary))
    else:
        print(", ".join(f"{k}={v}" for k, v in summary.items()))
    return 0
