"""Replication throttling (KIP-73) on two-broker ZooKeeper-mode clusters of odradek and of Apache Kafka 3.9.1,
set and observed as an operator does: a byte rate in the dynamic broker configs, the throttled replicas in the
topic's configs, then a reassignment adding a replica to a partition holding :data:`DATA_BYTES`.

Unthrottled, the new replica copies them in a fraction of a second (two fetches of 1 MiB). Throttled to
:data:`RATE` bytes a second, on the leader's side (``leader.replication.throttled.*``: the leader answers the
out-of-sync follower without records while the rate is over) or on the follower's (``follower.*``: the
follower leaves the partition out of its fetches), it takes seconds to join the ISR, on both brokers alike.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import kafka_jvm
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.conftest import Wire
from tests.controller.zk_brokers import kafka_brokers, odradek_brokers

RATE = 300_000
DATA_BYTES = 1_500_000
THROTTLED_AT_LEAST_S = 2.5
"""At :data:`RATE`, :data:`DATA_BYTES` take ~4 s (the first MiB passes at once, then the rest waits until the
rate measured since the first byte is back under the bound); unthrottled they take well under a second."""
BROKER, TOPIC = 4, 2
"""Config resource types."""


@pytest.fixture(scope="module", params=["odradek", "kafka"])
def bootstraps(request: pytest.FixtureRequest, zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, str]]:
    root: Path = tmp_path_factory.mktemp(f"throttle-{request.param}")
    connect = f"{zookeeper.connect}/throttle-{request.param}-{uuid.uuid4().hex[:6]}"
    settings = {"auto.leader.rebalance.enable": "false"}
    with contextlib.ExitStack() as stack:
        if request.param == "kafka":
            brokers: dict[int, Any] = stack.enter_context(kafka_brokers(connect, lambda b: root / f"kafka-{b}", settings, ids=(0, 1)))
            yield {b: f"127.0.0.1:{broker.port}" for b, broker in brokers.items()}
        else:
            brokers = stack.enter_context(odradek_brokers(connect, lambda b: root / f"odradek-{b}", settings, ids=(0, 1)))
            yield {b: broker.bootstrap for b, broker in brokers.items()}


def alter_configs(bootstrap: str, resource_type: int, name: str, configs: dict[str, str]) -> None:
    body = {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]}],
        "validate_only": False,
    }
    [result] = Wire.call_once(bootstrap, ApiKey.IncrementalAlterConfigs, 1, body).responses
    assert result.error_code == ErrorCode.NONE, result


def isr(bootstrap: str, topic: str) -> list[int]:
    topics = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3}).list_topics(topic, timeout=30).topics
    return sorted(topics[topic].partitions[0].isrs)


def catch_up_seconds(bootstraps: dict[int, str], topic: str, throttle: dict[int, dict[str, str]], throttled_replicas: dict[str, str]) -> float:
    """Create ``topic`` on broker 0, fill it, apply ``throttle`` (broker configs by broker id) and the topic's
    ``throttled_replicas`` configs, add broker 1 as a replica: the seconds until broker 1 is in the ISR."""
    admin = AdminClient({"bootstrap.servers": bootstraps[0], "log_level": 3})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[0]])])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstraps[0], "linger.ms": 20, "batch.size": 1_000_000, "message.max.bytes": 2_000_000, "log_level": 3})
    for _ in range(DATA_BYTES // 100_000):
        producer.produce(topic, os.urandom(100_000))
    assert producer.flush(60) == 0
    for broker_id, configs in throttle.items():
        alter_configs(bootstraps[broker_id], BROKER, str(broker_id), configs)
    alter_configs(bootstraps[0], TOPIC, topic, throttled_replicas)
    controller = Wire.call_once(bootstraps[0], ApiKey.Metadata, 1, {"topics": []}).controller_id
    reassign = {"timeout_ms": 60000, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "replicas": [0, 1]}]}]}
    started = time.monotonic()
    [[moved]] = [t.partitions for t in Wire.call_once(bootstraps[controller], ApiKey.AlterPartitionReassignments, 0, reassign).responses]
    assert moved.error_code == ErrorCode.NONE, moved
    while isr(bootstraps[0], topic) != [0, 1]:
        assert time.monotonic() - started < 60, f"broker 1 not in {topic}'s ISR within 60 s"
        time.sleep(0.1)
    return time.monotonic() - started


def test_the_leader_throttles_a_new_replica(bootstraps: dict[int, str]) -> None:
    took = catch_up_seconds(bootstraps, "leader-throttled", {0: {"leader.replication.throttled.rate": str(RATE)}}, {"leader.replication.throttled.replicas": "0:0"})
    assert took >= THROTTLED_AT_LEAST_S, f"caught up in {took:.2f} s"


def test_a_new_replica_throttles_itself(bootstraps: dict[int, str]) -> None:
    took = catch_up_seconds(bootstraps, "follower-throttled", {1: {"follower.replication.throttled.rate": str(RATE)}}, {"follower.replication.throttled.replicas": "0:1"})
    assert took >= THROTTLED_AT_LEAST_S, f"caught up in {took:.2f} s"


def test_without_a_throttle_the_new_replica_catches_up_at_once(bootstraps: dict[int, str]) -> None:
    """The same copy, unthrottled: what makes the two above mean something."""
    took = catch_up_seconds(bootstraps, "unthrottled", {}, {"leader.replication.throttled.replicas": "", "follower.replication.throttled.replicas": ""})
    assert took < THROTTLED_AT_LEAST_S, f"caught up in {took:.2f} s"
