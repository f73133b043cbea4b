"""A share group's lag for a partition led by another broker (KIP-1226): two ZooKeeper-mode odradek brokers,
a topic with one partition on each (one replica), and Kafka 4.4's ``kafka-share-groups.sh``.

The group's coordinator hosts one of the two partitions only; the lag of the other is computed from the high
watermark its leader answers (ListOffsets LATEST over the inter-broker listener), as Kafka 4.4 computes it
wherever the partition is led -- not answered unknown ("-") because this broker does not host it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import kafka44_jvm
import kafka_jvm
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.controller.zk_brokers import odradek_brokers
from tests.polling import wait_for
from odradek import Broker

SETTINGS = {
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}
TOPIC, GROUP = "lagged", "g-lag"
PRODUCED = {0: 5, 1: 8}
START = 2


@pytest.fixture
def brokers(zookeeper: kafka_jvm.ZooKeeper, tmp_path: Path) -> Iterator[dict[int, Broker]]:
    with odradek_brokers(zookeeper.connect + "/share-lag", lambda b: tmp_path / f"odradek-{b}", SETTINGS, ids=range(2)) as started:
        yield started


def describe(bootstrap: str) -> list[tuple[str, str, str]]:
    """(partition, start offset, lag) of each row of ``kafka-share-groups.sh --describe``."""
    described = kafka44_jvm.run_tool("kafka-share-groups", "--bootstrap-server", bootstrap, "--describe", "--group", GROUP)
    assert described.returncode == 0, described.stderr
    rows = [line.split() for line in described.stdout.splitlines() if line.startswith(GROUP)]
    return sorted((partition, start, lag) for _, topic, partition, start, lag in rows if topic == TOPIC)


def test_the_lag_of_a_partition_led_by_another_broker(brokers: dict[int, Broker]) -> None:
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=len(PRODUCED), replica_assignment=[[0], [1]])])[TOPIC].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    for partition, count in PRODUCED.items():
        for i in range(count):
            producer.produce(TOPIC, value=f"v-{i}".encode(), partition=partition)
    assert producer.flush(60) == 0
    reset = kafka44_jvm.run_tool(
        "kafka-share-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-offset", str(START), "--execute",
    )
    assert reset.returncode == 0, reset.stderr
    expected = [(str(p), str(START), str(count - START)) for p, count in sorted(PRODUCED.items())]
    assert describe(bootstrap) == expected
    # More records on the partition the coordinator does not host: the lag follows its leader's high watermark.
    for i in range(3):
        producer.produce(TOPIC, value=f"w-{i}".encode(), partition=1)
    assert producer.flush(60) == 0
    wait_for(lambda: describe(bootstrap) == [expected[0], ("1", str(START), str(PRODUCED[1] - START + 3))], timeout_s=60, what="the lag of partition 1 following its leader's high watermark")
