"""The leader's replication rules of broker/replication/partition.py on a real log, sans-IO (Kafka's Partition and
ReplicaState): when a follower counts as caught up, what the high watermark waits for, when the ISR is asked
to shrink or grow and how the controller's answers are taken. The same rules run end to end against a real
Kafka in test_replica_fetcher.py."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from odradek.broker.replication.partition import AlterPartitionResult, FollowerState, Partition, PendingIsrChange
from odradek.controller.metadata_image import PartitionState
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import Record, build_batch
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from tests.validated import validated

LAG_MS = 10_000
T0 = 1_000_000


@pytest.fixture
def sent() -> list[PendingIsrChange]:
    """The ISR changes the partition hands to its AlterPartition sender."""
    return []


@pytest.fixture
def partition(tmp_path: Path, sent: list[PendingIsrChange]) -> Partition:
    """Broker 0 leading replicas [0, 1, 2] in epoch 3, ISR [0, 1], min.insync.replicas 2, 10 records."""
    log = Log.open(tmp_path / "t-0", LogConfig(min_insync_replicas=2))
    state = PartitionState(0, 3, [0, 1], [0, 1, 2], 7)
    p = Partition("t", 0, uuid.uuid4(), log, state, 0, replica_lag_time_max_ms=LAG_MS, alter_partition=lambda _, change: sent.append(change))
    p.become_leader(state, True, T0)
    for _ in range(2):
        log.append_as_leader(validated(build_batch([Record(value=b"v")] * 5)), leader_epoch=3)
    return p


def fetch(p: Partition, replica: int, offset: int, now_ms: int) -> None:
    """Follower ``replica``'s fetch at ``offset``, read as the Fetch handler reads it."""
    p.read_records(offset, 1 << 20, replica, 0, True, p.log.latest_epoch if offset else -1, 0, now_ms)


def test_the_high_watermark_waits_for_the_isr_and_for_a_caught_up_follower_outside_it(partition: Partition) -> None:
    partition.alter_partition = None  # no ISR changes here: the caught-up rule alone
    fetch(partition, 1, 4, T0 + 1)
    assert partition.high_watermark == 4  # ISR member 1 has 4; follower 2, out of the ISR, never caught up
    fetch(partition, 1, 10, T0 + 2)
    fetch(partition, 2, 10, T0 + 3)  # follower 2 reaches the leader's end
    assert partition.high_watermark == 10
    partition.log.append_as_leader(validated(build_batch([Record(value=b"v")] * 5)), leader_epoch=3)
    fetch(partition, 1, 15, T0 + 4)
    assert partition.high_watermark == 10  # follower 2, caught up within the lag, is waited for though not in the ISR
    fetch(partition, 2, 15, T0 + 5)
    assert partition.high_watermark == 15


def test_a_follower_out_of_the_isr_stops_holding_the_high_watermark_after_the_lag(partition: Partition) -> None:
    fetch(partition, 1, 10, T0 + 1)
    fetch(partition, 2, 4, T0 + LAG_MS + 1)  # fetched, but not caught up since the epoch began
    assert partition.high_watermark == 10
    assert partition.followers[2].log_end_offset == 4


def test_under_min_isr_the_high_watermark_stays(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(min_insync_replicas=2))
    state = PartitionState(0, 1, [0], [0, 1], 0)
    p = Partition("t", 0, uuid.uuid4(), log, state, 0)
    p.become_leader(state, True, T0)
    log.append_as_leader(validated(build_batch([Record(value=b"v")])), leader_epoch=1)
    assert not p.maybe_increment_high_watermark(T0) and p.high_watermark == 0
    with pytest.raises(KafkaError) as refused:  # refused before the batch is looked at
        p.append_records_to_leader(validated(build_batch([Record(value=b"v")])), -1, T0)
    assert refused.value.code == ErrorCode.NOT_ENOUGH_REPLICAS


def test_caught_up_time_follows_kafkas_replica_state() -> None:
    follower = FollowerState()
    follower.update_fetch_state(5, 0, T0, leader_end_offset=10)  # behind the leader's end
    assert follower.last_caught_up_time_ms == 0
    follower.update_fetch_state(10, 0, T0 + 100, leader_end_offset=12)  # reached where the leader was at its last fetch
    assert follower.last_caught_up_time_ms == T0
    follower.update_fetch_state(12, 0, T0 + 200, leader_end_offset=12)  # reached the leader's end
    assert follower.last_caught_up_time_ms == T0 + 200
    assert follower.is_caught_up(20, T0 + 200 + LAG_MS, LAG_MS) and not follower.is_caught_up(20, T0 + 201 + LAG_MS, LAG_MS)


def test_a_lagging_isr_follower_is_asked_out_and_the_answer_committed(partition: Partition, sent: list[PendingIsrChange]) -> None:
    partition.maybe_shrink_isr(T0 + LAG_MS)
    assert sent == []  # the ISR members count as caught up when the epoch began
    partition.maybe_shrink_isr(T0 + LAG_MS + 1)
    [change] = sent
    assert (change.isr, change.maximal_isr, change.leader_epoch, change.partition_epoch) == ((0,), frozenset({0, 1}), 3, 7)
    partition.maybe_shrink_isr(T0 + LAG_MS + 2)
    assert len(sent) == 1  # one change pending at a time
    assert partition.high_watermark == 0  # the maximal ISR still holds follower 1 until the controller answers

    assert not partition.on_alter_partition(change, AlterPartitionResult(ErrorCode.NONE, 3, (0,), 8))
    assert (partition.isr, partition.state.partition_epoch, partition.pending_isr) == ([0], 8, None)
    assert partition.high_watermark == 0  # ISR [0] is under min.insync.replicas 2: frozen (KIP-966)


def test_a_follower_reaching_the_high_watermark_is_asked_in(partition: Partition, sent: list[PendingIsrChange]) -> None:
    fetch(partition, 1, 10, T0 + 1)
    fetch(partition, 2, 10, T0 + 2)
    [change] = sent
    assert (change.isr, change.maximal_isr) == ((0, 1, 2), frozenset({0, 1, 2}))


@pytest.mark.parametrize(
    ("error", "retry", "pending_after"),
    [
        (ErrorCode.INELIGIBLE_REPLICA, False, False),  # not applied: the committed ISR holds again
        (ErrorCode.OPERATION_NOT_ATTEMPTED, False, False),
        (ErrorCode.FENCED_LEADER_EPOCH, False, True),  # wait for LeaderAndIsr
        (ErrorCode.INVALID_UPDATE_VERSION, False, True),
        (ErrorCode.NOT_CONTROLLER, True, True),  # sent again
    ],
)
def test_the_controllers_refusals(partition: Partition, sent: list[PendingIsrChange], error: ErrorCode, retry: bool, pending_after: bool) -> None:
    partition.maybe_shrink_isr(T0 + LAG_MS + 1)
    [change] = sent
    assert partition.on_alter_partition(change, AlterPartitionResult(error)) is retry
    assert (partition.pending_isr is change) is pending_after
    assert partition.isr == [0, 1]


def test_an_answer_for_another_leader_epoch_is_ignored(partition: Partition, sent: list[PendingIsrChange]) -> None:
    partition.maybe_shrink_isr(T0 + LAG_MS + 1)
    [change] = sent
    assert not partition.on_alter_partition(change, AlterPartitionResult(ErrorCode.NONE, 4, (0,), 8))
    assert partition.isr == [0, 1] and partition.pending_isr is change


def test_an_acks_all_append_waiting_when_the_isr_shrinks_below_the_minimum_is_not_acknowledged(partition: Partition, sent: list[PendingIsrChange]) -> None:
    """Kafka 3.9's ``checkEnoughReplicasReachOffset`` with the high watermark frozen under min ISR: the
    append waiting for offsets [0, 10) is not done (it times out) while the ISR is the leader alone, even
    once follower 1 has the records; done with NONE once follower 1 is back in the ISR."""
    assert partition.check_enough_replicas_reach_offset(10) == (False, ErrorCode.NONE)
    partition.maybe_shrink_isr(T0 + LAG_MS + 1)
    [shrink] = sent
    partition.on_alter_partition(shrink, AlterPartitionResult(ErrorCode.NONE, 3, (0,), 8))
    assert partition.is_under_min_isr and partition.check_enough_replicas_reach_offset(10) == (False, ErrorCode.NONE)
    fetch(partition, 1, 10, T0 + LAG_MS + 2)  # follower 1 has every record: asked into the ISR, not in it yet
    [_, expand] = sent
    assert expand.isr == (0, 1)
    assert partition.high_watermark == 0 and partition.check_enough_replicas_reach_offset(10) == (False, ErrorCode.NONE)
    partition.on_alter_partition(expand, AlterPartitionResult(ErrorCode.NONE, 3, (0, 1), 9))
    assert partition.high_watermark == 10 and partition.check_enough_replicas_reach_offset(10) == (True, ErrorCode.NONE)


def test_an_append_whose_offsets_the_high_watermark_passed_with_the_isr_below_the_minimum_failed_after_append(partition: Partition) -> None:
    """The other outcome of ``checkEnoughReplicasReachOffset``: the high watermark is past the append but the
    maximal ISR is below ``min.insync.replicas`` (here raised to 3 after the records were committed by an ISR
    of 2): NOT_ENOUGH_REPLICAS_AFTER_APPEND; and NOT_LEADER_OR_FOLLOWER once no longer leader."""
    fetch(partition, 1, 10, T0 + 1)
    assert partition.high_watermark == 10 and partition.check_enough_replicas_reach_offset(10) == (True, ErrorCode.NONE)
    partition.log.config = LogConfig(min_insync_replicas=3)
    assert partition.check_enough_replicas_reach_offset(10) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    partition.become_follower(PartitionState(1, 4, [0, 1], [0, 1, 2], 8), False)
    assert partition.check_enough_replicas_reach_offset(10) == (True, ErrorCode.NOT_LEADER_OR_FOLLOWER)
