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

Without ``--bootstrap`` the cluster is the one the fault tests use (tests/cluster/harness.py): ZooKeeper
and three brokers, each in its own network namespace, all on this machine.
"""

from __future__ import annotations

import argparse
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


def start_cluster(stack: ExitStack, kind: str) -> str:
    """A 3-broker cluster from the fault tests' harness, stopped and removed when ``stack`` closes."""
    sys.path.insert(0, str(REPO / "tests" / "cluster"))
    import harness

    root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-replication-")))
    cluster = stack.enter_context(harness.Cluster(root, kind))
    return cluster.bootstrap


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


def throughput(bootstrap: str, setup: Setup, records: int, size: int) -> tuple[float, float]:
    """(records/s, MB/s) of one producer sending ``records`` records to a new topic of ``setup``."""
    topic = create_topic(bootstrap, setup.replication_factor, setup.min_insync)
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": setup.acks, "linger.ms": 5, "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
    })
    failed: list[str] = []

    def delivered(err: object, _: object) -> None:
        if err is not None:
            failed.append(str(err))

    value = b"x" * size
    producer.produce(topic, value, on_delivery=delivered)  # connections and metadata before timing
    producer.flush(30)
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
    if failed:
        raise KafkaException(f"{len(failed)} writes failed, first: {failed[0]}")
    return records / elapsed, records * size / elapsed / 1e6


def end_to_end_latency(bootstrap: str, setup: Setup, rate: int, seconds: float) -> tuple[float, float]:
    """(p50, p99) in ms of send-to-receive time at ``rate`` records/s, linger 1 ms."""
    topic = create_topic(bootstrap, setup.replication_factor, setup.min_insync)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])  # no group: nothing to wait for
    latencies: list[float] = []
    expected = int(rate * seconds)
    done = threading.Event()

    def consume() -> None:
        while len(latencies) < expected and not done.is_set():
            for msg in consumer.consume(1000, timeout=0.1):
                if msg.error() is None:
                    latencies.append(time.perf_counter() - struct.unpack(">d", msg.value())[0])

    reader = threading.Thread(target=consume)
    reader.start()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": setup.acks, "linger.ms": 1})
    producer.produce(topic, struct.pack(">d", time.perf_counter()))  # both clients connected and reading
    producer.flush(30)
    deadline = time.monotonic() + 30
    while not latencies and time.monotonic() < deadline:
        time.sleep(0.01)
    if not latencies:
        raise TimeoutError("the first record was not read back within 30 s")
    latencies.clear()
    start = time.perf_counter()
    for i in range(expected):
        time.sleep(max(0.0, start + i / rate - time.perf_counter()))
        producer.produce(topic, struct.pack(">d", time.perf_counter()))
        producer.poll(0)
    producer.flush(30)
    reader.join(30)
    done.set()
    reader.join()
    consumer.close()
    if len(latencies) < expected:
        raise TimeoutError(f"only {len(latencies)} of {expected} records read back")
    quantiles = statistics.quantiles(latencies, n=100)
    return quantiles[49] * 1000, quantiles[98] * 1000


def measure_cluster(bootstrap: str, records: int = 300_000, size: int = 1000, rate: int = 2000, seconds: float = 10.0) -> list[Result]:
    """Throughput of every set-up, then latency at rf 3 and rf 1 (acks=all)."""
    results = []
    for setup in SETUPS:
        _, mb_per_s = throughput(bootstrap, setup, records, size)
        results.append(Result(f"produce {size} B records, {setup.name}", mb_per_s, "MB/s"))
    for setup in (SETUPS[0], SETUPS[2]):
        p50, p99 = end_to_end_latency(bootstrap, setup, rate, seconds)
        results.append(Result(f"end-to-end p50 at {rate} records/s, {setup.name}", p50, "ms"))
        results.append(Result(f"end-to-end p99 at {rate} records/s, {setup.name}", p99, "ms"))
    return results


def run() -> list[Result]:
    """For benchmarks/run.py: the defaults, on a 3-broker real Kafka started here."""
    with ExitStack() as stack:
        return measure_cluster(start_cluster(stack, "kafka"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", help="the cluster's bootstrap servers; without it a 3-broker cluster is started")
    parser.add_argument("--kind", default="kafka", choices=("kafka", "odradek"), help="brokers of the started cluster")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=1000, help="record value size in bytes")
    parser.add_argument("--rate", type=int, default=2000, help="records/s for the latency runs")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each latency run")
    args = parser.parse_args()
    with ExitStack() as stack:
        bootstrap = args.bootstrap or start_cluster(stack, args.kind)
        for result in measure_cluster(bootstrap, args.records, args.size, args.rate, args.seconds):
            print(f"{result.name:<52} {result.value:>10,.1f} {result.unit}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
