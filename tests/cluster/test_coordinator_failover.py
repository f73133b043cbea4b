"""A consumer group's coordinator moves with its ``__consumer_offsets`` partition, and the group's committed
offsets with it.

Three brokers, ``__consumer_offsets`` of rf 3 (3 partitions), a topic of rf 3 written all along by the
checker's idempotent producer; two confluent-kafka consumers of one group read it, each committing
synchronously after every batch. The broker leading the group's ``__consumer_offsets`` partition is killed
(SIGKILL) or paused (SIGSTOP) and, while it is down:

- the controller elects another leader of that partition (ZooKeeper), and FindCoordinator asked of the
  other brokers then names that leader;
- the new coordinator loads the group before it answers for it: each OffsetFetch it answers without an
  error holds at least every offset whose commit was acknowledged before the fault (until then it answers
  COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR, as Kafka does);
- the consumers go on: commits are acknowledged again on every partition, beyond the ones before the fault.

After the broker is back: every acknowledged write was delivered to the group; no record was delivered
again at an offset below a commit acknowledged before the delivery began (at-least-once, and no more
re-reading than that); the group's committed offsets are the last acknowledged ones; and the checker finds
the topic's log whole.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import pytest
from checker import REQUEST_TIMEOUT_MS, Workload
from confluent_kafka import Consumer, KafkaException
from harness import Cluster

from odradek.broker.coordinator.runtime import partition_for
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.conftest import Wire

GROUP_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 3
"""``offsets.topic.num.partitions`` of the harness's brokers."""
PARTITIONS = 3
MEMBERS = 2
LOADING_ERRORS = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
"""What a broker answers for a group it is not (yet) serving."""


@dataclass(frozen=True)
class BrokerFault:
    inject: Callable[[Cluster, int], None]
    undo: Callable[[Cluster, int], None]


FAULTS = {"kill": BrokerFault(Cluster.kill, Cluster.restart), "pause": BrokerFault(Cluster.pause, Cluster.resume)}


@dataclass(frozen=True)
class Event:
    """A delivery to the group (``offset`` of the record) or an acknowledged commit (``offset``: the next to
    read), at ``at`` (``time.monotonic()``: for a delivery, when the consume call that returned it began)."""

    partition: int
    offset: int
    at: float


@dataclass
class Group:
    """:data:`MEMBERS` consumers of ``group_id`` in threads, each committing synchronously after each batch."""

    bootstrap: str
    topic: str
    group_id: str
    deliveries: list[Event] = field(default_factory=list)
    commits: list[Event] = field(default_factory=list)
    commit_errors: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> "Group":
        self.threads = [threading.Thread(target=self._member, daemon=True) for _ in range(MEMBERS)]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(60)

    def _member(self) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group_id, "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "socket.timeout.ms": REQUEST_TIMEOUT_MS, "log_level": 0,
        })
        consumer.subscribe([self.topic])
        try:
            while not self.stopping.is_set():
                began = time.monotonic()
                messages = [m for m in consumer.consume(200, timeout=0.3) if m.error() is None]
                with self.lock:
                    self.deliveries.extend(Event(m.partition(), m.offset(), began) for m in messages)
                if not messages:
                    continue
                try:
                    committed = consumer.commit(asynchronous=False) or []
                except KafkaException as exc:
                    with self.lock:
                        self.commit_errors[exc.args[0].name()] += 1
                    continue
                acknowledged_at = time.monotonic()
                with self.lock:
                    self.commits.extend(Event(tp.partition, tp.offset, acknowledged_at) for tp in committed if tp.error is None and tp.offset >= 0)
        finally:
            consumer.close()

    def committed(self) -> dict[int, int]:
        """The highest acknowledged commit of each partition."""
        with self.lock:
            out: dict[int, int] = {}
            for commit in self.commits:
                out[commit.partition] = max(out.get(commit.partition, -1), commit.offset)
            return out

    def wait_for_commits_beyond(self, before: dict[int, int], timeout_s: float = 60.0) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            now = self.committed()
            if all(now.get(p, -1) > before.get(p, -1) for p in range(PARTITIONS)):
                return time.monotonic() - start
            time.sleep(0.1)
        raise TimeoutError(f"no acknowledged commit beyond {before} on every partition within {timeout_s}s: {self.committed()}, errors {dict(self.commit_errors)}")

    def wait_delivered(self, offsets: dict[int, set[int]], timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                missing = {p: len(wanted - {d.offset for d in self.deliveries if d.partition == p}) for p, wanted in offsets.items()}
            if not any(missing.values()):
                return
            time.sleep(0.2)
        raise TimeoutError(f"acknowledged writes never delivered to the group, per partition: {missing}")

    def rereads_below_commits(self) -> list[str]:
        """Deliveries at an offset below a commit of their partition acknowledged before they began."""
        with self.lock:
            commits = sorted(self.commits, key=lambda c: c.at)
            deliveries = list(self.deliveries)
        found = []
        for delivery in deliveries:
            floor = max((c.offset for c in commits if c.partition == delivery.partition and c.at < delivery.at), default=-1)
            if delivery.offset < floor:
                found.append(f"partition {delivery.partition} offset {delivery.offset} delivered after offset {floor} was committed")
        return found


def coordinator_answer(bootstrap: str, group_id: str) -> tuple[int, int]:
    """(error code, node id) of FindCoordinator v4 for the group, asked of one broker."""
    wire = Wire(bootstrap)
    try:
        [answer] = wire.call(ApiKey.FindCoordinator, 4, {"key_type": 0, "coordinator_keys": [group_id]}).coordinators
        return answer.error_code, answer.node_id
    finally:
        wire.close()


def offsets_answer(bootstrap: str, group_id: str, topic: str) -> tuple[int, dict[int, int]]:
    """(group error code, committed offset per partition) of OffsetFetch v8, asked of one broker."""
    wire = Wire(bootstrap)
    try:
        body = {"groups": [{"group_id": group_id, "topics": [{"name": topic, "partition_indexes": list(range(PARTITIONS))}]}], "require_stable": False}
        [group] = wire.call(ApiKey.OffsetFetch, 8, body).groups
        offsets = {p.partition_index: p.committed_offset for t in group.topics for p in t.partitions}
        return group.error_code, offsets
    finally:
        wire.close()


@pytest.mark.parametrize("fault_name", FAULTS)
def test_the_group_coordinator_moves_with_its_partition(cluster: Cluster, fault_name: str) -> None:
    fault = FAULTS[fault_name]
    topic, group_id = f"coordinated-{fault_name}", f"group-{fault_name}"
    cluster.create_topic(topic, PARTITIONS)
    offsets_partition = partition_for(group_id, OFFSETS_PARTITIONS)
    with Workload(cluster.bootstrap, topic, PARTITIONS, rate_per_partition=50) as workload, Group(cluster.bootstrap, topic, group_id) as group:
        group.wait_for_commits_beyond({})
        cluster.wait_fully_replicated(GROUP_TOPIC)
        before = cluster.leader_and_isr(GROUP_TOPIC, offsets_partition)
        others = {b: broker.bootstrap for b, broker in cluster.brokers.items() if b != before.leader}
        committed_before = group.committed()
        fault.inject(cluster, before.leader)
        answers: Counter[str] = Counter()
        try:

            def served_by_new_leader() -> bool:
                """Every other broker asked OffsetFetch: none answers for the group without its commits; true
                once ZooKeeper names a new leader of the group's partition and that broker answers."""
                new_leader = cluster.leader_and_isr(GROUP_TOPIC, offsets_partition).leader
                served = False
                for broker_id, bootstrap in others.items():
                    error, offsets = offsets_answer(bootstrap, group_id, topic)
                    answers[f"broker {broker_id} {ErrorCode(error).name}"] += 1
                    if error in LOADING_ERRORS:
                        continue
                    assert error == ErrorCode.NONE
                    assert all(offsets[p] >= committed for p, committed in committed_before.items()), f"broker {broker_id} answered {offsets}, committed before the fault {committed_before}"
                    served |= broker_id == new_leader
                return served

            loaded_in = wait_asserting(served_by_new_leader, "the new leader of the group's partition answering OffsetFetch", 60)
            new_leader = cluster.leader_and_isr(GROUP_TOPIC, offsets_partition).leader
            took = cluster.wait_until(lambda: {coordinator_answer(b, group_id) for b in others.values()} == {(ErrorCode.NONE, new_leader)}, f"FindCoordinator naming broker {new_leader}", 30)
            continued_in = group.wait_for_commits_beyond(committed_before)
        finally:
            fault.undo(cluster, before.leader)
        cluster.wait_fully_replicated(GROUP_TOPIC)
        cluster.wait_fully_replicated(topic)
        report = workload.finish()
        group.wait_delivered({p: {o for o in offsets.values() if o is not None} for p, offsets in workload.acknowledged.items()})
        group.stop()
        final = offsets_answer(cluster.brokers[cluster.leader_and_isr(GROUP_TOPIC, offsets_partition).leader].bootstrap, group_id, topic)
    print(
        f"\n{fault_name} of broker {before.leader} (coordinator of {group_id}): broker {new_leader} served OffsetFetch {loaded_in:.1f}s after"
        f" ({dict(answers)}), every FindCoordinator named it {took:.1f}s later, commits again after {continued_in:.1f}s;"
        f" commit errors {dict(group.commit_errors)}; {len(group.deliveries)} deliveries\n{report}"
    )
    assert report.ok, str(report)
    assert group.rereads_below_commits() == []
    assert final == (ErrorCode.NONE, {p: group.committed()[p] for p in range(PARTITIONS)})


def wait_asserting(condition: Callable[[], bool], what: str, timeout_s: float) -> float:
    """Poll ``condition`` until true, the seconds it took; an AssertionError in it fails at once, another
    error (a broker in flux) counts as false."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        try:
            if condition():
                return time.monotonic() - start
        except AssertionError:
            raise
        except Exception:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{what}: not within {timeout_s}s")
