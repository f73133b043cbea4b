"""``odradek perf produce|consume``: load generators in the manner of kafka-producer-perf-test and
kafka-consumer-perf-test, using confluent-kafka (librdkafka), against any Kafka-compatible broker.

They print what Kafka's tools print, rounded as they round it: the producer a line every 5 seconds
(records acknowledged in the window, their rate, latency) and a total with latency percentiles; the
consumer Kafka's header and totals line, and it gives up after ``--timeout`` ms without a record (an
empty topic fails in seconds, not minutes). Latencies come from a sample of delivery reports (a Python
callback per record would cost more than the broker's work per record). With ``--broker-pid`` they also
print the broker process's CPU time (user+sys) spent during the run: the figure that says how much work
the broker does, whatever the client costs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Callable

MIB = 1024 * 1024  # Kafka's tools count MB in MiB


class PerfError(Exception):
    """A run that cannot complete; the message is the one line the tool prints."""


@dataclass
class PerfResult:
    records: int
    bytes: int
    seconds: float
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    broker_cpu_s: float | None = None
    start_ms: int = 0  # wall clock, for kafka-consumer-perf-test's start.time and end.time

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
        out = {k: v for k, v in asdict(self).items() if k not in ("latencies_ms", "start_ms")}
        out.update(seconds=round(self.seconds, 3), records_per_s=round(self.records_per_s), mb_per_s=round(self.mb_per_s, 2))
        if self.broker_cpu_s is not None:
            out["broker_cpu_s"] = round(self.broker_cpu_s, 3)
        if self.latencies_ms:
            out.update(
                latency_avg_ms=round(sum(self.latencies_ms) / len(self.latencies_ms), 3),
                latency_p50_ms=round(self.percentile(50), 3),
                latency_p99_ms=round(self.percentile(99), 3),
                latency_p999_ms=round(self.percentile(99.9), 3),
            )
        return out

    def producer_total(self) -> str:
        """kafka-producer-perf-test's last line (``ProducerPerformance.Stats.printTotal``)."""
        lat = self.latencies_ms or [0.0]
        percentiles = ", ".join(f"{int(self.percentile(p)) if self.latencies_ms else 0} ms {name}" for p, name in ((50, "50th"), (95, "95th"), (99, "99th"), (99.9, "99.9th")))
        return (
            f"{self.records} records sent, {self.records_per_s:f} records/sec ({self.bytes / self.seconds / MIB if self.seconds else 0:.2f} MB/sec), "
            f"{sum(lat) / len(lat):.2f} ms avg latency, {max(lat):.2f} ms max latency, {percentiles}."
        )

    def consumer_total(self) -> str:
        """kafka-consumer-perf-test's header and totals line (no group rebalance: partitions are assigned)."""
        end_ms = self.start_ms + int(self.seconds * 1000)
        mb = self.bytes / MIB
        per_s = (lambda x: x / self.seconds) if self.seconds else (lambda x: 0.0)
        return (
            "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
            f"{_kafka_date(self.start_ms)}, {_kafka_date(end_ms)}, {mb:.4f}, {per_s(mb):.4f}, {self.records}, {per_s(self.records):.4f}, "
            f"0, {end_ms - self.start_ms}, {per_s(mb):.4f}, {per_s(self.records):.4f}"
        )


def _kafka_date(ms: int) -> str:
    """Kafka's ``yyyy-MM-dd HH:mm:ss:SSS``."""
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S:") + f"{ms % 1000:03d}"


@dataclass
class Window:
    """kafka-producer-perf-test's periodic report: the records acknowledged since the last one, their rate,
    and the latencies sampled meanwhile."""

    record_size: int
    started: float
    acked: int = 0
    first_latency: int = 0

    def line(self, now: float, acked: int, latencies: list[float]) -> str:
        count = acked - self.acked
        elapsed = max(now - self.started, 1e-9)
        window = latencies[self.first_latency :] or [0.0]
        return (
            f"{count} records sent, {count / elapsed:.1f} records/sec ({count * self.record_size / elapsed / MIB:.2f} MB/sec), "
            f"{sum(window) / len(window):.1f} ms avg latency, {max(window):.1f} ms max latency."
        )


def process_cpu_seconds(pid: int) -> float:
    """user+sys CPU time of a process, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def produce(bootstrap: str, topic: str, num_records: int, record_size: int, *, acks: str = "1", linger_ms: int = 5, batch_size: int = 1_000_000, throughput: int = -1, compression: str = "none", broker_pid: int | None = None, extra: dict[str, Any] | None = None, progress: Callable[[str], None] | None = None, reporting_interval_ms: int = 5000, flush_timeout_s: float = 120.0) -> PerfResult:
    """``progress`` receives a report line every ``reporting_interval_ms`` (kafka-producer-perf-test's 5 s)."""
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
    window = Window(record_size, start)

    def report(now: float, produced: int) -> None:
        nonlocal window
        if progress is not None and now - window.started >= reporting_interval_ms / 1000:
            # len(producer) counts protocol requests in flight as well as records, so this estimate of the
            # records acknowledged can step back between windows: a window never reports fewer than none.
            acked = max(window.acked, produced - len(producer))
            progress(window.line(now, acked, latencies))
            window = Window(record_size, now, acked, len(latencies))

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
        if i % 100 == 0:
            report(time.perf_counter(), i + 1)
    flush_deadline = time.perf_counter() + flush_timeout_s
    while (undelivered := producer.flush(min(1.0, max(0.0, flush_deadline - time.perf_counter())))) and time.perf_counter() < flush_deadline:
        report(time.perf_counter(), num_records)
    seconds = time.perf_counter() - start
    # Delivery reports are requested for a sample only; every record must still have left the queue, acknowledged.
    if undelivered:
        raise PerfError(f"{undelivered} records were not acknowledged within {flush_timeout_s:.0f} s")
    if errors:
        raise PerfError(f"{len(errors)} sampled deliveries failed, first: {errors[0]}")
    cpu = process_cpu_seconds(broker_pid) - cpu_before if broker_pid and cpu_before is not None else None
    return PerfResult(num_records, num_records * record_size, seconds, latencies, cpu)


def consume(bootstrap: str, topic: str, num_records: int, *, fetch_max_bytes: int = 52_428_800, broker_pid: int | None = None, timeout_ms: int = 10_000, extra: dict[str, Any] | None = None) -> PerfResult:
    """Read ``num_records`` from the start of every partition; fails after ``timeout_ms`` without a record,
    as kafka-consumer-perf-test's ``--timeout`` (the longest wait between returned records). ``extra``: more
    consumer settings (security, for instance)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

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
            **(extra or {}),
        }
    )
    try:
        try:
            described = consumer.list_topics(topic, timeout=timeout_ms / 1000).topics[topic]
        except KafkaException as exc:
            raise PerfError(f"Cannot read the metadata of {bootstrap}: {exc.args[0].str() if exc.args else exc}") from None
        if described.error is not None:
            raise PerfError(f"Topic {topic}: {described.error.str()}")
        consumer.assign([TopicPartition(topic, p, 0) for p in described.partitions])
        cpu_before = process_cpu_seconds(broker_pid) if broker_pid else None
        count = 0
        size = 0
        start_ms = int(time.time() * 1000)
        start = last_record = time.perf_counter()
        while count < num_records and time.perf_counter() - last_record <= timeout_ms / 1000:
            messages = consumer.consume(10_000, 0.1)
            if messages:
                last_record = time.perf_counter()
            for msg in messages:
                if msg.error():
                    raise PerfError(f"consume failed: {msg.error()}")
                count += 1
                size += len(msg.value() or b"") + len(msg.key() or b"")
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    if count < num_records:
        raise PerfError(
            f"WARNING: Exiting before consuming the expected number of messages: timeout ({timeout_ms} ms) exceeded. "
            f"You can use the --timeout option to increase the timeout. ({count} of {num_records} consumed)"
        )
    cpu = process_cpu_seconds(broker_pid) - cpu_before if broker_pid and cpu_before is not None else None
    return PerfResult(count, size, seconds, [], cpu, start_ms)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="mode", required=True)
    for mode in ("produce", "consume"):
        p = sub.add_parser(mode)
        p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
        p.add_argument("--topic", required=True)
        p.add_argument("--num-records", type=int, required=True)
        p.add_argument("--broker-pid", type=int, help="report this process's CPU time during the run")
        p.add_argument("--json", action="store_true", help="print one JSON object (no progress lines)")
        if mode == "produce":
            p.add_argument("--record-size", type=int, default=100)
            p.add_argument("--acks", default="1")
            p.add_argument("--linger-ms", type=int, default=5)
            p.add_argument("--batch-size", type=int, default=1_000_000)
            p.add_argument("--throughput", type=int, default=-1, help="records/s to aim for; -1 = as fast as possible")
            p.add_argument("--compression", default="none")
            p.add_argument("--reporting-interval", type=int, default=5000, help="ms between progress lines (default 5000, as Kafka's)")
        else:
            p.add_argument("--timeout", type=int, default=10_000, help="the longest wait in ms between returned records (default 10000, as Kafka's)")


def main(args: argparse.Namespace) -> int:
    try:
        if args.mode == "produce":
            progress = None if args.json else (lambda line: print(line, flush=True))
            result = produce(args.bootstrap_server, args.topic, args.num_records, args.record_size, acks=args.acks, linger_ms=args.linger_ms, batch_size=args.batch_size, throughput=args.throughput, compression=args.compression, broker_pid=args.broker_pid, progress=progress, reporting_interval_ms=args.reporting_interval)
        else:
            result = consume(args.bootstrap_server, args.topic, args.num_records, broker_pid=args.broker_pid, timeout_ms=args.timeout)
    except PerfError as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result.summary()))
        return 0
    print(result.producer_total() if args.mode == "produce" else result.consumer_total())
    if result.broker_cpu_s is not None:
        print(f"broker CPU: {result.broker_cpu_s:.3f} s (user+sys)")
    return 0
