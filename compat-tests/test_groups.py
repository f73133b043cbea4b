"""Consumer groups: what the range and roundrobin assignors hand out through JoinGroup/SyncGroup, the
rebalance when a member leaves, committed offsets, DescribeGroups, and DeleteGroups."""

from __future__ import annotations

import time
from typing import Callable

import pytest

from compat_client import Client, GroupMember, MemberConfig, Record, TopicSpec
from compat_member_process import MemberProcess
from compat_observe import unique, within
from compat_targets import Target

REBALANCE_TIMEOUT_S = 20
SESSION_TIMEOUT_S = 6  # what the members ask for; a leave must rebalance well before it expires


def _covers(members: list[GroupMember], partitions: set[tuple[str, int]]) -> bool:
    assigned = [m.assignment() for m in members]
    return all(assigned) and set().union(*assigned) == partitions and sum(map(len, assigned)) == len(partitions)


def _wait_balanced(members: list[GroupMember], partitions: set[tuple[str, int]]) -> bool:
    deadline = time.monotonic() + REBALANCE_TIMEOUT_S
    while not _covers(members, partitions):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _when_stable(client: Client, group: str) -> dict:
    """DescribeGroups once the group is Stable: kafka-python joins a second time right after its first
    assignment (its metadata snapshot was empty when it joined), on any broker."""
    deadline = time.monotonic() + REBALANCE_TIMEOUT_S
    while True:
        described = client.describe_group(group)
        if described.get("state") == "Stable" or time.monotonic() > deadline:
            return described
        time.sleep(0.1)


def assignment_scenario(assignor: str) -> Callable[[Target, Client], dict]:
    def group_assignment(target: Target, client: Client) -> dict:
        """Two members share topics A (3 partitions) and B (2); one leaves and the other takes all."""
        a, b = unique("assign-a"), unique("assign-b")
        client.create_topics([TopicSpec(a, partitions=3), TopicSpec(b, partitions=2)])
        client.wait_for_topic(a, 3)
        client.wait_for_topic(b, 2)
        every = {(a, p) for p in range(3)} | {(b, p) for p in range(2)}
        label = {a: "A", b: "B"}
        group = unique(f"group-{assignor}")
        first = client.group_member(group, [a, b], MemberConfig(assignor, "member-1"))
        second = client.group_member(group, [a, b], MemberConfig(assignor, "member-2"))
        try:
            balanced = _wait_balanced([first, second], every)
            shares = sorted(sorted(f"{label[t]}{p}" for t, p in m.assignment()) for m in (first, second))
            described = _when_stable(client, group)
            second.close()
            left_at = time.monotonic()
            after = first.wait_for(lambda current: current == every, REBALANCE_TIMEOUT_S)
            rebalanced_s = time.monotonic() - left_at
        finally:
            first.close()
        return {
            "balanced": balanced,
            "shares": shares,
            "protocol": described.get("protocol"),
            "after_leave": sorted(f"{label[t]}{p}" for t, p in after),
            "rebalanced_before_session_timeout": rebalanced_s < SESSION_TIMEOUT_S,
        }

    return group_assignment


@pytest.mark.parametrize(
    "assignor, shares",
    [
        # members in member-id order; range: each topic's partitions in contiguous runs, the first member
        # of each topic taking the extra one
        ("range", [["A0", "A1", "B0"], ["A2", "B1"]]),
        # roundrobin: all partitions, topic by topic, dealt to the members in turn
        ("roundrobin", [["A0", "A2", "B1"], ["A1", "B0"]]),
    ],
)
def test_group_assignment(compat, assignor, shares):
    compat.check(
        assignment_scenario(assignor),
        {"balanced": True, "shares": sorted(shares), "protocol": assignor, "after_leave": ["A0", "A1", "A2", "B0", "B1"], "rebalanced_before_session_timeout": True},
    )


def group_lifecycle(target: Target, client: Client) -> dict:
    """Commit, describe, and delete a group: refused while it has a member, done once it is empty."""
    topic = client.new_topic("lifecycle", partitions=2)
    client.produce(topic, [Record(b"0"), Record(b"1"), Record(b"2"), Record(b"3", partition=1)])
    group = unique("group-lifecycle")
    partitions = [(topic, 0), (topic, 1)]

    def offsets() -> list[int]:
        found = client.group_offsets(group, partitions)
        return [found.get(f"{topic}:{p}", "absent") for _, p in partitions]

    member = client.group_member(group, [topic], MemberConfig("range", "lifecycle-member"))
    try:
        joined = member.wait_for(lambda current: len(current) == 2, REBALANCE_TIMEOUT_S) == set(partitions)
        before_commit = offsets()
        member.commit({(topic, 0): 2, (topic, 1): 1})
        committed = offsets()
        stable = _when_stable(client, group)
        delete_while_member = client.delete_groups([group])[group]
    finally:
        member.close()
    empty = client.describe_group(group)
    offsets_kept = offsets()
    deleted = client.delete_groups([group])[group]
    return {
        "joined": joined,
        "before_commit": before_commit,
        "committed": committed,
        "stable": {**stable, "members": [{**m, "assignment": [[t == topic, p] for t, p in m["assignment"]]} for m in stable.get("members", [])]},
        "delete_while_member": delete_while_member,
        "empty": empty,
        "offsets_after_leave": offsets_kept,
        "delete_empty": deleted,
        "after_delete": client.describe_group(group),
        "delete_again": client.delete_groups([group])[group],
        "offsets_after_delete": offsets(),
    }


def test_group_lifecycle(compat):
    compat.check(group_lifecycle, EXPECTED_LIFECYCLE)


EXPECTED_LIFECYCLE = {
    "joined": True,
    "before_commit": [-1, -1],
    "committed": [2, 1],
    "stable": {
        "error": "NONE",
        "state": "Stable",
        "protocol_type": "consumer",
        "protocol": "range",
        "members": [{"client_id": "lifecycle-member", "client_host": "/127.0.0.1", "assignment": [[True, 0], [True, 1]]}],
    },
    "delete_while_member": "NON_EMPTY_GROUP",
    "empty": {"error": "NONE", "state": "Empty", "protocol_type": "consumer", "protocol": "", "members": []},
    "offsets_after_leave": [2, 1],
    "delete_empty": "NONE",
    # DescribeGroups of a group that does not exist (any more) is no error: the group is "Dead"
    "after_delete": {"error": "NONE", "state": "Dead", "protocol_type": "", "protocol": "", "members": []},
    "delete_again": "GROUP_ID_NOT_FOUND",
    "offsets_after_delete": [-1, -1],
}


def member_crash(target: Target, client: Client) -> dict:
    """Three members share six partitions; one process is killed (no LeaveGroup): the coordinator notices
    only when its session times out, and then the other two take its partitions."""
    topic = client.new_topic("crash", partitions=6)
    every = {(topic, p) for p in range(6)}
    group = unique("group-crash")
    survivors = [client.group_member(group, [topic], MemberConfig(client_id=f"survivor-{n}")) for n in (1, 2)]
    doomed = MemberProcess(client.name, target.bootstrap, group, [topic], MemberConfig(client_id="doomed"))
    try:
        balanced = _wait_balanced([*survivors, doomed], every)
        share_sizes = sorted(len(m.assignment()) for m in (*survivors, doomed))
        doomed.kill()
        killed_at = time.monotonic()
        taken_over = _wait_balanced(survivors, every)
        took_s = time.monotonic() - killed_at
    finally:
        doomed.kill()
        for member in survivors:
            member.close()
    return {
        "balanced": balanced,
        "share_sizes": share_sizes,
        "survivors_took_all": taken_over,
        # not before the session timeout (the last heartbeat was at most one interval before the kill)
        "took_over_after_session_timeout": within(took_s, SESSION_TIMEOUT_S - 0.5, SESSION_TIMEOUT_S + REBALANCE_TIMEOUT_S),
    }


def test_member_crash(compat):
    compat.check(member_crash, {"balanced": True, "share_sizes": [2, 2, 2], "survivors_took_all": True, "took_over_after_session_timeout": "within"})


def static_rejoin(target: Target, client: Client) -> dict:
    """KIP-345: a static member (group.instance.id) whose process dies and comes back within the session
    timeout gets its partitions back without a rebalance: the other member's assignment never changes."""
    topic = client.new_topic("static", partitions=4)
    every = {(topic, p) for p in range(4)}
    group = unique("group-static")
    static = MemberConfig(client_id="static-a", instance_id="instance-a")
    other = client.group_member(group, [topic], MemberConfig(client_id="static-b", instance_id="instance-b"))
    first = MemberProcess(client.name, target.bootstrap, group, [topic], static)
    second: MemberProcess | None = None
    try:
        balanced = _wait_balanced([other, first], every)
        held, other_held = first.assignment(), other.assignment()
        other_changes_before = len(other.assignments)
        first.kill()
        killed_at = time.monotonic()
        second = MemberProcess(client.name, target.bootstrap, group, [topic], static)
        back = second.wait_for(lambda current: bool(current), REBALANCE_TIMEOUT_S)
        back_s = time.monotonic() - killed_at
        time.sleep(1)  # a rebalance, had there been one, would show in the other member by now
        other_after = other.assignments[other_changes_before - 1 :]
        described = client.describe_group(group)
    finally:
        first.kill()
        if second is not None:
            second.kill()
        other.close()
    return {
        "balanced": balanced,
        "rejoined_with_its_partitions": back == held,
        "rejoined_before_session_timeout": back_s < SESSION_TIMEOUT_S,
        "other_member_assignments_since": [len(a) for a in other_after],
        "other_member_kept_its_partitions": other_after == [other_held],
        "state": described.get("state"),
        "members": sorted(m["client_id"] for m in described.get("members", [])),
    }


def test_static_rejoin(compat):
    compat.check(
        static_rejoin,
        {
            "balanced": True,
            "rejoined_with_its_partitions": True,
            "rejoined_before_session_timeout": True,
            "other_member_assignments_since": [2],
            "other_member_kept_its_partitions": True,
            "state": "Stable",
            "members": ["static-a", "static-b"],
        },
    )
