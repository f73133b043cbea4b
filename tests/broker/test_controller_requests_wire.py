"""What a controller's requests from a deposed controller (an epoch older than any a broker has followed)
are answered, on the wire, by a single-node odradek and by a real Kafka 3.9 broker in ZooKeeper mode:
STALE_CONTROLLER_EPOCH for UpdateMetadata, LeaderAndIsr (and each of its partitions) and StopReplica (and
each of its partitions), with nothing changed. The cluster side is tests/controller/test_zk_broker_cluster.py.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

import kafka_jvm
import pytest

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode

TOPIC = "controller-requests-wire"
HEADER = {"controller_id": 7, "is_k_raft_controller": False, "controller_epoch": 0, "broker_epoch": -1}
"""Epoch 0: older than the epoch of any controller a broker has followed (the first election makes 1)."""

REQUESTS: dict[str, tuple[ApiKey, int, dict]] = {
    "UpdateMetadata v8": (ApiKey.UpdateMetadata, 8, {**HEADER, "type": 0, "topic_states": [], "live_brokers": []}),
    "LeaderAndIsr v7": (ApiKey.LeaderAndIsr, 7, {**HEADER, "type": 0, "live_leaders": [], "topic_states": [{
        "topic_name": TOPIC, "topic_id": uuid.UUID(int=1), "partition_states": [{
            "partition_index": 0, "controller_epoch": 0, "leader": 0, "leader_epoch": 5, "isr": [0], "partition_epoch": 5,
            "replicas": [0], "adding_replicas": [], "removing_replicas": [], "is_new": True, "leader_recovery_state": 0,
        }],
    }]}),
    "StopReplica v4": (ApiKey.StopReplica, 4, {**HEADER, "topic_states": [
        {"topic_name": TOPIC, "partition_states": [{"partition_index": 0, "leader_epoch": -2, "delete_partition": True}]},
    ]}),
}


def answer(response: Any) -> Any:
    """The error codes of a response, whatever its shape."""
    if hasattr(response, "topics"):  # LeaderAndIsr v5+
        return response.error_code, [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partition_errors]) for t in response.topics]
    if hasattr(response, "partition_errors"):
        return response.error_code, [(p.topic_name, p.partition_index, p.error_code) for p in response.partition_errors]
    return response.error_code


@pytest.mark.parametrize("name", REQUESTS)
def test_a_deposed_controllers_request_is_answered_as_kafka_answers_it(
    name: str, real_kafka: kafka_jvm.RealKafka, odradek_as_kafka: Broker, connect: Callable[..., Any]
) -> None:
    api, version, body = REQUESTS[name]
    expected = answer(connect(real_kafka.bootstrap).call(api, version, body))
    assert answer(connect(odradek_as_kafka.bootstrap).call(api, version, body)) == expected
    assert (expected[0] if isinstance(expected, tuple) else expected) == ErrorCode.STALE_CONTROLLER_EPOCH
