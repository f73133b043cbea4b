"""Faults on a partition's leader under continuous acks=all load lose nothing acknowledged.

Three brokers, a topic of rf 3 with ``min.insync.replicas=2`` and no unclean election; an idempotent
producer writes numbered records to every partition and a consumer reads them all along (checker.py). Each
round hits the leader of partition 0: SIGKILL, SIGSTOP, a network partition from the other brokers, or a
partition from ZooKeeper. Each fault must show its effect in ZooKeeper while it lasts: where Kafka fails
over (kill, pause, session expiry) the controller elects another leader, and where the old leader is gone
(kill, pause) the writes to partition 0 are acknowledged again before it comes back; a leader cut from
ZooKeeper still answers Metadata with itself as leader (it learns of its expired session only when it
reaches ZooKeeper again), so a client that asks it may wait for the cut to heal; a leader cut from its followers acknowledges no write to partition 0 until healed
(its followers cannot fetch; in ZooKeeper mode its AlterPartition to shrink the ISR only reaches the
controller when it is the controller itself, and then min ISR 2 refuses the writes). Then the fault is undone, every replica must be back in the ISR and writes
acknowledged on every partition before the next round. At the end the checker must find no
acknowledged write lost, no duplicate, no reordering and no read of a record that did not survive.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import pytest
from checker import ViolationKind, Workload
from harness import CLUSTER_SETTINGS, Cluster, LeaderAndIsr

PARTITIONS = 3
ROUNDS = 2
CUT_HOLD_S = int(CLUSTER_SETTINGS["replica.lag.time.max.ms"]) / 1000 + 2
"""How long a cut from the other brokers lasts: past ``replica.lag.time.max.ms``, the followers' lag."""


def leader_replaced(cluster: Cluster, workload: Workload, topic: str, before: LeaderAndIsr) -> None:
    """The controller elects another leader (in ZooKeeper)."""
    cluster.wait_for_leader_change(topic, 0, before)


def leader_moved(cluster: Cluster, workload: Workload, topic: str, before: LeaderAndIsr) -> None:
    """The controller elects another leader, and writes to the partition are acknowledged again."""
    leader_replaced(cluster, workload, topic, before)
    workload.wait_for_progress()


def writes_stall(cluster: Cluster, workload: Workload, topic: str, before: LeaderAndIsr) -> None:
    """No write to the partition produced after its leader was cut from its followers is acknowledged while
    the cut lasts (writes in flight before it may still complete)."""
    cut_at = time.monotonic()
    time.sleep(CUT_HOLD_S)
    acknowledged = workload.acknowledged_since(0, cut_at)
    assert acknowledged == 0, f"leader {before.leader} of {topic}-0 acknowledged {acknowledged} writes produced while it was cut from its followers"


@dataclass(frozen=True)
class LeaderFault:
    """How a round hits the leader, what must be seen while it lasts, and how it is undone."""

    inject: Callable[[Cluster, int], None]
    effect: Callable[[Cluster, Workload, str, LeaderAndIsr], None]
    undo: Callable[[Cluster, int], None]


def heal(cluster: Cluster, _: int) -> None:
    cluster.heal()


FAULTS: dict[str, LeaderFault] = {
    "kill": LeaderFault(Cluster.kill, leader_moved, Cluster.restart),
    "pause": LeaderFault(Cluster.pause, leader_moved, Cluster.resume),
    "partition-from-brokers": LeaderFault(Cluster.partition_from_brokers, writes_stall, heal),
    "isolate-from-zookeeper": LeaderFault(Cluster.isolate_from_zk, leader_replaced, heal),
}


@pytest.mark.parametrize("fault_name", FAULTS)
def test_nothing_acknowledged_is_lost(cluster: Cluster, fault_name: str) -> None:
    fault = FAULTS[fault_name]
    topic = f"leader-{fault_name}"
    cluster.create_topic(topic, PARTITIONS)
    timings: list[str] = []
    with Workload(cluster.bootstrap, topic, PARTITIONS) as workload:
        workload.wait_for_progress()
        for _ in range(ROUNDS):
            before = cluster.leader_and_isr(topic, 0)
            start = time.monotonic()
            fault.inject(cluster, before.leader)
            try:
                fault.effect(cluster, workload, topic, before)
                took = time.monotonic() - start
            finally:
                fault.undo(cluster, before.leader)
            recovered = cluster.wait_fully_replicated(topic) + workload.wait_for_progress()
            timings.append(f"leader {before.leader}: fault for {took:.1f}s, {recovered:.1f}s to recover")
        report = workload.finish()
    print(f"\n{fault_name}: {'; '.join(timings)}\n{report}")
    assert report.ok, str(report)
    assert report.acknowledged > 0 and report.read > 0


def test_an_unclean_election_loses_acknowledged_writes_and_the_checker_reports_it(cluster: Cluster) -> None:
    """The loss Kafka documents for ``unclean.leader.election.enable=true``, made to happen: a follower cut
    from the other brokers drops out of the ISR while writes go on; the leader and the follower still in
    the ISR are killed; the stale follower, the only broker left, becomes leader although it is not in the
    ISR, and the others truncate to its log when they come back. The checker must see what was lost (the
    idempotent producer may also stop on a fatal OUT_OF_ORDER_SEQUENCE_NUMBER: its writes are gone)."""
    topic = "unclean-election"
    cluster.create_topic(topic, 1, config={"unclean.leader.election.enable": "true"})
    with Workload(cluster.bootstrap, topic, 1) as workload:
        workload.wait_for_progress()
        state = cluster.leader_and_isr(topic, 0)
        controller = cluster.controller()
        stale = next(b for b in state.isr if b not in (state.leader, controller))  # the shrink must reach the controller
        in_sync = next(b for b in state.isr if b not in (state.leader, stale))
        cluster.partition_from_brokers(stale)
        cluster.wait_until(lambda: cluster.leader_and_isr(topic, 0).isr == (state.leader, in_sync), f"broker {stale} out of the ISR", 60)
        workload.wait_for_progress()  # writes acknowledged by the leader and the follower in sync only
        cluster.kill(state.leader)
        cluster.kill(in_sync)
        cluster.heal()
        cluster.wait_until(lambda: cluster.leader_and_isr(topic, 0).leader == stale, f"unclean election of broker {stale}", 60)
        cluster.restart(state.leader)
        cluster.restart(in_sync)
        cluster.wait_fully_replicated(topic)
        report = workload.finish()
    print(f"\nunclean election of broker {stale}:\n{report}")
    assert report.count(ViolationKind.LOST) > 0, str(report)
    assert report.count(ViolationKind.DUPLICATE) == report.count(ViolationKind.REORDERED) == 0, str(report)
