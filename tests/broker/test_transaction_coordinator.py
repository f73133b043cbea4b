"""The transaction coordinator's state machine and decisions, without sockets: its transaction log is a list
that acknowledges or fails each append as told, its marker sender records what it is asked to write."""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.runtime import AppendResult, CoordinatorRuntime, CoordinatorTopic, LoadedBatch
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.transaction.transaction_coordinator import MarkerResult, TransactionConfig, TransactionCoordinator, TxnMarkerEntry
from odradek.broker.coordinator.transaction.transaction_log import key_bytes, read_key, read_value, value_bytes
from odradek.broker.coordinator.transaction.transaction_metadata import IllegalTransitionError, TransactionMetadata, TransactionState
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import read_batch_header
from odradek.protocol.records import iter_records_unchecked

S = TransactionState


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class RecordingLog:
    """The ``__transaction_state`` partitions: every appended record is kept; ``fail_with`` makes the next
    appends fail with that error."""

    def __init__(self) -> None:
        self.records: list[tuple[int, bytes, bytes | None]] = []
        self.fail_with: ErrorCode | None = None

    def append(self, partition: int, batch: bytearray) -> Deferred[AppendResult]:
        if self.fail_with is not None:
            return Deferred.completed(AppendResult(self.fail_with))
        header = read_batch_header(batch, 0)
        self.records.extend((partition, r.key, r.value) for r in iter_records_unchecked(batch, 0, header))
        return Deferred.completed(AppendResult(ErrorCode.NONE, 0))

    def batches(self, partition: int) -> list[LoadedBatch]:
        return [LoadedBatch(0, -1, -1, False, [(k, v)]) for p, k, v in self.records if p == partition]

    def states(self, transactional_id: str) -> list[TransactionState]:
        return [read_value(transactional_id, v).state for _, k, v in self.records if read_key(k) == transactional_id and v is not None]


class HeldMarkers:
    """Marker writes stay pending until the test answers them."""

    def __init__(self) -> None:
        self.sent: list[tuple[TxnMarkerEntry, Deferred[MarkerResult]]] = []

    def send(self, entry: TxnMarkerEntry) -> Deferred[MarkerResult]:
        out: Deferred[MarkerResult] = Deferred()
        self.sent.append((entry, out))
        return out

    def answer_all(self, error: ErrorCode = ErrorCode.NONE) -> None:
        sent, self.sent = self.sent, []
        for entry, out in sent:
            out.complete(MarkerResult({tp: error for tp in entry.partitions}))


def coordinator_on(log: RecordingLog, markers: HeldMarkers, clock: Clock, first_producer_id: int, coordinator_epoch: int, transaction_version: int = 2) -> TransactionCoordinator:
    """A coordinator over one ``__transaction_state`` partition, loaded from what ``log`` holds, in a cluster
    with ``transaction.version`` finalized at ``transaction_version`` (2: a single node's)."""
    config = TransactionConfig(num_partitions=1, transaction_max_timeout_ms=60_000, transactional_id_expiration_ms=100_000)
    ids = iter(range(first_producer_id, first_producer_id + 1000))
    runtime: CoordinatorRuntime = CoordinatorRuntime(CoordinatorTopic("__transaction_state", 1, 1, {}), lambda context: coordinator.build_shard(context), log, broker_id=0, clock=clock)
    coordinator = TransactionCoordinator(config, runtime, markers, lambda: next(ids), lambda: transaction_version)
    runtime.load(0, log.batches(0), coordinator_epoch)
    return coordinator


def run_timers(coordinator: TransactionCoordinator) -> None:
    coordinator.runtime.run_due_timers()


@pytest.fixture
def env():
    clock, log, markers = Clock(), RecordingLog(), HeldMarkers()
    return coordinator_on(log, markers, clock, 1000, 5), log, markers, clock


def init(coordinator, tid="t", timeout=10_000, expected=None):
    return coordinator.init_producer_id(tid, timeout, expected).value


def test_init_gives_epoch_zero_then_bumps_and_fences_the_old_epoch(env):
    coordinator, log, _, _ = env
    first = init(coordinator)
    assert (first.error, first.producer_id, first.producer_epoch) == (ErrorCode.NONE, 1000, 0)
    second = init(coordinator)
    assert (second.producer_id, second.producer_epoch) == (1000, 1)
    assert coordinator.add_partitions("t", 1000, 0, [("a", 0)]).value == ErrorCode.PRODUCER_FENCED
    assert coordinator.end_transaction("t", 1000, 0, True).value.error == ErrorCode.PRODUCER_FENCED
    assert log.states("t") == [S.EMPTY, S.EMPTY]


def test_timeout_beyond_the_maximum_and_empty_id_are_refused(env):
    coordinator = env[0]
    assert init(coordinator, timeout=60_001).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert init(coordinator, timeout=0).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert init(coordinator, tid="").error == ErrorCode.INVALID_REQUEST


def test_kip360_retry_with_the_previous_epoch_gets_the_same_epoch_and_a_stranger_is_fenced(env):
    coordinator = env[0]
    init(coordinator)
    bumped = init(coordinator, expected=(1000, 0))
    assert bumped.producer_epoch == 1
    retried = init(coordinator, expected=(1000, 0))
    assert (retried.error, retried.producer_epoch) == (ErrorCode.NONE, 1)
    assert init(coordinator, expected=(999, 3)).error == ErrorCode.PRODUCER_FENCED


def test_commit_writes_prepare_then_markers_then_complete(env):
    coordinator, log, markers, _ = env
    init(coordinator)
    assert coordinator.add_partitions("t", 1000, 0, [("a", 0), ("a", 1)]).value == ErrorCode.NONE
    assert coordinator.add_partitions("t", 1000, 0, [("a", 0)]).value == ErrorCode.NONE  # already in: nothing written
    assert coordinator.describe("t")["transaction_state"] == "Ongoing"
    assert coordinator.end_transaction("t", 1000, 0, True).value.error == ErrorCode.NONE
    [(entry, _)] = markers.sent
    assert entry == TxnMarkerEntry(1000, 0, 5, True, frozenset({("a", 0), ("a", 1)}))
    # While the markers are out, the producer's next moves wait.
    assert coordinator.add_partitions("t", 1000, 0, [("a", 0)]).value == ErrorCode.CONCURRENT_TRANSACTIONS
    assert init(coordinator).error == ErrorCode.CONCURRENT_TRANSACTIONS
    markers.answer_all()
    assert log.states("t") == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    assert coordinator.describe("t")["transaction_state"] == "CompleteCommit"
    # A retried EndTxn of the finished commit succeeds; an abort of it is an invalid state.
    assert coordinator.end_transaction("t", 1000, 0, True).value.error == ErrorCode.NONE
    assert coordinator.end_transaction("t", 1000, 0, False).value.error == ErrorCode.INVALID_TXN_STATE


def test_retriable_marker_errors_are_retried(env):
    coordinator, log, markers, clock = env
    init(coordinator)
    coordinator.add_partitions("t", 1000, 0, [("a", 0)])
    coordinator.end_transaction("t", 1000, 0, False)
    markers.answer_all(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert markers.sent == []
    clock.now += 200
    run_timers(coordinator)
    assert len(markers.sent) == 1
    markers.answer_all()
    assert log.states("t")[-1] == S.COMPLETE_ABORT


def test_init_over_an_open_transaction_aborts_it_with_a_bumped_epoch(env):
    coordinator, log, markers, _ = env
    init(coordinator)
    coordinator.add_partitions("t", 1000, 0, [("a", 0)])
    assert init(coordinator).error == ErrorCode.CONCURRENT_TRANSACTIONS
    [(entry, _)] = markers.sent
    assert (entry.commit, entry.producer_epoch) == (False, 1)
    markers.answer_all()
    assert log.states("t")[-2:] == [S.PREPARE_ABORT, S.COMPLETE_ABORT]
    again = init(coordinator)
    assert (again.error, again.producer_epoch) == (ErrorCode.NONE, 2)
    # The zombie's commit is fenced.
    assert coordinator.end_transaction("t", 1000, 0, True).value.error == ErrorCode.PRODUCER_FENCED


def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(env):
    coordinator, log, markers, clock = env
    init(coordinator, timeout=1_000)
    coordinator.add_partitions("t", 1000, 0, [("a", 0)])
    clock.now += 20_000  # past the timeout and the abort check's interval
    run_timers(coordinator)
    markers.answer_all()
    assert log.states("t")[-1] == S.COMPLETE_ABORT
    assert coordinator.describe("t")["producer_epoch"] == 1
    assert coordinator.end_transaction("t", 1000, 0, True).value.error == ErrorCode.PRODUCER_FENCED


def test_failed_log_write_leaves_the_state_unchanged(env):
    coordinator, log, _, _ = env
    init(coordinator)
    log.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
    assert coordinator.add_partitions("t", 1000, 0, [("a", 0)]).value == ErrorCode.COORDINATOR_NOT_AVAILABLE
    log.fail_with = None
    assert coordinator.describe("t")["transaction_state"] == "Empty"
    assert coordinator.add_partitions("t", 1000, 0, [("a", 0)]).value == ErrorCode.NONE


def test_verify_only(env):
    coordinator = env[0]
    init(coordinator)
    coordinator.add_partitions("t", 1000, 0, [("a", 0)])
    assert coordinator.verify_partitions("t", 1000, 0, [("a", 0), ("a", 1)]) == {("a", 0): ErrorCode.NONE, ("a", 1): ErrorCode.TRANSACTION_ABORTABLE}
    assert coordinator.verify_partitions("t", 1000, 1, [("a", 0)]) == {("a", 0): ErrorCode.PRODUCER_FENCED}
    assert coordinator.verify_partitions("u", 1000, 0, [("a", 0)]) == {("a", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}


def test_list_filters(env):
    coordinator = env[0]
    init(coordinator, tid="t")
    init(coordinator, tid="u")
    coordinator.add_partitions("u", 1001, 0, [("a", 0)])
    listed = coordinator.list_transactions(set(), {"Ongoing", "Bogus"})
    assert [t["transactional_id"] for t in listed["transaction_states"]] == ["u"]
    assert listed["unknown_state_filters"] == ["Bogus"]
    assert [t["transactional_id"] for t in coordinator.list_transactions({1000}, set())["transaction_states"]] == ["t"]


def test_reload_resumes_a_prepared_commit_and_expiration_tombstones(env):
    coordinator, log, markers, clock = env
    init(coordinator)
    coordinator.add_partitions("t", 1000, 0, [("a", 0)])
    coordinator.end_transaction("t", 1000, 0, True)
    markers.sent.clear()  # the coordinator "crashed" before the markers were answered
    fresh = coordinator_on(log, markers, clock, 5000, 6)
    [(entry, _)] = markers.sent
    assert (entry.coordinator_epoch, entry.commit, entry.partitions) == (6, True, frozenset({("a", 0)}))
    markers.answer_all()
    assert fresh.describe("t")["transaction_state"] == "CompleteCommit"
    clock.now += 3_600_000  # past transactional.id.expiration.ms and the expiration check's interval
    run_timers(fresh)
    assert log.records[-1][2] is None
    assert fresh.describe("t")["error_code"] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_not_coordinator_for_unowned_partitions(env):
    coordinator = env[0]
    coordinator.runtime.unload(0)
    assert init(coordinator).error == ErrorCode.NOT_COORDINATOR


def test_state_machine_refuses_illegal_transitions():
    metadata = TransactionMetadata("t", 1, 0, 1000, S.EMPTY, 0)
    with pytest.raises(IllegalTransitionError):
        metadata.prepare_abort_or_commit(S.PREPARE_COMMIT, 1)
    target = metadata.prepare_add_partitions(frozenset({("a", 0)}), 1)
    with pytest.raises(IllegalTransitionError):  # one pending transition at a time
        metadata.prepare_add_partitions(frozenset({("a", 1)}), 1)
    metadata.complete_transition_to(target)
    assert (metadata.state, metadata.partitions, metadata.txn_start_timestamp) == (S.ONGOING, {("a", 0)}, 1)


def test_log_value_round_trip_matches_kafka_layout():
    metadata = TransactionMetadata("t", 7, 3, 60_000, S.ONGOING, 5, txn_start_timestamp=4, partitions={("b", 1), ("a", 2), ("a", 0)}, client_transaction_version=2)
    target = metadata.prepare_no_transit()
    data = value_bytes(target, 0)
    assert data[:2] == b"\x00\x00"  # value version 0 without a finalized transaction.version, as Kafka 3.9 writes it
    back = read_value("t", data)
    assert (back.producer_id, back.producer_epoch, back.state, back.partitions, back.txn_start_timestamp) == (7, 3, S.ONGOING, {("a", 0), ("a", 2), ("b", 1)}, 4)
    assert back.client_transaction_version == 0  # v0 has no room for it
    assert key_bytes("t") == b"\x00\x00\x00\x01t"


def test_log_value_v1_carries_kafka_44s_tagged_fields():
    """transaction.version >= 1 finalized: version 1, flexible, with ClientTransactionVersion (tag 2),
    PreviousProducerId (tag 0) and NextProducerId (tag 1), each left out at its default, as Kafka 4.4's
    generated writer does."""
    metadata = TransactionMetadata("t", 7, 3, 60_000, S.ONGOING, 5, txn_start_timestamp=4, partitions={("a", 0)}, last_producer_id=6, client_transaction_version=2)
    data = value_bytes(metadata.prepare_no_transit(), 2)
    expected = (
        b"\x00\x01" + (7).to_bytes(8, "big") + (3).to_bytes(2, "big") + (60_000).to_bytes(4, "big") + b"\x01"
        + b"\x02" + b"\x02a" + b"\x02" + (0).to_bytes(4, "big") + b"\x00"  # [{a, [0]}], compact, no tags
        + (5).to_bytes(8, "big") + (4).to_bytes(8, "big")
        + b"\x02" + b"\x00\x08" + (6).to_bytes(8, "big") + b"\x02\x02" + (2).to_bytes(2, "big")  # tags 0 and 2
    )
    assert data == expected
    back = read_value("t", data)
    assert (back.client_transaction_version, back.last_producer_id, back.next_producer_id, back.partitions) == (2, 6, -1, {("a", 0)})
    v1_client = TransactionMetadata("t", 7, 3, 60_000, S.EMPTY, 5)
    assert value_bytes(v1_client.prepare_no_transit(), 2).endswith(b"\x00")  # every tag at its default: none written


def test_verification_before_an_append_translates_errors_as_kafkas_leaders_do(env):
    coordinator = env[0]
    init(coordinator)
    coordinator.add_partitions("t", 1000, 0, [("a", 0)])
    assert coordinator.verify_for_append("t", 1000, 1, [("a", 0)], abortable_known=True) == {("a", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert coordinator.verify_for_append("t", 1000, 0, [("a", 1)], abortable_known=True) == {("a", 1): ErrorCode.TRANSACTION_ABORTABLE}
    assert coordinator.verify_for_append("t", 1000, 0, [("a", 1)], abortable_known=False) == {("a", 1): ErrorCode.INVALID_TXN_STATE}


def test_an_exhausted_epoch_rotates_the_producer_id(env):
    coordinator, _, _, _ = env
    init(coordinator)
    shard = coordinator.runtime.shard(0)
    shard.transactions["t"].producer_epoch = 32766  # Short.MAX_VALUE - 1: no epoch left to hand out
    rotated = init(coordinator, expected=(1000, 32766))
    assert (rotated.error, rotated.producer_id, rotated.producer_epoch) == (ErrorCode.NONE, 1001, 0)
    # A retry of that call, whose answer the client lost, is recognised by the previous id's exhausted epoch
    # and gets the same answer again.
    retried = init(coordinator, expected=(1000, 32766))
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (ErrorCode.NONE, 1001, 0)


# -- transactions v2 (KIP-890 part 2): EndTxn v5 and the leaders' implicit adds ----------------------------

TV2 = 2


def test_v2_end_bumps_the_epoch_writes_markers_with_it_and_answers_it(env):
    coordinator, log, markers, _ = env
    init(coordinator)
    assert coordinator.add_partitions("t", 1000, 0, [("a", 0)], TV2).value == ErrorCode.NONE  # a leader's implicit add
    ended = coordinator.end_transaction("t", 1000, 0, True, TV2).value
    assert (ended.error, ended.producer_id, ended.producer_epoch) == (ErrorCode.NONE, 1000, 1)
    [(entry, _)] = markers.sent
    assert entry == TxnMarkerEntry(1000, 1, 5, True, frozenset({("a", 0)}))  # the old epoch's late writes are fenced
    markers.answer_all()
    described = coordinator.describe("t")
    assert (described["transaction_state"], described["producer_epoch"]) == ("CompleteCommit", 1)
    # A retry (the answer was lost) carries the old epoch: the same answer, nothing written.
    written = len(log.records)
    retried = coordinator.end_transaction("t", 1000, 0, True, TV2).value
    assert (retried.error, retried.producer_epoch) == (ErrorCode.NONE, 1) and len(log.records) == written
    # The old epoch may not abort it, nor start anything.
    assert coordinator.end_transaction("t", 1000, 0, False, TV2).value.error == ErrorCode.INVALID_TXN_STATE
    assert coordinator.add_partitions("t", 1000, 0, [("a", 0)], TV2).value == ErrorCode.PRODUCER_FENCED
    # The next transaction goes on with epoch 1 and ends with 2.
    assert coordinator.add_partitions("t", 1000, 1, [("a", 1)], TV2).value == ErrorCode.NONE
    assert coordinator.end_transaction("t", 1000, 1, False, TV2).value.producer_epoch == 2
    assert log.states("t") == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT, S.ONGOING, S.PREPARE_ABORT]


def test_v2_abort_with_no_partition_is_accepted_and_a_commit_of_nothing_refused(env):
    coordinator, log, markers, _ = env
    init(coordinator)
    assert coordinator.end_transaction("t", 1000, 0, True, TV2).value.error == ErrorCode.INVALID_TXN_STATE
    aborted = coordinator.end_transaction("t", 1000, 0, False, TV2).value
    assert (aborted.error, aborted.producer_epoch) == (ErrorCode.NONE, 1)
    assert markers.sent == []  # no partition, no marker
    assert log.states("t") == [S.EMPTY, S.PREPARE_ABORT, S.COMPLETE_ABORT]
    assert coordinator.describe("t")["producer_epoch"] == 1


def test_v2_fence_of_an_open_transaction_bumps_once_and_the_successor_once_more(env):
    coordinator, _, markers, _ = env
    init(coordinator)
    coordinator.add_partitions("t", 1000, 0, [("a", 0)], TV2)
    assert init(coordinator).error == ErrorCode.CONCURRENT_TRANSACTIONS  # aborts the open transaction first
    [(entry, _)] = markers.sent
    assert (entry.producer_epoch, entry.commit) == (1, False)
    markers.answer_all()
    assert init(coordinator).producer_epoch == 2
    assert coordinator.end_transaction("t", 1000, 0, True, TV2).value.error == ErrorCode.PRODUCER_FENCED  # the zombie


def test_v2_the_last_epoch_moves_the_transaction_to_a_new_producer_id(env):
    coordinator, log, markers, _ = env
    init(coordinator)
    shard = coordinator.runtime.shard(0)
    shard.transactions["t"].producer_epoch = 32766  # Short.MAX_VALUE - 1: clients never get the last one
    coordinator.add_partitions("t", 1000, 32766, [("a", 0)], TV2)
    ended = coordinator.end_transaction("t", 1000, 32766, True, TV2).value
    assert ended.error == ErrorCode.NONE
    markers.answer_all()
    described = coordinator.describe("t")
    assert (described["producer_id"], described["producer_epoch"], described["transaction_state"]) == (1001, 0, "CompleteCommit")
    # The producer's retry with the id and epoch it had is recognised.
    retried = coordinator.end_transaction("t", 1000, 32766, True, TV2).value
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (ErrorCode.NONE, 1001, 0)


def test_a_reloaded_v2_transaction_times_out_on_the_v2_path(env):
    """The client's transaction version is kept in ``__transaction_state`` (v1 values): a coordinator that
    loads an open v2 transaction aborts it, when it times out, as a v2 one (Kafka 4.4's
    ``endTransaction`` with TV2: the PrepareAbort carries the client's version 2)."""
    coordinator, log, markers, clock = env
    init(coordinator, timeout=1_000)
    coordinator.add_partitions("t", 1000, 0, [("a", 0)], TV2)
    fresh = coordinator_on(log, markers, clock, 5000, 6)
    assert fresh.runtime.shard(0).transactions["t"].client_transaction_version == TV2
    clock.now += 20_000
    run_timers(fresh)
    markers.answer_all()
    written = [read_value("t", v) for _, k, v in log.records if read_key(k) == "t" and v is not None]
    assert [(m.state, m.producer_epoch, m.client_transaction_version) for m in written[-2:]] == [(S.PREPARE_ABORT, 1, TV2), (S.COMPLETE_ABORT, 1, TV2)]
    assert fresh.describe("t")["producer_epoch"] == 1


def test_without_a_finalized_transaction_version_values_stay_version_0(env):
    """A ZooKeeper cluster with Kafka 3.9 brokers finalizes no transaction.version: v0 values, which any Kafka
    reads."""
    _, log, markers, clock = env
    coordinator = coordinator_on(log, markers, clock, 1000, 5, transaction_version=0)
    init(coordinator)
    coordinator.add_partitions("t", 1000, 0, [("a", 0)])
    assert {v[:2] for _, _, v in log.records if v is not None} == {b"\x00\x00"}


def test_an_epoch_exhausting_v2_commit_in_flight_at_a_reload_still_rotates_the_producer_id(env):
    """The PrepareCommit of the epoch's last value carries NextProducerId: the coordinator that loads it
    completes the commit onto the new producer id, as the one that wrote it would have."""
    coordinator, log, markers, clock = env
    init(coordinator)
    coordinator.runtime.shard(0).transactions["t"].producer_epoch = 32766
    coordinator.add_partitions("t", 1000, 32766, [("a", 0)], TV2)
    assert coordinator.end_transaction("t", 1000, 32766, True, TV2).value.error == ErrorCode.NONE
    markers.sent.clear()  # the coordinator stopped before the markers were answered
    fresh = coordinator_on(log, markers, clock, 5000, 6)
    markers.answer_all()
    described = fresh.describe("t")
    assert (described["producer_id"], described["producer_epoch"], described["transaction_state"]) == (1001, 0, "CompleteCommit")
