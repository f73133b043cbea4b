"""What survives a broker restart: an idempotent producer's sequence and a group's committed offsets.

These scenarios restart their broker (``target.restart()``: a clean shutdown, then a start on the same
address and log directory), so they run against brokers of their own (``restart_compat``): a subprocess
odradek, and a Kafka broker under a ZooKeeper chroot of its own; the shared targets are left untouched.
"""

from __future__ import annotations

from contextlib import closing

from compat_client import Client, Record
from compat_observe import unique
from compat_targets import Target

AFTER_RESTART_TIMEOUT_S = 60


def _restart(target: Target, client: Client, topic: str) -> dict:
    """Restart the broker and wait, as a user would, until its partition is led again."""
    assert target.restart is not None, "restart scenarios need a restartable target"
    target.restart()
    seen = client.wait_for_topic(topic, 1, timeout_s=AFTER_RESTART_TIMEOUT_S)
    return {"error": seen["error"], "leader": seen.get("partitions", {}).get(0, {}).get("leader")}


def across_restart(target: Target, client: Client) -> dict:
    """What survives one restart of the broker:

    - an idempotent producer sending before and after it: its producer id and sequence numbers carry on
      (the broker restores its producer state), so nothing is refused, lost or duplicated;
    - a group's committed offsets: stored in __consumer_offsets and loaded again, so the next member of
      the group resumes where the last one committed.
    """
    topic = client.new_topic("restart")
    group = unique("group-restart")
    with closing(client.producer(idempotent=True)) as producer:
        before = producer.send(topic, [Record(b"%d" % n) for n in range(3)])
        with closing(client.group_member(group, [topic])) as first:
            consumed = first.wait_for_records(3, AFTER_RESTART_TIMEOUT_S)
            first.commit({(topic, 0): 2})
        restarted = _restart(target, client, topic)
        after = producer.send(topic, [Record(b"%d" % n) for n in range(3, 5)])
    # the member before asking for offsets: consumers wait while the coordinator loads the group
    # (COORDINATOR_LOAD_IN_PROGRESS), where admin clients give up
    with closing(client.group_member(group, [topic])) as second:
        resumed = second.wait_for_records(3, AFTER_RESTART_TIMEOUT_S)
    seen, error = client.read(topic, 0, 0, 6, timeout_s=2)
    return {
        "produced_before": [[r["offset"], r["error"]] for r in before],
        "consumed_before": [offset for _, _, offset, _ in consumed],
        "restarted": restarted,
        "produced_after": [[r["offset"], r["error"]] for r in after],
        "resumed_from_committed": [[offset, value] for _, _, offset, value in resumed],
        "committed_after_restart": client.group_offsets(group, [(topic, 0)])[f"{topic}:0"],
        "read_back": [[r["offset"], r["value"]] for r in seen],
        "read_error": error,
    }


def test_across_restart(restart_compat):
    restart_compat.check(
        across_restart,
        {
            "produced_before": [[0, "NONE"], [1, "NONE"], [2, "NONE"]],
            "consumed_before": [0, 1, 2],
            "restarted": {"error": "NONE", "leader": 0},
            "produced_after": [[3, "NONE"], [4, "NONE"]],
            "resumed_from_committed": [[2, "2"], [3, "3"], [4, "4"]],
            "committed_after_restart": 2,
            "read_back": [[n, str(n)] for n in range(5)],
            "read_error": None,
        },
    )
