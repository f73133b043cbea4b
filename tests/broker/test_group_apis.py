"""The group APIs on the wire at every version Kafka 3.9 defines, against a real broker over a socket.

Each client library speaks one version of each API; these tests speak all of them and check what a client
of that version reads: MEMBER_ID_REQUIRED only from JoinGroup v4, nullable protocol names from v7,
LeaveGroup's per-member answers from v3, OffsetFetch's top-level error from v2 and its groups from v8.
"""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from odradek import Broker
from odradek.broker.kafka_apis import HANDLERS
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode

E = ErrorCode
_names = itertools.count()


def versions(api: ApiKey) -> range:
    """Every version the broker serves (and advertises), not every one declared: those include Kafka 4.4's."""
    return range(HANDLERS[api].min_version, HANDLERS[api].max_version + 1)


@pytest.fixture(scope="module")
def broker():
    with Broker(config={"group.min.session.timeout.ms": "1000"}) as b:
        yield b


@pytest.fixture
def wire(broker, connect):
    w = connect(broker.bootstrap)
    # The offsets topic exists once a coordinator was looked up: lookups answer "not yet" until it is made.
    deadline = time.monotonic() + 10
    while w.call(ApiKey.FindCoordinator, 0, {"key": "warm-up", "key_type": 0}).error_code == E.COORDINATOR_NOT_AVAILABLE:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return w


def name(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def new_topic(wire, partitions: int = 2) -> str:
    topic = name("group-wire")
    body = {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 5000}
    assert wire.call(ApiKey.CreateTopics, 4, body).topics[0].error_code == E.NONE
    return topic


def join(wire, version: int, group: str, member_id: str = "", protocols=(("range", b"meta"),), instance: str | None = None):
    body = {
        "group_id": group,
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 10000,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocols": [{"name": n, "metadata": m} for n, m in protocols],
    }
    return wire.call(ApiKey.JoinGroup, version, body)


def sync(wire, version: int, group: str, generation: int, member_id: str, assignments: dict[str, bytes]):
    body = {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()],
    }
    return wire.call(ApiKey.SyncGroup, version, body)


def test_find_coordinator_every_version(broker, wire) -> None:
    host, port = broker.bootstrap.rsplit(":", 1)
    for version in versions(ApiKey.FindCoordinator):
        if version < 4:
            r = wire.call(ApiKey.FindCoordinator, version, {"key": "some-group", "key_type": 0})
            assert (r.error_code, r.node_id, r.host, r.port) == (E.NONE, 0, host, int(port)), version
            if version >= 1:
                assert r.error_message == "NONE"
        else:
            r = wire.call(ApiKey.FindCoordinator, version, {"key_type": 0, "coordinator_keys": ["a", "b"]})
            assert [(c.key, c.error_code, c.node_id, c.port) for c in r.coordinators] == [("a", E.NONE, 0, int(port)), ("b", E.NONE, 0, int(port))]
    bad = wire.call(ApiKey.FindCoordinator, 4, {"key_type": 7, "coordinator_keys": ["a"]})
    assert bad.coordinators[0].error_code == E.INVALID_REQUEST


@pytest.mark.parametrize("version", versions(ApiKey.JoinGroup))
def test_join_sync_heartbeat_leave_at_each_join_version(wire, version: int) -> None:
    group = name("join")
    first = join(wire, version, group)
    if version >= 4:
        assert (first.error_code, first.generation_id) == (E.MEMBER_ID_REQUIRED, -1)
        assert first.member_id.startswith("wire-test-")
        first = join(wire, version, group, first.member_id)
    member = first.member_id
    assert (first.error_code, first.generation_id, first.leader, first.protocol_name) == (E.NONE, 1, member, "range")
    assert [(m.member_id, m.metadata) for m in first.members] == [(member, b"meta")]
    if version >= 7:
        assert first.protocol_type == "consumer"
    sync_version = min(version, HANDLERS[ApiKey.SyncGroup].max_version)
    synced = sync(wire, sync_version, group, 1, member, {member: b"assigned"})
    assert (synced.error_code, synced.assignment) == (E.NONE, b"assigned")
    for hb_version in versions(ApiKey.Heartbeat):
        body = {"group_id": group, "generation_id": 1, "member_id": member, "group_instance_id": None}
        assert wire.call(ApiKey.Heartbeat, hb_version, body).error_code == E.NONE
        assert wire.call(ApiKey.Heartbeat, hb_version, {**body, "generation_id": 2}).error_code == E.ILLEGAL_GENERATION
    leave_version = min(version, HANDLERS[ApiKey.LeaveGroup].max_version)
    if leave_version < 3:
        assert wire.call(ApiKey.LeaveGroup, leave_version, {"group_id": group, "member_id": member}).error_code == E.NONE
    else:
        left = wire.call(ApiKey.LeaveGroup, leave_version, {"group_id": group, "members": [{"member_id": member}, {"member_id": "ghost"}]})
        assert left.error_code == E.NONE
        assert [(m.member_id, m.error_code) for m in left.members] == [(member, E.NONE), ("ghost", E.UNKNOWN_MEMBER_ID)]
    body = {"group_id": group, "generation_id": 1, "member_id": member, "group_instance_id": None}
    assert wire.call(ApiKey.Heartbeat, 0, body).error_code == E.UNKNOWN_MEMBER_ID


def test_join_naming_a_protocol_twice_is_answered_and_leaves_the_group_usable(broker, wire, connect) -> None:
    """JoinGroup v7 listing ``range`` twice: the retry is answered (the first metadata wins) and a second
    member can still join. Kafka 3.9 never answers it and jams the group (compat-tests/README.md)."""
    group = name("twice")
    twice = (("range", b"first"), ("range", b"second"))
    first = join(wire, 7, group, protocols=twice)
    assert first.error_code == E.MEMBER_ID_REQUIRED
    joined = join(wire, 7, group, first.member_id, protocols=twice)
    member = joined.member_id
    assert (joined.error_code, joined.generation_id, joined.protocol_name) == (E.NONE, 1, "range")
    assert [(m.member_id, m.metadata) for m in joined.members] == [(member, b"first")]
    assert sync(wire, 5, group, 1, member, {member: b"a"}).error_code == E.NONE

    other = connect(broker.bootstrap, "other")
    second = join(other, 7, group)
    assert second.error_code == E.MEMBER_ID_REQUIRED
    leave = {"group_id": group, "members": [{"member_id": member}]}
    assert wire.call(ApiKey.LeaveGroup, 3, leave).members[0].error_code == E.NONE
    admitted = join(other, 7, group, second.member_id)
    assert (admitted.error_code, admitted.generation_id, admitted.leader) == (E.NONE, 3, second.member_id)


def test_second_member_is_admitted_and_both_get_their_assignment(broker, connect) -> None:
    """The trap other brokers fell into: the second member must not be answered UNKNOWN_MEMBER_ID, and
    every SyncGroup answer carries an assignment, empty for a member the leader gave nothing."""
    a, b = connect(broker.bootstrap, "client-a"), connect(broker.bootstrap, "client-b")
    for w in (a, b):
        w.call(ApiKey.FindCoordinator, 0, {"key": "warm-up", "key_type": 0})
        w.call(ApiKey.FindCoordinator, 0, {"key": "warm-up", "key_type": 0})
    group = name("pair")
    first = join(a, 5, group)
    first = join(a, 5, group, first.member_id)
    leader = first.member_id
    sync(a, 3, group, 1, leader, {leader: b"everything"})

    second = join(b, 5, group)
    assert second.error_code == E.MEMBER_ID_REQUIRED
    answers = {}
    joiner = threading.Thread(target=lambda: answers.setdefault("b", join(b, 5, group, second.member_id)))
    joiner.start()
    while True:  # the leader learns of the rebalance from its heartbeat
        hb = a.call(ApiKey.Heartbeat, 3, {"group_id": group, "generation_id": 1, "member_id": leader, "group_instance_id": None})
        if hb.error_code == E.REBALANCE_IN_PROGRESS:
            break
    rejoined = join(a, 5, group, leader)
    joiner.join(10)
    follower = answers["b"]
    assert (rejoined.error_code, follower.error_code) == (E.NONE, E.NONE)
    assert rejoined.generation_id == follower.generation_id == 2
    assert sorted(m.member_id for m in rejoined.members) == sorted([leader, follower.member_id])
    assert follower.members == []
    follower_sync = {}
    waiting = threading.Thread(target=lambda: follower_sync.setdefault("b", sync(b, 3, group, 2, follower.member_id, {})))
    waiting.start()
    leader_sync = sync(a, 3, group, 2, leader, {leader: b"all-of-it"})
    waiting.join(10)
    assert leader_sync.assignment == b"all-of-it"
    assert (follower_sync["b"].error_code, follower_sync["b"].assignment) == (E.NONE, b"")


@pytest.mark.parametrize("version", versions(ApiKey.OffsetCommit))
def test_offset_commit_and_fetch_round_trip_at_each_version(wire, version: int) -> None:
    topic = new_topic(wire)
    group = name("offsets")
    partitions = [{"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": 0, "commit_timestamp": -1, "committed_metadata": f"v{version}:ü"}]
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "retention_time_ms": -1,
        "topics": [{"name": topic, "partitions": partitions}, {"name": "no-such-topic", "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": None}]}],
    }
    result = wire.call(ApiKey.OffsetCommit, version, body)
    assert {(t.name, p.error_code) for t in result.topics for p in t.partitions} == {(topic, E.NONE), ("no-such-topic", E.UNKNOWN_TOPIC_OR_PARTITION)}
    fetch_version = min(version, HANDLERS[ApiKey.OffsetFetch].max_version)
    wanted = [{"name": topic, "partition_indexes": [0, 1]}]
    if fetch_version < 8:
        fetched = wire.call(ApiKey.OffsetFetch, fetch_version, {"group_id": group, "topics": wanted})
        topics = fetched.topics
    else:
        fetched = wire.call(ApiKey.OffsetFetch, fetch_version, {"groups": [{"group_id": group, "topics": wanted}, {"group_id": "nobody", "topics": wanted}]})
        assert [g.group_id for g in fetched.groups] == [group, "nobody"]
        assert [p.committed_offset for t in fetched.groups[1].topics for p in t.partitions] == [-1, -1]
        topics = fetched.groups[0].topics
    got = {p.partition_index: (p.committed_offset, p.metadata) for t in topics for p in t.partitions}
    assert got == {0: (42, f"v{version}:ü"), 1: (-1, "")}


def test_offset_fetch_all_partitions_and_errors(wire) -> None:
    topic = new_topic(wire, 3)
    group = name("all")
    parts = [{"partition_index": p, "committed_offset": 10 + p, "committed_metadata": ""} for p in range(3)]
    wire.call(ApiKey.OffsetCommit, 8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "topics": [{"name": topic, "partitions": parts}]})
    fetched = wire.call(ApiKey.OffsetFetch, 7, {"group_id": group, "topics": None, "require_stable": True})
    assert fetched.error_code == E.NONE
    assert sorted((p.partition_index, p.committed_offset) for t in fetched.topics for p in t.partitions) == [(0, 10), (1, 11), (2, 12)]
    bad = wire.call(ApiKey.OffsetFetch, 6, {"group_id": "", "topics": None})
    assert bad.error_code == E.NONE, "the empty group id is valid for offsets"
    refused = wire.call(ApiKey.OffsetCommit, 8, {"group_id": group, "generation_id_or_member_epoch": 3, "member_id": "x", "topics": [{"name": topic, "partitions": parts}]})
    assert {p.error_code for t in refused.topics for p in t.partitions} == {E.UNKNOWN_MEMBER_ID}


def test_list_describe_delete_groups_and_offset_delete_every_version(wire) -> None:
    topic = new_topic(wire)
    empty_group, active_group = name("idle"), name("busy")
    parts = [{"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]
    wire.call(ApiKey.OffsetCommit, 2, {"group_id": empty_group, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1, "topics": [{"name": topic, "partitions": parts}]})
    joined = join(wire, 3, active_group)
    sync(wire, 3, active_group, 1, joined.member_id, {joined.member_id: b"x"})

    for version in versions(ApiKey.ListGroups):
        listed = wire.call(ApiKey.ListGroups, version, {"states_filter": [], "types_filter": []})
        groups = {g.group_id: g for g in listed.groups}
        assert listed.error_code == E.NONE and {empty_group, active_group} <= groups.keys()
        assert groups[active_group].protocol_type == "consumer"
        if version >= 4:
            assert (groups[empty_group].group_state, groups[active_group].group_state) == ("Empty", "Stable")
            stable = wire.call(ApiKey.ListGroups, version, {"states_filter": ["stable"], "types_filter": []})
            assert active_group in {g.group_id for g in stable.groups} and empty_group not in {g.group_id for g in stable.groups}
        if version >= 5:
            assert groups[active_group].group_type == "classic"
            assert wire.call(ApiKey.ListGroups, version, {"states_filter": [], "types_filter": ["consumer"]}).groups == []

    for version in versions(ApiKey.DescribeGroups):
        described = wire.call(ApiKey.DescribeGroups, version, {"groups": [active_group, empty_group, "never-was"], "include_authorized_operations": True})
        active, empty, never = described.groups
        assert (active.group_state, active.protocol_type, active.protocol_data) == ("Stable", "consumer", "range")
        assert [(m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) for m in active.members] == [(joined.member_id, "wire-test", "/127.0.0.1", b"meta", b"x")]
        assert (empty.group_state, empty.members) == ("Empty", [])
        assert (never.error_code, never.group_state) == (E.NONE, "Dead")
        if version >= 3:
            assert active.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)

    deleted = wire.call(ApiKey.OffsetDelete, 0, {"group_id": active_group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]})
    assert deleted.error_code == E.NONE, "a consumer group with members may drop offsets of topics it does not consume"
    for version in versions(ApiKey.DeleteGroups):
        results = wire.call(ApiKey.DeleteGroups, version, {"groups_names": [active_group, "never-was"]}).results
        assert [(r.group_id, r.error_code) for r in results] == [(active_group, E.NON_EMPTY_GROUP), ("never-was", E.GROUP_ID_NOT_FOUND)]
    offset_deleted = wire.call(ApiKey.OffsetDelete, 0, {"group_id": empty_group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]})
    assert [p.error_code for t in offset_deleted.topics for p in t.partitions] == [E.NONE]
    assert wire.call(ApiKey.DeleteGroups, 2, {"groups_names": [empty_group]}).results[0].error_code == E.GROUP_ID_NOT_FOUND, "the last offset took the group with it"
