"""The consumer group protocol (KIP-848) with Kafka's Java client 4.4 (``group.protocol=consumer``), run
side by side against odradek and Apache Kafka 4.4 (KRaft, tests/jvm/kafka44_jvm.py): the broker assigns,
members reconcile incrementally, and Kafka 4.4's ``kafka-consumer-groups.sh`` describes the group the same
way on both.

Each member is tests/e2e/java44/GroupMember.java (the ``java44`` programs) run as its own JVM: it commits
after every batch and prints what it received, what it committed and which partitions it was given or lost.
The tests judge those lines: no record is lost and none is committed twice, through members joining,
leaving and being SIGKILLed.

Needs a JDK and ``make jvm-deps`` (the kafka44 sets); a missing one fails the tests.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import kafka44_jvm
import pytest
from group_members import Member, wait_until

from odradek import Broker

SESSION_TIMEOUT_S = int(kafka44_jvm.CONSUMER_GROUP_SETTINGS["group.consumer.session.timeout.ms"]) // 1000


@pytest.fixture(scope="module")
def odradek44(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """odradek set up as the shared Kafka 4.4 node: its settings, heartbeats every second and 10 s sessions
    (kafka44_jvm.CONSUMER_GROUP_SETTINGS) among them."""
    config = {"broker.id": "0", **kafka44_jvm.SINGLE_NODE_SETTINGS, **kafka44_jvm.CONSUMER_GROUP_SETTINGS}
    with Broker(log_dir=tmp_path_factory.mktemp("odradek44"), subprocess=True, config=config) as b:
        yield b


@pytest.fixture(params=["odradek", "kafka44"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    """The broker under test: odradek, or the real Kafka 4.4 it is compared with."""
    if request.param == "odradek":
        return request.getfixturevalue("odradek44").bootstrap
    return request.getfixturevalue("real_kafka44").bootstrap


@pytest.fixture
def members(java44: kafka44_jvm.JavaPrograms, tmp_path: Path) -> Iterator[Any]:
    started: list[Member] = []

    def start(bootstrap: str, topic: str, group: str, **kw: Any) -> Member:
        member = Member(java44, bootstrap, topic, group, tmp_path / f"member-{len(started)}.log", **kw)
        started.append(member)
        return member

    yield start
    for member in started:
        member.stop()


def create_topic(bootstrap: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"kip848-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def produce(bootstrap: str, topic: str, values: list[str], partitions: int, pause_s: float = 0.0) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % partitions)
        if pause_s and i % 50 == 49:
            producer.flush(30)
            time.sleep(pause_s)
    assert producer.flush(30) == 0


def committed_values(*ms: Member) -> list[str]:
    return [value for m in ms for _, _, value in m.batches()[0]]


def missing(values: list[str], members: list[Member]) -> str:
    """For a failed wait: how many records are committed, the first ones not committed, and each member's
    partitions, last event and whether its JVM still runs."""
    committed = set(committed_values(*members))
    absent = [v for v in values if v not in committed]
    states = [(m.owned(), (m.snapshot() or [{}])[-1].get("event"), m.proc.poll()) for m in members]
    return f"{len(committed)} committed; not {absent[:8]} of {len(absent)}; members (owned, last event, exit): {states}"


def describe(bootstrap: str, group: str, *args: str) -> list[list[str]]:
    """kafka-consumer-groups.sh of Kafka 4.4 --describe: the rows of its table, split on whitespace."""
    done = kafka44_jvm.run_tool("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group, "--timeout", "60000", *args)
    assert done.returncode == 0, done.stderr
    return [line.split() for line in done.stdout.splitlines() if line.strip() and not line.startswith("Warning")]


def test_three_members_share_six_partitions_and_the_tool_describes_them(bootstrap: str, members: Any) -> None:
    topic = create_topic(bootstrap, 6)
    values = [f"v{i}" for i in range(600)]
    produce(bootstrap, topic, values, 6)
    group = f"g-{topic}"
    ms = [members(bootstrap, topic, group) for _ in range(3)]
    wait_until(
        lambda: sorted(len(m.owned()) for m in ms) == [2, 2, 2] and len(committed_values(*ms)) >= 600,
        120,
        lambda: f"three members with two partitions each (own {[m.owned() for m in ms]}, exit codes {[m.proc.poll() for m in ms]}) and every record committed ({len(committed_values(*ms))})",
    )
    got = committed_values(*ms)
    assert sorted(got) == sorted(values), "every record committed exactly once"
    assert set().union(*(m.owned() for m in ms)) == set(range(6))

    last: list[list[list[str]]] = []

    def settled() -> bool:
        last.append(describe(bootstrap, group, "--state", "--verbose"))
        return len(last[-1]) == 2 and last[-1][1][4] == "Stable"

    wait_until(settled, 30, lambda: f"the group to be Stable: {last[-1:]}")
    header, *rows = describe(bootstrap, group, "--members", "--verbose")
    # No member has an instance id: the tool leaves out GROUP-INSTANCE-ID.
    assert header == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    assert len(rows) == 3
    for row in rows:
        group_id, _member, host, _client, n, epoch, current, target_epoch, target = row
        assert (group_id, host, n, epoch == target_epoch, current == target) == (group, "/127.0.0.1", "2", True, True)
        assert current.startswith(f"{topic}:")
    [state_header, state] = last[-1]  # what settled() saw: the tool's --state --verbose of the Stable group
    assert state_header == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert (state[3], state[4], state[5] == state[6], state[7]) == ("uniform", "Stable", True, "3")
    header, *offsets = describe(bootstrap, group)
    assert sorted((int(r[2]), r[3], r[4], r[5]) for r in offsets) == [(p, "100", "100", "0") for p in range(6)]
    for m in ms:
        m.leave()
    wait_until(lambda: describe(bootstrap, group, "--state")[1][4] == "Empty", 30, "the group to be Empty")


def test_a_commit_at_the_previous_epoch_counts_for_the_partitions_kept(bootstrap: str, connect: Any) -> None:
    """KIP-1251 on the wire, as the Java client meets it: a member commits while the heartbeat that moves it to
    the next epoch is in flight, so the commit carries the epoch it had. Kafka 4.4 accepts it for the
    partitions the member kept and refuses it for those it gave up (or that another member got at a later
    epoch); ``commitSync`` fails with CommitFailedException on a refusal."""
    from odradek.protocol.api import ApiKey
    from odradek.protocol.errors import ErrorCode

    topic = create_topic(bootstrap, 6)
    group = f"g-{topic}"
    wire = connect(bootstrap)
    retriable = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR}

    def heartbeat(member: str, epoch: int, owned: set[int] | None = None) -> Any:
        body: dict[str, Any] = {"group_id": group, "member_id": member, "member_epoch": epoch}
        if epoch == 0:
            body |= {"rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic], "topic_partitions": []}
        elif owned is not None:
            body["topic_partitions"] = [{"topic_id": topic_id, "partitions": sorted(owned)}] if owned else []
        deadline = time.monotonic() + 60
        while (answer := wire.call(ApiKey.ConsumerGroupHeartbeat, 1, body)).error_code in retriable and time.monotonic() < deadline:
            time.sleep(0.2)
        assert answer.error_code == ErrorCode.NONE, answer
        return answer

    def assigned(answer: Any) -> set[int]:
        return {p for tp in answer.assignment.topic_partitions for p in tp.partitions}

    def next_assignment(member: str, epoch: int, owned: set[int] | None = None) -> Any:
        """Heartbeat until the answer carries an assignment (Kafka 4.4 may compute a target a little later)."""
        deadline = time.monotonic() + 30
        while (answer := heartbeat(member, epoch, owned)).assignment is None:
            assert time.monotonic() < deadline, "no new assignment"
            time.sleep(0.2)
        return answer

    def commit(member: str, epoch: int, partition: int) -> int:
        body = {"group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member, "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [{"partition_index": partition, "committed_offset": 0, "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
        [[error]] = [[p.error_code for p in t.partitions] for t in wire.call(ApiKey.OffsetCommit, 9, body).topics]
        return error

    # FindCoordinator creates __consumer_offsets; the heartbeats retry until its partition is loaded.
    wire.call(ApiKey.FindCoordinator, 4, {"key_type": 0, "coordinator_keys": [group]})
    first, second = uuid.uuid4().hex[:22], uuid.uuid4().hex[:22]
    joined = heartbeat(first, 0)
    while not assigned(joined):  # Kafka's coordinator may not see the new topic at once
        joined = next_assignment(first, joined.member_epoch, set())
    topic_id = joined.assignment.topic_partitions[0].topic_id
    old_epoch = joined.member_epoch
    assert assigned(joined) == set(range(6))
    second_epoch = heartbeat(second, 0).member_epoch
    kept = assigned(next_assignment(first, old_epoch, set(range(6))))  # revoke the rest first
    moved_on = heartbeat(first, old_epoch, kept)
    assert moved_on.member_epoch > old_epoch and len(kept) == 3
    given = assigned(next_assignment(second, second_epoch))
    assert given == set(range(6)) - kept
    assert commit(first, old_epoch, min(kept)) == ErrorCode.NONE
    assert commit(first, old_epoch, min(given)) == ErrorCode.STALE_MEMBER_EPOCH
    assert commit(second, old_epoch, min(given)) == ErrorCode.STALE_MEMBER_EPOCH
    assert commit(first, moved_on.member_epoch + 1, min(kept)) == ErrorCode.STALE_MEMBER_EPOCH
    for member, epoch in ((first, moved_on.member_epoch), (second, second_epoch)):
        wire.call(ApiKey.ConsumerGroupHeartbeat, 1, {"group_id": group, "member_id": member, "member_epoch": -1})


def test_churn_loses_nothing_and_commits_nothing_twice(bootstrap: str, members: Any) -> None:
    """Members join, leave and are SIGKILLed while records keep coming: every record is committed once,
    except that the killed member's last batch may have been committed by it just before it died."""
    topic = create_topic(bootstrap, 6)
    group = f"g-{topic}"
    values = [f"v{i}" for i in range(1500)]
    producer = threading.Thread(target=produce, args=(bootstrap, topic, values, 6, 0.4), daemon=True)
    first, second = members(bootstrap, topic, group), members(bootstrap, topic, group)
    producer.start()
    wait_until(lambda: len(first.owned()) + len(second.owned()) == 6 and first.owned() and second.owned(), 60, "two members sharing the partitions")
    third = members(bootstrap, topic, group, instance="static-3")
    wait_until(lambda: third.owned(), 60, "the third member's partitions")
    second.kill()
    first.leave()
    producer.join(120)
    assert not producer.is_alive()
    # The killed member's partitions come back once its session expires.
    wait_until(lambda: third.owned() == set(range(6)), SESSION_TIMEOUT_S + 60, "the last member to own every partition")
    wait_until(lambda: len(set(committed_values(first, second, third)) | set(v for *_, v in second.batches()[1])) >= len(values), 60, "every record committed")
    committed = committed_values(first, second, third)
    assert len(committed) == len(set(committed)), "a record was committed twice"
    missing = set(values) - set(committed)
    assert missing <= {v for *_, v in second.batches()[1]}, f"lost records: {sorted(missing)[:10]}"
    third.leave()


def test_librdkafka_members_share_the_partitions(bootstrap: str) -> None:
    """librdkafka (confluent-kafka) with ``group.protocol=consumer``: two members, the second joining while
    records keep coming; each record's commit succeeds exactly once and both members get partitions."""
    from confluent_kafka import Consumer, KafkaException

    topic = create_topic(bootstrap, 6)
    group = f"g-{topic}"
    values = [f"v{i}" for i in range(900)]
    committed: dict[str, list[str]] = {"a": [], "b": []}
    owned: dict[str, set[int]] = {"a": set(), "b": set()}
    stop = threading.Event()

    def consume(name: str) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(
            [topic],
            on_assign=lambda _, ps: owned[name].update(p.partition for p in ps),
            on_revoke=lambda _, ps: owned[name].difference_update(p.partition for p in ps),
        )
        try:
            while not stop.is_set():
                message = consumer.poll(0.2)
                if message is None or message.error():
                    continue
                try:
                    consumer.commit(message, asynchronous=False)
                except KafkaException:
                    continue  # not committed: the partition's next owner reads it again
                committed[name].append(message.value().decode())
        finally:
            consumer.close()

    threads = {name: threading.Thread(target=consume, args=(name,), daemon=True) for name in committed}
    threads["a"].start()
    producer = threading.Thread(target=produce, args=(bootstrap, topic, values, 6, 0.3), daemon=True)
    producer.start()
    wait_until(lambda: len(committed["a"]) > 0, 60, "the first member's records")
    threads["b"].start()
    wait_until(lambda: owned["a"] and owned["b"] and len(owned["a"]) + len(owned["b"]) == 6, 90, lambda: f"both members to own partitions ({owned})")
    producer.join(120)
    wait_until(lambda: len(committed["a"]) + len(committed["b"]) >= len(values), 60, "every record committed")
    stop.set()
    for thread in threads.values():
        thread.join(60)
    everything = committed["a"] + committed["b"]
    assert sorted(everything) == sorted(values), "every record committed exactly once"


def test_kafka_features_describes_group_version_as_on_kafka_44(odradek44: Broker, real_kafka44: Any) -> None:
    described = []
    for address in (odradek44.bootstrap, real_kafka44.bootstrap):
        done = kafka44_jvm.run_tool("kafka-features", "--bootstrap-server", address, "describe")
        assert done.returncode == 0, done.stderr
        [line] = [line for line in done.stdout.splitlines() if line.startswith("Feature: group.version")]
        described.append(line.split("Epoch:")[0].split())
    assert described[0] == described[1] == "Feature: group.version SupportedMinVersion: 0 SupportedMaxVersion: 1 FinalizedVersionLevel: 1".split()


def test_kafka_dump_log_decodes_the_group_records(odradek44: Broker, members: Any) -> None:
    """The ConsumerGroup* records odradek writes are Kafka 4.4's: its ``kafka-dump-log.sh --offsets-decoder``
    reads every one (it prints "Error at offset" for a record it cannot parse)."""
    bootstrap = odradek44.bootstrap
    topic = create_topic(bootstrap, 2)
    produce(bootstrap, topic, ["a", "b"], 2)
    group = f"g-{topic}"
    member = members(bootstrap, topic, group, instance="dumped")
    wait_until(lambda: len(member.batches()[0]) == 2, 90, "the records committed")
    member.leave()
    segments = sorted(odradek44.log_dir.glob(f"__consumer_offsets-{kafka44_jvm.coordinator_partition(group)}/*.log"))
    done = kafka44_jvm.run_tool("kafka-dump-log", "--files", ",".join(map(str, segments)), "--offsets-decoder")
    assert done.returncode == 0, done.stderr
    mine = [line for line in done.stdout.splitlines() if f'"{group}"' in line or "Error at offset" in line]
    assert not [line for line in mine if "Error at offset" in line]
    types = {line.split('"type":"')[1].split('"')[0] for line in mine}
    assert {"3", "5", "6", "7", "8"} <= types, types  # epoch, member, target epoch and member, current assignment


def test_rolling_between_the_classic_and_the_consumer_protocol(bootstrap: str, members: Any) -> None:
    """KIP-848's online migration (``group.consumer.migration.policy`` bidirectional, Kafka 4.x's default):
    a group of classic members is rolled member by member to ``group.protocol=consumer`` -- the first such
    member converts the group into a consumer group, the classic members left in it are assigned by the
    broker through JoinGroup/SyncGroup -- and back, the last consumer-protocol member leaving turning it
    into a classic group again. Records keep coming; none is lost and none committed twice, and Kafka
    4.4's ``kafka-consumer-groups.sh`` describes each step the same on both brokers."""
    topic = create_topic(bootstrap, 4)
    group = f"g-{topic}"
    values = [f"v{i}" for i in range(1600)]
    producer = threading.Thread(target=produce, args=(bootstrap, topic, values, 4, 0.3), daemon=True)
    started: list[Member] = []

    def start(protocol: str) -> Member:
        started.append(members(bootstrap, topic, group, protocol=protocol))
        return started[-1]

    def sharing(*ms: Member) -> None:
        wait_until(
            lambda: all(m.owned() for m in ms) and sorted(p for m in ms for p in m.owned()) == list(range(4)),
            90,
            lambda: f"{len(ms)} members sharing the 4 partitions (own {[m.owned() for m in ms]})",
        )

    def described(kind: str) -> None:
        """The tool's --state and --members --verbose once the group is Stable: a classic group (assigned by
        its leader with ``range``, no epochs) or a consumer group (``uniform``, epochs, and UPGRADED: true
        for a consumer-protocol member, false for a classic one), each member owning its target."""
        last: list[list[str]] = []

        def stable() -> bool:
            last[:] = describe(bootstrap, group, "--state", "--verbose")
            return len(last) == 2 and last[1][4] == "Stable"

        wait_until(stable, 60, lambda: f"the group to be Stable: {last}")
        header, row = last
        assert header == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
        header, *rows = describe(bootstrap, group, "--members", "--verbose")
        assert len(rows) == 2 and all(r[4] == "2" for r in rows)
        if kind == "classic":
            assert (row[3], row[5], row[6], row[7]) == ("range", "-", "-", "2")
            assert header[-1] == "TARGET-ASSIGNMENT" and all(r[5] == r[7] == r[8] == "-" for r in rows)
        else:
            assert (row[3], row[5] == row[6], row[7]) == ("uniform", True, "2")
            assert header[-1] == "UPGRADED" and all((r[5], r[6]) == (r[7], r[8]) for r in rows)
            assert sorted(r[9] for r in rows) == ["false", "true"]  # one classic member, one of the consumer protocol

    first, second = start("classic"), start("classic")
    producer.start()
    sharing(first, second)
    described("classic")

    # Upgrade: a consumer-protocol member replaces a classic one.
    first.leave()
    third = start("consumer")
    sharing(second, third)
    described("mixed")
    second.leave()
    fourth = start("consumer")
    sharing(third, fourth)

    # Downgrade: classic members come back; the last consumer-protocol member to leave converts the group.
    fifth = start("classic")
    sharing(third, fourth, fifth)
    third.leave()
    sharing(fourth, fifth)
    described("mixed")
    fourth.leave()
    sixth = start("classic")
    sharing(fifth, sixth)
    described("classic")

    producer.join(180)
    assert not producer.is_alive()
    wait_until(lambda: len(set(committed_values(*started))) >= len(values), 90, lambda: f"every record committed ({missing(values, started)})")
    committed = committed_values(*started)
    assert len(committed) == len(set(committed)), "a record was committed twice"
    assert set(committed) == set(values)
    fifth.leave()
    sixth.leave()
