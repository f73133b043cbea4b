"""Fail-over time: from SIGKILL of a partition's leader to the first acknowledged write on its new leader.

    python benchmarks/bench_failover.py                  # a 3-broker real Kafka 3.9.1 (needs root)
    python benchmarks/bench_failover.py --kind odradek   # the same cluster of odradek brokers

The cluster is the fault tests' (tests/cluster/harness.py: ZooKeeper and three brokers, each in its own
network namespace, with their settings: a 6 s ZooKeeper session). A topic of 1 partition, rf 3,
``min.insync.replicas`` 2 takes a steady ``--rate`` of writes from an idempotent acks=all producer
(librdkafka's defaults otherwise). Each round kills the partition's leader and measures, from the kill:
when ZooKeeper shows the new leader (the controller's election), and when the first write produced after
the kill is acknowledged (what a client sees); then restarts the killed broker and waits for the full ISR.
``benchmarks/run.py`` calls :func:`run`: three rounds on a real Kafka cluster, the medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from typing import Callable

from confluent_kafka import KafkaError, Message, Producer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "cluster"))
sys.path.insert(0, str(REPO))  # the harness imports tests.conftest

import harness  # noqa: E402
from run import Result  # noqa: E402

TOPIC = "bench-failover"


class SteadyProducer:
    """Writes ``rate`` records/s from a thread, keeping when each was produced and acknowledged."""

    def __init__(self, bootstrap: str, rate: int) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 1})
        self.rate = rate
        self.acknowledged: list[tuple[float, float]] = []  # (produced at, acknowledged at)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self) -> None:
        start = time.monotonic()
        sent = 0
        while not self.stopping.is_set():
            time.sleep(max(0.0, start + sent / self.rate - time.monotonic()))
            self.producer.produce(TOPIC, b"x" * 100, on_delivery=self.delivered(time.monotonic()))
            self.producer.poll(0)
            sent += 1
        self.producer.flush(60)

    def delivered(self, produced_at: float) -> Callable[[KafkaError | None, Message], None]:
        def record(err: KafkaError | None, _: Message) -> None:
            if err is None:
                self.acknowledged.append((produced_at, time.monotonic()))

        return record

    def first_acknowledged_after(self, since: float, timeout_s: float = 120.0) -> float:
        """When the first write produced at ``since`` or later was acknowledged."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            after = [acked for produced, acked in list(self.acknowledged) if produced >= since]
            if after:
                return min(after)
            time.sleep(0.01)
        raise TimeoutError(f"no write acknowledged within {timeout_s}s of the kill")

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()


def failover(kind: str, rounds: int, rate: int) -> tuple[list[float], list[float]]:
    """Per round: seconds from the kill to the new leader in ZooKeeper, and to the first acknowledged write."""
    elections: list[float] = []
    failovers: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as root, harness.Cluster(Path(root), kind) as cluster:
        cluster.create_topic(TOPIC, 1, config={"min.insync.replicas": "2"})
        producer = SteadyProducer(cluster.bootstrap, rate)
        try:
            for round_ in range(1, rounds + 1):
                time.sleep(2)  # steady state
                before = cluster.leader_and_isr(TOPIC, 0)
                killed_at = time.monotonic()
                cluster.kill(before.leader)
                after = cluster.wait_for_leader_change(TOPIC, 0, before)
                elections.append(time.monotonic() - killed_at)
                failovers.append(producer.first_acknowledged_after(killed_at) - killed_at)
                print(f"round {round_}: killed leader {before.leader}; broker {after.leader} leader in ZooKeeper after {elections[-1]:.2f} s, "
                      f"first write acknowledged after {failovers[-1]:.2f} s", flush=True)
                cluster.restart(before.leader)
                cluster.wait_fully_replicated(TOPIC)
        finally:
            producer.stop()
    return elections, failovers


def run() -> list[Result]:
    """For benchmarks/run.py: three rounds on a real Kafka cluster, the medians."""
    elections, failovers = failover("kafka", 3, 500)
    return [
        Result("leader kill to new leader in ZooKeeper, median", statistics.median(elections), "s"),
        Result("leader kill to first acknowledged write, median", statistics.median(failovers), "s"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", default="kafka", choices=sorted(harness.BROKER_KINDS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rate", type=int, default=500, help="writes/s")
    args = parser.parse_args()
    elections, failovers = failover(args.kind, args.rounds, args.rate)
    print(f"{args.kind}, {args.rounds} rounds at {args.rate} writes/s: election median {statistics.median(elections):.2f} s "
          f"(min {min(elections):.2f}, max {max(elections):.2f}); first acknowledged write median {statistics.median(failovers):.2f} s "
          f"(min {min(failovers):.2f}, max {max(failovers):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
