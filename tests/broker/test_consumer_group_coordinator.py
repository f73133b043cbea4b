"""The consumer group protocol (KIP-848) driven directly on the sans-IO coordinator: member epochs, the
target assignment, revocation before assignment, unreleased partitions, static members, fencing, offsets
and the records, reloaded from the in-memory offsets log as a restarted coordinator would."""

from __future__ import annotations

import struct
import uuid
from dataclasses import replace

import pytest

from odradek.broker.coordinator.group.assignors import GroupSpec, MemberSpec, range_, uniform
from odradek.broker.coordinator.group.consumer_group import MemberState
from odradek.broker.coordinator.group.consumer_group_manager import ConsumerGroupConfig, HeartbeatRequest
from odradek.broker.coordinator.group.consumer_group_records import decode_record, encode_record, GroupEpochRecord, CurrentAssignmentRecord
from odradek.broker.coordinator.group.group_coordinator import GroupConfig, GroupCoordinator, GroupCoordinatorShard, JoinRequest, LeavingMember
from odradek.broker.coordinator.group.group_metadata_records import OffsetAndMetadata
from odradek.broker.coordinator.group.consumer_protocol import read_assignment, write_assignment
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.controller.metadata_image import PartitionState, TopicInfo
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.data import CONSUMER_PROTOCOL_SUBSCRIPTION
from odradek.protocol.schema import encode
from tests.broker.test_group_coordinator import OFFSETS_TOPIC, PARTITIONS, ManualClock, MemoryLog, subscription

E = ErrorCode
T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


class Image:
    def __init__(self) -> None:
        self.topics: dict[str, TopicInfo] = {}
        self.group_configs: dict[str, dict[str, str]] = {}

    def add(self, name: str, topic_id: uuid.UUID, partitions: int) -> None:
        self.topics[name] = TopicInfo(name, topic_id, {p: PartitionState(0, 0, [0], [0]) for p in range(partitions)})


class Harness:
    def __init__(self, log: MemoryLog | None = None, clock: ManualClock | None = None, image: Image | None = None, **consumer) -> None:
        self.clock = clock or ManualClock()
        self.log = log or MemoryLog()
        self.image = image or Image()
        if image is None:
            self.image.add("t", T1, 6)
        config = ConsumerGroupConfig(**consumer)
        self.runtime = CoordinatorRuntime(OFFSETS_TOPIC, lambda context: GroupCoordinatorShard(context, GroupConfig(initial_rebalance_delay_ms=0), config, lambda: self.image), self.log, broker_id=0, clock=self.clock)
        self.coordinator = GroupCoordinator(self.runtime)
        for p in range(PARTITIONS):
            self.runtime.load(p, self.log.loaded_batches[p])

    def advance(self, ms: int) -> None:
        self.clock.now += ms
        self.runtime.run_due_timers()

    def hb(self, member_id: str, epoch: int, *, group: str = "g", topics=None, owned=None, instance=None, assignor=None, regex=None, rebalance_timeout=-1, version=1):
        req = HeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance, rebalance_timeout_ms=rebalance_timeout,
            subscribed_topic_names=topics, subscribed_topic_regex=regex, server_assignor=assignor, owned=owned, client_id="c", client_host="/127.0.0.1", api_version=version,
        )
        deferred = self.coordinator.consumer_group_heartbeat(req)
        assert deferred.done
        return deferred.value

    def join(self, member_id: str, topics=("t",), **kw):
        return self.hb(member_id, 0, topics=list(topics), owned={}, rebalance_timeout=kw.pop("rebalance_timeout", 30000), **kw)

    def shard(self, group: str = "g") -> GroupCoordinatorShard:
        return self.runtime.shard(self.coordinator.partition_for(group))

    def group(self, group: str = "g"):
        return self.shard(group).consumer_groups[group]


def parts(assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in (assignment or {}).items() for p in ps}


def test_first_member_gets_every_partition_and_the_group_epoch():
    h = Harness()
    r = h.join("m1")
    assert r.error == E.NONE and r.member_id == "m1" and r.member_epoch == 1 and r.heartbeat_interval_ms == 5000
    assert parts(r.assignment) == {(T1, p) for p in range(6)}
    g = h.group()
    assert (g.group_epoch, g.assignment_epoch, g.state.value) == (1, 1, "Stable")
    # A heartbeat with nothing changed answers no assignment (the member keeps what it has).
    r = h.hb("m1", 1)
    assert r.error == E.NONE and r.member_epoch == 1 and r.assignment is None


def test_second_member_waits_for_revocation_before_its_partitions():
    h = Harness()
    h.join("m1")
    r2 = h.join("m2")
    # The target gives m2 half, but m1 still owns them: unreleased, nothing yet, epoch 2.
    assert r2.member_epoch == 2 and parts(r2.assignment) == set()
    assert h.group().members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    # m1 is asked to revoke three partitions and stays at epoch 1.
    r1 = h.hb("m1", 1)
    kept = parts(r1.assignment)
    assert r1.member_epoch == 1 and len(kept) == 3
    assert h.group().members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    assert h.group().state.value == "Reconciling"
    # m2 still cannot have them while m1 reports owning all six.
    assert h.hb("m2", 2).assignment is None
    all_six = {T1: frozenset(range(6))}
    assert h.hb("m1", 1, owned=all_six).member_epoch == 1
    # Once m1 reports only what it keeps, it moves to epoch 2 and m2 gets the rest.
    r1 = h.hb("m1", 1, owned={T1: frozenset(p for _, p in kept)})
    assert r1.member_epoch == 2
    r2 = h.hb("m2", 2)
    assert parts(r2.assignment) == {(T1, p) for p in range(6)} - kept
    assert h.group().state.value == "Stable"


def test_epoch_errors():
    h = Harness()
    h.join("m1")
    assert h.hb("m1", 5).error == E.FENCED_MEMBER_EPOCH
    assert h.hb("nobody", 1).error == E.UNKNOWN_MEMBER_ID
    assert h.hb("m1", 1, group="other").error == E.GROUP_ID_NOT_FOUND
    assert h.hb("", 0, topics=["t"], owned={}, rebalance_timeout=1).error == E.INVALID_REQUEST
    assert h.hb("m9", 0, topics=["t"], owned={}).error == E.INVALID_REQUEST  # no rebalance timeout
    assert h.hb("m9", -3).error == E.INVALID_REQUEST
    assert h.join("m9", assignor="sticky").error == E.UNSUPPORTED_ASSIGNOR
    assert h.join("m9", topics=(), regex="a(").error == E.INVALID_REGULAR_EXPRESSION


def test_previous_epoch_accepted_with_a_subset_of_the_assignment():
    h = Harness()
    h.join("m1")
    h.join("m2")
    r1 = h.hb("m1", 1, owned={T1: frozenset(range(6))})
    kept = frozenset(p for _, p in parts(r1.assignment))
    assert h.hb("m1", 1, owned={T1: kept}).member_epoch == 2
    # The answer with epoch 2 was lost: epoch 1 with a subset of the assignment is still accepted.
    assert h.hb("m1", 1, owned={T1: kept}).error == E.NONE
    assert h.hb("m1", 1, owned={T1: frozenset(range(6))}).error == E.FENCED_MEMBER_EPOCH


def test_a_commit_at_an_older_epoch_counts_for_the_partitions_owned_since():
    """KIP-1251 (Kafka 4.3+): a member commits while its heartbeat is in flight, so its commit may carry the
    epoch it had before the heartbeat that moved it on was applied. Kafka 4.4 accepts it for the partitions
    the member has owned since that epoch; refusing it (STALE_MEMBER_EPOCH) fails the Java client's
    ``commitSync`` with a CommitFailedException -- which killed a member of the three-member e2e test."""
    h = Harness()
    h.join("m1")
    h.join("m2")
    kept = frozenset(p for _, p in parts(h.hb("m1", 1).assignment))
    assert h.hb("m1", 1, owned={T1: kept}).member_epoch == 2
    given = frozenset(p for _, p in parts(h.hb("m2", 2).assignment))
    assert given == frozenset(range(6)) - kept and h.group().state.value == "Stable"

    def commit(member: str, epoch: int, *partitions: int) -> set[ErrorCode]:
        offsets = {("t", p): OffsetAndMetadata(1) for p in partitions}
        return set(h.coordinator.commit_offsets("g", member, None, epoch, offsets, api_version=9).value.values())

    k, g = min(kept), min(given)
    assert commit("m1", 1, k) == {E.NONE}  # m1 has owned it since epoch 1
    assert commit("m1", 1, g) == {E.STALE_MEMBER_EPOCH}  # m1 gave it up
    assert commit("m1", 1, k, g) == {E.STALE_MEMBER_EPOCH}  # one refused partition refuses the commit
    assert commit("m2", 1, g) == {E.STALE_MEMBER_EPOCH}  # m2 got it at epoch 2
    assert commit("m2", 2, g) == {E.NONE}
    assert commit("m1", 3, k) == {E.STALE_MEMBER_EPOCH}  # newer than the member's epoch
    # The epochs are written as Kafka 4.3+ writes them (AssignmentEpochs) and come back on a reload.
    m1 = h.group().members["m1"]
    assert decode_record(*encode_record(CurrentAssignmentRecord("g", "m1", m1))) == CurrentAssignmentRecord("g", "m1", replace(m1, subscribed_topic_names=frozenset(), rebalance_timeout_ms=-1, client_id="", client_host=""))
    assert {m1.assignment_epoch(T1, p) for p in kept} == {1}
    reloaded = Harness(h.log, h.clock, h.image).group().members
    assert reloaded["m1"].assignment_epochs == m1.assignment_epochs and {reloaded["m2"].assignment_epoch(T1, p) for p in given} == {2}


def test_a_member_still_revoking_keeps_its_epoch():
    """Kafka 4.2+ (KAFKA-19974): a member that revoked what it was asked to but must revoke more for a newer
    target stays at its epoch (it used to move to epoch + 1, an epoch the group may never have had, at which
    a partition could be owned by two members one after the other)."""
    h = Harness()
    h.join("m1")
    h.join("m2")
    kept = frozenset(p for _, p in parts(h.hb("m1", 1).assignment))
    h.join("m3")
    r1 = h.hb("m1", 1, owned={T1: kept})
    m1 = h.group().members["m1"]
    assert (r1.member_epoch, m1.state, m1.member_epoch) == (1, MemberState.UNREVOKED_PARTITIONS, 1)
    now = frozenset(p for _, p in parts(r1.assignment))
    assert len(now) == 2 and h.hb("m1", 1, owned={T1: now}).member_epoch == 3


def test_a_partition_the_member_itself_revokes_is_given_back_at_once():
    """Kafka 4.2+ (KAFKA-19449): when the target gives a member back a partition it is revoking, the partition
    is not "unreleased" (owned by another member): the member gets it in the same step."""
    h = Harness()
    h.join("m1")
    h.join("m2")
    kept = frozenset(p for _, p in parts(h.hb("m1", 1).assignment))
    assert h.hb("m2", -1).error == E.NONE
    r1 = h.hb("m1", 1, owned={T1: kept})
    assert r1.member_epoch == 3 and parts(r1.assignment) == {(T1, p) for p in range(6)}
    assert h.group().members["m1"].state is MemberState.STABLE


def test_leave_fences_and_the_others_take_over():
    h = Harness()
    h.join("m1")
    h.join("m2")
    r1 = h.hb("m1", 1, owned={T1: frozenset(range(6))})
    h.hb("m1", 1, owned={T1: frozenset(p for _, p in parts(r1.assignment))})
    h.hb("m2", 2)
    r = h.hb("m1", -1)
    assert (r.error, r.member_id, r.member_epoch) == (E.NONE, "m1", -1)
    assert set(h.group().members) == {"m2"}
    r2 = h.hb("m2", 2)
    assert r2.member_epoch == 3 and parts(r2.assignment) == {(T1, p) for p in range(6)}


def test_session_timeout_fences_a_silent_member():
    h = Harness(session_timeout_ms=45000)
    h.join("m1")
    h.join("m2")
    for _ in range(9):
        h.advance(5000)
        h.hb("m2", h.group().members["m2"].member_epoch)
    h.advance(1000)
    assert set(h.group().members) == {"m2"}


def test_a_group_config_sets_the_session_timeout_and_heartbeat_interval():
    """Kafka 4.4's consumer.session.timeout.ms and consumer.heartbeat.interval.ms group configs (GROUP config
    resources) take the place of the broker's group.consumer.* for that group."""
    h = Harness(session_timeout_ms=45000)
    h.image.group_configs["g"] = {"consumer.session.timeout.ms": "12000", "consumer.heartbeat.interval.ms": "3000"}
    assert h.join("m1").heartbeat_interval_ms == 3000
    assert h.join("m1", group="other").heartbeat_interval_ms == 5000
    h.advance(12001)
    assert "m1" not in h.group().members and "m1" in h.group("other").members


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    h = Harness()
    h.join("m1", rebalance_timeout=10000)
    h.join("m2")
    h.hb("m1", 1, owned={T1: frozenset(range(6))})
    h.advance(10001)
    assert set(h.group().members) == {"m2"}


def test_static_member_rejoins_with_its_assignment():
    h = Harness()
    h.join("a1", instance="i1")
    h.join("b1", instance="i2")
    r = h.hb("a1", 1, owned={T1: frozenset(range(6))}, instance="i1")
    kept = frozenset(p for _, p in parts(r.assignment))
    h.hb("a1", 1, owned={T1: kept}, instance="i1")
    h.hb("b1", 2, instance="i2")
    assert h.join("a2", instance="i1").error == E.UNRELEASED_INSTANCE_ID
    r = h.hb("a1", -2, instance="i1")
    assert (r.error, r.member_epoch) == (E.NONE, -2)
    epoch = h.group().group_epoch
    r = h.join("a2", instance="i1")
    assert r.error == E.NONE and frozenset(p for _, p in parts(r.assignment)) == kept
    assert h.group().group_epoch == epoch  # no rebalance
    assert "a1" not in h.group().members
    assert h.hb("a1", 2, instance="i1").error == E.FENCED_INSTANCE_ID


def test_group_max_size():
    h = Harness(max_size=1)
    h.join("m1")
    assert h.join("m2").error == E.GROUP_MAX_SIZE_REACHED


def test_offsets_commit_and_fetch_with_member_epoch():
    h = Harness()
    h.join("m1")
    offsets = {("t", 0): OffsetAndMetadata(42)}
    assert h.coordinator.commit_offsets("g", "m1", None, 1, offsets, api_version=9).value == {("t", 0): E.NONE}
    assert h.coordinator.commit_offsets("g", "m1", None, 0, offsets, api_version=9).value == {("t", 0): E.STALE_MEMBER_EPOCH}
    assert h.coordinator.commit_offsets("g", "m1", None, 1, offsets, api_version=8).value == {("t", 0): E.UNSUPPORTED_VERSION}
    assert h.coordinator.commit_offsets("g", "zz", None, 1, offsets, api_version=9).value == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.coordinator.commit_offsets("g", "", None, -1, offsets, api_version=9).value == {("t", 0): E.UNKNOWN_MEMBER_ID}
    error, fetched = h.coordinator.fetch_offsets("g", False, [("t", 0)], "m1", 1)
    assert error == E.NONE and fetched[("t", 0)].offset == 42
    assert h.coordinator.fetch_offsets("g", False, [("t", 0)], "m1", 7)[0] == E.STALE_MEMBER_EPOCH
    assert h.coordinator.fetch_offsets("g", False, [("t", 0)])[0] == E.NONE


def classic_join(h: Harness, member_id: str = "", group: str = "g", topics=("t",), owned=(), session_timeout=10000):
    metadata = write_subscription(topics, owned)
    join = JoinRequest(member_id=member_id, group_instance_id=None, client_id="c", client_host="/h", rebalance_timeout_ms=1000, session_timeout_ms=session_timeout, group_id=group, protocol_type="consumer", protocols=[("range", metadata)], require_known_member_id=False)
    return h.coordinator.join_group(join)


def write_subscription(topics, owned) -> bytes:
    fields = {"topics": list(topics), "user_data": None, "owned_partitions": [{"topic": t, "partitions": list(ps)} for t, ps in owned], "generation_id": -1, "rack_id": None}
    return struct.pack(">h", 1) + encode(CONSUMER_PROTOCOL_SUBSCRIPTION, 1, fields)


def stable_classic_group(h: Harness, group: str = "g") -> list[str]:
    """Two classic members in a Stable group, m-a with partitions 0-2 and m-b with 3-5."""
    first, second = classic_join(h, group=group), classic_join(h, group=group)
    h.advance(0)
    a, b = first.value, second.value
    leader = a if a.leader_id == a.member_id else b
    assignment = {a.member_id: write_assignment({"t": [0, 1, 2]}, write_subscription(["t"], [])), b.member_id: write_assignment({"t": [3, 4, 5]}, write_subscription(["t"], []))}
    h.coordinator.sync_group(group, leader.generation_id, leader.member_id, "consumer", "range", None, assignment)
    follower = b if leader is a else a
    assert h.coordinator.sync_group(group, follower.generation_id, follower.member_id, "consumer", "range", None, {}).value.error == E.NONE
    return [a.member_id, b.member_id]


def test_migration_disabled_keeps_a_classic_group_classic():
    h = Harness(migration_policy="disabled")
    stable_classic_group(h, "cg")
    assert h.join("x", group="cg").error == E.GROUP_ID_NOT_FOUND
    [described] = h.coordinator.consumer_group_describe(["cg"])
    assert described.error == E.GROUP_ID_NOT_FOUND and described.error_message == "Group cg is not a consumer group."
    h.join("m1")
    error, groups = h.coordinator.list_groups([], [])
    assert {(g.group_id, g.group_type, g.state) for g in groups} == {("g", "consumer", "Stable"), ("cg", "classic", "Stable")}
    assert h.coordinator.describe_group("g")[1].state == "Dead"
    # A classic member may join a consumer group whatever the policy (only conversions are governed by it).
    joined = classic_join(h).value
    assert joined.error == E.NONE and joined.leader_id == "" and joined.members == [] and joined.protocol_name == "range"
    assert h.group().members[joined.member_id].uses_classic_protocol


def test_classic_member_requires_a_member_id_and_a_shared_protocol():
    h = Harness()
    h.join("m1")
    join = JoinRequest(member_id="", group_instance_id=None, client_id="c", client_host="/h", rebalance_timeout_ms=1000, session_timeout_ms=10000, group_id="g", protocol_type="consumer", protocols=[("range", subscription("t"))])
    first = h.coordinator.join_group(join).value
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id
    assert classic_join(h, first.member_id).value.error == E.NONE
    other = JoinRequest(member_id="", group_instance_id=None, client_id="c", client_host="/h", rebalance_timeout_ms=1000, session_timeout_ms=10000, group_id="g", protocol_type="consumer", protocols=[("roundrobin", subscription("t"))], require_known_member_id=False)
    assert h.coordinator.join_group(other).value.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_online_upgrade_and_downgrade():
    log, clock, image = MemoryLog(), ManualClock(), Image()
    image.add("t", T1, 6)
    h = Harness(log, clock, image)
    a, b = stable_classic_group(h)
    generation = h.shard().groups["g"].generation_id
    h.coordinator.commit_offsets("g", a, None, generation, {("t", 0): OffsetAndMetadata(5)})

    # Upgrade: a consumer-protocol member joins the classic group.
    r = h.join("c1")
    assert r.error == E.NONE
    group = h.group()
    assert set(group.members) == {a, b, "c1"} and group.group_epoch == generation + 1
    assert group.members[a].member_epoch == generation and parts(group.members[a].assigned_partitions) == {(T1, p) for p in range(3)}
    assert h.shard().groups["g"].generation_id == 0 and not h.shard().groups["g"].members  # only the offsets stay
    assert h.coordinator.fetch_offsets("g", False, [("t", 0)])[1][("t", 0)].offset == 5
    # The classic members are told to rejoin, and get their part of the new assignment through SyncGroup.
    assert h.coordinator.heartbeat("g", a, None, generation) == E.REBALANCE_IN_PROGRESS
    assert h.coordinator.sync_group("g", generation, a, "consumer", "range", None, {}).value.error == E.REBALANCE_IN_PROGRESS
    target_a = group.target_assignment[a]
    rejoined = classic_join(h, a, owned=[("t", [0, 1, 2])]).value
    assert rejoined.error == E.NONE and rejoined.member_id == a
    synced = h.coordinator.sync_group("g", rejoined.generation_id, a, "consumer", "range", None, {}).value
    assert synced.error == E.NONE
    kept = {p for p in read_assignment(synced.assignment).get("t", [])}
    assert kept <= {0, 1, 2} and kept <= set(target_a.get(T1, ()))
    assert h.coordinator.commit_offsets("g", a, None, rejoined.generation_id, {("t", 0): OffsetAndMetadata(6)}).value == {("t", 0): E.NONE}
    assert h.coordinator.commit_offsets("g", a, None, rejoined.generation_id - 1, {("t", 0): OffsetAndMetadata(6)}).value == {("t", 0): E.ILLEGAL_GENERATION}
    [d] = h.coordinator.consumer_group_describe(["g"])
    assert {m.member.member_id: m.member.uses_classic_protocol for m in d.members} == {a: True, b: True, "c1": False}

    # A restarted coordinator loads the mixed group, classic members with their JoinGroup's metadata.
    restarted = Harness(log, clock, image)
    assert restarted.group().members == h.group().members

    # Downgrade: the last consumer-protocol member leaves; the classic members form a classic group again.
    epoch = h.group().group_epoch
    assert h.hb("c1", h.group().members["c1"].member_epoch and -1).error == E.NONE
    assert "g" not in h.shard().consumer_groups
    classic = h.shard().groups["g"]
    assert set(classic.members) == {a, b} and classic.state.value == "PreparingRebalance" and classic.generation_id == epoch
    assert h.coordinator.heartbeat("g", a, None, epoch) == E.REBALANCE_IN_PROGRESS
    assert h.coordinator.fetch_offsets("g", False, [("t", 0)])[1][("t", 0)].offset == 6
    reloaded = Harness(log, clock, image)
    assert "g" not in reloaded.shard().consumer_groups and set(reloaded.shard().groups["g"].members) == {a, b}


def test_classic_members_leave_a_consumer_group():
    h = Harness()
    h.join("c1")
    joined = classic_join(h).value
    epoch = h.group().group_epoch
    error, answers = h.coordinator.leave_group("g", [LeavingMember(joined.member_id), LeavingMember("c1")])
    assert error == E.NONE and [e for _, e in answers] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert set(h.group().members) == {"c1"} and h.group().group_epoch == epoch + 1


def test_a_classic_static_member_replacing_the_last_consumer_one_downgrades():
    h = Harness()
    h.join("c1", instance="i1")
    k1 = classic_join(h).value.member_id
    epoch = h.group().group_epoch
    target = {p for p in h.group().target_assignment["c1"].get(T1, ())}
    join = JoinRequest(member_id="", group_instance_id="i1", client_id="c", client_host="/h", rebalance_timeout_ms=1000, session_timeout_ms=10000, group_id="g", protocol_type="consumer", protocols=[("range", write_subscription(["t"], []))], require_known_member_id=False)
    joined = h.coordinator.join_group(join).value
    assert joined.error == E.NONE and joined.member_id != "c1"
    assert "g" not in h.shard().consumer_groups
    classic = h.shard().groups["g"]
    assert set(classic.members) == {k1, joined.member_id} and classic.state.value == "Stable" and classic.generation_id == epoch
    assert set(read_assignment(classic.members[joined.member_id].assignment).get("t", [])) == target
    reloaded = Harness(h.log, h.clock, h.image)
    assert reloaded.shard().consumer_groups == {} and set(reloaded.shard().groups["g"].members) == {k1, joined.member_id}


def test_upgrade_of_a_group_rebalancing_out_of_empty_reads_the_members_first_protocol():
    """A classic group that emptied has no protocol until its next generation: a member joining it meanwhile
    is read by its first protocol's subscription."""
    h = Harness()
    first = classic_join(h)
    h.advance(0)
    h.coordinator.leave_group("g", [LeavingMember(first.value.member_id)])
    assert h.shard().groups["g"].protocol_name is None and h.shard().groups["g"].generation_id == 2
    waiting = classic_join(h)  # parked in JoinGroup while the group prepares its rebalance
    assert h.join("c1").error == E.NONE
    assert waiting.value.error == E.REBALANCE_IN_PROGRESS
    assert h.group().members[waiting.value.member_id].subscribed_topic_names == frozenset({"t"})


def test_migration_policy_upgrade_only_does_not_downgrade():
    h = Harness(migration_policy="upgrade")
    stable_classic_group(h)
    h.join("c1")
    assert h.hb("c1", h.group().members["c1"].member_epoch and -1).error == E.NONE
    assert "g" in h.shard().consumer_groups and len(h.group().members) == 2


def test_describe():
    h = Harness()
    h.join("m1", assignor="range")
    [d] = h.coordinator.consumer_group_describe(["g"])
    assert (d.error, d.state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (E.NONE, "Stable", 1, 1, "range")
    [m] = d.members
    assert m.member.member_id == "m1" and m.assignment == [(T1, "t", list(range(6)))] and m.target_assignment == m.assignment


def test_group_survives_a_coordinator_restart():
    log, clock, image = MemoryLog(), ManualClock(), Image()
    image.add("t", T1, 6)
    h = Harness(log, clock, image)
    h.join("m1")
    h.join("m2", instance="i2")
    h.hb("m1", 1, owned={T1: frozenset(range(6))})
    h.coordinator.commit_offsets("g", "m1", None, 1, {("t", 1): OffsetAndMetadata(7)})
    before = h.group()
    restarted = Harness(log, clock, image)
    after = restarted.group()
    assert after.members == before.members
    assert after.target_assignment == before.target_assignment
    assert (after.group_epoch, after.assignment_epoch, after.metadata_hash, after.static_members) == (before.group_epoch, before.assignment_epoch, before.metadata_hash, before.static_members)
    assert after.partition_epochs == before.partition_epochs
    assert restarted.coordinator.fetch_offsets("g", False, [("t", 1)])[1][("t", 1)].offset == 7
    # The reloaded members carry on at their epochs, without a rebalance.
    assert restarted.hb("m2", 2, instance="i2").error == E.NONE
    assert restarted.group().group_epoch == before.group_epoch


def test_failed_append_puts_the_group_back():
    h = Harness()
    h.join("m1")
    h.log.hold = True
    deferred = h.coordinator.consumer_group_heartbeat(HeartbeatRequest("g", "m2", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["t"], owned={}))
    assert "m2" in h.group().members
    h.log.release(E.NOT_LEADER_OR_FOLLOWER)
    assert deferred.value.error == E.NOT_COORDINATOR
    assert set(h.group().members) == {"m1"} and h.group().group_epoch == 1


def test_new_topic_partitions_bump_the_group_epoch():
    h = Harness()
    h.join("m1", topics=("t", "later"))
    assert h.group().group_epoch == 1
    h.image.add("later", T2, 2)
    r = h.hb("m1", 1)
    assert r.member_epoch == 2 and parts(r.assignment) == {(T1, p) for p in range(6)} | {(T2, 0), (T2, 1)}


def test_regex_subscription():
    h = Harness()
    h.image.add("orders-eu", T2, 2)
    r = h.join("m1", topics=(), regex="orders-.*")
    assert parts(r.assignment) == {(T2, 0), (T2, 1)}
    [d] = h.coordinator.consumer_group_describe(["g"])
    assert d.members[0].member.subscribed_topic_regex == "orders-.*"


def test_delete_group_only_when_empty():
    h = Harness()
    h.join("m1")
    assert h.coordinator.delete_groups(["g"]) == {"g": E.NON_EMPTY_GROUP}
    h.hb("m1", -1)
    assert h.coordinator.delete_groups(["g"]) == {"g": E.NONE}
    assert "g" not in h.shard().consumer_groups
    assert Harness(h.log, h.clock, h.image).shard().consumer_groups == {}


def test_records_round_trip():
    for record in (GroupEpochRecord("g", 3, -5), GroupEpochRecord("g", None), CurrentAssignmentRecord("g", "m", None)):
        key, value = encode_record(record)
        assert decode_record(key, value) == record


def spec(members: dict[str, tuple[set[uuid.UUID], dict]], homogeneous=True, assigned=lambda t, p: False) -> GroupSpec:
    return GroupSpec({m: MemberSpec(m, None, frozenset(topics), {t: frozenset(ps) for t, ps in a.items()}) for m, (topics, a) in members.items()}, homogeneous, assigned)


def test_uniform_is_sticky_and_balanced():
    current = {"a": {T1: {0, 1, 2, 3, 4, 5}}}
    out = uniform(spec({"a": ({T1}, current["a"]), "b": ({T1}, {}), "c": ({T1}, {})}, assigned=lambda t, p: True), {T1: 6})
    assert out["a"] == {T1: frozenset({0, 1})}
    assert sorted(len(a.get(T1, ())) for a in out.values()) == [2, 2, 2]
    assert set().union(*(a[T1] for a in out.values())) == set(range(6))


@pytest.mark.parametrize("heterogeneous", [False, True])
def test_range_gives_contiguous_ranges_by_member_id(heterogeneous):
    out = range_(spec({"b": ({T1, T2}, {}), "a": ({T1, T2}, {})}, homogeneous=not heterogeneous), {T1: 5, T2: 3})
    assert out == {"a": {T1: frozenset({0, 1, 2}), T2: frozenset({0, 1})}, "b": {T1: frozenset({3, 4}), T2: frozenset({2})}}


def test_uniform_heterogeneous_respects_subscriptions():
    out = uniform(spec({"a": ({T1}, {}), "b": ({T1, T2}, {})}, homogeneous=False), {T1: 4, T2: 2})
    assert T2 not in out["a"] and out["b"][T2] == frozenset({0, 1})
    assert out["a"][T1] | out["b"].get(T1, frozenset()) == frozenset(range(4))


def test_offsets_of_subscribed_topics_do_not_expire_while_the_group_has_members():
    h = Harness()
    h.image.add("u", T2, 1)
    h.join("m1")
    h.coordinator.commit_offsets("g", "m1", None, 1, {("t", 0): OffsetAndMetadata(5, commit_timestamp=h.clock.now), ("u", 0): OffsetAndMetadata(6, commit_timestamp=h.clock.now)})
    h.clock.now += 8 * 24 * 3600 * 1000
    h.shard().metadata.expire_offsets()
    fetched = h.coordinator.fetch_offsets("g", False, [("t", 0), ("u", 0)])[1]
    assert (fetched[("t", 0)].offset, fetched[("u", 0)].offset) == (5, -1)


def test_a_member_rejoins_under_its_own_id_with_epoch_0():
    """KIP-1082: a fenced client keeps its member id and rejoins with epoch 0 (Kafka 4.4 accepts it)."""
    h = Harness()
    h.join("m1")
    h.join("m2")
    assert h.hb("m1", 7).error == E.FENCED_MEMBER_EPOCH
    r = h.join("m1")
    assert r.error == E.NONE and r.member_id == "m1" and r.member_epoch >= 1


def test_a_changed_assignor_vote_bumps_the_group_epoch():
    h = Harness()
    h.join("m1")
    epoch = h.group().group_epoch
    r = h.hb("m1", 1, assignor="range")
    assert h.group().group_epoch == epoch + 1 and r.member_epoch == epoch + 1
    [d] = h.coordinator.consumer_group_describe(["g"])
    assert d.assignor_name == "range"


def test_an_empty_regex_is_no_regex():
    """librdkafka sends SubscribedTopicRegex "" beside its topic names: nothing to resolve or record."""
    h = Harness()
    r = h.join("m1", regex="")
    assert parts(r.assignment) == {(T1, p) for p in range(6)}
    assert h.group().resolved_regexes == {}


def test_a_member_record_has_no_classic_metadata_section():
    """A null ClassicMemberMetadata is left out of the tagged fields (Kafka's reader fails on an explicit null)."""
    from odradek.broker.coordinator.group.consumer_group import ConsumerGroupMember
    from odradek.broker.coordinator.group.consumer_group_records import MemberSubscriptionRecord

    _, value = encode_record(MemberSubscriptionRecord("g", "m", ConsumerGroupMember("m", client_id="c", client_host="/h", subscribed_topic_names=frozenset({"t"}))))
    assert value is not None and value.endswith(b"\x00")  # no tagged fields


def test_an_empty_group_of_either_kind_is_converted():
    """A consumer-protocol member takes the id of an empty classic group (its metadata record is deleted, its
    offsets stay), and a classic member the id of an empty consumer group (its records are deleted)."""
    from odradek.broker.coordinator.group.group_metadata_records import GroupMetadataKey, read_key

    h = Harness(migration_policy="disabled")  # empty groups convert whatever the policy
    join = JoinRequest(member_id="", group_instance_id=None, client_id="c", client_host="/h", rebalance_timeout_ms=1000, session_timeout_ms=10000, group_id="g", protocol_type="consumer", protocols=[("range", subscription("t"))], require_known_member_id=False)
    joined = h.coordinator.join_group(join)
    h.advance(0)
    member_id = joined.value.member_id
    assert h.coordinator.sync_group("g", 1, member_id, "consumer", "range", None, {member_id: b""}).value.error == E.NONE
    h.coordinator.commit_offsets("g", member_id, None, 1, {("t", 0): OffsetAndMetadata(3)})
    assert h.join("m1").error == E.GROUP_ID_NOT_FOUND  # the classic group has a member
    h.coordinator.leave_group("g", [LeavingMember(member_id)])
    r = h.join("m1")
    assert r.error == E.NONE and r.member_epoch == 1
    partition = h.coordinator.partition_for("g")
    tombstones = [key for _, key, value in h.log.partitions[partition] if value is None]
    assert any(isinstance(read_key(k), GroupMetadataKey) for k in tombstones)
    assert h.coordinator.fetch_offsets("g", False, [("t", 0)], "m1", 1)[1][("t", 0)].offset == 3
    h.hb("m1", -1)
    joined = h.coordinator.join_group(join)
    h.advance(0)
    assert joined.value.error == E.NONE
    assert "g" not in h.shard().consumer_groups
    assert Harness(h.log, h.clock, h.image).shard().consumer_groups == {}
