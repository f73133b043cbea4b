"""odradek's ZooKeeper controller electing leaders for ElectLeaders, on a real ZooKeeper, where a cluster of
brokers could not cheaply bring a partition there: an offline partition whose only in-sync replica is gone
while another replica is live. An unclean election gives it that replica (its ISR just itself, RECOVERING,
the epoch moved on), as Kafka's ``OfflinePartitionLeaderElectionStrategy(allowUnclean = true)``; a preferred
one cannot, and says so in Kafka's words.
"""

from __future__ import annotations

import uuid
from typing import Iterator

import kafka_jvm
import pytest

from odradek.broker.controller_channel import ControllerChannelManager
from odradek.controller import zk_data as zd
from odradek.controller.leader_election import ElectionError, ElectionType
from odradek.controller.zk_client import ZkClient
from odradek.controller.zk_controller import ZkController
from odradek.protocol.errors import ErrorCode

from tests.controller.test_zk_controller import registration, wait_for

RECOVERING = 1


@pytest.fixture
def controller(zookeeper: kafka_jvm.ZooKeeper) -> Iterator[ZkController]:
    """Broker 1, the active controller, with broker 3 registered (broker 2, which the partitions prefer, is not)."""
    connect = f"{zookeeper.connect}/elect-{uuid.uuid4().hex[:6]}"
    zk, other = ZkClient(connect), ZkClient(connect)
    channel = ControllerChannelManager(1)
    active = ZkController(zk, 1, channel)
    try:
        zk.create_top_level_paths()
        zk.keep_registered(registration(1))
        other.keep_registered(registration(3))
        active.startup()
        wait_for(lambda: active.active and 3 in active.context.live_brokers, what="controller elected, broker 3 live")
        yield active
    finally:
        active.shutdown()
        channel.close()
        other.close()
        zk.close()


def test_an_unclean_election_gives_an_offline_partition_a_live_replica_from_outside_the_isr(controller: ZkController) -> None:
    epoch = controller.context.epoch
    offline = zd.LeaderIsrAndControllerEpoch(-1, 7, (2,), epoch)
    # the state first, then the assignment: the controller learns of a partition already offline
    controller.zk.create_recursive(zd.partition_state_path("stranded", 0), offline.encode())
    controller.zk.kazoo.set(zd.topic_path("stranded"), zd.TopicAssignment(uuid.uuid4(), {0: zd.ReplicaAssignment((2, 3))}).encode())
    wait_for(lambda: ("stranded", 0) in controller.context.leadership, what="the controller knows the partition")
    assert controller.zk.partition_state("stranded", 0) == (offline, 0)  # no clean election possible

    refused = controller.elect_leaders({("stranded", 0), ("stranded", 1)}, ElectionType.PREFERRED).result(10)
    assert refused == {
        ("stranded", 0): ElectionError(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "Failed to elect leader for partition stranded-0 under strategy PreferredReplicaPartitionLeaderElectionStrategy"),
        ("stranded", 1): ElectionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
    }
    assert controller.elect_leaders({("stranded", 0)}, ElectionType.UNCLEAN).result(10) == {("stranded", 0): 3}
    assert controller.zk.partition_state("stranded", 0) == (zd.LeaderIsrAndControllerEpoch(3, 8, (3,), epoch, leader_recovery_state=RECOVERING), 1)
    assert controller.elect_leaders({("stranded", 0)}, ElectionType.UNCLEAN).result(10) == {
        ("stranded", 0): ElectionError(ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
    }
