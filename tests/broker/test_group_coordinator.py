"""The sans-IO group coordinator driven directly: the classic rebalance protocol as Kafka 3.9 answers it.

The coordinator writes to an in-memory offsets log (records kept exactly as encoded, so reloading from it
is reloading from what a partition would hold) and its timers run on a manual clock.
"""

from __future__ import annotations

import struct
from collections import defaultdict


from odradek.broker.coordinator.runtime import AppendResult, CoordinatorRuntime, CoordinatorTopic, LoadedBatch
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.group.group import GroupState
from odradek.broker.coordinator.group.group_coordinator import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    GroupConfig,
    GroupCoordinator,
    GroupCoordinatorShard,
    JoinRequest,
    LeavingMember,
)
from odradek.broker.coordinator.runtime import partition_for
from odradek.broker.coordinator.group.group_metadata_records import CONSUMER_PROTOCOL_SUBSCRIPTION, OffsetAndMetadata, read_key
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import read_batch_header
from odradek.protocol.records import iter_records_unchecked
from odradek.protocol.schema import encode

E = ErrorCode
PARTITIONS = 4
SESSION = 10_000
REBALANCE = 30_000
OFFSETS_TOPIC = CoordinatorTopic("__consumer_offsets", PARTITIONS, 1, {})


def subscription(*topics: str) -> bytes:
    return struct.pack(">h", 0) + encode(CONSUMER_PROTOCOL_SUBSCRIPTION, 0, {"topics": list(topics), "user_data": None})


class ManualClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


class MemoryLog:
    """The offsets topic in memory: the runtime's batches as written, read back record by record. With
    ``hold``, appends stay uncommitted until :meth:`release`, as while followers have not caught up."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[int, bytes, bytes | None]]] = defaultdict(list)
        self.loaded_batches: dict[int, list[LoadedBatch]] = defaultdict(list)
        self.hold = False
        self.held: list[tuple[Deferred[AppendResult], int]] = []

    def append(self, partition: int, batch: bytearray) -> Deferred[AppendResult]:
        log = self.partitions[partition]
        base = len(log)
        data = bytes(batch)
        header = read_batch_header(data)
        records = [(r.key, r.value) for r in iter_records_unchecked(data, 0, header)]
        log.extend((base, key, value) for key, value in records)
        self.loaded_batches[partition].append(LoadedBatch(base, header.producer_id, header.producer_epoch, header.is_transactional, records))
        out: Deferred[AppendResult] = Deferred()
        if self.hold:
            self.held.append((out, base))
        else:
            out.complete(AppendResult(E.NONE, base))
        return out

    def release(self, error: ErrorCode = E.NONE) -> None:
        held, self.held = self.held, []
        for deferred, base in held:
            deferred.complete(AppendResult(error, base))

    def write_marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """A transaction's COMMIT or ABORT marker, as the transaction coordinator has it written."""
        self.loaded_batches[partition].append(LoadedBatch(len(self.partitions[partition]), producer_id, producer_epoch, True, [], commit))


class Harness:
    def __init__(self, log: MemoryLog | None = None, clock: ManualClock | None = None, **config) -> None:
        config.setdefault("initial_rebalance_delay_ms", 0)
        self.clock = clock or ManualClock()
        self.log = log or MemoryLog()
        group_config = GroupConfig(**config)
        self.runtime = CoordinatorRuntime(OFFSETS_TOPIC, lambda context: GroupCoordinatorShard(context, group_config), self.log, broker_id=0, clock=self.clock)
        self.coordinator = GroupCoordinator(self.runtime)
        for p in range(PARTITIONS):
            self.runtime.load(p, self.log.loaded_batches[p])

    def advance(self, ms: int = 0) -> None:
        self.clock.now += ms
        self.runtime.run_due_timers()

    def keep_alive(self, ms: int, *members: tuple[str, str, int]) -> None:
        """Let ``ms`` pass while the given (group, member, generation) heartbeat every 2 s."""
        for _ in range(ms // 2000):
            for group, member_id, generation in members:
                self.heartbeat(group, member_id, generation)
            self.advance(2000)

    def join(self, group: str = "g", member_id: str = "", *, instance: str | None = None, protocols=None, client_id: str = "client", require_known: bool = True, session: int = SESSION, skip: bool = False):
        protocols = protocols if protocols is not None else [("range", subscription("t"))]
        req = JoinRequest(
            member_id=member_id, group_instance_id=instance, client_id=client_id, client_host="/127.0.0.1", rebalance_timeout_ms=REBALANCE, session_timeout_ms=session,
            group_id=group, protocol_type="consumer", protocols=protocols, require_known_member_id=require_known, support_skipping_assignment=skip,
        )
        return self.coordinator.join_group(req)

    def join_new(self, group: str = "g", **kw) -> tuple[str, Deferred]:
        """A dynamic member's two-step join (MEMBER_ID_REQUIRED, then with its member id)."""
        first = self.join(group, **kw)
        assert first.done and first.value.error == E.MEMBER_ID_REQUIRED
        member_id = first.value.member_id
        return member_id, self.join(group, member_id, **kw)

    def sync(self, group: str, member_id: str, generation: int, assignments: dict[str, bytes] | None = None, instance: str | None = None):
        return self.coordinator.sync_group(group, generation, member_id, "consumer", None, instance, assignments or {})

    def heartbeat(self, group: str, member_id: str, generation: int, instance: str | None = None) -> ErrorCode:
        return self.coordinator.heartbeat(group, member_id, instance, generation)

    def end_transaction(self, group: str, producer_id: int, commit: bool) -> None:
        partition = partition_for(group, PARTITIONS)
        self.log.write_marker(partition, producer_id, 0, commit)
        self.coordinator.complete_transaction(producer_id, 0, [partition], commit)

    def state(self, group: str = "g") -> GroupState:
        return self.coordinator.groups[group].state

    def stable_pair(self, group: str = "g") -> tuple[str, str, int]:
        """Two members, Stable, m1 leading: (m1, m2, generation)."""
        m1, j1 = self.join_new(group)
        self.advance()
        assert j1.value.error == E.NONE
        self.sync(group, m1, j1.value.generation_id, {m1: b"a1"})
        m2, j2 = self.join_new(group)
        assert not j2.done
        j1 = self.join(group, m1)
        assert j1.done and j2.done
        generation = j1.value.generation_id
        self.sync(group, m2, generation)
        self.sync(group, m1, generation, {m1: b"a1", m2: b"a2"})
        assert self.state(group) is GroupState.STABLE
        return m1, m2, generation


def test_first_member_gets_member_id_required_then_leads_generation_one() -> None:
    h = Harness()
    first = h.join("g")
    assert first.value.error == E.MEMBER_ID_REQUIRED
    member_id = first.value.member_id
    assert member_id.startswith("client-")
    second = h.join("g", member_id)
    assert not second.done, "the join waits for the (zero) initial rebalance delay"
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.advance()
    result = second.value
    assert (result.error, result.generation_id, result.leader_id, result.protocol_name) == (E.NONE, 1, member_id, "range")
    assert [m[0] for m in result.members] == [member_id]
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_second_member_joins_rebalance_and_each_gets_the_leaders_assignment() -> None:
    h = Harness()
    m1, j1 = h.join_new("g", protocols=[("range", b"meta-1")])
    h.advance()
    sync1 = h.sync("g", m1, 1, {m1: b"all"})
    assert sync1.value.assignment == b"all"

    # The trap: a second member must get MEMBER_ID_REQUIRED and then be admitted, not UNKNOWN_MEMBER_ID.
    m2, j2 = h.join_new("g", protocols=[("range", b"meta-2")])
    assert not j2.done and h.state() is GroupState.PREPARING_REBALANCE
    assert h.heartbeat("g", m1, 1) == E.REBALANCE_IN_PROGRESS
    assert h.sync("g", m1, 1).value.error == E.REBALANCE_IN_PROGRESS
    j1 = h.join("g", m1, protocols=[("range", b"meta-1")])
    assert j1.done and j2.done, "the join completes as soon as every known member rejoined"
    assert j1.value.generation_id == j2.value.generation_id == 2
    assert j1.value.leader_id == j2.value.leader_id == m1
    assert sorted(j1.value.members) == sorted([(m1, None, b"meta-1"), (m2, None, b"meta-2")])
    assert j2.value.members == []

    follower = h.sync("g", m2, 2)
    assert not follower.done, "a follower's SyncGroup waits for the leader's assignment"
    leader = h.sync("g", m1, 2, {m1: b"p0,p1"})
    assert leader.value == follower.value.__class__(E.NONE, "consumer", "range", b"p0,p1")
    assert (follower.value.error, follower.value.assignment) == (E.NONE, b""), "members left out get an empty assignment"
    assert h.state() is GroupState.STABLE
    assert h.heartbeat("g", m2, 2) == E.NONE
    assert h.heartbeat("g", m2, 1) == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", "nobody", 2) == E.UNKNOWN_MEMBER_ID


def test_protocol_chosen_by_votes_among_protocols_every_member_supports() -> None:
    h = Harness()
    prefs = [["range", "roundrobin"], ["roundrobin", "range"], ["range", "roundrobin", "sticky"]]
    joins = [h.join_new("g", protocols=[(p, b"") for p in ps]) for ps in prefs]
    h.advance()
    assert {j.value.protocol_name for _, j in joins} == {"range"}
    assert h.join("g", protocols=[("cooperative-sticky", b"")]).value.error == E.INCONSISTENT_GROUP_PROTOCOL

    h2 = Harness()
    for ps in (["range", "roundrobin"], ["roundrobin"], ["roundrobin", "range"]):
        h2.join_new("g", protocols=[(p, b"") for p in ps])
    h2.advance()
    assert h2.coordinator.groups["g"].protocol_name == "roundrobin"


def test_a_protocol_named_twice_counts_once_and_its_first_metadata_wins() -> None:
    # Kafka 3.9 counts the repeat twice and never completes the rebalance (compat-tests/README.md).
    h = Harness()
    m1, j1 = h.join_new("g", protocols=[("range", b"first"), ("roundrobin", b"rr"), ("range", b"second")])
    h.advance()
    assert (j1.value.error, j1.value.protocol_name, j1.value.members) == (E.NONE, "range", [(m1, None, b"first")])
    assert h.sync("g", m1, 1, {m1: b"a"}).value.error == E.NONE
    m2, j2 = h.join_new("g", protocols=[("range", b"other")])
    j1 = h.join("g", m1, protocols=[("range", b"first"), ("range", b"second")])
    assert j1.value.error == j2.value.error == E.NONE and j1.value.generation_id == 2
    assert sorted(j1.value.members) == sorted([(m1, None, b"first"), (m2, None, b"other")])


def test_a_failing_timer_resets_only_its_group_which_then_rebalances_again() -> None:
    """A timer that raises must not leave its group stuck (nor stop the other timers due with it): the
    members parked in the group are told to join again and the group starts over Empty."""
    h = Harness()
    m1, j1 = h.join_new("g")
    other, other_join = h.join_new("h")

    def fail() -> None:
        raise ValueError("a state no rule foresaw")

    h.runtime.shard(partition_for("g", PARTITIONS)).timers.schedule(("join", "g"), 0, fail)
    h.advance()
    assert (j1.value.error, j1.value.member_id) == (E.UNKNOWN_MEMBER_ID, "")
    assert h.state("g") is GroupState.EMPTY and not h.coordinator.groups["g"].members
    assert other_join.value.error == E.NONE, "the other group's rebalance completed in the same pass"

    m1, j1 = h.join_new("g")
    h.advance()
    assert (j1.value.error, j1.value.generation_id) == (E.NONE, 2)
    assert h.sync("g", m1, 2, {m1: b"a"}).value.assignment == b"a"
    assert h.state("g") is GroupState.STABLE


def test_session_timeout_removes_a_silent_member_and_the_group_rebalances() -> None:
    h = Harness()
    m1, m2, generation = h.stable_pair()
    for _ in range(2):
        h.advance(SESSION * 2 // 5)
        assert h.heartbeat("g", m1, generation) == E.NONE
    h.advance(SESSION * 2 // 5)
    assert h.state() is GroupState.PREPARING_REBALANCE, "m2 stopped heartbeating a session ago"
    assert h.heartbeat("g", m1, generation) == E.REBALANCE_IN_PROGRESS
    rejoin = h.join("g", m1)
    assert rejoin.value.generation_id == generation + 1
    assert [m[0] for m in rejoin.value.members] == [m1]
    assert h.heartbeat("g", m2, generation) == E.UNKNOWN_MEMBER_ID


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() -> None:
    h = Harness()
    m1, m2, generation = h.stable_pair()
    rejoin = h.join("g", m1)  # the leader asks for a rebalance
    assert not rejoin.done
    for _ in range(REBALANCE // (SESSION // 2)):
        assert h.heartbeat("g", m2, generation) == E.REBALANCE_IN_PROGRESS
        h.advance(SESSION // 2)
    assert rejoin.done and rejoin.value.generation_id == generation + 1
    assert list(h.coordinator.groups["g"].members) == [m1]


def test_follower_that_never_syncs_is_removed_after_the_rebalance_timeout() -> None:
    h = Harness()
    m1, j1 = h.join_new("g")
    h.advance()
    h.sync("g", m1, 1, {m1: b"x"})
    m2, j2 = h.join_new("g")
    h.join("g", m1)
    h.sync("g", m1, 2, {m1: b"x", m2: b"y"})
    assert h.state() is GroupState.STABLE
    # m2 heartbeats (its client got the JoinGroup answer) but never sends SyncGroup.
    h.keep_alive(REBALANCE - 2000, ("g", m1, 2), ("g", m2, 2))
    assert m2 in h.coordinator.groups["g"].members
    h.keep_alive(2000, ("g", m1, 2), ("g", m2, 2))
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert m2 not in h.coordinator.groups["g"].members


def test_pending_member_that_never_rejoins_expires_after_its_session() -> None:
    h = Harness()
    first = h.join("g")
    assert first.value.member_id in h.coordinator.groups["g"].pending_members
    h.advance(SESSION)
    assert not h.coordinator.groups["g"].pending_members
    assert h.join("g", first.value.member_id).value.error == E.UNKNOWN_MEMBER_ID


def test_new_member_parked_in_join_is_answered_when_its_join_timeout_passes() -> None:
    h = Harness()
    m1, m2, generation = h.stable_pair()
    _, j3 = h.join_new("g")
    assert not j3.done
    # m1 and m2 keep heartbeating but never rejoin: the rebalance timeout drops them, and the new member
    # completes a generation alone.
    for _ in range(REBALANCE // 5000):
        h.heartbeat("g", m1, generation)
        h.heartbeat("g", m2, generation)
        h.advance(5000)
    assert j3.done and j3.value.error == E.NONE and j3.value.generation_id == generation + 1
    assert NEW_MEMBER_JOIN_TIMEOUT_MS > REBALANCE


def test_static_member_rejoining_with_unknown_id_takes_its_place_without_rebalance() -> None:
    h = Harness()
    j = h.join("g", instance="i-1")
    assert not j.done, "static members are admitted without MEMBER_ID_REQUIRED"
    h.advance()
    old_id = j.value.member_id
    assert old_id.startswith("i-1-")
    h.sync("g", old_id, 1, {old_id: b"mine"}, instance="i-1")
    assert h.state() is GroupState.STABLE

    again = h.join("g", instance="i-1")
    assert again.done, "no rebalance: the group stays Stable"
    new_id = again.value.member_id
    assert new_id != old_id
    assert (again.value.error, again.value.generation_id, again.value.leader_id) == (E.NONE, 1, old_id), "the old leader id is returned so the member does not reassign"
    assert h.state() is GroupState.STABLE
    assert h.sync("g", new_id, 1, instance="i-1").value.assignment == b"mine"
    assert h.heartbeat("g", old_id, 1, instance="i-1") == E.FENCED_INSTANCE_ID
    assert h.heartbeat("g", new_id, 1, instance="i-1") == E.NONE


def test_static_leader_rejoining_on_join_group_v9_is_told_to_skip_assignment() -> None:
    h = Harness()
    j = h.join("g", instance="i-1")
    h.advance()
    h.sync("g", j.value.member_id, 1, {j.value.member_id: b"a"}, instance="i-1")
    again = h.join("g", instance="i-1", skip=True)
    assert again.value.skip_assignment and again.value.leader_id == again.value.member_id
    assert [m[0] for m in again.value.members] == [again.value.member_id]


def test_static_member_outlives_a_rebalance_it_misses_but_not_its_session() -> None:
    h = Harness()
    js = h.join("g", instance="i-1")
    m2, jd = h.join_new("g")
    h.advance()
    static_id, generation = js.value.member_id, js.value.generation_id
    for member_id, instance in ((m2, None), (static_id, "i-1")):
        h.sync("g", member_id, generation, {static_id: b"s", m2: b"d"}, instance=instance)
    assert h.state() is GroupState.STABLE
    assert h.join("g", m2).value.generation_id == generation, "a follower rejoining unchanged just gets the generation"
    rejoin = h.join("g", m2, protocols=[("range", subscription("t", "u"))])
    assert not rejoin.done, "a changed subscription starts a rebalance"
    # The static member heartbeats through the rebalance without rejoining: unlike a dynamic member it
    # is kept in the next generation (it may be restarting and come back under its instance id).
    h.keep_alive(REBALANCE, ("g", static_id, generation), ("g", m2, generation))
    assert rejoin.done and rejoin.value.generation_id == generation + 1
    assert rejoin.value.leader_id == m2
    assert {m[0] for m in rejoin.value.members} == {static_id, m2}
    assert h.heartbeat("g", static_id, generation, instance="i-1") == E.ILLEGAL_GENERATION
    h.sync("g", m2, generation + 1, {m2: b"d", static_id: b"s"})
    h.keep_alive(SESSION, ("g", m2, generation + 1))
    assert static_id not in h.coordinator.groups["g"].members, "its session ended"


def test_group_max_size() -> None:
    h = Harness(max_size=1)
    h.join_new("g")
    h.advance()
    assert h.join("g").value.error == E.GROUP_MAX_SIZE_REACHED


def test_invalid_session_timeout_and_group_id() -> None:
    h = Harness()
    assert h.join("g", session=1000).value.error == E.INVALID_SESSION_TIMEOUT
    assert h.join("").value.error == E.INVALID_GROUP_ID
    assert h.join("g", "made-up-id").value.error == E.UNKNOWN_MEMBER_ID


def test_leave_group_batched_and_by_instance_id() -> None:
    h = Harness()
    m1, m2, generation = h.stable_pair()
    error, results = h.coordinator.leave_group("g", [LeavingMember(m2), LeavingMember("ghost")])
    assert error == E.NONE and [e for _, e in results] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert h.state() is GroupState.PREPARING_REBALANCE
    rejoin = h.join("g", m1)
    assert rejoin.value.generation_id == generation + 1

    h.join("s", instance="i-9")
    h.advance()
    assert h.state("s") is GroupState.COMPLETING_REBALANCE
    error, results = h.coordinator.leave_group("s", [LeavingMember("", "i-9")])
    assert [e for _, e in results] == [E.NONE]
    # Kafka's removeMemberAndUpdateGroup: the rebalance it starts completes at once with no member left.
    assert h.state("s") is GroupState.EMPTY
    assert h.coordinator.leave_group("nope", [LeavingMember("x")])[1][0][1] == E.UNKNOWN_MEMBER_ID


def test_last_member_leaving_empties_the_group_and_persists_it() -> None:
    h = Harness()
    m1, j1 = h.join_new("g")
    h.advance()
    h.sync("g", m1, 1, {m1: b"x"})
    h.coordinator.leave_group("g", [LeavingMember(m1)])
    h.advance()
    assert h.state() is GroupState.EMPTY
    assert h.coordinator.groups["g"].generation_id == 2


def test_offsets_commit_fetch_and_metadata_round_trip() -> None:
    h = Harness()
    m1, m2, generation = h.stable_pair()
    offsets = {("t", 0): OffsetAndMetadata(42, 3, "checkpoint:α", h.clock.now), ("t", 1): OffsetAndMetadata(7, -1, "", h.clock.now)}
    assert h.coordinator.commit_offsets("g", m1, None, generation, offsets).value == {("t", 0): E.NONE, ("t", 1): E.NONE}
    error, fetched = h.coordinator.fetch_offsets("g", False, [("t", 0), ("t", 1), ("t", 2)])
    assert error == E.NONE
    assert (fetched[("t", 0)].offset, fetched[("t", 0)].leader_epoch, fetched[("t", 0)].metadata) == (42, 3, "checkpoint:α")
    assert (fetched[("t", 2)].offset, fetched[("t", 2)].metadata) == (-1, "")
    assert set(h.coordinator.fetch_offsets("g", False, None)[1]) == {("t", 0), ("t", 1)}
    # Who may commit:
    assert h.coordinator.commit_offsets("g", m1, None, generation - 1, offsets).value[("t", 0)] == E.ILLEGAL_GENERATION
    assert h.coordinator.commit_offsets("g", "", None, -1, offsets).value[("t", 0)] == E.UNKNOWN_MEMBER_ID
    assert h.coordinator.commit_offsets("other", "x", None, 5, offsets).value[("t", 0)] == E.ILLEGAL_GENERATION
    too_large = {("t", 0): OffsetAndMetadata(1, -1, "x" * 4097, 0), ("t", 1): OffsetAndMetadata(9, -1, "", 0)}
    assert h.coordinator.commit_offsets("g", m1, None, generation, too_large).value == {("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.NONE}


def test_simple_group_commits_without_membership() -> None:
    h = Harness()
    result = h.coordinator.commit_offsets("solo", "", None, -1, {("t", 0): OffsetAndMetadata(5, -1, "m", 0)})
    assert result.value == {("t", 0): E.NONE}
    assert h.state("solo") is GroupState.EMPTY
    assert h.coordinator.describe_group("solo")[1].state == "Empty"


def test_commit_during_completing_rebalance_is_refused() -> None:
    h = Harness()
    m1, j1 = h.join_new("g")
    h.advance()
    assert h.state() is GroupState.COMPLETING_REBALANCE
    result = h.coordinator.commit_offsets("g", m1, None, 1, {("t", 0): OffsetAndMetadata(1)})
    assert result.value[("t", 0)] == E.REBALANCE_IN_PROGRESS


def test_commits_wait_for_the_offsets_log_and_unstable_offsets_are_reported() -> None:
    h = Harness()
    h.log.hold = True
    pending = h.coordinator.commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(10)})
    assert not pending.done
    assert h.coordinator.fetch_offsets("g", True, [("t", 0)])[1][("t", 0)].error == E.UNSTABLE_OFFSET_COMMIT
    assert h.coordinator.fetch_offsets("g", False, [("t", 0)])[1][("t", 0)].offset == -1
    h.log.release()
    assert pending.value == {("t", 0): E.NONE}
    assert h.coordinator.fetch_offsets("g", True, [("t", 0)])[1][("t", 0)].offset == 10

    failed = h.coordinator.commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(11)})
    h.log.release(E.NOT_ENOUGH_REPLICAS)
    assert failed.value == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert h.coordinator.fetch_offsets("g", True, [("t", 0)])[1][("t", 0)].offset == 10


def test_sync_waits_for_the_group_record_and_a_failed_write_makes_members_rejoin() -> None:
    h = Harness()
    m1, j1 = h.join_new("g")
    h.advance()
    h.log.hold = True
    sync = h.sync("g", m1, 1, {m1: b"x"})
    assert not sync.done and h.state() is GroupState.COMPLETING_REBALANCE
    h.log.release(E.REQUEST_TIMED_OUT)
    assert sync.value.error == E.REBALANCE_IN_PROGRESS
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_groups_and_offsets_reload_from_the_offsets_log() -> None:
    h = Harness()
    m1, m2, generation = h.stable_pair()
    h.coordinator.commit_offsets("g", m1, None, generation, {("t", 0): OffsetAndMetadata(42, 1, "meta", 5)})
    h.coordinator.commit_offsets("solo", "", None, -1, {("u", 3): OffsetAndMetadata(8, -1, "", 5)})
    h.coordinator.commit_offsets("gone", "", None, -1, {("u", 0): OffsetAndMetadata(1)})
    assert h.coordinator.delete_groups(["gone"]) == {"gone": E.NONE}

    reloaded = Harness(log=h.log, clock=h.clock)
    c = reloaded.coordinator
    group = c.groups["g"]
    assert (group.state, group.generation_id, group.leader_id, group.protocol_name) == (GroupState.STABLE, generation, m1, "range")
    assert {m: group.members[m].assignment for m in group.members} == {m1: b"a1", m2: b"a2"}
    assert c.fetch_offsets("g", False, [("t", 0)])[1][("t", 0)] == c.fetch_offsets("g", False, None)[1][("t", 0)]
    assert c.fetch_offsets("g", False, [("t", 0)])[1][("t", 0)].metadata == "meta"
    assert c.fetch_offsets("solo", False, None)[1][("u", 3)].offset == 8
    assert "gone" not in c.groups
    # Members of the reloaded generation carry on, and expire like any other if they are gone.
    reloaded.keep_alive(SESSION, ("g", m1, generation))
    assert reloaded.state() is GroupState.PREPARING_REBALANCE
    assert list(reloaded.coordinator.groups["g"].members) == [m1]


def test_records_follow_kafkas_schemas() -> None:
    h = Harness()
    h.coordinator.commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(42, 1, "meta", 5)})
    (offset, key, value), = h.log.partitions[partition_for("g", PARTITIONS)]
    assert key == struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    assert value == struct.pack(">hqi", 3, 42, 1) + struct.pack(">h", 4) + b"meta" + struct.pack(">q", 5)


def test_delete_groups() -> None:
    h = Harness()
    m1, m2, generation = h.stable_pair()
    h.coordinator.commit_offsets("solo", "", None, -1, {("t", 0): OffsetAndMetadata(1)})
    assert h.coordinator.delete_groups(["g", "solo", "missing"]) == {"g": E.NON_EMPTY_GROUP, "solo": E.NONE, "missing": E.GROUP_ID_NOT_FOUND}
    assert "solo" not in h.coordinator.groups
    assert h.coordinator.fetch_offsets("solo", False, [("t", 0)])[1][("t", 0)].offset == -1
    written = h.log.partitions[partition_for("solo", PARTITIONS)]
    assert [(type(read_key(k)).__name__, v) for _, k, v in written[-1:]] == [("OffsetKey", None)], "a tombstone for the offset; no group record existed"


def test_offset_delete_respects_subscriptions() -> None:
    h = Harness()
    m1, j1 = h.join_new("g", protocols=[("range", subscription("t"))])
    h.advance()
    h.sync("g", m1, 1, {m1: b""})
    offsets = {("t", 0): OffsetAndMetadata(1), ("u", 0): OffsetAndMetadata(2)}
    h.coordinator.commit_offsets("g", m1, None, 1, offsets)
    error, errors = h.coordinator.delete_offsets("g", [("t", 0), ("u", 0)])
    assert (error, errors) == (E.NONE, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE})
    assert set(h.coordinator.fetch_offsets("g", False, None)[1]) == {("t", 0)}
    assert h.coordinator.delete_offsets("missing", [("t", 0)]) == (E.GROUP_ID_NOT_FOUND, {})


def test_offsets_of_an_empty_group_expire_after_retention_then_the_group_goes() -> None:
    h = Harness(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    m1, j1 = h.join_new("g")
    h.advance()
    h.sync("g", m1, 1, {m1: b""})
    h.coordinator.commit_offsets("g", m1, None, 1, {("t", 0): OffsetAndMetadata(5, -1, "", h.clock.now)})
    h.keep_alive(100_000, ("g", m1, 1))
    assert h.coordinator.fetch_offsets("g", False, [("t", 0)])[1][("t", 0)].offset == 5, "a Stable group subscribed to t keeps it"
    h.coordinator.leave_group("g", [LeavingMember(m1)])
    h.advance()
    assert h.state() is GroupState.EMPTY
    h.advance(50_000)
    assert "g" in h.coordinator.groups
    h.advance(20_000)
    assert "g" not in h.coordinator.groups


def test_list_and_describe_groups() -> None:
    h = Harness()
    m1, m2, generation = h.stable_pair("a")
    h.coordinator.commit_offsets("b", "", None, -1, {("t", 0): OffsetAndMetadata(1)})
    error, groups = h.coordinator.list_groups([], [])
    assert error == E.NONE and {(g.group_id, g.state) for g in groups} == {("a", "Stable"), ("b", "Empty")}
    assert [g.group_id for g in h.coordinator.list_groups(["stable"], [])[1]] == ["a"]
    assert h.coordinator.list_groups([], ["consumer"])[1] == []
    assert len(h.coordinator.list_groups([], ["Classic"])[1]) == 2
    error, summary = h.coordinator.describe_group("a")
    assert (summary.state, summary.protocol_type, summary.protocol) == ("Stable", "consumer", "range")
    assert {m.member_id: m.assignment for m in summary.members} == {m1: b"a1", m2: b"a2"}
    assert h.coordinator.describe_group("nope") == (E.NONE, h.coordinator.describe_group("nope")[1])
    assert h.coordinator.describe_group("nope")[1].state == "Dead"


def test_not_coordinator_for_partitions_this_broker_does_not_lead() -> None:
    h = Harness()
    h.runtime.unload(partition_for("g", PARTITIONS))
    assert h.join("g").value.error == E.NOT_COORDINATOR
    assert h.coordinator.fetch_offsets("g", False, None)[0] == E.NOT_COORDINATOR


def test_many_groups_rebalance_independently() -> None:
    h = Harness()
    members = {}
    for i in range(40):
        group = f"group-{i}"
        members[group] = [h.join_new(group) for _ in range(1 + i % 3)]
    h.advance()
    for group, joined in members.items():
        generations = {j.value.generation_id for _, j in joined}
        assert generations == {1}, group
        leaders = {j.value.leader_id for _, j in joined}
        assert len(leaders) == 1 and leaders <= {m for m, _ in joined}
        leader_view = [j.value.members for _, j in joined if j.value.members]
        assert len(leader_view) == 1 and {m[0] for m in leader_view[0]} == {m for m, _ in joined}


def offset_of(h: Harness, group: str, tp=("t", 0), *, stable: bool = False):
    error, offsets = h.coordinator.fetch_offsets(group, stable, [tp])
    assert error == E.NONE
    return offsets[tp].error if offsets[tp].error != E.NONE else offsets[tp].offset


def test_transactional_offsets_count_once_their_transaction_commits() -> None:
    h = Harness()
    answer = h.coordinator.commit_transactional_offsets("g", 7, 0, "", None, -1, {("t", 0): OffsetAndMetadata(5)})
    assert answer.value == {("t", 0): E.NONE}
    batch = h.log.loaded_batches[partition_for("g", PARTITIONS)][-1]
    assert (batch.producer_id, batch.producer_epoch, batch.is_transactional) == (7, 0, True)
    assert offset_of(h, "g") == -1, "not visible before the commit marker"
    assert offset_of(h, "g", stable=True) == E.UNSTABLE_OFFSET_COMMIT
    h.end_transaction("g", 7, commit=True)
    assert offset_of(h, "g") == 5 and offset_of(h, "g", stable=True) == 5

    h.coordinator.commit_transactional_offsets("g", 8, 0, "", None, -1, {("t", 0): OffsetAndMetadata(9)})
    h.end_transaction("g", 8, commit=False)
    assert offset_of(h, "g", stable=True) == 5, "an aborted transaction's offsets are dropped"


def test_a_transactional_commit_older_than_the_cached_offset_does_not_replace_it() -> None:
    h = Harness()
    h.coordinator.commit_transactional_offsets("g", 9, 0, "", None, -1, {("t", 0): OffsetAndMetadata(100)})
    h.coordinator.commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(6)})
    h.end_transaction("g", 9, commit=True)
    assert offset_of(h, "g") == 6, "the plain commit's record is later in the log"


def test_a_failed_transactional_append_is_answered_and_leaves_nothing_pending() -> None:
    h = Harness()
    h.log.hold = True
    answer = h.coordinator.commit_transactional_offsets("g", 7, 0, "", None, -1, {("t", 0): OffsetAndMetadata(5)})
    assert not answer.done and offset_of(h, "g", stable=True) == E.UNSTABLE_OFFSET_COMMIT
    h.log.release(E.NOT_LEADER_OR_FOLLOWER)
    assert answer.value == {("t", 0): E.NOT_COORDINATOR}
    assert offset_of(h, "g", stable=True) == -1


def test_transactional_commits_need_no_member_of_a_group_with_members_unless_they_name_one() -> None:
    h = Harness()
    m1, m2, generation = h.stable_pair()
    offsets = {("t", 0): OffsetAndMetadata(3)}
    assert h.coordinator.commit_offsets("g", "", None, -1, offsets).value == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.coordinator.commit_transactional_offsets("g", 7, 0, "", None, -1, offsets).value == {("t", 0): E.NONE}
    assert h.coordinator.commit_transactional_offsets("g", 7, 0, m1, None, generation + 1, offsets).value == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.coordinator.commit_transactional_offsets("g", 7, 0, "ghost", None, generation, offsets).value == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.coordinator.commit_transactional_offsets("", 7, 0, "", None, -1, offsets).value == {("t", 0): E.INVALID_GROUP_ID}


def test_transactional_offsets_reload_with_their_markers() -> None:
    h = Harness()
    h.coordinator.commit_transactional_offsets("done", 1, 0, "", None, -1, {("t", 0): OffsetAndMetadata(10)})
    h.end_transaction("done", 1, commit=True)
    h.coordinator.commit_transactional_offsets("aborted", 2, 0, "", None, -1, {("t", 0): OffsetAndMetadata(20)})
    h.end_transaction("aborted", 2, commit=False)
    h.coordinator.commit_transactional_offsets("open", 3, 0, "", None, -1, {("t", 0): OffsetAndMetadata(30)})

    reloaded = Harness(log=h.log, clock=h.clock)
    assert offset_of(reloaded, "done", stable=True) == 10
    assert "aborted" not in reloaded.coordinator.groups
    assert reloaded.coordinator.groups["open"].state is GroupState.EMPTY, "a group with only pending offsets loads"
    assert offset_of(reloaded, "open", stable=True) == E.UNSTABLE_OFFSET_COMMIT
    reloaded.end_transaction("open", 3, commit=True)
    assert offset_of(reloaded, "open", stable=True) == 30
