"""odradek's replica fetcher following a real Apache Kafka 3.9.1 leader.

odradek registers as broker 2 in the ZooKeeper of a Kafka broker 1 (nothing of odradek serves there: only its
fetcher runs), so Kafka's controller puts broker 2 in the topics' replica sets and Kafka's leader treats the
fetcher as its follower. What Kafka observes and what lands on disk say whether the fetcher replicates as a
Kafka follower does:

- acks=all with ``min.insync.replicas=2`` completes only once the follower's fetches moved Kafka's high
  watermark, and the follower's segment and leader-epoch checkpoint are Kafka's, byte for byte;
- a follower holding records of an old epoch the leader never had (KIP-101) is answered ``diverging_epoch``
  and cuts its log where the histories part -- not at its high watermark -- then replicates the new epoch;
  Kafka takes it back into the ISR once it has caught up;
- a fetch in a stale leader epoch is fenced: the partition waits for LeaderAndIsr (failed);
- the replica manager follows on LeaderAndIsr naming Kafka the leader (clients are refused) and stops
  fetching and leads, in a new epoch at its log end, on the next one naming itself; an idempotent
  producer's retry of a batch Kafka had acknowledged is deduplicated by the new leader;
- odradek leading in Kafka's cluster shrinks and expands the ISR through Kafka's controller (AlterPartition).

And odradek as the leader, followed by the same fetcher: acks=all waits for the follower's fetches, and a
follower with records of an epoch the leader never had is answered the diverging epoch and cut there.
"""

from __future__ import annotations

import json
import struct
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

import anyio
import anyio.from_thread
import kafka_jvm
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import Broker
from odradek.broker.replication.alter_partition_manager import AlterPartitionManager
from odradek.broker.network.kafka_client import KafkaClient, Node
from odradek.broker.replication.partition import Partition
from odradek.broker.replication.replica_fetcher import FetcherConfig, InitialFetchState, ReplicaFetcherManager, initial_fetch_offset
from odradek.broker.replication.replica_manager import PartitionAppend, ReplicaManager
from odradek.controller.metadata_image import PartitionState, TopicInfo
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.log_manager import LogManager
from odradek.storage.producer_state import AppendOrigin
from odradek.controller import zk_data as zd
from odradek.controller.zk_client import ZkClient
from odradek.protocol.record_batch import iter_batch_positions
from odradek.protocol.records import Record, build_batch
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from tests.following import follower_partition
from tests.polling import wait_for
from tests.validated import validated

FOLLOWER = 2
LEADER = 1


class KafkaLeader:
    """ZooKeeper, a Kafka broker 1, and odradek's broker 2 registered beside it."""

    def __init__(self, root: Path) -> None:
        self.zookeeper = kafka_jvm.ZooKeeper(root / "zookeeper").start()
        self.kafka = kafka_jvm.KafkaBroker(root / "kafka", self.zookeeper.connect, broker_id=LEADER, settings={"replica.lag.time.max.ms": "3000", **kafka_jvm.CLUSTER_STOP_SETTINGS})
        self.registration: ZkClient | None = None
        self.kafka.start()
        self.observer = ZkClient(self.zookeeper.connect)
        self.register_follower()

    def register_follower(self) -> None:
        self.registration = ZkClient(self.zookeeper.connect)
        self.broker_epoch = self.registration.register_broker(zd.BrokerRegistration(FOLLOWER, (zd.EndPoint("PLAINTEXT", "127.0.0.1", kafka_jvm.free_port(), "PLAINTEXT"),)))

    def deregister_follower(self) -> None:
        """The follower's ZooKeeper session ends: Kafka's controller takes it out of the ISR."""
        assert self.registration is not None
        self.registration.close()
        self.registration = None

    def state(self, topic: str) -> dict:
        """The partition's leader, epoch and ISR in ZooKeeper."""
        data, _ = self.observer.kazoo.get(f"/brokers/topics/{topic}/partitions/0/state")
        return json.loads(data)

    def create_topic(self, topic: str, config: dict[str, str] | None = None, replicas: list[int] = [LEADER, FOLLOWER]) -> None:
        admin = AdminClient({"bootstrap.servers": self.kafka.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[replicas], config=config or {"min.insync.replicas": "2"})])[topic].result(30)
        wait_for(lambda: self.state(topic)["isr"] == replicas, what=f"{topic} in ZooKeeper")

    def produce(self, topic: str, count: int, **settings: str) -> None:
        """acks=all, idempotent: raises unless every record is acknowledged."""
        producer = Producer({"bootstrap.servers": self.kafka.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 20000, **settings})
        failures = []
        for i in range(count):
            producer.produce(topic, f"value-{i}".encode() * 20, key=str(i).encode(), on_delivery=lambda err, msg: failures.append(err) if err else None)
        assert producer.flush(30) == 0
        assert failures == []

    def segment(self, topic: str) -> bytes:
        return (self.kafka.log_dir / f"{topic}-0" / "00000000000000000000.log").read_bytes()

    def epoch_checkpoint(self, topic: str) -> str:
        return (self.kafka.log_dir / f"{topic}-0" / "leader-epoch-checkpoint").read_text()

    def close(self) -> None:
        if self.registration is not None:
            self.registration.close()
        self.observer.close()
        self.kafka.stop()
        self.zookeeper.stop()


@pytest.fixture(scope="module")
def kafka_leader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaLeader]:
    leader = KafkaLeader(tmp_path_factory.mktemp("kafka-leader"))
    try:
        yield leader
    finally:
        leader.close()


async def topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    async with KafkaClient(bootstrap) as client:
        return (await client.refresh_metadata([topic])).topics[0].topic_id


def open_log(root: Path, topic: str) -> Log:
    return Log.open(root / f"{topic}-0", LogConfig())


class Following:
    """odradek's fetcher manager following partition 0 of ``topic`` on Kafka, in a task group."""

    def __init__(self, leader: KafkaLeader, topic: str, local: Log, tg: anyio.abc.TaskGroup, leader_epoch: int, topic_id: uuid.UUID) -> None:
        host, port = leader.kafka.bootstrap.split(":")
        self.tp = (topic, 0)
        self.local = local
        self.log_end_offsets: list[int] = []
        """The follower's log end offset after each append or truncation."""
        partition = follower_partition(local, FOLLOWER, LEADER, leader_epoch, lambda p: self.log_end_offsets.append(local.log_end_offset))
        self.manager = ReplicaFetcherManager(FetcherConfig(broker_id=FOLLOWER, max_wait_ms=100, backoff_ms=200), 1, {self.tp: partition}.__getitem__, tg)
        self.manager.add_fetcher_for_partitions({self.tp: InitialFetchState(topic_id, Node(LEADER, host, int(port)), leader_epoch, initial_fetch_offset(partition))})

    @property
    def failed(self) -> bool:
        return any(self.tp in f.failed for f in self.manager.fetchers.values())

    def stop(self) -> None:
        self.manager.remove_fetcher_for_partitions({self.tp})


async def until(condition: Callable[[], object], timeout_s: float = 30.0, what: str = "condition") -> None:
    with anyio.fail_after(timeout_s):
        while not condition():
            await anyio.sleep(0.05)


def test_kafka_leader_waits_for_the_follower_and_gets_its_bytes(kafka_leader: KafkaLeader, tmp_path: Path) -> None:
    topic = "followed"
    kafka_leader.create_topic(topic)
    local = open_log(tmp_path, topic)

    async def scenario() -> None:
        async with anyio.create_task_group() as tg:
            following = Following(kafka_leader, topic, local, tg, kafka_leader.state(topic)["leader_epoch"], await topic_id(kafka_leader.kafka.bootstrap, topic))
            # acks=all with min.insync.replicas=2: acknowledged only once our fetches carried Kafka's HW past them
            await anyio.to_thread.run_sync(lambda: kafka_leader.produce(topic, 300, **{"compression.type": "lz4"}))
            await anyio.to_thread.run_sync(lambda: kafka_leader.produce(topic, 200))
            expected = kafka_leader.segment(topic)
            await until(lambda: local.size_in_bytes == len(expected) and local.high_watermark == local.log_end_offset, what="caught up with the high watermark")
            following.stop()
            tg.cancel_scope.cancel()

    anyio.run(scenario)
    assert local.log_end_offset == 500
    assert (tmp_path / f"{topic}-0" / "00000000000000000000.log").read_bytes() == kafka_leader.segment(topic)
    assert (tmp_path / f"{topic}-0" / "leader-epoch-checkpoint").read_text() == kafka_leader.epoch_checkpoint(topic)
    assert kafka_leader.state(topic)["isr"] == [LEADER, FOLLOWER]
    local.close()


def test_a_follower_with_records_of_an_old_epoch_truncates_where_the_leaders_history_parts(kafka_leader: KafkaLeader, tmp_path: Path) -> None:
    topic = "diverged"
    kafka_leader.create_topic(topic, {"min.insync.replicas": "1"})
    local = open_log(tmp_path, topic)
    bootstrap = kafka_leader.kafka.bootstrap

    async def follow(leader_epoch: int, caught_up: Callable[[Following], bool], produce: Callable[[], None] = lambda: None) -> list[int]:
        async with anyio.create_task_group() as tg:
            following = Following(kafka_leader, topic, local, tg, leader_epoch, await topic_id(bootstrap, topic))
            await anyio.to_thread.run_sync(produce)
            await until(lambda: caught_up(following), what="the follower's state")
            following.stop()
            tg.cancel_scope.cancel()
        return following.log_end_offsets

    anyio.run(follow, 0, lambda f: local.log_end_offset == 5 and local.high_watermark == 5, lambda: kafka_leader.produce(topic, 5))
    # Records of epoch 0 the leader never had (written by the follower while it led epoch 0's last moments,
    # as far as its log can tell).
    records = [Record(timestamp=int(time.time() * 1000), key=b"lost-%d" % i, value=b"never replicated") for i in range(3)]
    local.append_as_leader(validated(build_batch(records)), leader_epoch=0)
    # The follower restarts with its high watermark checkpoint behind (Kafka writes it every 5 s).
    local.close()
    local = Log.open(tmp_path / f"{topic}-0", LogConfig(), high_watermark=0)
    assert (local.log_end_offset, local.latest_epoch, local.high_watermark) == (8, 0, 0)

    kafka_leader.deregister_follower()
    wait_for(lambda: kafka_leader.state(topic)["isr"] == [LEADER], what="the follower out of the ISR")
    epoch = kafka_leader.state(topic)["leader_epoch"]
    assert epoch > 0  # the controller's ISR change starts a new leader epoch, at offset 5
    kafka_leader.produce(topic, 4)  # offsets 5-8 in the new epoch
    kafka_leader.register_follower()
    wait_for(lambda: FOLLOWER in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers, what="the follower registered again")

    # A fetch in the old leader epoch is fenced: the partition waits for the next LeaderAndIsr.
    anyio.run(follow, 0, lambda f: f.failed)
    assert local.log_end_offset == 8

    # In the current epoch: Kafka answers diverging_epoch (0, 5); the log is cut at 5 -- not at its high
    # watermark (0), not at its end -- and the new epoch's records follow.
    # Kafka takes the follower back into the ISR once it has caught up.
    ends = anyio.run(follow, epoch, lambda f: local.log_end_offset == 9 and local.high_watermark == 9 and kafka_leader.state(topic)["isr"] == [LEADER, FOLLOWER])
    assert ends[0] == 5 and min(ends) == 5  # cut once, at 5: offsets 0-4, below no high watermark it knew, were kept
    assert (tmp_path / f"{topic}-0" / "00000000000000000000.log").read_bytes() == kafka_leader.segment(topic)
    assert (tmp_path / f"{topic}-0" / "leader-epoch-checkpoint").read_text() == kafka_leader.epoch_checkpoint(topic)
    assert kafka_leader.epoch_checkpoint(topic).split("\n")[2:4] == ["0 0", f"{epoch} 5"]
    local.close()


def test_the_replica_manager_follows_then_leads_as_leader_and_isr_says(kafka_leader: KafkaLeader, tmp_path: Path) -> None:
    topic = "handed-over"
    kafka_leader.create_topic(topic)
    host, port = kafka_leader.kafka.bootstrap.split(":")
    log_manager = LogManager([tmp_path / "logs"], {})
    log_manager.startup(None, FOLLOWER)
    replicas = ReplicaManager(FOLLOWER, log_manager, {}, fetcher_config=lambda: FetcherConfig(FOLLOWER, max_wait_ms=100, backoff_ms=200))
    replicas.leader_node = {LEADER: Node(LEADER, host, int(port))}.get
    epoch = kafka_leader.state(topic)["leader_epoch"]
    replicated: list[int] = []

    async def scenario() -> None:
        tid = await topic_id(kafka_leader.kafka.bootstrap, topic)
        async with anyio.create_task_group() as tg:
            replicas.background = tg
            replicas.become_leader_or_follower(TopicInfo(topic, tid, {0: PartitionState(LEADER, epoch, [LEADER, FOLLOWER], [LEADER, FOLLOWER])}), [0])
            with pytest.raises(KafkaError) as refused:
                replicas.leader_partition(topic, 0)
            assert refused.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            await anyio.to_thread.run_sync(lambda: kafka_leader.produce(topic, 50))  # min.insync.replicas=2: through our fetches
            partition = replicas.get_partition(topic, 0)
            await until(lambda: partition.high_watermark == partition.log_end_offset == 50, what="the follower caught up")
            replicated.append(partition.size_in_bytes)

            # The next LeaderAndIsr makes this broker the leader of a new epoch, with an ISR of itself.
            replicas.become_leader_or_follower(TopicInfo(topic, tid, {0: PartitionState(FOLLOWER, epoch + 1, [FOLLOWER], [LEADER, FOLLOWER], 1)}), [0])
            await anyio.to_thread.run_sync(lambda: kafka_leader.produce(topic, 5, **{"acks": "1", "enable.idempotence": False}))  # Kafka still thinks it leads
            await anyio.sleep(1)  # a fetcher still running would have fetched them by now
            assert partition.log_end_offset == 50
            # The idempotent producer's state came with the replicated batches: its retry of its last batch,
            # sent to the new leader, is recognised and answered with the original offsets.
            data = (tmp_path / "logs" / f"{topic}-0" / "00000000000000000000.log").read_bytes()
            position, base_offset, size = list(iter_batch_positions(data))[-1]
            retry = bytearray(data[position : position + size])
            struct.pack_into(">q", retry, 0, 0)  # as the client sent it: base offset 0,
            struct.pack_into(">i", retry, 12, -1)  # no partition leader epoch
            duplicate = replicas.append_records([PartitionAppend(topic, 0, retry)], -1, 5000, AppendOrigin.CLIENT, produce_version=9)
            await duplicate.completion()
            assert (duplicate.results[0].error, duplicate.results[0].base_offset, partition.log_end_offset) == (ErrorCode.NONE, base_offset, 50)
            records = bytearray(build_batch([Record(timestamp=int(time.time() * 1000), key=b"k", value=b"led here")]))
            outcome = replicas.append_records([PartitionAppend(topic, 0, records)], -1, 5000, AppendOrigin.CLIENT, produce_version=9)
            await outcome.completion()
            assert (outcome.results[0].error, outcome.results[0].base_offset) == (ErrorCode.NONE, 50)
            assert (partition.log.epoch_for_offset(49), partition.log.epoch_for_offset(50)) == (epoch, epoch + 1)
            tg.cancel_scope.cancel()

    anyio.run(scenario)
    (size,) = replicated
    assert (tmp_path / "logs" / f"{topic}-0" / "00000000000000000000.log").read_bytes()[:size] == kafka_leader.segment(topic)[:size]
    log_manager.shutdown()


def test_odradek_leading_in_kafkas_cluster_drops_a_follower_that_never_fetches_through_kafkas_controller(kafka_leader: KafkaLeader, tmp_path: Path) -> None:
    """odradek (broker 2) leads; Kafka's broker 1, its follower, cannot reach it. After replica.lag.time.max.ms
    odradek asks Kafka's controller (AlterPartition) to shrink the ISR, Kafka writes it to ZooKeeper, and the
    acks=all append that waited for the ISR completes. Once broker 1 fetches up to the high watermark, odradek
    asks it back in."""
    topic = "shrinking"
    kafka_leader.create_topic(topic, {"min.insync.replicas": "1"}, replicas=[FOLLOWER, LEADER])
    znode, version = kafka_leader.observer.partition_state(topic, 0)
    assert znode.leader == FOLLOWER
    host, port = kafka_leader.kafka.bootstrap.split(":")
    kafka = Node(LEADER, host, int(port))
    log_manager = LogManager([tmp_path / "logs"], {})
    log_manager.startup(None, FOLLOWER)
    replicas = ReplicaManager(FOLLOWER, log_manager, {}, replica_lag_time_max_ms=2000)
    replicas.leader_node = {LEADER: kafka, FOLLOWER: Node(FOLLOWER, "127.0.0.1", 1)}.get
    outcome_and_time: list = []

    async def scenario() -> None:
        tid = await topic_id(kafka_leader.kafka.bootstrap, topic)
        async with anyio.create_task_group() as tg:
            replicas.background = tg
            replicas.start_isr_changes(AlterPartitionManager(FOLLOWER, lambda: kafka_leader.broker_epoch, lambda: kafka, tg))
            replicas.become_leader_or_follower(TopicInfo(topic, tid, {0: PartitionState(FOLLOWER, znode.leader_epoch, list(znode.isr), [FOLLOWER, LEADER], version)}), [0])
            partition = replicas.get_partition(topic, 0)
            records = bytearray(build_batch([Record(timestamp=int(time.time() * 1000), key=b"k", value=b"waits for the ISR")]))
            started = time.monotonic()
            outcome = replicas.append_records([PartitionAppend(topic, 0, records)], -1, 15000, AppendOrigin.CLIENT, produce_version=9)
            assert partition.high_watermark == 0  # Kafka's broker 1 is in the ISR and has fetched nothing
            await outcome.completion()
            outcome_and_time.append((outcome.results[0].error, time.monotonic() - started, list(partition.isr), partition.state.partition_epoch, partition.high_watermark, kafka_leader.state(topic)["isr"]))
            # Broker 1's fetch (as the Fetch handler reads for it) reaches the high watermark: asked back in.
            partition.read_records(partition.log_end_offset, 1 << 20, LEADER, 0, True, partition.log.latest_epoch, 0, int(time.time() * 1000))
            await until(lambda: partition.isr == [FOLLOWER, LEADER], what="broker 1 back in the ISR")
            tg.cancel_scope.cancel()

    anyio.run(scenario)
    error, waited, isr, partition_epoch, high_watermark, isr_in_zookeeper = outcome_and_time[0]
    assert error == ErrorCode.NONE and waited >= 2.0 and high_watermark == 1
    assert isr == isr_in_zookeeper == [FOLLOWER]
    assert partition_epoch > version
    assert kafka_leader.state(topic)["isr"] == [FOLLOWER, LEADER] and kafka_leader.observer.partition_state(topic, 0)[1] == partition_epoch + 1
    log_manager.shutdown()


# -- odradek's leader side, followed by odradek's fetcher ----------------------------------------------------


@pytest.fixture
def odradek_leader(tmp_path: Path, connect: Callable) -> Iterator[Broker]:
    with Broker(log_dir=tmp_path / "leader", config={"broker.id": "0"}) as broker:
        topic = {"name": "led", "num_partitions": 1, "replication_factor": 1}
        assert connect(broker.bootstrap).call(ApiKey.CreateTopics, 7, {"topics": [topic], "timeout_ms": 5000}).topics[0].error_code == 0
        yield broker


def lead_with_follower(broker: Broker, epoch: int) -> Partition:
    """A LeaderAndIsr giving partition led-0 a follower, broker 2, in its ISR, in leader epoch ``epoch``."""
    partition = broker.server.replica_manager.partitions[("led", 0)]
    state = PartitionState(0, epoch, [0, FOLLOWER], [0, FOLLOWER], epoch)
    anyio.from_thread.run_sync(lambda: partition.become_leader(state, False, int(time.time() * 1000)), token=broker._token)
    return partition


def test_odradek_leads_its_follower_and_answers_where_their_logs_part(odradek_leader: Broker, tmp_path: Path) -> None:
    leader = lead_with_follower(odradek_leader, 1)
    local = open_log(tmp_path / "follower", "led")
    host, port = odradek_leader.bootstrap.split(":")
    node = Node(0, host, int(port))
    config = FetcherConfig(broker_id=FOLLOWER, max_wait_ms=100, backoff_ms=200)

    def produce(count: int) -> None:
        producer = Producer({"bootstrap.servers": odradek_leader.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 20000})
        failures: list = []
        for i in range(count):
            producer.produce("led", b"led-%d" % i * 30, on_delivery=lambda err, msg: failures.append(err) if err else None)
        assert producer.flush(30) == 0 and failures == []

    async def follow(epoch: int, caught_up: Callable[[], bool], work: Callable[[], None] = lambda: None) -> list[int]:

        ends: list[int] = []
        async with anyio.create_task_group() as tg:
            partition = follower_partition(local, FOLLOWER, 0, epoch, lambda p: ends.append(local.log_end_offset))
            manager = ReplicaFetcherManager(config, 1, {("led", 0): partition}.__getitem__, tg)
            manager.add_fetcher_for_partitions({("led", 0): InitialFetchState(leader.topic_id, node, epoch, initial_fetch_offset(partition))})
            await anyio.to_thread.run_sync(work)
            await until(caught_up, what="the follower's state")
            manager.remove_fetcher_for_partitions({("led", 0)})
            tg.cancel_scope.cancel()
        return ends

    def run_on_the_broker(*args: object) -> list[int]:
        """The fetcher runs on the in-process broker's event loop, as it would in the broker."""
        return anyio.from_thread.run(follow, *args, token=odradek_leader._token)

    # acks=all waits for the follower in the ISR: acknowledged only through its fetches.
    run_on_the_broker(1, lambda: local.log_end_offset == leader.log_end_offset == leader.high_watermark == local.high_watermark == 100, lambda: produce(100))
    leader_dir = Path(odradek_leader.log_dir) / "led-0"
    assert (tmp_path / "follower" / "led-0" / "00000000000000000000.log").read_bytes() == (leader_dir / "00000000000000000000.log").read_bytes()

    # The follower writes in an epoch the leader never had (2); the leader moves on to epoch 3 at its end.
    records = [Record(timestamp=int(time.time() * 1000), key=b"lost-%d" % i, value=b"never replicated") for i in range(3)]
    local.append_as_leader(validated(build_batch(records)), leader_epoch=2)
    lead_with_follower(odradek_leader, 3)
    # As Kafka's followers, the fetcher fetched in an incremental session the leader keeps for a follower.
    assert any(session.is_follower and (leader.topic_id, 0) in session.partitions for session in odradek_leader.server.fetch_sessions.sessions.values())
    ends = run_on_the_broker(3, lambda: local.log_end_offset == leader.log_end_offset == 105, lambda: produce(5))
    assert ends[0] == 100  # told epoch 1 ends at 100: cut there, and only there
    assert (tmp_path / "follower" / "led-0" / "00000000000000000000.log").read_bytes() == (leader_dir / "00000000000000000000.log").read_bytes()
    assert (tmp_path / "follower" / "led-0" / "leader-epoch-checkpoint").read_text() == (leader_dir / "leader-epoch-checkpoint").read_text()
    local.close()
