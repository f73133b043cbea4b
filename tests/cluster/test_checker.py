"""The checker's judgement on runs whose outcome is known: each kind of violation is found and reported
where it happened, and a clean run has none."""

from __future__ import annotations

from checker import ViolationKind, check

CLEAN_LOG = {0: [(0, 0), (1, 1), (2, 2), (3, 3)]}


def test_a_clean_run_has_no_violation() -> None:
    report = check({0: {0: 0, 1: 1, 3: 3}}, {0: [(0, 0), (1, 1), (0, 0)]}, CLEAN_LOG, failed=1)
    assert report.ok, str(report)
    assert (report.acknowledged, report.failed, report.read, report.surviving) == (3, 1, 3, 4)


def test_an_acknowledged_write_missing_or_moved_is_lost() -> None:
    report = check({0: {0: 0, 1: 1, 4: 4}}, {}, {0: [(0, 0), (1, 2)]})
    assert [(v.kind, v.offset, v.number) for v in report.violations] == [(ViolationKind.LOST, 1, 1), (ViolationKind.LOST, 4, 4)]
    assert "first lost: partition 0 offset 1 number 1: acknowledged at this offset, which now holds number 2" in str(report)


def test_an_acknowledgement_without_offset_is_reported_and_lost_if_the_number_is_nowhere() -> None:
    report = check({0: {2: None, 7: None}}, {}, CLEAN_LOG)
    assert [(v.kind, v.offset, v.number) for v in report.violations] == [(ViolationKind.NO_OFFSET, -1, 2), (ViolationKind.LOST, -1, 7)]
    assert not report.ok
    assert check({0: {2: None}}, {}, CLEAN_LOG).ok  # only reported: librdkafka's implicit acknowledgement


def test_a_number_twice_is_a_duplicate_and_going_back_is_reordered() -> None:
    report = check({}, {}, {0: [(0, 0), (1, 1), (2, 1), (3, 2)], 1: [(0, 1), (1, 0)]})
    assert [(v.kind, v.partition, v.offset) for v in report.violations] == [
        (ViolationKind.DUPLICATE, 0, 2), (ViolationKind.REORDERED, 0, 2), (ViolationKind.REORDERED, 1, 1),
    ]


def test_a_read_the_surviving_log_does_not_hold_is_a_phantom_read() -> None:
    report = check({}, {0: [(3, 3), (4, 4), (2, 9)]}, CLEAN_LOG)
    assert [(v.kind, v.offset, v.number) for v in report.violations] == [(ViolationKind.PHANTOM_READ, 2, 9), (ViolationKind.PHANTOM_READ, 4, 4)]
    assert report.count(ViolationKind.PHANTOM_READ) == 2 and not report.ok
