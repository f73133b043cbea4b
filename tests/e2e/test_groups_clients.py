"""Consumer groups of real clients against a real broker: confluent-kafka, kafka-python, aiokafka, mixed.

Each client's group goes through Kafka's membership story on a 6-partition topic: three members split the
partitions; one member is killed with SIGKILL (a consumer in a child process) and its partitions move to
the others only once its session times out; a new member joins; one closes and leaves. Records are
produced in quiet phases and every member commits what it consumed, so a partition changing owner must
resume at its committed offset: in the end every record was consumed exactly once and the group's
committed offsets are the topic's end offsets.

Each member polls continuously on its own thread, as an application would (kafka-python 3.0's consumer
discards a rebalance that completes while nobody is inside ``poll``, so members polled in turn would
rebalance forever).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Callable, Protocol

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import Broker

PARTITIONS = 6
SESSION_MS = 6000
HEARTBEAT_MS = 500
WAIT_S = 45
_ids = itertools.count()

Record = tuple[int, int]  # (partition, offset)


class Member(Protocol):
    def poll(self) -> list[Record]: ...
    def assignment(self) -> set[int]: ...
    def close(self) -> None: ...


class ConfluentMember:
    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str = "range", **config: object) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "partition.assignment.strategy": assignor,
                **config,
            }
        )
        self.consumer.subscribe([topic])

    def poll(self) -> list[Record]:
        messages = [m for m in self.consumer.consume(100, 0.2) if m.error() is None]
        if messages:
            self.consumer.commit(asynchronous=False)
        return [(m.partition(), m.offset()) for m in messages]

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonMember:
    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str = "range") -> None:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        strategy = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[assignor]
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            partition_assignment_strategy=[strategy],
        )

    def poll(self) -> list[Record]:
        # kafka-python 3.0.12 can stall for good when a poll times out while its SyncGroup is in flight (it
        # logs "timeout in ensure_active_group; returning early" and never heartbeats again; seen under load
        # in full-suite runs), so each poll gives a join time to complete, as compat-tests' member does; it
        # returns as soon as records arrive.
        batches = self.consumer.poll(timeout_ms=500)
        records = [(tp.partition, r.offset) for tp, rs in batches.items() for r in rs]
        if records:
            self.consumer.commit()
        return records

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self.consumer.close()


class AiokafkaMember:
    """aiokafka on its own event loop thread, so that it heartbeats while the test polls other members."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str = "range") -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        strategy = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[assignor]
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=HEARTBEAT_MS,
                partition_assignment_strategy=[strategy],
            )
            await consumer.start()
            return consumer

        self.consumer = self._run(start())

    def _run(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def poll(self) -> list[Record]:
        async def poll() -> list[Record]:
            batches = await self.consumer.getmany(timeout_ms=200)
            records = [(tp.partition, r.offset) for tp, rs in batches.items() for r in rs]
            if records:
                await self.consumer.commit()
            return records

        return self._run(poll())

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self._run(self.consumer.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


MEMBERS: dict[str, Callable[..., Member]] = {"confluent": ConfluentMember, "kafka-python": KafkaPythonMember, "aiokafka": AiokafkaMember}


class PolledMember:
    """A member polled continuously on its own thread; the test collects what it consumed."""

    def __init__(self, member: Member) -> None:
        self.member = member
        self.records: queue.Queue[Record] = queue.Queue()
        self._assignment: set[int] = set()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for record in self.member.poll():
                self.records.put(record)
            self._assignment = self.member.assignment()

    def poll(self) -> list[Record]:
        records = []
        while not self.records.empty():
            records.append(self.records.get())
        return records

    def assignment(self) -> set[int]:
        return self._assignment

    def close(self) -> None:
        self._stop.set()
        self.thread.join(30)
        self.member.close()
        self._assignment = set()


def serve_member(client: str, bootstrap: str, group: str, topic: str, assignor: str) -> None:
    """A member in a child process: reports its assignment and each record (before and after committing it)
    as JSON lines, so the parent knows when it may kill it without losing a commit."""
    member = MEMBERS[client](bootstrap, group, topic, assignor)
    reported = None
    while True:
        records = member.poll()
        for record in records:
            print(json.dumps({"committed": record}), flush=True)
        assignment = sorted(member.assignment())
        if assignment != reported:
            reported = assignment
            print(json.dumps({"assignment": assignment}), flush=True)


class ChildMember:
    """The parent's view of a member in a child process; ``kill`` is SIGKILL, so it never leaves the group."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, assignor: str = "range") -> None:
        code = (
            "import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('groups_clients', {__file__!r})\n"
            "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
            "module.serve_member(*sys.argv[1:])\n"
        )
        self.process = subprocess.Popen([sys.executable, "-c", code, client, bootstrap, group, topic, assignor], stdout=subprocess.PIPE, text=True)
        self.lines: queue.Queue[dict] = queue.Queue()
        self._assignment: set[int] = set()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def poll(self) -> list[Record]:
        records = []
        while True:
            try:
                event = self.lines.get_nowait()
            except queue.Empty:
                return records
            if "assignment" in event:
                self._assignment = set(event["assignment"])
            else:
                records.append(tuple(event["committed"]))

    def assignment(self) -> set[int]:
        return self._assignment

    def close(self) -> None:
        self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._assignment = set()


class Group:
    """The members of one group and every record they consumed."""

    def __init__(self) -> None:
        self.members: list[Member] = []
        self.consumed: Counter[Record] = Counter()

    def pump(self, done: Callable[[], bool], what: str, timeout: float = WAIT_S) -> float:
        """Poll every member in turn until ``done``; returns the seconds it took."""
        start = time.monotonic()
        while not done():
            assert time.monotonic() - start < timeout, f"timed out waiting for {what}: assignments {[sorted(m.assignment()) for m in self.members]}"
            for member in self.members:
                self.consumed.update(member.poll())
            time.sleep(0.02)
        return time.monotonic() - start

    def owns_all_partitions(self) -> bool:
        """Each partition is owned by exactly one member, and every member owns some."""
        assignments = [m.assignment() for m in self.members]
        owned = [p for a in assignments for p in a]
        return sorted(owned) == list(range(PARTITIONS)) and all(assignments)

    def settle(self, what: str) -> float:
        return self.pump(self.owns_all_partitions, what)

    def consume(self, total: int) -> None:
        self.pump(lambda: sum(self.consumed.values()) >= total, f"{total} records")
        # A little longer: a duplicate delivery would show up now.
        deadline = time.monotonic() + 0.5
        self.pump(lambda: time.monotonic() > deadline, "quiet")
        assert sum(self.consumed.values()) == total


@pytest.fixture(scope="module")
def broker():
    with Broker(config={"group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


def new_topic(bootstrap: str) -> str:
    name = f"groups-{next(_ids)}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(10)
    return name


def produce(bootstrap: str, topic: str, per_partition: int, phase: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(topic, f"{phase}-{p}-{i}".encode(), partition=p)
    assert producer.flush(10) == 0


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)}
    finally:
        consumer.close()


def run_membership_story(bootstrap: str, make: Callable[[], Member], make_child: Callable[[], ChildMember], topic: str, group_id: str) -> None:
    group = Group()
    child = make_child()
    group.members = [make(), make(), child]
    group.settle("three members to split the partitions")
    assert all(len(m.assignment()) == 2 for m in group.members)

    produce(bootstrap, topic, 10, 1)
    group.consume(60)

    child.kill()
    group.members.remove(child)
    took = group.settle("the killed member's partitions to move")
    assert took > SESSION_MS / 1000 * 0.6, f"partitions moved after {took:.1f}s: before the killed member's session timed out"

    produce(bootstrap, topic, 10, 2)
    group.consume(120)

    group.members.append(make())
    group.settle("a new member to get partitions")
    assert all(len(m.assignment()) == 2 for m in group.members)

    leaving = group.members.pop(0)
    leaving.close()
    took = group.settle("the closed member's partitions to move")
    assert took < SESSION_MS / 1000, "a member that closes leaves the group at once"

    produce(bootstrap, topic, 10, 3)
    group.consume(180)

    assert set(group.consumed.values()) == {1}, "every record consumed exactly once"
    assert {p for p, _ in group.consumed} == set(range(PARTITIONS))
    for member in group.members:
        member.close()
    assert committed(bootstrap, group_id, topic) == {p: 30 for p in range(PARTITIONS)}


@pytest.mark.parametrize("client", list(MEMBERS))
def test_group_membership_story(broker: Broker, client: str) -> None:
    topic = new_topic(broker.bootstrap)
    group = f"story-{client}-{next(_ids)}"
    run_membership_story(
        broker.bootstrap,
        lambda: PolledMember(MEMBERS[client](broker.bootstrap, group, topic)),
        lambda: ChildMember(client, broker.bootstrap, group, topic),
        topic,
        group,
    )


def test_mixed_group_of_kafka_python_and_confluent_with_the_range_assignor(broker: Broker) -> None:
    topic = new_topic(broker.bootstrap)
    group = f"mixed-{next(_ids)}"
    clients = itertools.cycle(["kafka-python", "confluent"])
    run_membership_story(
        broker.bootstrap,
        lambda: PolledMember(MEMBERS[next(clients)](broker.bootstrap, group, topic, "range")),
        lambda: ChildMember("confluent", broker.bootstrap, group, topic, "range"),
        topic,
        group,
    )
