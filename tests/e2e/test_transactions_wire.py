"""The transaction APIs on the wire, at versions no client library lets a test choose: InitProducerId,
AddPartitionsToTxn (v3 and the v4+ batched, verify-only form), EndTxn, DescribeTransactions and
ListTransactions, and a transactional Produce checked against the transaction coordinator (KIP-890):
a partition not added to the transaction is refused (INVALID_TXN_STATE; TRANSACTION_ABORTABLE from
Produce v11), one that was is appended."""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch

E = ErrorCode
TXN_KEY_TYPE = 1


def find_transaction_coordinator(conn: Any, transactional_id: str) -> None:
    """Ask until the coordinator is there (the first lookup creates __transaction_state)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = conn.call(ApiKey.FindCoordinator, 3, {"key": transactional_id, "key_type": TXN_KEY_TYPE})
        if r.error_code == E.NONE:
            return
        assert r.error_code == E.COORDINATOR_NOT_AVAILABLE, r
        time.sleep(0.1)
    raise AssertionError("no transaction coordinator within 30 s")


def init(conn: Any, transactional_id: str, version: int = 4, timeout_ms: int = 60_000) -> Any:
    deadline = time.monotonic() + 30
    while True:
        r = conn.call(ApiKey.InitProducerId, version, {"transactional_id": transactional_id, "transaction_timeout_ms": timeout_ms, "producer_id": -1, "producer_epoch": -1})
        if r.error_code != E.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            return r
        time.sleep(0.1)


def produce(conn: Any, version: int, transactional_id: str, topic: str, producer_id: int, epoch: int, sequence: int) -> int:
    batch = build_batch([Record(value=b"v")], producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence, is_transactional=True)
    r = conn.call(ApiKey.Produce, version, {"transactional_id": transactional_id, "acks": -1, "timeout_ms": 10_000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return r.responses[0].partition_responses[0].error_code


def test_transaction_apis_and_produce_verification(wire: Callable[[], Any], new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    conn = wire()
    tid = f"wire-{uuid.uuid4().hex[:8]}"
    find_transaction_coordinator(conn, tid)
    assert init(conn, tid, timeout_ms=2**31 - 1).error_code == E.INVALID_TRANSACTION_TIMEOUT
    first = init(conn, tid)
    assert (first.error_code, first.producer_epoch) == (E.NONE, 0)
    pid = first.producer_id

    # Not added to the transaction: refused before anything is written.
    assert produce(conn, 9, tid, topic, pid, 0, 0) == E.INVALID_TXN_STATE
    assert produce(conn, 11, tid, topic, pid, 0, 0) == E.TRANSACTION_ABORTABLE

    add = {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": topic, "partitions": [0]}]}
    r = conn.call(ApiKey.AddPartitionsToTxn, 3, add)
    assert [(t.name, [(p.partition_index, p.partition_error_code) for p in t.results_by_partition]) for t in r.results_by_topic_v3_and_below] == [(topic, [(0, E.NONE)])]
    assert produce(conn, 9, tid, topic, pid, 0, 0) == E.NONE

    # A leader's batched verification (v4+): the partition is in the first transaction; in the second an
    # unknown topic fails the whole transaction.
    verify = {"transactions": [
        {"transactional_id": tid, "producer_id": pid, "producer_epoch": 0, "verify_only": True, "topics": [{"name": topic, "partitions": [0]}]},
        {"transactional_id": f"{tid}-other", "producer_id": pid, "producer_epoch": 0, "verify_only": True, "topics": [{"name": topic, "partitions": [0]}, {"name": f"{topic}-none", "partitions": [0]}]},
    ]}
    r = conn.call(ApiKey.AddPartitionsToTxn, 4, verify)
    results = [sorted((t.name, p.partition_index, p.partition_error_code) for t in x.topic_results for p in t.results_by_partition) for x in r.results_by_transaction]
    assert results == [[(topic, 0, E.NONE)], [(topic, 0, E.OPERATION_NOT_ATTEMPTED), (f"{topic}-none", 0, E.UNKNOWN_TOPIC_OR_PARTITION)]]

    d = conn.call(ApiKey.DescribeTransactions, 0, {"transactional_ids": [tid, f"{tid}-none"]})
    ours, missing = d.transaction_states
    assert (ours.error_code, ours.transaction_state, ours.producer_id, [(t.topic, list(t.partitions)) for t in ours.topics]) == (E.NONE, "Ongoing", pid, [(topic, [0])])
    assert missing.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    listed = conn.call(ApiKey.ListTransactions, 1, {"state_filters": ["Ongoing", "Sleeping"], "producer_id_filters": [pid], "duration_filter": -1})
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [(tid, "Ongoing")]
    assert list(listed.unknown_state_filters) == ["Sleeping"]

    # A stale epoch is fenced: INVALID_PRODUCER_EPOCH before v2, PRODUCER_FENCED after.
    assert conn.call(ApiKey.EndTxn, 1, {"transactional_id": tid, "producer_id": pid, "producer_epoch": 7, "committed": True}).error_code == E.INVALID_PRODUCER_EPOCH
    assert conn.call(ApiKey.EndTxn, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": 7, "committed": True}).error_code == E.PRODUCER_FENCED
    assert conn.call(ApiKey.EndTxn, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": 0, "committed": True}).error_code == E.NONE
