"""The share-partition state machine (sans-IO): acquisition, acknowledgement, redelivery after RELEASE
or a lock's expiry, the delivery-count limit, the SPSO's advance, and the state persisted for it, as
Kafka's ``SharePartition`` behaves."""

from __future__ import annotations

from odradek.broker.share.share_partition import AcknowledgeType, Acknowledgement, AcquiredRecords, SharePartition
from odradek.broker.share.state_batches import RecordState, StateBatch, overlay
from odradek.protocol.errors import ErrorCode

ACCEPT, RELEASE, REJECT, GAP = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT, AcknowledgeType.GAP


def ack(first: int, last: int, *types: int) -> Acknowledgement:
    return Acknowledgement(first, last, list(types))


def test_a_fetch_acquires_whole_batches_and_acceptance_moves_the_start() -> None:
    sp = SharePartition(0, lock_duration_ms=1000)
    assert sp.acquire("a", [(0, 4), (5, 9)], 500, now_ms=0) == [AcquiredRecords(0, 9, 1)]
    assert sp.next_fetch_offset() == 10
    # Nothing is acquirable twice.
    assert sp.acquire("b", [(0, 4), (5, 9)], 500, now_ms=0) == []
    error, update = sp.acknowledge("a", [ack(0, 9, ACCEPT)])
    assert error == ErrorCode.NONE and update is not None
    # As Kafka: the state is persisted with the SPSO of before; the batches say the records are done.
    assert update.start_offset == 0 and update.batches == [StateBatch(0, 9, RecordState.ACKNOWLEDGED, 1)]
    assert sp.start_offset == 10 and sp.in_flight == []


def test_max_records_is_a_soft_limit_of_whole_batches() -> None:
    sp = SharePartition(0)
    assert sp.acquire("a", [(0, 4), (5, 9), (10, 14)], 6, now_ms=0) == [AcquiredRecords(0, 9, 1)]
    assert sp.next_fetch_offset() == 10


def test_records_before_the_start_offset_are_not_acquired() -> None:
    """A fetch from the SPSO reads the whole batch holding it."""
    sp = SharePartition(3)
    assert sp.acquire("a", [(0, 4)], 500, now_ms=0) == [AcquiredRecords(3, 4, 1)]


def test_release_redelivers_with_a_higher_delivery_count_and_only_to_one_member() -> None:
    sp = SharePartition(0)
    sp.acquire("a", [(0, 9)], 500, now_ms=0)
    error, update = sp.acknowledge("a", [ack(0, 9, *([ACCEPT] * 3 + [RELEASE] * 2 + [ACCEPT] * 5))])
    assert error == ErrorCode.NONE and update is not None
    assert sp.start_offset == 3
    assert sp.next_fetch_offset() == 3
    assert sp.acquire("b", [(0, 9)], 500, now_ms=0) == [AcquiredRecords(3, 4, 2)]
    assert sp.acquire("a", [(0, 9)], 500, now_ms=0) == []
    assert sp.acknowledge("b", [ack(3, 4, ACCEPT)])[0] == ErrorCode.NONE
    assert sp.start_offset == 10 and sp.in_flight == []


def test_acknowledging_what_one_does_not_hold_is_refused_whole() -> None:
    sp = SharePartition(0)
    sp.acquire("a", [(0, 4)], 500, now_ms=0)
    sp.acquire("b", [(5, 9)], 500, now_ms=0)
    assert sp.acknowledge("a", [ack(0, 4, ACCEPT), ack(5, 5, ACCEPT)]) == (ErrorCode.INVALID_RECORD_STATE, None)
    assert sp.acknowledge("a", [ack(0, 10, ACCEPT)])[0] == ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("a", [ack(0, 4, ACCEPT, REJECT)]) == (ErrorCode.INVALID_REQUEST, None)
    assert sp.acknowledge("a", [ack(0, 4, 7)]) == (ErrorCode.INVALID_REQUEST, None)
    # Nothing of the refused requests applied.
    assert sp.acknowledge("a", [ack(0, 4, ACCEPT)])[0] == ErrorCode.NONE
    assert sp.acknowledge("a", [ack(0, 4, ACCEPT)])[0] == ErrorCode.INVALID_RECORD_STATE
    assert sp.start_offset == 5


def test_an_expired_lock_makes_records_available_and_the_late_acknowledgement_fails() -> None:
    sp = SharePartition(0, lock_duration_ms=1000)
    sp.acquire("a", [(0, 4)], 500, now_ms=0)
    assert sp.next_deadline() == 1000
    assert sp.expire_locks(999) is None
    update = sp.expire_locks(1000)
    assert update is not None and update.batches == [StateBatch(0, 4, RecordState.AVAILABLE, 1)]
    assert sp.acknowledge("a", [ack(0, 4, ACCEPT)])[0] == ErrorCode.INVALID_RECORD_STATE
    assert sp.acquire("b", [(0, 4)], 500, now_ms=2000) == [AcquiredRecords(0, 4, 2)]


def test_the_delivery_count_limit_archives_and_the_start_offset_passes_archived_records() -> None:
    sp = SharePartition(0, delivery_count_limit=2)
    sp.acquire("a", [(0, 4)], 500, now_ms=0)
    sp.acknowledge("a", [ack(0, 4, RELEASE)])
    assert sp.acquire("a", [(0, 4)], 500, now_ms=0) == [AcquiredRecords(0, 4, 2)]
    error, update = sp.acknowledge("a", [ack(0, 4, RELEASE)])
    assert error == ErrorCode.NONE and update is not None
    assert update.batches == [StateBatch(0, 4, RecordState.ARCHIVED, 2)] and sp.start_offset == 5
    assert sp.acquire("a", [(0, 4)], 500, now_ms=0) == []


def test_reject_archives_and_gaps_are_archived() -> None:
    sp = SharePartition(0)
    sp.acquire("a", [(0, 4)], 500, now_ms=0)
    error, update = sp.acknowledge("a", [ack(0, 4, REJECT, ACCEPT, GAP, ACCEPT, ACCEPT)])
    assert error == ErrorCode.NONE and update is not None
    assert [b.state for b in update.batches] == [RecordState.ARCHIVED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED, RecordState.ACKNOWLEDGED]
    assert sp.start_offset == 5


def test_a_leaving_member_releases_what_it_holds() -> None:
    sp = SharePartition(0)
    sp.acquire("a", [(0, 4)], 500, now_ms=0)
    sp.acquire("b", [(5, 9)], 500, now_ms=0)
    update = sp.release("a")
    assert update is not None and update.batches == [StateBatch(0, 4, RecordState.AVAILABLE, 1)]
    assert sp.acquire("c", [(0, 4)], 500, now_ms=0) == [AcquiredRecords(0, 4, 2)]


def test_the_in_flight_window_is_bounded() -> None:
    sp = SharePartition(0, max_in_flight=10)
    assert sp.acquire("a", [(0, 9), (10, 19)], 500, now_ms=0) == [AcquiredRecords(0, 9, 1)]
    assert not sp.can_acquire()
    sp.acknowledge("a", [ack(0, 4, ACCEPT)])
    assert sp.can_acquire()


def test_a_share_partition_resumes_from_its_persisted_state() -> None:
    """What the coordinator kept: ACKNOWLEDGED/ARCHIVED records stay done, AVAILABLE ones keep their
    delivery count, and fetching resumes at the first AVAILABLE record."""
    persisted = [StateBatch(0, 2, RecordState.ACKNOWLEDGED, 1), StateBatch(3, 4, RecordState.AVAILABLE, 3), StateBatch(5, 9, RecordState.ACKNOWLEDGED, 1)]
    sp = SharePartition(0, persisted)
    assert sp.start_offset == 3 and sp.end_offset == 10 and sp.next_fetch_offset() == 3
    assert sp.acquire("a", [(0, 9), (10, 14)], 500, now_ms=0) == [AcquiredRecords(3, 4, 4), AcquiredRecords(10, 14, 1)]


def test_the_log_start_moving_past_the_start_offset_archives_records() -> None:
    sp = SharePartition(0)
    sp.acquire("a", [(0, 9)], 500, now_ms=0)
    update = sp.move_start_to(5)
    assert update is not None and update.start_offset == 5
    assert sp.acknowledge("a", [ack(5, 9, ACCEPT)])[0] == ErrorCode.NONE
    assert sp.start_offset == 10


def test_overlay_lays_newer_batches_over_older_and_merges() -> None:
    older = [StateBatch(0, 9, RecordState.AVAILABLE, 1)]
    newer = [StateBatch(3, 4, RecordState.ACKNOWLEDGED, 1), StateBatch(5, 9, RecordState.AVAILABLE, 1)]
    assert overlay(older, newer, 2) == [StateBatch(2, 2, RecordState.AVAILABLE, 1), StateBatch(3, 4, RecordState.ACKNOWLEDGED, 1), StateBatch(5, 9, RecordState.AVAILABLE, 1)]
    assert overlay(older, [StateBatch(0, 9, RecordState.AVAILABLE, 1)], 0) == older
    assert overlay([StateBatch(0, 4, RecordState.ARCHIVED, 2), StateBatch(5, 9, RecordState.ARCHIVED, 2)], [], 0) == [StateBatch(0, 9, RecordState.ARCHIVED, 2)]


def test_the_record_limit_mode_acquires_no_more_than_asked() -> None:
    sp = SharePartition(0)
    assert sp.acquire("a", [(0, 9)], 3, now_ms=0, strict=True) == [AcquiredRecords(0, 2, 1)]
    assert sp.next_fetch_offset() == 3
    sp.acknowledge("a", [ack(0, 2, RELEASE)])
    assert sp.acquire("b", [(0, 9)], 2, now_ms=0, strict=True) == [AcquiredRecords(0, 1, 2)]
    assert sp.acquire("b", [(0, 9)], 4, now_ms=0, strict=True) == [AcquiredRecords(2, 2, 2), AcquiredRecords(3, 5, 1)]


def test_renew_restarts_the_lock() -> None:
    sp = SharePartition(0, lock_duration_ms=1000)
    sp.acquire("a", [(0, 4)], 500, now_ms=0)
    assert sp.acknowledge("a", [ack(0, 4, AcknowledgeType.RENEW)], now_ms=900) == (ErrorCode.NONE, None)
    assert sp.expire_locks(1500) is None and sp.next_deadline() == 1900
