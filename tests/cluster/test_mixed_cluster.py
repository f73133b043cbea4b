"""Real Apache Kafka 3.9.1 brokers and odradek brokers in one ZooKeeper-mode cluster, replicating to each other.

Two clusters, one per controller: ``odradek-led`` (brokers 1 and 2 odradek, broker 1 started first so it is
the controller, broker 3 Kafka) and ``kafka-led`` (broker 1 Kafka and the controller, brokers 2 and 3
odradek). In each, a topic of rf 3 and ``min.insync.replicas=2`` spreads its leaders over all three brokers,
so each kind leads partitions the other follows: Kafka's ReplicaFetcherThread fetches from odradek leaders
(Fetch with a replica id, OffsetForLeaderEpoch, truncation) and odradek's fetcher from Kafka's; each
controller drives brokers of the other kind with LeaderAndIsr, UpdateMetadata and StopReplica, and takes
their AlterPartition.

Under an idempotent acks=all workload (checker.py): the ISR stays as created while nothing fails; a broker of
the kind that does not control is cut from the other brokers until its logs hold writes its followers do not
have, and killed (SIGKILL); its leaderships move, writes go on; it is restarted, truncates what only it had
(the other kind's leader tells it where its log diverged), catches up and is back in every ISR; nothing
acknowledged is lost, and every replica's segment files hold the same bytes whichever implementation wrote
them. Consumer groups whose coordinators are spread over both kinds commit and read back their offsets.
Transactions coordinated by either kind commit and abort on leaders of both. A broker stopped cleanly hands
its leadership over through the other kind's controller (ControlledShutdown) before it exits. Every broker has
a ``broker.rack``: each controller places a new topic's replicas as Kafka's rack-aware assignment does, with
the racks the other kind registered. Killed, the controller is succeeded by a broker of either kind, which
takes the state the other kind wrote from ZooKeeper. A deleted topic's logs leave brokers of both kinds.
An odradek broker finalizes no ``transaction.version`` while a Kafka 3.9 broker, which registers no features,
is live (a 4.x client would send it Produce v12), and finalizes it once that broker is gone.
"""

from __future__ import annotations

import random
import shutil
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from checker import Workload
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from harness import CLUSTER_SETTINGS, Cluster, KafkaBrokerProcess, running_cluster

from odradek.broker.coordinator.runtime import partition_for
from odradek.controller.replica_assignment import BrokerMetadata, assign_replicas_to_brokers

PARTITIONS = 6
TOPIC = "mixed"
STEADY_S = 5.0
"""How long the workload runs with nothing failing while the ISR is watched."""
LOGS_EQUAL_TIMEOUT_S = 30.0

CLUSTERS: dict[str, tuple[str, ...]] = {
    "odradek-led": ("odradek", "odradek", "kafka"),
    "kafka-led": ("kafka", "odradek", "odradek"),
}
"""Each cluster's broker kinds by id (broker 1 is started first and becomes the controller)."""
RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-a"}
"""Each broker's ``broker.rack``: two racks, so a partition of rf 2 must have broker 2 and one of 1 and 3."""


@pytest.fixture(scope="module", params=CLUSTERS)
def mixed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp(f"mixed-{request.param}")
    try:
        with running_cluster(root, kinds=CLUSTERS[request.param], broker_settings={b: {"broker.rack": rack} for b, rack in RACKS.items()}) as cluster:
            yield cluster
    finally:
        shutil.rmtree(root, ignore_errors=True)


def kind(cluster: Cluster, broker_id: int) -> str:
    return "kafka" if isinstance(cluster.brokers[broker_id], KafkaBrokerProcess) else "odradek"


def segment_files(cluster: Cluster, broker_id: int, topic: str, partition: int) -> dict[str, bytes]:
    """The ``.log`` files of one replica, by name."""
    directory = cluster.brokers[broker_id].log_dir / f"{topic}-{partition}"
    return {path.name: path.read_bytes() for path in sorted(Path(directory).glob("*.log"))}


def committed_offset(cluster: Cluster, group: str, topic: str) -> TopicPartition:
    """Partition 0 of ``topic`` with the offset ``group`` committed for it, as a new member reads it."""
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False, "log_level": 0})
    try:
        (read,) = reader.committed([TopicPartition(topic, 0)], timeout=30)
        return read
    finally:
        reader.close()


def create_offsets_topic(cluster: Cluster, topic: str) -> None:
    """The first FindCoordinator creates ``__consumer_offsets``. A broker whose metadata already names the
    new coordinator may answer before the coordinator has the controller's LeaderAndIsr, and a broker not yet
    leading the group's partition answers NOT_COORDINATOR (Kafka's GroupCoordinator does so too), which
    librdkafka's ``committed`` gives up on: asked again (seen once on the Kafka-led cluster)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            committed_offset(cluster, "group-creating-the-offsets-topic", topic)
            return
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.NOT_COORDINATOR or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def concatenated(files: dict[str, bytes]) -> bytes:
    return b"".join(files[name] for name in sorted(files))


def write_unreplicated(cluster: Cluster, leader: int, topic: str, partitions: list[int]) -> None:
    """A write acknowledged by ``leader`` alone (acks=1) to each of ``partitions`` (the number -1: the
    checker would report it if it survived)."""
    producer = Producer({"bootstrap.servers": cluster.brokers[leader].bootstrap, "acks": 1, "message.timeout.ms": 10_000, "log_level": 0})
    failed: list[str] = []
    for partition in partitions:
        producer.produce(topic, b"-1", partition=partition, on_delivery=lambda err, _: failed.append(str(err)) if err else None)
    assert producer.flush(15) == 0 and not failed, failed


def ahead_of_followers(cluster: Cluster, leader: int, topic: str, partition: int) -> bool:
    """The leader's log of ``partition`` is longer than each follower's (what it appended did not reach them)."""
    replicas = cluster.znode(f"/brokers/topics/{topic}")["partitions"][str(partition)]
    size = {b: len(concatenated(segment_files(cluster, b, topic, partition))) for b in replicas}
    return all(size[leader] > size[b] for b in replicas if b != leader)


def replicas_differing(cluster: Cluster, topic: str, partitions: int) -> dict[int, dict[int, dict[str, int]]]:
    """The partitions whose replicas' segment files are not all equal: each replica's file sizes."""
    differing = {}
    for partition in range(partitions):
        replicas = cluster.znode(f"/brokers/topics/{topic}")["partitions"][str(partition)]
        files = {b: segment_files(cluster, b, topic, partition) for b in replicas}
        if any(f != files[replicas[0]] for f in files.values()):
            differing[partition] = {b: {name: len(data) for name, data in f.items()} for b, f in files.items()}
    return differing


def replicas_differing_after(cluster: Cluster, topic: str, partitions: int, timeout_s: float) -> dict[int, dict[int, dict[str, int]]]:
    """:func:`replicas_differing` once it is empty (the followers fetched the last records) or the time is up."""
    deadline = time.monotonic() + timeout_s
    while (differing := replicas_differing(cluster, topic, partitions)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return differing


class Draws(random.Random):
    """The two numbers Kafka's assignment draws at random (start index, first follower shift), given."""

    def __init__(self, *draws: int) -> None:
        super().__init__()
        self.draws = list(draws)

    def randrange(self, *_: object) -> int:  # type: ignore[override]
        return self.draws.pop(0)


def test_the_controller_places_replicas_on_the_racks_both_kinds_registered(mixed: Cluster) -> None:
    """The controller reads each broker's rack from its registration, whichever kind wrote it: every
    partition of rf 2 spans both racks, laid out as Kafka's rack-aware assignment would for one of its
    random draws."""
    topic = "racked"
    assert {b: mixed.znode(f"/brokers/ids/{b}")["rack"] for b in mixed.brokers} == RACKS
    mixed.create_topic(topic, PARTITIONS, replication_factor=2)
    placed = {int(p): replicas for p, replicas in mixed.znode(f"/brokers/topics/{topic}")["partitions"].items()}
    assert all({RACKS[b] for b in replicas} == set(RACKS.values()) for replicas in placed.values()), placed
    brokers = [BrokerMetadata(b, rack) for b, rack in sorted(RACKS.items())]
    kafkas = [assign_replicas_to_brokers(brokers, PARTITIONS, 2, rng=Draws(start, shift)) for start in range(3) for shift in range(3)]
    assert placed in kafkas


def test_groups_commit_through_coordinators_of_both_kinds(mixed: Cluster) -> None:
    """One group per ``__consumer_offsets`` partition (whose leader is its coordinator, of either kind):
    each commits an offset and a new member of the group reads it back. (First: after the kill below, the
    partitions the killed broker led stay with their new leaders.)"""
    topic = "mixed-groups"
    mixed.create_topic(topic, 1)
    create_offsets_topic(mixed, topic)
    offsets_partitions = int(CLUSTER_SETTINGS["offsets.topic.num.partitions"])
    mixed.wait_fully_replicated("__consumer_offsets", partitions=offsets_partitions)
    groups: dict[int, str] = {}
    while len(groups) < offsets_partitions:
        group = f"group-{uuid.uuid4().hex[:8]}"
        groups.setdefault(partition_for(group, offsets_partitions), group)
    coordinators = {mixed.leader_and_isr("__consumer_offsets", p).leader for p in groups}
    assert {kind(mixed, b) for b in coordinators} == {"kafka", "odradek"}
    for partition, group in sorted(groups.items()):
        committed = 100 + partition
        member = Consumer({"bootstrap.servers": mixed.bootstrap, "group.id": group, "enable.auto.commit": False, "log_level": 0})
        try:
            member.commit(offsets=[TopicPartition(topic, 0, committed)], asynchronous=False)
        finally:
            member.close()
        read = committed_offset(mixed, group, topic)
        coordinator = mixed.leader_and_isr("__consumer_offsets", partition).leader
        assert (read.error, read.offset) == (None, committed), f"group {group} coordinated by broker {coordinator} ({kind(mixed, coordinator)})"


def test_transactions_coordinated_by_either_kind_commit_and_abort_on_leaders_of_both(mixed: Cluster) -> None:
    """One transactional id per ``__transaction_state`` partition (coordinators of both kinds, each sending
    WriteTxnMarkers to leaders of both kinds): each aborts a transaction over every partition, then commits
    one; a read_committed consumer gets exactly the committed records."""
    topic = "mixed-transactions"
    mixed.create_topic(topic, PARTITIONS)
    state_partitions = int(CLUSTER_SETTINGS["transaction.state.log.num.partitions"])
    ids: dict[int, str] = {}
    while len(ids) < state_partitions:
        transactional_id = f"txn-{uuid.uuid4().hex[:8]}"
        ids.setdefault(partition_for(transactional_id, state_partitions), transactional_id)
    for transactional_id in ids.values():
        producer = Producer({"bootstrap.servers": mixed.bootstrap, "transactional.id": transactional_id, "log_level": 0})
        producer.init_transactions(30)
        for outcome in ("aborted", "committed"):
            producer.begin_transaction()
            for partition in range(PARTITIONS):
                producer.produce(topic, f"{transactional_id} {outcome}".encode(), partition=partition)
            (producer.abort_transaction if outcome == "aborted" else producer.commit_transaction)(30)
    coordinators = {mixed.leader_and_isr("__transaction_state", p).leader for p in ids}
    assert {kind(mixed, b) for b in coordinators} == {"kafka", "odradek"}
    expected = sorted(f"{t} committed" for t in ids.values() for _ in range(PARTITIONS))
    reader = Consumer({"bootstrap.servers": mixed.bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}", "isolation.level": "read_committed",
                       "enable.auto.commit": False, "log_level": 0})
    read: list[str] = []
    try:
        reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 30
        while len(read) < len(expected) and time.monotonic() < deadline:  # the aborted ones come before
            read += [m.value().decode() for m in reader.consume(100, timeout=0.5) if m.error() is None]
    finally:
        reader.close()
    assert sorted(read) == expected
    # Nothing finalizes transaction.version with a Kafka 3.9 broker registered: odradek's coordinators write
    # TransactionLogValue version 0 as Kafka 3.9's do, which either kind loads when it takes a partition over.
    assert transaction_log_value_versions(mixed, sorted(ids)) == {0}


def transaction_log_value_versions(cluster: Cluster, partitions: list[int]) -> set[int]:
    """The versions of the values in these ``__transaction_state`` partitions (tombstones aside)."""
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"state-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False, "log_level": 0})
    versions: set[int] = set()
    seen: dict[int, int] = {}
    try:
        reader.assign([TopicPartition("__transaction_state", p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            batch = reader.consume(100, timeout=1)
            if not batch and sorted(seen) == partitions:
                break  # every partition read up to its end
            for m in batch:
                if m.error() is None and m.value() is not None:
                    seen[m.partition()] = seen.get(m.partition(), 0) + 1
                    versions.add(int.from_bytes(m.value()[:2], "big"))
    finally:
        reader.close()
    assert sorted(seen) == partitions, seen
    return versions


def test_a_peer_stopped_cleanly_hands_over_first_through_the_other_kinds_controller(mixed: Cluster) -> None:
    """SIGTERM to the broker of the kind that does not control: its ControlledShutdown to the other kind's
    controller moves the leadership it holds and takes it out of every ISR before it exits; restarted, it is
    back in every ISR."""
    topic = "handover"
    mixed.create_topic(topic, len(mixed.brokers))
    stopping = next(b for b in mixed.brokers if kind(mixed, b) != kind(mixed, mixed.controller()))
    assert any(mixed.leader_and_isr(topic, p).leader == stopping for p in range(len(mixed.brokers)))
    took = mixed.stop(stopping)
    states = {p: mixed.leader_and_isr(topic, p) for p in range(len(mixed.brokers))}
    assert all(s.leader not in (stopping, -1) and stopping not in s.isr for s in states.values()), states
    mixed.restart(stopping)
    rejoined = mixed.wait_fully_replicated(topic)
    print(f"\nbroker {stopping} ({kind(mixed, stopping)}) stopped in {took:.1f}s, back in every ISR {rejoined:.1f}s after its restart")


def test_both_kinds_lead_and_follow_and_a_killed_peer_catches_up_losing_nothing(mixed: Cluster) -> None:
    mixed.create_topic(TOPIC, PARTITIONS, config={"min.insync.replicas": "2"})
    controller = mixed.controller()
    assert controller == 1
    created = {p: mixed.leader_and_isr(TOPIC, p) for p in range(PARTITIONS)}
    assert {kind(mixed, s.leader) for s in created.values()} == {"kafka", "odradek"}
    victim = next(b for b in mixed.brokers if kind(mixed, b) != kind(mixed, controller) and any(s.leader == b for s in created.values()))
    led_by_victim = [p for p, s in created.items() if s.leader == victim]
    state_paths = {p: f"/brokers/topics/{TOPIC}/partitions/{p}/state" for p in range(PARTITIONS)}
    versions = {p: mixed.znode_version(path) for p, path in state_paths.items()}

    with Workload(mixed.bootstrap, TOPIC, PARTITIONS) as workload:
        workload.wait_for_progress()
        time.sleep(STEADY_S)
        assert {p: mixed.znode_version(path) for p, path in state_paths.items()} == versions, "an ISR changed while nothing failed"

        # Cut from the other brokers first, then given acks=1 writes as leader: they are in its log only, so
        # that after the kill its log diverges from the new leaders' and it must truncate when it is back.
        # (The workload's acks=all writes in flight cannot do it: they were fetched before the cut.)
        mixed.partition_from_brokers(victim)
        write_unreplicated(mixed, victim, TOPIC, led_by_victim)
        assert all(ahead_of_followers(mixed, victim, TOPIC, p) for p in led_by_victim)
        mixed.kill(victim)
        diverged = {p: segment_files(mixed, victim, TOPIC, p) for p in led_by_victim}
        start = time.monotonic()
        for p in led_by_victim:
            moved = mixed.wait_for_leader_change(TOPIC, p, created[p])
            assert victim not in moved.isr
        # Healed only now: the dead broker's kernel still retransmits the fetch responses it sent while cut,
        # and a follower still fetching would take the acks=1 write from one (as from a real network).
        mixed.heal()
        failover_s = time.monotonic() - start + workload.wait_for_progress()

        mixed.restart(victim)
        rejoined_s = mixed.wait_fully_replicated(TOPIC) + workload.wait_for_progress()
        assert all(victim in mixed.leader_and_isr(TOPIC, p).isr for p in range(PARTITIONS))
        report = workload.finish()
    print(f"\nbroker {victim} ({kind(mixed, victim)}) killed: leaders moved and writes acknowledged after {failover_s:.1f}s, "
          f"back in every ISR {rejoined_s:.1f}s after its restart\n{report}")
    assert report.ok, str(report)
    assert report.acknowledged > 0 and report.read > 0
    assert replicas_differing_after(mixed, TOPIC, PARTITIONS, LOGS_EQUAL_TIMEOUT_S) == {}
    truncated = {p: not concatenated(segment_files(mixed, victim, TOPIC, p)).startswith(concatenated(files)) for p, files in diverged.items()}
    assert all(truncated.values()), f"broker {victim} kept what only it had written: {truncated}"


def test_a_deleted_topics_replicas_leave_brokers_of_both_kinds(mixed: Cluster) -> None:
    """DeleteTopics: the controller's StopReplica (delete) reaches the brokers of the other kind too; no
    broker keeps a live log of the topic (Kafka renames a deleted log ``<topic>-<p>.<id>-delete`` and removes
    it later), and ZooKeeper forgets the topic."""
    topic = "deleted"
    partitions = len(mixed.brokers)
    mixed.create_topic(topic, partitions)
    producer = Producer({"bootstrap.servers": mixed.bootstrap, "acks": "all", "log_level": 0})
    for partition in range(partitions):
        producer.produce(topic, b"to be deleted", partition=partition)
    assert producer.flush(30) == 0
    assert all((mixed.brokers[b].log_dir / f"{topic}-{p}").is_dir() for b in mixed.brokers for p in range(partitions))
    mixed.admin().delete_topics([topic], operation_timeout=30)[topic].result(60)

    def gone() -> bool:
        logs = [d.name for b in mixed.brokers.values() for d in b.log_dir.iterdir() if d.name.startswith(f"{topic}-") and not d.name.endswith("-delete")]
        return not logs and not mixed.znode_exists(f"/brokers/topics/{topic}")

    mixed.wait_until(gone, f"{topic}'s logs and znode gone", 60)


def test_the_controller_killed_a_broker_of_either_kind_takes_over(mixed: Cluster) -> None:
    """SIGKILL of the controller (broker 1): whichever broker wins the election, of either kind, reads the
    state the other kind wrote to ZooKeeper, moves the leaderships broker 1 held and drives the others; writes
    are acknowledged on every partition, and broker 1 restarted is back in every ISR under the new controller."""
    topic = "controller-failover"
    mixed.create_topic(topic, len(mixed.brokers))
    before = {p: mixed.leader_and_isr(topic, p) for p in range(len(mixed.brokers))}
    epoch = mixed.znode_version("/controller_epoch")
    mixed.kill(1)
    mixed.wait_until(lambda: mixed.controller() != 1, "another controller", 60)
    successor = mixed.controller()
    for p, state in before.items():
        if state.leader == 1:
            mixed.wait_for_leader_change(topic, p, state)
    producer = Producer({"bootstrap.servers": mixed.bootstrap, "acks": "all", "message.timeout.ms": 30_000, "log_level": 0})
    failed: list[str] = []
    for partition in before:
        producer.produce(topic, b"after the failover", partition=partition, on_delivery=lambda err, _: failed.append(str(err)) if err else None)
    assert producer.flush(40) == 0 and not failed, failed
    mixed.restart(1)
    mixed.wait_fully_replicated(topic)
    assert mixed.controller() == successor and mixed.znode_version("/controller_epoch") > epoch
    print(f"\nbroker {successor} ({kind(mixed, successor)}) took over from broker 1 ({kind(mixed, 1)})")


def test_odradek_finalizes_transactions_v2_only_while_no_kafka_39_broker_is_registered(mixed: Cluster) -> None:
    """Kafka finalizes a feature level cluster-wide, and only one every broker supports: Kafka 3.9's brokers
    register no supported features in ZooKeeper, so with one live no odradek broker tells a 4.x client to
    use transactions v2 (Produce v12, which Kafka 3.9 does not serve) or the consumer group protocol. Stopped,
    the odradek brokers finalize the levels they all register; restarted, nothing again."""
    (kafka_id,) = (b for b in mixed.brokers if kind(mixed, b) == "kafka")
    odradek = [b for b in mixed.brokers if b != kafka_id]
    assert mixed.znode(f"/brokers/ids/{kafka_id}")["features"] == {}
    assert [mixed.finalized_features(b) for b in odradek] == [({}, -1)] * len(odradek)  # none: epoch "unknown"
    mixed.stop(kafka_id)
    try:
        mixed.wait_until(lambda: all(mixed.finalized_features(b)[0].get("transaction.version") == 2 for b in odradek), "transaction.version 2 finalized", 30)
        assert all(mixed.finalized_features(b)[1] >= 0 for b in odradek)
    finally:
        mixed.restart(kafka_id)
    mixed.wait_until(lambda: [mixed.finalized_features(b) for b in odradek] == [({}, -1)] * len(odradek), "nothing finalized again", 30)
