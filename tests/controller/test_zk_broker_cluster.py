"""Three odradek brokers started with ``odradek serve --override zookeeper.connect=...`` form one cluster
on a real ZooKeeper: they register, elect a controller among themselves, and every broker answers
Metadata from what that controller told it (UpdateMetadata), which is what ZooKeeper holds.

The brokers are processes (``Broker(subprocess=True)``), talked to over real sockets with real clients
(confluent-kafka, Kafka's own ``kafka-topics``) and bare Metadata requests (each broker's own view).
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from typing import Any, Callable, Iterator

import kafka_jvm
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from tests.conftest import Wire
from tests.polling import wait_for
from tests.controller.zk_brokers import odradek_brokers, zk_session
from odradek import Broker
from odradek.controller import zk_data as zd
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode

CHROOT = "/odradek-cluster"
TOPIC = "spread"
PARTITIONS = 6
SESSION_TIMEOUT_MS = 10000
LAG_TIME_MAX_MS = 1500
"""A follower stopped for longer leaves the ISR; one stopped for less than the session stays registered."""
REGISTERED_AFTER_STOP_S = SESSION_TIMEOUT_MS * 2 / 3 / 1000
"""How long a stopped broker's registration surely lasts: its ZooKeeper client pings every third of the
session timeout, so the session expires no sooner than two thirds of it after the stop."""


@pytest.fixture(scope="module")
def brokers(zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Broker]]:
    """Brokers 0, 1 and 2 under :data:`CHROOT`; those still in the dict killed after the module."""
    settings = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, "replica.lag.time.max.ms": LAG_TIME_MAX_MS}
    with odradek_brokers(zookeeper.connect + CHROOT, lambda b: tmp_path_factory.mktemp(f"zk-odradek-{b}"), settings) as started:
        yield started


@pytest.fixture(scope="module")
def zk(zookeeper: kafka_jvm.ZooKeeper, brokers: dict[int, Broker]) -> Iterator[KazooClient]:
    with zk_session(zookeeper.connect + CHROOT) as client:
        yield client


def view(connect: Callable[..., Any], broker: Broker, topic: str = TOPIC) -> tuple[int, tuple[int, ...], dict[int, tuple[int, int, list[int], list[int], list[int]]]]:
    """One broker's own Metadata answer: controller id, broker ids, and each partition's leader, leader epoch,
    replicas, ISR and offline replicas."""
    response = connect(broker.bootstrap).call(ApiKey.Metadata, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": topic}], "allow_auto_topic_creation": False})
    (answer,) = response.topics
    partitions = {p.partition_index: (p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes), list(p.offline_replicas)) for p in answer.partitions}
    return response.controller_id, tuple(sorted(b.node_id for b in response.brokers)), partitions


def zk_view(zk: KazooClient, live: set[int], topic: str = TOPIC) -> tuple[int, tuple[int, ...], dict[int, tuple[int, int, list[int], list[int], list[int]]]]:
    """The same as ZooKeeper holds it: ``/controller``, ``/brokers/ids``, the assignment and partition states."""
    controller = zd.ControllerRegistration.decode(zk.get(zd.CONTROLLER)[0]).broker_id
    assignment = zd.TopicAssignment.decode(zk.get(zd.topic_path(topic))[0])
    partitions = {}
    for index, replicas in assignment.partitions.items():
        state = zd.LeaderIsrAndControllerEpoch.decode(zk.get(zd.partition_state_path(topic, index))[0])
        assert state is not None
        partitions[index] = (state.leader, state.leader_epoch, list(replicas.replicas), list(state.isr), [r for r in replicas.replicas if r not in live])
    return controller, tuple(sorted(int(b) for b in zk.get_children(zd.BROKER_IDS))), partitions


def converged(connect: Callable[..., Any], zk: KazooClient, brokers: dict[int, Broker]) -> Any:
    """Every broker's view equal to ZooKeeper's, every partition led, or None."""
    try:
        expected = zk_view(zk, set(brokers))
        views = [view(connect, b) for b in brokers.values()]
    except Exception:  # the topic or a state not written yet, a broker not answering yet
        return None
    if expected[1] != tuple(sorted(brokers)) or len(expected[2]) != PARTITIONS:
        return None
    return expected if all(v == expected for v in views) else None


@pytest.fixture(scope="module")
def spread(brokers: dict[int, Broker], zk: KazooClient) -> Any:
    """:data:`TOPIC`, created through broker 1 once for the module's tests that use it (whichever of them run),
    and the view every broker and ZooKeeper then agree on."""
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    wires: list[Wire] = []

    def connect(bootstrap: str) -> Wire:
        wires.append(Wire(bootstrap))
        return wires[-1]

    try:
        return wait_for(lambda: converged(connect, zk, brokers), what="every broker's metadata equal to ZooKeeper's")
    finally:
        for wire in wires:
            wire.close()


def test_a_topic_created_on_one_broker_is_seen_alike_by_every_broker_and_in_zookeeper(brokers: dict[int, Broker], spread: Any) -> None:
    controller, broker_ids, partitions = spread
    assert controller in brokers
    assert broker_ids == (0, 1, 2)
    assert {state[2][0] for state in partitions.values()} == {0, 1, 2}  # spread over the brokers
    assert all(state[0] == state[2][0] and state[3] == state[2] and state[4] == [] for state in partitions.values())


def test_records_produced_to_each_partitions_leader_are_consumed(brokers: dict[int, Broker], spread: Any) -> None:
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for index in range(PARTITIONS):
        for n in range(5):
            producer.produce(TOPIC, f"{index}-{n}".encode(), partition=index)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "zk-cluster", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, index, 0) for index in range(PARTITIONS)])
        got: dict[int, list[str]] = {}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < PARTITIONS * 5 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.setdefault(message.partition(), []).append(message.value().decode())
    finally:
        consumer.close()
    assert got == {index: [f"{index}-{n}" for n in range(5)] for index in range(PARTITIONS)}


def test_a_replicated_topic_acknowledges_acks_all_and_every_replica_holds_the_records(brokers: dict[int, Broker], zk: KazooClient, connect: Callable[..., Any]) -> None:
    topic = "replicated"
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    wait_for(lambda: all(len(view(connect, b, topic)[2]) == 3 for b in brokers.values()), what="the topic in every broker's metadata")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for index in range(3):
        for n in range(10):
            producer.produce(topic, f"{index}-{n}".encode(), partition=index)
    assert producer.flush(30) == 0

    def segments(index: int) -> list[bytes]:
        return [(b.log_dir / f"{topic}-{index}" / "00000000000000000000.log").read_bytes() for b in brokers.values()]

    for index in range(3):  # the followers fetched the leader's batches as they are
        wait_for(lambda: len(set(segments(index))) == 1 and segments(index)[0].count(b"-9") == 1, what=f"every replica of partition {index} equal to the leader's")
        assert f"{index}-9".encode() in segments(index)[0]


def test_a_stopped_follower_leaves_the_isr_through_alter_partition_and_comes_back(brokers: dict[int, Broker], zk: KazooClient, connect: Callable[..., Any]) -> None:
    """The leader asks the active controller (AlterPartition) to shrink the ISR of a follower that stopped
    fetching for replica.lag.time.max.ms, and to expand it once the follower caught up again.

    A record is written after the stop: a follower whose log ends where the leader's does is in sync however
    long it has not fetched (Kafka's ``isCaughtUp``), so on an idle partition a stopped follower stays in
    the ISR. With the record, the leader's check (every replica.lag.time.max.ms / 2) finds it out of sync
    about 1.5 x replica.lag.time.max.ms after the stop, well before its ZooKeeper session could expire."""
    topic = "isr"
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers.values())})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)

    def isr() -> list[int]:
        state = zk.exists(zd.partition_state_path(topic, 0)) and zd.LeaderIsrAndControllerEpoch.decode(zk.get(zd.partition_state_path(topic, 0))[0])
        return list(state.isr) if state else []

    wait_for(lambda: len(isr()) == 3, what="the partition online with every replica in sync")
    controller = zd.ControllerRegistration.decode(zk.get(zd.CONTROLLER)[0]).broker_id
    leader = zd.LeaderIsrAndControllerEpoch.decode(zk.get(zd.partition_state_path(topic, 0))[0]).leader
    follower = next(b for b in brokers if b not in (controller, leader))
    producer = Producer({"bootstrap.servers": brokers[leader].bootstrap, "acks": 1})
    stopped = time.monotonic()
    os.kill(brokers[follower].pid, signal.SIGSTOP)
    try:
        producer.produce(topic, b"after the stop", partition=0)
        assert producer.flush(REGISTERED_AFTER_STOP_S) == 0
        wait_for(lambda: follower not in isr() and len(isr()) == 2, timeout_s=REGISTERED_AFTER_STOP_S - (time.monotonic() - stopped), what="the stopped follower out of the ISR")
    finally:
        os.kill(brokers[follower].pid, signal.SIGCONT)
    assert zk.exists(zd.broker_path(follower))  # still registered: an ISR change, not a broker failure
    wait_for(lambda: sorted(isr()) == sorted(brokers), what="the follower back in the ISR")
    wait_for(lambda: all(sorted(view(connect, b, topic)[2][0][3]) == sorted(brokers) for b in brokers.values()), what="every broker's metadata with the ISR whole again")


def test_kafka_topics_describe_shows_the_clusters_leaders(brokers: dict[int, Broker], spread: Any, zk: KazooClient, connect: Callable[..., Any]) -> None:
    done = kafka_jvm.run_tool("kafka-topics", "--bootstrap-server", brokers[2].bootstrap, "--describe", "--topic", TOPIC)
    assert done.returncode == 0, done.stdout + done.stderr
    _, _, partitions = view(connect, brokers[2])
    described = {}
    for line in done.stdout.splitlines():
        fields = dict(part.split(": ", 1) for part in line.strip().split("\t") if ": " in part)
        if "Partition" in fields:
            described[int(fields["Partition"])] = (int(fields["Leader"]), [int(r) for r in fields["Replicas"].split(",")], [int(r) for r in fields["Isr"].split(",")])
    assert described == {index: (state[0], state[2], state[3]) for index, state in partitions.items()}


def test_a_topic_config_altered_through_one_broker_is_written_to_zookeeper_and_described_by_every_broker(brokers: dict[int, Broker], spread: Any, zk: KazooClient, connect: Callable[..., Any]) -> None:
    """The broker the tool's request reached writes the config and the /config/changes notification; every
    broker follows the notification (Kafka's ZkConfigManager)."""
    done = kafka_jvm.run_tool("kafka-configs", "--bootstrap-server", brokers[1].bootstrap, "--alter", "--entity-type", "topics", "--entity-name", TOPIC, "--add-config", "retention.ms=12345")
    assert done.returncode == 0, done.stdout + done.stderr
    assert zd.decode_entity_config(zk.get(zd.config_entity_path(zd.ConfigType.TOPIC, TOPIC))[0]) == {"retention.ms": "12345"}
    change = max(zk.get_children(zd.CONFIG_CHANGES))
    assert zd.decode_config_change(zk.get(f"{zd.CONFIG_CHANGES}/{change}")[0]) == (zd.ConfigType.TOPIC, TOPIC)

    def described(broker: Broker) -> str:
        answer = connect(broker.bootstrap).call(ApiKey.DescribeConfigs, 4, {
            "resources": [{"resource_type": 2, "resource_name": TOPIC, "configuration_keys": ["retention.ms"]}], "include_synonyms": False, "include_documentation": False,
        })
        return answer.results[0].configs[0].value

    wait_for(lambda: all(described(b) == "12345" for b in brokers.values()), timeout_s=10, what="every broker describing retention.ms=12345")


def test_a_group_config_is_kept_in_zookeeper_and_described_by_every_broker(brokers: dict[int, Broker], zk: KazooClient, connect: Callable[..., Any]) -> None:
    """Kafka 4.4's ``kafka-configs.sh --entity-type groups``: Kafka keeps group configs in KRaft metadata only;
    odradek's ZooKeeper mode keeps them as the other entities, ``/config/groups/<group>`` with a change
    notification every broker follows (docs/protocol.md)."""
    import kafka44_jvm

    done = kafka44_jvm.run_tool("kafka-configs", "--bootstrap-server", brokers[1].bootstrap, "--alter", "--entity-type", "groups", "--entity-name", "zk-share", "--add-config", "share.auto.offset.reset=earliest")
    assert done.returncode == 0, done.stdout + done.stderr
    assert zd.decode_entity_config(zk.get(zd.config_entity_path(zd.ConfigType.GROUP, "zk-share"))[0]) == {"share.auto.offset.reset": "earliest"}
    change = max(zk.get_children(zd.CONFIG_CHANGES))
    assert zd.decode_config_change(zk.get(f"{zd.CONFIG_CHANGES}/{change}")[0]) == (zd.ConfigType.GROUP, "zk-share")

    def described(broker: Broker) -> tuple[str, int]:
        answer = connect(broker.bootstrap).call(ApiKey.DescribeConfigs, 4, {
            "resources": [{"resource_type": 32, "resource_name": "zk-share", "configuration_keys": ["share.auto.offset.reset"]}], "include_synonyms": False, "include_documentation": False,
        })
        (config,) = answer.results[0].configs
        return config.value, config.config_source

    wait_for(lambda: all(described(b) == ("earliest", 8) for b in brokers.values()), timeout_s=10, what="every broker describing share.auto.offset.reset=earliest")


def test_a_stopping_broker_hands_its_leaderships_over_first_and_rejoins_after_a_restart(brokers: dict[int, Broker], zk: KazooClient) -> None:
    """SIGTERM: the broker asks the controller (ControlledShutdown) to move the replicated partitions it
    leads to the other in-sync replicas before it stops serving; restarted, it catches up into the ISR."""
    topic = "replicated"

    def states() -> dict[int, zd.LeaderIsrAndControllerEpoch]:
        return {p: zd.LeaderIsrAndControllerEpoch.decode(zk.get(zd.partition_state_path(topic, p))[0]) for p in range(3)}  # type: ignore[misc]

    controller = zd.ControllerRegistration.decode(zk.get(zd.CONTROLLER)[0]).broker_id
    stopping = next(s.leader for s in states().values() if s.leader != controller)
    led = [p for p, s in states().items() if s.leader == stopping]
    brokers[stopping].stop()
    wait_for(lambda: any("Controlled shutdown request returned successfully" in line for line in brokers[stopping].output), timeout_s=5, what="the controlled shutdown's success in the broker's log")
    after = states()
    for p in led:
        assert after[p].leader != stopping and stopping not in after[p].isr
    brokers[stopping].start()
    wait_for(lambda: all(sorted(s.isr) == sorted(brokers) for s in states().values()), what="the restarted broker back in every ISR")


def test_requests_from_a_deposed_controller_or_for_an_old_broker_epoch_are_refused(brokers: dict[int, Broker], spread: Any, zk: KazooClient, connect: Callable[..., Any]) -> None:
    """A controller whose epoch is older than the one a broker has followed is refused STALE_CONTROLLER_EPOCH,
    a request for an earlier registration of the broker STALE_BROKER_EPOCH; neither changes its metadata."""
    epoch = int(zk.get(zd.CONTROLLER_EPOCH)[0])
    broker_epoch = zk.get(zd.broker_path(2))[1].czxid
    before = view(connect, brokers[2])
    header = {"controller_id": 1, "is_k_raft_controller": False, "broker_epoch": broker_epoch}
    wire = connect(brokers[2].bootstrap, "broker-1-controller")
    update = {**header, "controller_epoch": epoch - 1, "type": 0, "topic_states": [], "live_brokers": []}
    assert wire.call(ApiKey.UpdateMetadata, 8, update).error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert wire.call(ApiKey.UpdateMetadata, 8, {**update, "controller_epoch": epoch, "broker_epoch": broker_epoch - 1}).error_code == ErrorCode.STALE_BROKER_EPOCH
    state = {
        "partition_index": 0, "controller_epoch": epoch - 1, "leader": 2, "leader_epoch": 99, "isr": [2], "partition_epoch": 99,
        "replicas": [2], "adding_replicas": [], "removing_replicas": [], "is_new": False, "leader_recovery_state": 0,
    }
    leader_and_isr = {**header, "controller_epoch": epoch - 1, "type": 0, "live_leaders": [],
                      "topic_states": [{"topic_name": TOPIC, "topic_id": uuid.UUID(int=1), "partition_states": [state]}]}
    answer = wire.call(ApiKey.LeaderAndIsr, 7, leader_and_isr)
    assert answer.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partition_errors]) for t in answer.topics] == [(uuid.UUID(int=1), [(0, ErrorCode.STALE_CONTROLLER_EPOCH)])]
    stop = {**header, "controller_epoch": epoch - 1,
            "topic_states": [{"topic_name": TOPIC, "partition_states": [{"partition_index": 0, "leader_epoch": -2, "delete_partition": True}]}]}
    answer = wire.call(ApiKey.StopReplica, 4, stop)
    assert (answer.error_code, [(p.topic_name, p.partition_index, p.error_code) for p in answer.partition_errors]) == (
        ErrorCode.STALE_CONTROLLER_EPOCH, [])
    assert view(connect, brokers[2]) == before


def test_the_controller_hands_a_live_broker_at_its_epoch_a_producer_id_block(brokers: dict[int, Broker], zk: KazooClient, connect: Callable[..., Any]) -> None:
    """AllocateProducerIds, which Kafka 3.9's ZooKeeper-mode brokers send the controller instead of writing
    ``/latest_producer_id_block`` themselves: a block of 1000 after the latest, recorded in ZooKeeper for the
    asking broker; refused for an earlier registration (STALE_BROKER_EPOCH), an unregistered broker
    (BROKER_ID_NOT_REGISTERED), and by a broker that is not the controller (NOT_CONTROLLER), as Kafka's
    ``processAllocateProducerIds``."""
    controller = zd.ControllerRegistration.decode(zk.get(zd.CONTROLLER)[0]).broker_id
    asking = next(b for b in brokers if b != controller)
    broker_epoch = zk.get(zd.broker_path(asking))[1].czxid
    wire = connect(brokers[controller].bootstrap, f"broker-{asking}-forwarding")
    answer = wire.call(ApiKey.AllocateProducerIds, 0, {"broker_id": asking, "broker_epoch": broker_epoch})
    latest = zd.ProducerIdBlock.decode(zk.get(zd.LATEST_PRODUCER_ID_BLOCK)[0])
    assert (answer.error_code, answer.producer_id_start, answer.producer_id_len) == (ErrorCode.NONE, latest.first, 1000)
    assert latest.broker_id == asking
    again = wire.call(ApiKey.AllocateProducerIds, 0, {"broker_id": asking, "broker_epoch": broker_epoch})
    assert (again.error_code, again.producer_id_start) == (ErrorCode.NONE, latest.first + 1000)
    assert wire.call(ApiKey.AllocateProducerIds, 0, {"broker_id": asking, "broker_epoch": broker_epoch - 1}).error_code == ErrorCode.STALE_BROKER_EPOCH
    assert wire.call(ApiKey.AllocateProducerIds, 0, {"broker_id": 7, "broker_epoch": broker_epoch}).error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
    not_controller = connect(brokers[asking].bootstrap, f"broker-{asking}-forwarding")
    assert not_controller.call(ApiKey.AllocateProducerIds, 0, {"broker_id": asking, "broker_epoch": broker_epoch}).error_code == ErrorCode.NOT_CONTROLLER


def test_the_controller_killed_another_takes_over_and_metadata_converges(brokers: dict[int, Broker], spread: Any, zk: KazooClient, connect: Callable[..., Any]) -> None:
    old_controller = zd.ControllerRegistration.decode(zk.get(zd.CONTROLLER)[0]).broker_id
    leaders_before = {index: state[0] for index, state in zk_view(zk, set(brokers), "replicated")[2].items()}
    brokers.pop(old_controller).kill()
    survivors = dict(brokers)
    started = time.monotonic()

    def new_controller() -> int | None:
        try:
            data = zk.get(zd.CONTROLLER)[0]
        except NoNodeError:  # between the dead controller's session and the next election
            return None
        broker_id = zd.ControllerRegistration.decode(data).broker_id
        return broker_id if broker_id in survivors else None

    wait_for(new_controller, timeout_s=SESSION_TIMEOUT_MS / 1000 + 10, what="a surviving broker elected controller")
    assert time.monotonic() - started < SESSION_TIMEOUT_MS / 1000 + 5  # the dead broker's session expires, then an election

    def survivors_agree() -> Any:
        try:
            expected = zk_view(zk, set(survivors))
            views = [view(connect, b) for b in survivors.values()]
        except Exception:
            return None
        return expected if expected[1] == tuple(sorted(survivors)) and all(v == expected for v in views) else None

    controller, _, partitions = wait_for(survivors_agree, timeout_s=20, what="the survivors' metadata equal to ZooKeeper's")
    replicated = wait_for(
        lambda: (found := zk_view(zk, set(survivors), "replicated")) == view(connect, next(iter(survivors.values())), "replicated") and found,
        timeout_s=20, what="the replicated topic's metadata equal to ZooKeeper's",
    )
    for index, (leader, _, replicas, isr, offline) in replicated[2].items():
        live = [r for r in replicas if r != old_controller]
        # What it led goes to the first live ISR member in assignment order; it leaves every ISR.
        expected_leader = live[0] if leaders_before[index] == old_controller else leaders_before[index]
        assert (leader, sorted(isr), offline) == (expected_leader, sorted(live), [old_controller])
    assert controller in survivors
    survivor = next(iter(survivors.values()))
    answer = connect(survivor.bootstrap).call(ApiKey.Metadata, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": TOPIC}], "allow_auto_topic_creation": False})
    errors = {p.partition_index: p.error_code for p in answer.topics[0].partitions}
    for index, (leader, _, replicas, isr, offline) in partitions.items():
        if replicas == [old_controller]:  # its only replica is gone: offline, the last ISR member kept
            assert (leader, isr, offline, errors[index]) == (-1, [old_controller], [old_controller], ErrorCode.LEADER_NOT_AVAILABLE)
        else:
            assert (leader, offline, errors[index]) == (replicas[0], [], ErrorCode.NONE)
