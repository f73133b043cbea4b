"""Transactions with each client's transactional producer: three transactions on one partition, the second
aborted. A read_committed consumer reads the committed records only, at the offsets Kafka gave them (each
transaction's COMMIT or ABORT marker takes an offset of its own); a read_uncommitted consumer reads the
aborted record too, and neither sees a marker."""

from __future__ import annotations

from compat_client import Client, Record
from compat_observe import unique
from compat_targets import Target

TRANSACTIONS = [([Record(b"a"), Record(b"b")], True), ([Record(b"aborted")], False), ([Record(b"c")], True)]


def offsets_and_values(seen: list[dict]) -> list[list]:
    return [[r["offset"], r["value"]] for r in seen]


def commit_and_abort(target: Target, client: Client) -> dict:
    topic = client.new_topic("transactions")
    outcomes = client.transactions(topic, unique("transactional-id"), TRANSACTIONS)
    committed, committed_error = client.read(topic, 0, 0, 3, isolation="read_committed")
    everything, error = client.read(topic, 0, 0, 4)
    return {
        "outcomes": outcomes,
        "read_committed": offsets_and_values(committed),
        "read_committed_error": committed_error,
        "read_uncommitted": offsets_and_values(everything),
        "read_uncommitted_error": error,
    }


def test_commit_and_abort(compat):
    compat.check(
        commit_and_abort,
        {
            "outcomes": ["NONE", "NONE", "NONE"],
            # a=0 b=1 COMMIT=2, aborted=3 ABORT=4, c=5 COMMIT=6
            "read_committed": [[0, "a"], [1, "b"], [5, "c"]],
            "read_committed_error": None,
            "read_uncommitted": [[0, "a"], [1, "b"], [3, "aborted"], [5, "c"]],
            "read_uncommitted_error": None,
        },
    )
