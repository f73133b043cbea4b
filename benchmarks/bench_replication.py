"""Produce throughput with replication, and end-to-end latency at rf 3, against any cluster.

    python benchmarks/bench_replication.py --bootstrap host:port,host:port,...
    python benchmarks/bench_replication.py                  # starts a 3-broker real Kafka 3.9.1 (needs root)
    python benchmarks/bench_replication.py --kind odradek   # the same cluster of odradek brokers

Three set-ups, one fresh topic each (1 partition, so the figures are one leader's): rf 3 with acks=all,
rf 3 with acks=1, rf 1 with acks=all (``min.insync.replicas`` 2 at rf 3, 1 at rf 1). Each sends
``--records`` records of ``--size`` bytes as fast as one confluent-kafka producer can (linger 5 ms, 1 MB
batches) and reports records/s and MB/s from the first send to the last acknowledgement. Then
end-to-end latency at rf 3 and at rf 1, acks=all: ``--rate`` records/s for ``--seconds``, each carrying
its send time, read back by a consumer in this process; p50 and p99 of receive time minus send time.
``benchmarks/run.py`` calls :func:`run`: the defaults, on a real Kafka cluster it starts.

On a cluster it starts, each run also reports the brokers' CPU time (user+sys from /proc) per produce
request the producer sent (librdkafka's statistics count them): the leader's, and the two followers'
together. On a shared machine that is the steadier figure: throughput and latency move with the load,
CPU time per request much less.

Without ``--bootstrap`` the cluster is the one the fault tests use (tests/cluster/harness.py): ZooKeeper
and three brokers, each in its own network namespace, all on this machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from run import Result

from odradek.tools.perf import process_cpu_seconds

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Setup:
    name: str
    replication_factor: int
    acks: str

    @property
    def min_insync(self) -> int:
        return min(2, self.replication_factor)


SETUPS = (Setup("rf 3, acks=all", 3, "all"), Setup("rf 3, acks=1", 3, "1"), Setup("rf 1, acks=all", 1, "all"))


def start_cluster(stack: ExitStack, kind: str) -> tuple[str, dict[int, int]]:
    """A 3-broker cluster from the fault tests' harness, stopped and removed when ``stack`` closes: its
    bootstrap servers and each broker's process id."""
    sys.path.insert(0, str(REPO / "tests" / "cluster"))
    sys.path.insert(0, str(REPO))  # the harness imports tests.conftest
    import harness

    root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-replication-")))
    cluster = stack.enter_context(harness.Cluster(root, kind))
    pids = {broker_id: broker.pid for broker_id, broker in cluster.brokers.items() if broker.pid is not None}
    return cluster.bootstrap, pids


@dataclass
class BrokerCpu:
    """The brokers' CPU time over a measured window, and the produce requests sent in it."""

    pids: dict[int, int]
    leader: int
    start: dict[int, float] | None = None
    end: dict[int, float] | None = None
    produce_requests: int = 0

    def sample(self) -> dict[int, float]:
        return {broker_id: process_cpu_seconds(pid) for broker_id, pid in self.pids.items()}

    def per_request_us(self) -> tuple[float, float]:
        """(the leader's, the followers' together) CPU µs per produce request."""
        assert self.start is not None and self.end is not None
        used = {b: self.end[b] - self.start[b] for b in self.pids}
        n = max(self.produce_requests, 1)
        return used[self.leader] / n * 1e6, sum(v for b, v in used.items() if b != self.leader) / n * 1e6


class RequestCounter:
    """Produce requests the producer sent, from librdkafka's statistics (``statistics.interval.ms``)."""

    INTERVAL_MS = 200

    def __init__(self) -> None:
        self.latest = 0

    def config(self) -> dict[str, object]:
        return {"statistics.interval.ms": self.INTERVAL_MS, "stats_cb": self._on_stats}

    def _on_stats(self, raw: str) -> None:
        stats = json.loads(raw)
        self.latest = sum(b.get("req", {}).get("Produce", 0) for b in stats.get("brokers", {}).values())

    def settle(self, producer: Producer) -> int:
        """The count once a statistics report after the last request has come in."""
        producer.poll(self.INTERVAL_MS * 2.5 / 1000)
        return self.latest


def leader_of(bootstrap: str, topic: str) -> int:
    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics[topic].partitions[0].leader


def create_topic(bootstrap: str, replication_factor: int, min_insync: int) -> str:
    topic = f"bench-replication-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": str(min_insync)}
    admin.create_topics([NewTopic(topic, 1, replication_factor, config=config)])[topic].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every replica in the ISR before measuring
        partition = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(0)
        if partition is not None and partition.leader >= 0 and len(partition.isrs) == replication_factor:
            return topic
        time.sleep(0.2)
    raise TimeoutError(f"{topic}: replicas not in sync within 60 s")


def throughput(bootstrap: str, setup: Setup, records: int, size: int, cpu: BrokerCpu | None = None) -> tuple[float, float]:
    """(records/s, MB/s) of one producer sending ``records`` records to a new topic of ``setup``; ``cpu``
    (its leader set here) gets the brokers' CPU time over the run."""
    topic = create_topic(bootstrap, setup.replication_factor, setup.min_insync)
    counter = RequestCounter()
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": setup.acks, "linger.ms": 5, "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576, **counter.config(),
    })
    failed: list[str] = []

    def delivered(err: object, _: object) -> None:
        if err is not None:
            failed.append(str(err))

    value = b"x" * size
    producer.produce(topic, value, on_delivery=delivered)  # connections and metadata before timing
    producer.flush(30)
    sent_before = counter.settle(producer)
    if cpu is not None:
        cpu.leader = leader_of(bootstrap, topic)
        cpu.start = cpu.sample()
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120):
        raise TimeoutError("records still unacknowledged after 120 s")
    elapsed = time.perf_counter() - start
    if cpu is not None:
        cpu.end = cpu.sample()
        cpu.produce_requests = counter.settle(producer) - sent_before
    if failed:
        raise KafkaException(f"{len(failed)} writes failed, first: {failed[0]}")
    return records / elapsed, records * size / elapsed / 1e6


def end_to_end_latency(bootstrap: str, setup: Setup, rate: int, seconds: float, cpu: BrokerCpu | None = None) -> tuple[float, float]:
    """(p50, p99) in ms of send-to-receive time at ``rate`` records/s, linger 1 ms; ``cpu`` as for
    :func:`throughput`."""
    topic = create_topic(bootstrap, setup.replication_factor, setup.min_insync)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])  # no group: nothing to wait for
    latencies: list[float] = []
    expected = int(rate * seconds)
    done = threading.Event()

    def consume() -> None:
        while len(latencies) < expected and not done.is_set():
            # poll returns each record as it arrives; consume(n, timeout) would hold them until n or the timeout
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                latencies.append(time.perf_counter() - struct.unpack(">d", msg.value())[0])

    reader = threading.Thread(target=consume)
    reader.start()
    counter = RequestCounter()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": setup.acks, "linger.ms": 1, **counter.config()})
    producer.produce(topic, struct.pack(">d", time.perf_counter()))  # both clients connected and reading
    producer.flush(30)
    deadline = time.monotonic() + 30
    while not latencies and time.monotonic() < deadline:
        time.sleep(0.01)
    if not latencies:
        raise TimeoutError("the first record was not read back within 30 s")
    sent_before = counter.settle(producer)
    latencies.clear()
    if cpu is not None:
        cpu.leader = leader_of(bootstrap, topic)
        cpu.start = cpu.sample()
    start = time.perf_counter()
    for i in range(expected):
        time.sleep(max(0.0, start + i / rate - time.perf_counter()))
        producer.produce(topic, struct.pack(">d", time.perf_counter()))
        producer.poll(0)
    producer.flush(30)
    reader.join(30)
    if cpu is not None:
        cpu.end = cpu.sample()
        cpu.produce_requests = counter.settle(producer) - sent_before
    done.set()
    reader.join()
    consumer.close()
    if len(latencies) < expected:
        raise TimeoutError(f"only {len(latencies)} of {expected} records read back")
    quantiles = statistics.quantiles(latencies, n=100)
    return quantiles[49] * 1000, quantiles[98] * 1000


def measure_cluster(bootstrap: str, records: int = 300_000, size: int = 1000, rate: int = 2000, seconds: float = 10.0, pids: dict[int, int] | None = None) -> list[Result]:
    """Throughput of every set-up, then latency at rf 3 and rf 1 (acks=all); with the brokers' ``pids``,
    their CPU time per produce request in each."""
    results = []

    def add_cpu(what: str, cpu: BrokerCpu | None) -> None:
        if cpu is not None:
            leader_us, followers_us = cpu.per_request_us()
            results.append(Result(f"{what}: produce requests", cpu.produce_requests, "requests"))
            results.append(Result(f"{what}: leader CPU per produce request", leader_us, "µs (lower is better)"))
            results.append(Result(f"{what}: followers' CPU per produce request", followers_us, "µs (lower is better)"))

    for setup in SETUPS:
        cpu = BrokerCpu(pids, -1) if pids else None
        _, mb_per_s = throughput(bootstrap, setup, records, size, cpu)
        results.append(Result(f"produce {size} B records, {setup.name}", mb_per_s, "MB/s"))
        add_cpu(f"produce {size} B records, {setup.name}", cpu)
    for setup in (SETUPS[0], SETUPS[2]):
        cpu = BrokerCpu(pids, -1) if pids else None
        p50, p99 = end_to_end_latency(bootstrap, setup, rate, seconds, cpu)
        results.append(Result(f"end-to-end p50 at {rate} records/s, {setup.name}", p50, "ms"))
        results.append(Result(f"end-to-end p99 at {rate} records/s, {setup.name}", p99, "ms"))
        add_cpu(f"end-to-end at {rate} records/s, {setup.name}", cpu)
    return results


def run() -> list[Result]:
    """For benchmarks/run.py: the defaults, on a 3-broker real Kafka started here as Kafka ships it."""
    with ExitStack() as stack:
        bootstrap, pids = start_cluster(stack, "kafka-as-shipped")
        return measure_cluster(bootstrap, pids=pids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", help="the cluster's bootstrap servers; without it a 3-broker cluster is started")
    parser.add_argument("--kind", default="kafka", choices=("kafka", "kafka-as-shipped", "odradek"), help="brokers of the started cluster (kafka: the fault tests' quick-start JVM options; kafka-as-shipped: those of Kafka's scripts)")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=1000, help="record value size in bytes")
    parser.add_argument("--rate", type=int, default=2000, help="records/s for the latency runs")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each latency run")
    parser.add_argument("--rounds", type=int, default=1, help="measure this many times on the same cluster (a JVM compiles its hot paths during the first)")
    args = parser.parse_args()
    with ExitStack() as stack:
        bootstrap, pids = (args.bootstrap, {}) if args.bootstrap else start_cluster(stack, args.kind)
        for round_ in range(1, args.rounds + 1):
            if args.rounds > 1:
                print(f"round {round_} of {args.rounds}", flush=True)
            for result in measure_cluster(bootstrap, args.records, args.size, args.rate, args.seconds, pids):
                print(f"{result.name:<52} {result.value:>10,.1f} {result.unit}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
