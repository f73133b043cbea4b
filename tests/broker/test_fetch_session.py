"""Incremental fetch sessions (KIP-227): the sans-IO cache, then the same rules on the wire."""

from __future__ import annotations

import uuid

import pytest

from odradek import Broker
from odradek.broker.replication.fetch_session import EVICTION_MS, FetchPartition, FetchSessionCache, PartitionOutcome
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch


def part(topic: str, partition: int, offset: int = 0) -> FetchPartition:
    return FetchPartition((topic, partition), topic, None, partition, offset, 1 << 20)


def outcome(hw: int, records: int = 0) -> PartitionOutcome:
    return PartitionOutcome(0, hw, hw, 0, records)


def open_session(cache: FetchSessionCache, partitions: list[FetchPartition], now: int = 0) -> int:
    context = cache.new_context(0, 0, partitions, [], False, now)
    session_id, keys = cache.finish(context, {p.key: outcome(0) for p in partitions}, False, now)
    assert keys == [p.key for p in partitions]  # a full fetch answers every partition
    return session_id


def test_a_full_fetch_at_epoch_0_opens_a_session_and_epoch_minus_1_is_sessionless() -> None:
    cache = FetchSessionCache(10)
    assert open_session(cache, [part("a", 0)]) > 0
    context = cache.new_context(0, -1, [part("a", 0)], [], False, 0)
    assert cache.finish(context, {("a", 0): outcome(0)}, False, 0)[0] == 0


def test_incremental_fetches_answer_only_what_changed_and_bump_the_epoch() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, [part("a", 0), part("a", 1), part("b", 0)])
    context = cache.new_context(sid, 1, [], [], False, 1)  # nothing new asked: the session's partitions
    assert [p.key for p in context.partitions()] == [("a", 0), ("a", 1), ("b", 0)]
    outcomes = {("a", 0): outcome(0), ("a", 1): outcome(5, records=100), ("b", 0): outcome(3)}
    assert cache.finish(context, outcomes, False, 1) == (sid, [("a", 1), ("b", 0)])  # new data, moved HW
    context = cache.new_context(sid, 2, [], [], False, 2)
    assert cache.finish(context, outcomes | {("a", 1): outcome(5)}, False, 2) == (sid, [])  # nothing changed
    assert cache.new_context(sid, 2, [], [], False, 3).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH  # epoch reused


def test_a_preferred_replica_a_diverging_epoch_and_the_end_of_an_error_are_always_news() -> None:
    """Kafka's ``maybeUpdateResponseData``: a preferred read replica (KIP-392) or a diverging epoch is answered
    even with nothing else new; after an error the partition is answered again once the error is gone, though
    its high watermark is the one cached before the error."""
    cache = FetchSessionCache(10)
    sid = open_session(cache, [part("a", 0)])
    news = [
        PartitionOutcome(0, 0, 0, 0, 0, preferred_read_replica=2),
        PartitionOutcome(0, 0, 0, 0, 0, diverging=True),
        PartitionOutcome(ErrorCode.NOT_LEADER_OR_FOLLOWER, 0, 0, 0, 0),
        outcome(0),  # the error gone: answered again
    ]
    for epoch, found in enumerate(news, start=1):
        context = cache.new_context(sid, epoch, [], [], False, epoch)
        assert cache.finish(context, {("a", 0): found}, False, epoch) == (sid, [("a", 0)]), found
    context = cache.new_context(sid, len(news) + 1, [], [], False, 9)
    assert cache.finish(context, {("a", 0): outcome(0)}, False, 9) == (sid, [])  # and then not


def test_unknown_session_and_wrong_epoch_are_errors() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, [part("a", 0)])
    assert cache.new_context(sid + 1, 1, [], [], False, 0).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.new_context(sid, 7, [], [], False, 0).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_added_updated_and_forgotten_partitions() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, [part("a", 0), part("a", 1)])
    context = cache.new_context(sid, 1, [part("a", 0, offset=9), part("c", 0)], [("a", 1)], False, 0)
    assert [(p.key, p.fetch_offset) for p in context.partitions()] == [(("a", 0), 9), (("c", 0), 0)]
    # a partition new to the session is always answered (its cached high watermark is unknown)
    assert cache.finish(context, {("a", 0): outcome(0), ("c", 0): outcome(0)}, False, 0)[1] == [("c", 0)]


def test_epoch_0_with_a_session_id_closes_it_and_opens_another() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, [part("a", 0)])
    context = cache.new_context(sid, 0, [part("b", 0)], [], False, 0)
    new_sid, _ = cache.finish(context, {("b", 0): outcome(0)}, False, 0)
    assert new_sid not in (0, sid) and sid not in cache.sessions


def test_a_session_partition_whose_topic_id_was_unknown_gets_its_name_once_the_broker_knows_it() -> None:
    """A follower adds a partition of a topic its leader does not know yet (UNKNOWN_TOPIC_ID), backs off,
    and asks again with the same request: unchanged, it is not sent again, so the session must name it
    itself (Kafka's ``maybeResolveUnknownName``), or the follower never gets its records."""
    topic_id = uuid.uuid4()
    cache = FetchSessionCache(10)
    unknown = FetchPartition((topic_id, 0), None, topic_id, 0, 0, 1 << 20)
    context = cache.new_context(0, 0, [unknown], [], True, 0)
    sid, _ = cache.finish(context, {unknown.key: PartitionOutcome(ErrorCode.UNKNOWN_TOPIC_ID, -1, -1, -1, 0)}, True, 0)
    context = cache.new_context(sid, 1, [], [], True, 1)
    assert [p.topic for p in context.partitions({}.get)] == [None]  # still unknown
    context = cache.new_context(sid, 2, [], [], True, 2)
    assert [(p.key, p.topic) for p in context.partitions({topic_id: "t"}.get)] == [((topic_id, 0), "t")]


def test_the_cache_limit_and_eviction() -> None:
    cache = FetchSessionCache(2)
    small = open_session(cache, [part("a", 0)], now=0)
    big = open_session(cache, [part("b", p) for p in range(3)], now=0)
    # full: a one-partition consumer session cannot push out sessions at least as large and still in use
    assert open_session(cache, [part("c", 0)], now=1) == 0
    # a larger one may evict the smallest
    larger = open_session(cache, [part("d", p) for p in range(2)], now=2)
    assert larger and small not in cache.sessions and big in cache.sessions
    # sessions idle past the eviction time make room for anyone
    assert open_session(cache, [part("e", 0)], now=EVICTION_MS + 10)
    assert open_session(FetchSessionCache(0), [part("a", 0)]) == 0  # no slots configured: always sessionless


# -- on the wire ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker():
    with Broker(config={"num.partitions": "2"}) as b:
        yield b


def fetch(wire, version: int, session_id: int, epoch: int, topic, partitions: dict[int, int], forgotten=()):
    key = {"topic_id": topic} if version >= 13 else {"topic": topic}
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [{**key, "partitions": [{"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20} for p, o in partitions.items()]}] if partitions else [],
        "forgotten_topics_data": [{**key, "partitions": list(forgotten)}] if forgotten else [],
    }
    return wire.call(ApiKey.Fetch, version, body)


@pytest.mark.parametrize("version", [12, 13, 17])
def test_sessions_on_the_wire(broker, connect, version: int) -> None:
    wire = connect(broker.bootstrap)
    name = f"sessions-v{version}"
    topic_id = wire.call(ApiKey.CreateTopics, 7, {"topics": [{"name": name, "num_partitions": 2, "replication_factor": 1}], "timeout_ms": 5000}).topics[0].topic_id
    topic = topic_id if version >= 13 else name

    full = fetch(wire, version, 0, 0, topic, {0: 0, 1: 0})
    assert full.error_code == 0 and full.session_id > 0
    assert sorted(p.partition_index for p in full.responses[0].partitions) == [0, 1]

    idle = fetch(wire, version, full.session_id, 1, topic, {})
    assert idle.session_id == full.session_id and idle.responses == []  # nothing changed: nothing answered

    produce = {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": name, "partition_data": [{"index": 1, "records": build_batch([Record(value=b"x")])}]}]}
    assert wire.call(ApiKey.Produce, 9, produce).responses[0].partition_responses[0].error_code == 0
    changed = fetch(wire, version, full.session_id, 2, topic, {})
    (answered,) = changed.responses[0].partitions
    assert answered.partition_index == 1 and answered.high_watermark == 1 and bytes(answered.records)
    if version >= 13:
        assert changed.responses[0].topic_id == topic_id

    assert fetch(wire, version, full.session_id, 2, topic, {}).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert fetch(wire, version, full.session_id + 1, 1, topic, {}).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    # forget partition 1; data arriving there is no longer answered
    assert fetch(wire, version, full.session_id, 3, topic, {}, forgotten=[1]).error_code == 0
    assert wire.call(ApiKey.Produce, 9, produce).responses[0].partition_responses[0].error_code == 0
    assert fetch(wire, version, full.session_id, 4, topic, {}).responses == []


def test_fetch_by_unknown_topic_id(broker, connect) -> None:
    response = fetch(connect(broker.bootstrap), 13, 0, -1, uuid.uuid4(), {0: 0})
    assert response.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
