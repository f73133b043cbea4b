"""Client quota values at the edges of a double (NaN, the infinities, 0, negative, the smallest and largest),
set with AlterClientQuotas and then met by a client, on the wire against the real Kafka 3.9.1 and odradek.

Kafka stores a LONG quota after a saturating cast (NaN is 0, 2^63 is Long.MAX_VALUE, an infinity is refused
as not whole) and a DOUBLE one as it came. It measures clients against them in doubles: a bound of 0 or NaN
is divided by, which gives an infinity or NaN where Python raises, and the throttle time is rounded to a
long and cast to an int. A quota no operator would set must still leave its client served as Kafka serves
it, never its connection closed (issue 26).
"""

from __future__ import annotations

import math
import time
import uuid

import pytest

from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch

KEYS = ["producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"]
VALUES = [math.nan, math.inf, -math.inf, -1.0, 0.0, 5e-324, 1.5, 2.0**63, 1e308]
MET = [
    *(("request_percentage", v) for v in (math.nan, math.inf, -math.inf, -1.0, 0.0, 5e-324)),
    *(("controller_mutation_rate", v) for v in (math.nan, math.inf, -math.inf, -1.0, 0.0, 5e-324)),
    *((key, v) for key in ("producer_byte_rate", "consumer_byte_rate") for v in (0.0, 2.0**63)),
]
"""(key, value) set for a client of its own, which then produces, fetches and creates a topic twice."""


@pytest.fixture(params=["kafka", "odradek"])
def bootstrap(request, real_kafka, odradek_as_kafka) -> str:
    return real_kafka.bootstrap if request.param == "kafka" else odradek_as_kafka.bootstrap


def entry(client_id: str, key: str, value: float | None) -> dict:
    op = {"key": key, "value": 0.0 if value is None else value, "remove": value is None}
    return {"entity": [{"entity_type": "client-id", "entity_name": client_id}], "ops": [op]}


def alter(wire, entries: list[dict]) -> list[tuple[int, str | None]]:
    return [(e.error_code, e.error_message) for e in wire.call(ApiKey.AlterClientQuotas, 1, {"entries": entries, "validate_only": False}).entries]


def described(wire, client_id: str) -> list[tuple[str, str]]:
    """The client's quota values, as reprs (NaN equals nothing, not even NaN)."""
    body = {"components": [{"entity_type": "client-id", "match_type": 0, "match": client_id}], "strict": False}
    return sorted((v.key, repr(v.value)) for e in (wire.call(ApiKey.DescribeClientQuotas, 1, body).entries or []) for v in e["values"])


@pytest.fixture
def run_id(bootstrap, connect):
    """A prefix for this run's client ids; their quotas are removed afterwards (the brokers are shared)."""
    prefix = f"edge-{uuid.uuid4().hex[:8]}"
    yield prefix
    admin = connect(bootstrap, "edge-admin")
    alter(admin, [entry(f"{prefix}-{i}", key, None) for i, key in enumerate(KEYS)] + [entry(f"{prefix}-met-{i}", key, None) for i, (key, _) in enumerate(MET)])


def test_quota_values_are_stored_as_kafka_stores_them(bootstrap, connect, run_id: str) -> None:
    admin = connect(bootstrap, "edge-admin")
    seen = []
    for i, key in enumerate(KEYS):
        client_id = f"{run_id}-{i}"
        for value in VALUES:
            seen.append((key, repr(value), alter(admin, [entry(client_id, key, value)]), described(admin, client_id)))
    assert seen == EXPECTED_STORED


def test_a_client_under_a_quota_at_the_edges_is_served_as_by_kafka(bootstrap, connect, run_id: str) -> None:
    admin = connect(bootstrap, "edge-admin")
    topic = f"{run_id}-topic"
    assert admin.call(ApiKey.CreateTopics, 4, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 10000}).topics[0].error_code == ErrorCode.NONE
    assert alter(admin, [entry(f"{run_id}-met-{i}", key, value) for i, (key, value) in enumerate(MET)]) == [(ErrorCode.NONE, None)] * len(MET)
    time.sleep(1.0)  # Kafka applies a quota when its config change notification arrives
    seen = []
    for i, (key, value) in enumerate(MET):
        wire = connect(bootstrap, f"{run_id}-met-{i}")
        rounds = []
        for round_ in range(2):
            # The rounds' mutations a few milliseconds apart: Kafka's token bucket refills by the bound times the
            # milliseconds since the last refill, and a bound of -inf times 0 is NaN, which lets a second
            # mutation in the same millisecond through (odradek's arithmetic is Kafka's: both do).
            time.sleep(0.005)
            produced = wire.call(ApiKey.Produce, 7, {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": build_batch([Record(value=b"x" * 100)])}]}]})
            fetched = wire.call(ApiKey.Fetch, 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
            created = wire.call(ApiKey.CreateTopics, 6, {"topics": [{"name": f"{run_id}-{i}-{round_}", "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 10000})
            rounds.append((
                produced.throttle_time_ms > 0, produced.responses[0].partition_responses[0].error_code,
                fetched.throttle_time_ms > 0, fetched.error_code,
                created.throttle_time_ms > 0, created.topics[0].error_code,
            ))
        seen.append((key, repr(value), rounds))
    assert seen == EXPECTED_MET


NOT_LONG = {key: (ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a LONG value") for key in ("producer_byte_rate", "consumer_byte_rate")}
OK = (ErrorCode.NONE, None)


def _stored(key: str) -> list:
    """What the real Kafka 3.9.1 answered and then described, value after value on one client id."""
    if key in NOT_LONG:
        refused = NOT_LONG[key]
        after = [OK, refused, refused, refused, OK, OK, refused, OK, refused]  # nan, inf, -inf, -1, 0, 5e-324, 1.5, 2^63, 1e308
        kept = ["0.0", "0.0", "0.0", "0.0", "0.0", "0.0", "0.0", "9.223372036854776e+18", "9.223372036854776e+18"]
        return [(key, repr(v), [a], [(key, k)]) for v, a, k in zip(VALUES, after, kept)]
    return [(key, repr(v), [OK], [(key, repr(v))]) for v in VALUES]


EXPECTED_STORED = [row for key in KEYS for row in _stored(key)]

FREE = (False, ErrorCode.NONE, False, ErrorCode.NONE, False, ErrorCode.NONE)
THROTTLED = (True, ErrorCode.NONE, True, ErrorCode.NONE, True, ErrorCode.NONE)
REFUSED = (False, ErrorCode.NONE, False, ErrorCode.NONE, False, ErrorCode.THROTTLING_QUOTA_EXCEEDED)
EXPECTED_MET = [
    (key, repr(value), rounds) for (key, value), rounds in zip(MET, [
        # request_percentage: NaN, the infinities and negative bounds never throttle; 0 and 5e-324 always
        [FREE] * 2, [FREE] * 2, [FREE] * 2, [FREE] * 2, [THROTTLED] * 2, [THROTTLED] * 2,
        # controller_mutation_rate: a negative bound refuses at once; 0 and 5e-324 after the first creation
        [FREE] * 2, [FREE] * 2, [REFUSED] * 2, [REFUSED] * 2, [FREE, REFUSED], [FREE, REFUSED],
        # byte rates of 0 are exceeded, but their throttle time (Long.MAX_VALUE as an int) is -1: not throttled
        [FREE] * 2, [FREE] * 2, [FREE] * 2, [FREE] * 2,
    ])
]
