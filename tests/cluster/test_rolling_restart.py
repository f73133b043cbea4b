"""A rolling restart of every broker under continuous acks=all load loses nothing and fails no write.

Three brokers, a topic of rf 3 with ``min.insync.replicas=2``, the checker's idempotent producer and reader
running all along. One broker at a time (the controller among them): SIGTERM, which makes it ask the
controller to move its leaderships away (controlled shutdown) before it exits; once it has exited, it
leads no partition of the topic and is in no ISR (ZooKeeper); it is started again on its log directory and
the next one waits until every replica is back in the ISR and writes are acknowledged on every partition.
At the end the checker finds no acknowledged write lost, no duplicate, no reordering, no read of a record
that did not survive, and no write failed: the producer met only errors it retries (NOT_LEADER_OR_FOLLOWER,
a closed connection), which it does not report.
"""

from __future__ import annotations

import signal
import time

from checker import Workload
from harness import Cluster

PARTITIONS = 3
STOP_TIMEOUT_S = 60.0
"""Bound on a controlled shutdown (Kafka's default is 3 tries of the controller, 5 s apart at worst)."""


def stop(cluster: Cluster, broker_id: int) -> float:
    """SIGTERM the broker and wait until its process has exited; the seconds it took."""
    broker = cluster.brokers[broker_id]
    start = time.monotonic()
    cluster.signal(broker_id, signal.SIGTERM)
    cluster.wait_until(lambda: not broker.running(), f"broker {broker_id} exiting after SIGTERM", STOP_TIMEOUT_S)
    return time.monotonic() - start


def test_a_rolling_restart_loses_nothing(cluster: Cluster) -> None:
    topic = "rolling"
    cluster.create_topic(topic, PARTITIONS)
    timings: list[str] = []
    with Workload(cluster.bootstrap, topic, PARTITIONS) as workload:
        workload.wait_for_progress()
        for broker_id in sorted(cluster.brokers):
            stopped_in = stop(cluster, broker_id)
            states = {p: cluster.leader_and_isr(topic, p) for p in range(PARTITIONS)}
            assert all(s.leader != broker_id and broker_id not in s.isr for s in states.values()), f"broker {broker_id} stopped, still leader or in the ISR: {states}"
            cluster.restart(broker_id)
            recovered = cluster.wait_fully_replicated(topic) + workload.wait_for_progress()
            timings.append(f"broker {broker_id}: stopped in {stopped_in:.1f}s, {recovered:.1f}s to a full ISR and writes after its restart")
        report = workload.finish()
    print(f"\nrolling restart: {'; '.join(timings)}\n{report}")
    assert report.ok, str(report)
    assert report.failed == 0, str(report)
    assert report.acknowledged > 0 and report.read > 0
