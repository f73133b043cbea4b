"""odradek's ZooKeeper controller on a real ZooKeeper, for what needs no broker to answer it: what it writes
when a topic's replicas are not all there, and what it does with znodes holding something that is not
Kafka's JSON (it reads them as Kafka does, as no partitions or no state, and goes on)."""

from __future__ import annotations

import uuid
from typing import Callable, Iterator

import kafka_jvm
import pytest

from odradek.broker.controller_channel import ControllerChannelManager
from odradek.controller import zk_data as zd
from odradek.controller.zk_client import ZkClient
from odradek.controller.zk_controller import LeaderBalance, ZkController
from tests.polling import wait_for


def registration(broker_id: int) -> zd.BrokerRegistration:
    """A broker registered at an address nothing serves: the controller's requests to it wait, unanswered."""
    return zd.BrokerRegistration(broker_id, (zd.EndPoint("PLAINTEXT", "127.0.0.1", kafka_jvm.free_port(), "PLAINTEXT"),))


@pytest.fixture
def cluster(zookeeper: kafka_jvm.ZooKeeper) -> Iterator[tuple[ZkController, Callable[[int], ZkClient]]]:
    """An active controller (broker 1) under a chroot of its own, and ``join(id)`` registering more brokers.
    It checks the leader balance every half second (Kafka: every 300 s)."""
    connect = f"{zookeeper.connect}/controller-{uuid.uuid4().hex[:6]}"
    zk = ZkClient(connect)
    channel = ControllerChannelManager(1)
    controller = ZkController(zk, 1, channel, leader_balance=LeaderBalance(check_interval_s=0.5))
    others: list[ZkClient] = []

    def join(broker_id: int) -> ZkClient:
        client = ZkClient(connect)
        client.keep_registered(registration(broker_id))
        others.append(client)
        return client

    try:
        zk.create_top_level_paths()
        zk.keep_registered(registration(1))
        controller.startup()
        wait_for(lambda: controller.active, what="controller elected")
        yield controller, join
    finally:
        controller.shutdown()
        channel.close()
        for client in others:
            client.close()
        zk.close()


def test_a_partition_with_no_live_replica_waits_for_one(cluster: tuple[ZkController, Callable[[int], ZkClient]]) -> None:
    controller, join = cluster
    assignment = zd.TopicAssignment(uuid.uuid4(), {0: zd.ReplicaAssignment((2, 1)), 1: zd.ReplicaAssignment((3,))})
    controller.zk.create_topic("waiting", assignment, {})
    epoch = controller.context.epoch
    # partition 0: broker 2 is not there, so broker 1 leads alone; partition 1 has no live replica: no state
    wait_for(lambda: controller.zk.partition_state("waiting", 0) is not None, what="partition 0 online")
    assert controller.zk.partition_state("waiting", 0) == (zd.LeaderIsrAndControllerEpoch(1, 0, (1,), epoch), 0)
    assert controller.zk.partition_state("waiting", 1) is None
    join(3)
    wait_for(lambda: controller.zk.partition_state("waiting", 1) is not None, what="partition 1 online once broker 3 registered")
    assert controller.zk.partition_state("waiting", 1) == (zd.LeaderIsrAndControllerEpoch(3, 0, (3,), epoch), 0)


def test_znodes_that_are_not_json_read_as_kafka_reads_them(cluster: tuple[ZkController, Callable[[int], ZkClient]]) -> None:
    controller, _ = cluster
    controller.zk.kazoo.create(zd.topic_path("garbled"), b"{not json")
    controller.zk.create_topic("fine", zd.TopicAssignment(uuid.uuid4(), {0: zd.ReplicaAssignment((1,))}), {})
    wait_for(lambda: controller.zk.partition_state("fine", 0) is not None, what="the good topic online")
    assert not any(t == "garbled" for t, _ in controller.context.assignments)
    controller.zk.kazoo.set(zd.partition_state_path("fine", 0), b"\xff\xfe")
    assert controller.zk.partition_state("fine", 0) is None
    # a controller elected now reads everything again, the garbled znodes included, and still comes up
    controller.zk.resign_controller(1)
    wait_for(lambda: controller.active and controller.context.epoch == 2, what="re-elected")
    assert ("fine", 0) in controller.context.assignments and ("fine", 0) not in controller.context.leadership


def place_partition(controller: ZkController, topic: str, replicas: tuple[int, ...], state: zd.LeaderIsrAndControllerEpoch) -> None:
    """A partition whose state ZooKeeper already holds when the controller learns of its topic (as after
    leadership moved away from the preferred replica): the state first, then the assignment."""
    controller.zk.create_recursive(zd.partition_state_path(topic, 0), state.encode())
    controller.zk.kazoo.set(zd.topic_path(topic), zd.TopicAssignment(uuid.uuid4(), {0: zd.ReplicaAssignment(replicas)}).encode())


def test_leadership_goes_back_to_the_preferred_replica_when_the_balance_is_off(cluster: tuple[ZkController, Callable[[int], ZkClient]]) -> None:
    controller, join = cluster
    join(3)
    wait_for(lambda: 3 in controller.context.live_brokers, what="broker 3 live")
    epoch = controller.context.epoch
    place_partition(controller, "unbalanced", (1, 3), zd.LeaderIsrAndControllerEpoch(3, 4, (3, 1), epoch))
    # broker 1 leads none of the partitions it prefers (100% > 10%): the next check hands it back
    wait_for(lambda: controller.zk.partition_state("unbalanced", 0) == (zd.LeaderIsrAndControllerEpoch(1, 5, (3, 1), epoch), 1), what="broker 1 leads again")


def test_a_topic_allowing_unclean_election_gets_a_leader_from_outside_the_isr(cluster: tuple[ZkController, Callable[[int], ZkClient]]) -> None:
    controller, join = cluster
    broker2, _ = join(2), join(3)
    wait_for(lambda: {2, 3} <= set(controller.context.live_brokers), what="brokers 2 and 3 live")
    epoch = controller.context.epoch
    for topic, unclean in (("careful", None), ("reckless", "true")):
        controller.zk.create_topic(topic, zd.TopicAssignment(uuid.uuid4(), {0: zd.ReplicaAssignment((2, 3))}), {} if unclean is None else {"unclean.leader.election.enable": unclean})
        place = zd.LeaderIsrAndControllerEpoch(2, 0, (2, 3), epoch)
        wait_for(lambda topic=topic: controller.zk.partition_state(topic, 0) == (place, 0), what=f"{topic} online")
        # broker 3 falls out of the ISR (as its leader would tell the controller)
        controller.zk.update_partition_state_fenced(topic, 0, zd.LeaderIsrAndControllerEpoch(2, 0, (2,), epoch), 0, controller.context.epoch_zk_version)
    controller.zk.resign_controller(1)  # re-read the states written behind the controller's back
    wait_for(lambda: controller.active and controller.context.epoch == epoch + 1, what="re-elected")
    broker2.close()  # the only in-sync replica fails
    wait_for(lambda: controller.zk.partition_state("reckless", 0)[0] == zd.LeaderIsrAndControllerEpoch(3, 1, (3,), epoch + 1, leader_recovery_state=1), what="reckless led by broker 3, recovering")
    wait_for(lambda: controller.zk.partition_state("careful", 0)[0] == zd.LeaderIsrAndControllerEpoch(-1, 1, (2,), epoch + 1), what="careful offline")


def test_an_isr_change_notification_is_read_and_deleted(cluster: tuple[ZkController, Callable[[int], ZkClient]]) -> None:
    """What a broker before AlterPartition writes when it shrinks an ISR: the state, then a notification."""
    controller, join = cluster
    join(3)
    wait_for(lambda: 3 in controller.context.live_brokers, what="broker 3 live")
    controller.zk.create_topic("shrinking", zd.TopicAssignment(uuid.uuid4(), {0: zd.ReplicaAssignment((1, 3))}), {})
    wait_for(lambda: ("shrinking", 0) in controller.context.leadership, what="online")
    epoch = controller.context.epoch
    controller.zk.kazoo.set(zd.partition_state_path("shrinking", 0), zd.LeaderIsrAndControllerEpoch(1, 0, (1,), epoch).encode(), version=0)
    controller.zk.kazoo.create(f"{zd.ISR_CHANGE_NOTIFICATION}/{zd.ISR_CHANGE_PREFIX}", zd.encode_isr_change([("shrinking", 0), ("unknown", 5)]), sequence=True)
    wait_for(lambda: controller.context.leadership[("shrinking", 0)].state.isr == (1,), what="the controller read the new ISR")
    assert controller.context.leadership[("shrinking", 0)].zk_version == 1
    wait_for(lambda: controller.zk.kazoo.get_children(zd.ISR_CHANGE_NOTIFICATION) == [], what="the notification deleted")
