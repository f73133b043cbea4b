"""odradek's ZooKeeper-mode controller judging AlterPartition as Kafka 3.9's does, with a real Kafka broker
leading the partition and a real ZooKeeper.

odradek's controller (broker 1) leads the cluster; Kafka's broker 0 leads partition 0 of a topic whose other
replica, broker 1, never fetches. The AlterPartition a leader sends is decoded from the wire format and
handed to the controller as its request handler would: a shrink is written to ZooKeeper at the partition
epoch and reaches Kafka's metadata through UpdateMetadata; a retry gets the same answer; a stale broker epoch,
an old leader epoch, an old partition epoch and an ISR naming a dead broker are refused with Kafka's errors.
"""

from __future__ import annotations

import uuid
from typing import Iterator

import kafka_jvm
import pytest
from confluent_kafka.admin import AdminClient

from odradek.broker.controller_channel import ControllerChannelManager
from odradek.controller import zk_data as zd
from odradek.controller.embedded_controller import new_cluster_id
from odradek.controller.zk_client import ZkClient
from odradek.controller.zk_controller import ZkController
from odradek.protocol.api import ApiKey, decode_request, encode_request
from odradek.protocol.errors import ErrorCode
from tests.polling import wait_for

TOPIC = "isr-changes"


@pytest.fixture(scope="module")
def cluster(zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ZkController, kafka_jvm.KafkaBroker]]:
    connect = f"{zookeeper.connect}/alter-partition-{uuid.uuid4().hex[:6]}"
    zk = ZkClient(connect)
    channel = ControllerChannelManager(1)
    controller = ZkController(zk, 1, channel)
    kafka = kafka_jvm.KafkaBroker(tmp_path_factory.mktemp("kafka-leader"), connect, broker_id=0, settings=kafka_jvm.CLUSTER_STOP_SETTINGS)
    try:
        zk.create_top_level_paths()
        zk.create_or_get_cluster_id(new_cluster_id())
        zk.keep_registered(zd.BrokerRegistration(1, (zd.EndPoint("PLAINTEXT", "127.0.0.1", kafka_jvm.free_port(), "PLAINTEXT"),)))
        controller.startup()
        wait_for(lambda: controller.active, what="odradek's controller elected")
        kafka.start()
        zk.create_topic(TOPIC, zd.TopicAssignment(uuid.uuid4(), {0: zd.ReplicaAssignment((0, 1))}), {})
        wait_for(lambda: (TOPIC, 0) in controller.context.leadership, what="the partition led")
        yield controller, kafka
    finally:
        kafka.stop()
        controller.shutdown()
        channel.close()
        zk.close()


def alter(controller: ZkController, broker_epoch: int, leader_epoch: int, isr: list[int], partition_epoch: int, version: int = 3) -> dict:
    """Kafka broker 0's AlterPartition for partition 0, through the wire format; the answer as a dict."""
    topic = {"topic_name": TOPIC, "topic_id": controller.context.topic_ids[TOPIC], "partitions": [
        {"partition_index": 0, "leader_epoch": leader_epoch, "new_isr": isr, "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in isr], "leader_recovery_state": 0, "partition_epoch": partition_epoch}
    ]}
    frame = encode_request(ApiKey.AlterPartition, version, 7, {"broker_id": 0, "broker_epoch": broker_epoch, "topics": [topic]}, client_id="broker-0-to-controller")
    request = decode_request(frame[4:])
    return controller.alter_partition(request.body, version).result(10)


def only_partition(answer: dict) -> dict:
    assert answer["error_code"] == ErrorCode.NONE
    [topic] = answer["topics"]
    [partition] = topic["partitions"]
    return partition


def test_a_leaders_isr_change_is_judged_and_written_as_kafkas_controller_does(cluster: tuple[ZkController, kafka_jvm.KafkaBroker]) -> None:
    controller, kafka = cluster
    state, version = controller.zk.partition_state(TOPIC, 0)
    assert (state.leader, state.isr) == (0, (0, 1))
    epoch = controller.context.broker_epochs[0]

    assert alter(controller, epoch + 1, state.leader_epoch, [0], version)["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    assert only_partition(alter(controller, epoch, state.leader_epoch, [0], version + 1))["error_code"] == ErrorCode.NOT_CONTROLLER

    shrunk = only_partition(alter(controller, epoch, state.leader_epoch, [0], version))
    assert (shrunk["error_code"], shrunk["leader_id"], shrunk["isr"], shrunk["partition_epoch"]) == (ErrorCode.NONE, 0, [0], version + 1)
    written, new_version = controller.zk.partition_state(TOPIC, 0)
    assert (written.leader, written.leader_epoch, written.isr, new_version) == (0, state.leader_epoch, (0,), version + 1)

    def kafkas_isr() -> list[int] | None:
        partition = AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(TOPIC, timeout=10).topics[TOPIC].partitions.get(0)
        return None if partition is None else partition.isrs

    wait_for(lambda: kafkas_isr() == [0], what="Kafka's metadata shows the ISR (UpdateMetadata)")

    # A retry of the change made is answered with the state as it is; the old partition epoch is refused
    # for anything else, as is a dead broker in the ISR and an old leader epoch.
    assert only_partition(alter(controller, epoch, state.leader_epoch, [0], version)) == shrunk
    assert only_partition(alter(controller, epoch, state.leader_epoch, [0, 1], version))["error_code"] == ErrorCode.INVALID_UPDATE_VERSION
    assert only_partition(alter(controller, epoch, state.leader_epoch, [0, 5], version + 1))["error_code"] == ErrorCode.INELIGIBLE_REPLICA
    assert only_partition(alter(controller, epoch, state.leader_epoch, [0, 5], version + 1, version=1))["error_code"] == ErrorCode.OPERATION_NOT_ATTEMPTED
    assert only_partition(alter(controller, epoch, state.leader_epoch - 1, [0], version + 1))["error_code"] == ErrorCode.FENCED_LEADER_EPOCH


def test_a_broker_in_controlled_shutdown_cannot_rejoin_an_isr(cluster: tuple[ZkController, kafka_jvm.KafkaBroker]) -> None:
    """KIP-841: once broker 1 asked for a controlled shutdown it left the ISR, and while it stops it still
    fetches; the leader's change adding it back is refused (INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED
    before v2) and ZooKeeper keeps the ISR without it, as Kafka's controller does."""
    controller, _ = cluster
    state, version = controller.zk.partition_state(TOPIC, 0)
    epochs = controller.context.broker_epochs
    if 1 not in state.isr:
        rejoined = only_partition(alter(controller, epochs[0], state.leader_epoch, [0, 1], version))
        assert (rejoined["error_code"], rejoined["isr"]) == (ErrorCode.NONE, [0, 1])
        state, version = controller.zk.partition_state(TOPIC, 0)
    assert controller.controlled_shutdown(1, epochs[1]).result(10) == {"error_code": ErrorCode.NONE, "remaining_partitions": []}
    shrunk, version = controller.zk.partition_state(TOPIC, 0)
    assert (shrunk.leader, shrunk.isr) == (0, (0,))

    assert only_partition(alter(controller, epochs[0], shrunk.leader_epoch, [0, 1], version))["error_code"] == ErrorCode.INELIGIBLE_REPLICA
    assert only_partition(alter(controller, epochs[0], shrunk.leader_epoch, [0, 1], version, version=1))["error_code"] == ErrorCode.OPERATION_NOT_ATTEMPTED
    assert controller.zk.partition_state(TOPIC, 0) == (shrunk, version)
