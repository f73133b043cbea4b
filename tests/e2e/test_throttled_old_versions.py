"""A throttled answer to a client too old to throttle itself (Produce before v6, Fetch before v8: Kafka's
``shouldClientThrottle``) comes at once, as to a new client, and the connection is muted for the throttle
time (KIP-219): Kafka 3.9's ``ClientQuotaManager.throttle`` mutes the channel whatever the version, and
KafkaApis sends the answer immediately. Compared with the real Kafka over bare protocol connections.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

import pytest

from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import build_batch

RATE = 10000
"""The quota, bytes per second: Kafka's default window (11 samples of 1 s) counts a first burst over 10 s."""
BURST = 120000
"""Over ten seconds of the quota: about two seconds of throttle time."""
API_VERSIONS = {"client_software_name": "t", "client_software_version": "1"}


@pytest.fixture(params=["kafka", "odradek"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("real_kafka" if request.param == "kafka" else "odradek_as_kafka").bootstrap


def set_quota(wire: Any, client_id: str, key: str) -> None:
    entry = {"entity": [{"entity_type": "client-id", "entity_name": client_id}], "ops": [{"key": key, "value": float(RATE), "remove": False}]}
    assert wire.call(ApiKey.AlterClientQuotas, 1, {"entries": [entry], "validate_only": False}).entries[0].error_code == ErrorCode.NONE


def create_topic(wire: Any, topic: str) -> None:
    created = wire.call(ApiKey.CreateTopics, 4, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 10000})
    assert created.topics[0].error_code == ErrorCode.NONE


def produce_v5(wire: Any, topic: str) -> Any:
    batch = build_batch([(None, bytes(BURST))])
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 10000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    return wire.call(ApiKey.Produce, 5, body)


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    return call(), time.monotonic() - start


def test_a_throttled_produce_v5_is_answered_at_once_and_the_connection_muted(bootstrap: str, connect: Callable[..., Any]) -> None:
    client_id = f"old-producer-{uuid.uuid4().hex[:6]}"
    topic = f"old-throttle-{uuid.uuid4().hex[:6]}"
    admin = connect(bootstrap)
    set_quota(admin, client_id, "producer_byte_rate")
    create_topic(admin, topic)
    wire = connect(bootstrap, client_id)
    for _ in range(5):  # until the quota reached the quota manager (Kafka applies the change from ZooKeeper)
        response, answered_after = timed(lambda: produce_v5(wire, topic))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        if response.throttle_time_ms:
            break
        time.sleep(0.2)
    throttle_s = response.throttle_time_ms / 1000
    assert throttle_s > 1
    assert answered_after < throttle_s / 2
    _, next_after = timed(lambda: wire.call(ApiKey.ApiVersions, 0, API_VERSIONS))
    assert next_after >= throttle_s - answered_after - 0.2  # nothing read from the connection meanwhile


def test_a_throttled_fetch_v7_is_answered_at_once_empty_and_the_connection_muted(bootstrap: str, connect: Callable[..., Any]) -> None:
    client_id = f"old-consumer-{uuid.uuid4().hex[:6]}"
    topic = f"old-fetch-throttle-{uuid.uuid4().hex[:6]}"
    admin = connect(bootstrap)
    set_quota(admin, client_id, "consumer_byte_rate")
    create_topic(admin, topic)
    assert produce_v5(admin, topic).responses[0].partition_responses[0].error_code == ErrorCode.NONE
    wire = connect(bootstrap, client_id)
    fetch = {
        "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 10 * BURST, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 10 * BURST}]}], "forgotten_topics_data": [],
    }
    for _ in range(5):  # the records are answered (and counted) until the consumer is over its quota
        response, answered_after = timed(lambda: wire.call(ApiKey.Fetch, 7, fetch))
        if response.throttle_time_ms:
            break
        time.sleep(0.2)  # Kafka applies the quota from ZooKeeper's change notification
    throttle_s = response.throttle_time_ms / 1000
    assert throttle_s > 1
    assert answered_after < throttle_s / 2
    assert response.responses == []
    _, next_after = timed(lambda: wire.call(ApiKey.ApiVersions, 0, API_VERSIONS))
    assert next_after >= throttle_s - answered_after - 0.2
