"""A group's life beyond rebalances, seen by real clients: static membership across a member restart,
committed offsets across broker restarts (clean and kill -9), and what admin clients show and do."""

from __future__ import annotations

import itertools
import time
from typing import Callable

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from odradek import Broker

SESSION_MS = 6000
WAIT_S = 30
_ids = itertools.count()


def create_topic(bootstrap: str, partitions: int, per_partition: int) -> str:
    name = f"lifecycle-{next(_ids)}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(name, f"{p}-{i}".encode(), partition=p)
    assert producer.flush(10) == 0
    return name


def consumer(bootstrap: str, group: str, **config: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "range",
            **config,
        }
    )


def poll_until(consumers: list[Consumer], done: Callable[[], bool], what: str) -> float:
    start = time.monotonic()
    while not done():
        assert time.monotonic() - start < WAIT_S, f"timed out waiting for {what}"
        for c in consumers:
            c.poll(0.05)
    return time.monotonic() - start


def partitions(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


@pytest.fixture(scope="module")
def broker():
    with Broker() as b:
        yield b


def test_static_member_restarting_within_its_session_gets_its_partitions_back_without_rebalance(broker: Broker) -> None:
    topic = create_topic(broker.bootstrap, 6, 0)
    group = f"static-{next(_ids)}"
    seen: dict[str, list[tuple[str, list[int]]]] = {"s1": [], "s2": []}

    def member(name: str) -> Consumer:
        c = consumer(broker.bootstrap, group, **{"group.instance.id": name})
        c.subscribe(
            [topic],
            on_assign=lambda _, ps: seen[name].append(("assign", sorted(p.partition for p in ps))),
            on_revoke=lambda _, ps: seen[name].append(("revoke", sorted(p.partition for p in ps))),
        )
        return c

    s1, s2 = member("s1"), member("s2")
    poll_until([s1, s2], lambda: len(partitions(s1)) == 3 and len(partitions(s2)) == 3 and not partitions(s1) & partitions(s2), "two static members to split the partitions")
    before = partitions(s1)
    s2_history = list(seen["s2"])

    s1.close()  # a static member does not leave the group on close
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(10)
    assert described.state == ConsumerGroupState.STABLE and len(described.members) == 2

    restarted = member("s1")
    took = poll_until([restarted, s2], lambda: bool(partitions(restarted)), "the restarted static member's assignment")
    assert took < SESSION_MS / 1000
    assert partitions(restarted) == before
    settle = time.monotonic() + 1.5  # a rebalance would reach s2 through its next heartbeats
    poll_until([restarted, s2], lambda: time.monotonic() > settle, "heartbeats")
    assert seen["s2"] == s2_history, "the other member saw no rebalance"
    described = admin.describe_consumer_groups([group])[group].result(10)
    assert sorted(m.group_instance_id for m in described.members) == ["s1", "s2"]
    restarted.close()
    s2.close()


def consume_and_commit(bootstrap: str, group: str, topic: str, count: int) -> list[tuple[int, int]]:
    """Consume ``count`` records, committing each one after processing it, then close."""
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    processed: list[tuple[int, int]] = []
    start = time.monotonic()
    while len(processed) < count:
        assert time.monotonic() - start < WAIT_S, "timed out consuming"
        m = c.poll(0.1)
        if m is None or m.error() is not None:
            continue
        processed.append((m.partition(), m.offset()))
        c.commit(message=m, asynchronous=False)
    c.close()
    return processed


@pytest.mark.parametrize("stop", ["clean", "kill -9"])
def test_group_resumes_at_committed_offsets_after_broker_restart(tmp_path, stop: str) -> None:
    with Broker(log_dir=tmp_path, subprocess=True) as b:
        topic = create_topic(b.bootstrap, 3, 20)
        group = "survivor"
        first = consume_and_commit(b.bootstrap, group, topic, 25)
        committed = {p: max(o for q, o in first if q == p) + 1 for p, _ in first}
        if stop == "clean":
            b.restart()
        else:
            b.kill()
            b.start()
        c = consumer(b.bootstrap, group)
        positions = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
        assert {tp.partition: tp.offset for tp in positions if tp.offset >= 0} == committed
        c.close()
        rest = consume_and_commit(b.bootstrap, group, topic, 60 - 25)
        firsts = {p: min(o for q, o in rest if q == p) for p, _ in rest}
        assert all(firsts[p] == committed.get(p, 0) for p in firsts), f"resumed at {firsts}, committed {committed}"
        assert sorted(first + rest) == [(p, o) for p in range(3) for o in range(20)], "every record exactly once"


def test_admin_client_lists_describes_shows_offsets_and_lag_and_deletes(broker: Broker) -> None:
    topic = create_topic(broker.bootstrap, 4, 10)
    group = f"admin-{next(_ids)}"
    members = [consumer(broker.bootstrap, group, **{"client.id": name}) for name in ("member-a", "member-b")]
    for c in members:
        c.subscribe([topic])
    consumed: list[tuple[int, int]] = []

    def poll_and_commit() -> bool:
        for c in members:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                consumed.append((m.partition(), m.offset()))
                c.commit(message=m, asynchronous=False)
        return len(consumed) == 40 and all(len(partitions(c)) == 2 for c in members)

    poll_until([], poll_and_commit, "both members to consume everything")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    listed = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
    assert listed[group].state == ConsumerGroupState.STABLE and listed[group].is_simple_consumer_group is False
    empty_only = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(10).valid
    assert group not in {g.group_id for g in empty_only}

    described = admin.describe_consumer_groups([group])[group].result(10)
    assert (described.state, described.partition_assignor) == (ConsumerGroupState.STABLE, "range")
    assert sorted(m.client_id for m in described.members) == ["member-a", "member-b"]
    assert {m.host for m in described.members} == {"/127.0.0.1"}
    owned = [tp.partition for m in described.members for tp in m.assignment.topic_partitions]
    assert sorted(owned) == [0, 1, 2, 3]

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(5):
        producer.produce(topic, b"late", partition=0)
    producer.flush(10)
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    committed = {tp.partition: tp.offset for tp in offsets.topic_partitions}
    assert committed == {0: 10, 1: 10, 2: 10, 3: 10}
    ends = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(4)})
    lag = {tp.partition: f.result(10).offset - committed[tp.partition] for tp, f in ends.items()}
    assert lag == {0: 5, 1: 0, 2: 0, 3: 0}

    with pytest.raises(KafkaException) as refused:
        admin.delete_consumer_groups([group])[group].result(10)
    assert "NON_EMPTY_GROUP" in str(refused.value) or "not empty" in str(refused.value).lower()
    for c in members:
        c.close()
    admin.delete_consumer_groups([group])[group].result(10)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])])[group].result(10)
    assert [tp.offset for tp in offsets.topic_partitions] == [-1001], "the group's offsets went with it"


def test_many_groups_rebalancing_at_once_do_not_interfere(broker: Broker) -> None:
    """Five groups of two members each, all joining at the same time on one topic: every group splits the
    partitions among its own members and reads every record once."""
    topic = create_topic(broker.bootstrap, 4, 5)
    groups = [f"crowd-{next(_ids)}" for _ in range(5)]
    members = {g: [consumer(broker.bootstrap, g) for _ in range(2)] for g in groups}
    for cs in members.values():
        for c in cs:
            c.subscribe([topic])
    consumed: dict[str, list[tuple[int, int]]] = {g: [] for g in groups}

    def poll_all() -> bool:
        for g, cs in members.items():
            for c in cs:
                m = c.poll(0.01)
                if m is not None and m.error() is None:
                    consumed[g].append((m.partition(), m.offset()))
                    c.commit(message=m, asynchronous=False)
        return all(len(v) == 20 for v in consumed.values()) and all(len(partitions(c)) == 2 for cs in members.values() for c in cs)

    poll_until([], poll_all, "every group to read the topic")
    for g, cs in members.items():
        assert sorted(consumed[g]) == [(p, o) for p in range(4) for o in range(5)], g
        assert sorted(p for c in cs for p in partitions(c)) == [0, 1, 2, 3], g
        for c in cs:
            c.close()
