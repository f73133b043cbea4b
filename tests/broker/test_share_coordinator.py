"""The share coordinator's shard (sans-IO): what it writes to ``__share_group_state`` -- a ShareSnapshot
first, ShareUpdates after, a new snapshot every ``share.coordinator.snapshot.update.records.per.snapshot``
updates -- and that replaying those records rebuilds the same state."""

from __future__ import annotations

import uuid

from odradek.broker.coordinator.runtime import AppendResult, ShardContext
from odradek.broker.coordinator.share.share_coordinator import ShareCoordinatorShard, coordinator_key
from odradek.broker.coordinator.share.share_records import SHARE_SNAPSHOT, SHARE_UPDATE, SharePartitionKey, decode_record
from odradek.broker.coordinator.timers import Timers
from odradek.broker.share.state_batches import RecordState, StateBatch
from odradek.protocol.errors import ErrorCode

KEY = SharePartitionKey("g", uuid.UUID("99ddb536-4124-453b-beaf-cdd1ad017e96"), 3)
ACKED, AVAILABLE = RecordState.ACKNOWLEDGED, RecordState.AVAILABLE


def shard(updates_per_snapshot: int = 2) -> ShareCoordinatorShard:
    return ShareCoordinatorShard(ShardContext(0, lambda: 1000, Timers(lambda: 1000), lambda result: None), updates_per_snapshot)


def write(s: ShareCoordinatorShard, start: int, batches: list[StateBatch]) -> list[tuple[bytes, bytes | None]]:
    result = s.write_state(KEY, start, batches)
    assert result.response(AppendResult(ErrorCode.NONE)) == ErrorCode.NONE
    return list(result.records)


def test_the_key_is_kafkas_coordinator_key() -> None:
    assert coordinator_key(KEY) == "g:md21NkEkRTu-r83RrQF-lg:3"


def test_snapshot_then_updates_then_a_new_snapshot_and_replay_rebuilds_the_state() -> None:
    s = shard()
    log: list[tuple[bytes, bytes | None]] = []
    log += write(s, 0, [])
    log += write(s, 5, [StateBatch(0, 4, ACKED, 1), StateBatch(5, 9, AVAILABLE, 1)])
    log += write(s, 10, [StateBatch(5, 9, ACKED, 2)])
    log += write(s, 10, [StateBatch(10, 12, AVAILABLE, 1)])
    kinds = [decode_record(k, v)[0] for k, v in log]
    assert kinds == [SHARE_SNAPSHOT, SHARE_UPDATE, SHARE_UPDATE, SHARE_SNAPSHOT]
    snapshot = decode_record(*log[-1])[2]
    assert snapshot is not None and snapshot.snapshot_epoch == 1 and snapshot.start_offset == 10  # type: ignore[attr-defined]
    expected = s.read_state(KEY)[1]
    assert expected is not None and expected.batches == (StateBatch(10, 12, AVAILABLE, 1),)

    replayed = shard()
    for offset, (k, v) in enumerate(log):
        replayed.replay(offset, None, k, v)
    assert replayed.read_state(KEY)[1] == expected
    # Updates laid over the first snapshot give the same state as the second snapshot.
    partial = shard()
    for offset, (k, v) in enumerate(log[:3]):
        partial.replay(offset, None, k, v)
    state = partial.read_state(KEY)[1]
    assert state is not None and state.start_offset == 10 and state.batches == ()


def test_a_failed_append_makes_the_next_write_a_snapshot() -> None:
    s = shard(updates_per_snapshot=100)
    write(s, 0, [])
    failed = s.write_state(KEY, 3, [StateBatch(0, 2, ACKED, 1)])
    assert failed.response(AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    (record,) = write(s, 3, [])
    assert decode_record(*record)[0] == SHARE_SNAPSHOT


def test_a_tombstone_deletes_the_state() -> None:
    s = shard()
    log = write(s, 0, [StateBatch(0, 0, ACKED, 1)])
    log += list(s.delete_state(KEY).records)
    replayed = shard()
    for offset, (k, v) in enumerate(log):
        replayed.replay(offset, None, k, v)
    assert replayed.read_state(KEY)[1] is None


def test_a_deposed_leader_and_an_older_state_epoch_are_fenced() -> None:
    """As Kafka's ``ShareCoordinatorShard``: the leader epoch a share-partition leader read or wrote with
    fences lower ones (the leader before it), and a write below the state epoch (the state was
    re-initialized since) is FENCED_STATE_EPOCH; -1 keeps what the state holds. Replay restores the
    leader epoch, so a new coordinator fences as the old one did."""
    s = shard()
    log = list(s.initialize_state(KEY, 0, state_epoch=1).records)
    assert s.read_state(KEY, leader_epoch=4)[0] == ErrorCode.NONE
    assert s.read_state(KEY, leader_epoch=3) == (ErrorCode.FENCED_LEADER_EPOCH, None)
    assert s.write_state(KEY, 0, [], state_epoch=1, leader_epoch=3).response(AppendResult(ErrorCode.NONE)) == ErrorCode.FENCED_LEADER_EPOCH
    assert s.write_state(KEY, 0, [], state_epoch=0, leader_epoch=4).response(AppendResult(ErrorCode.NONE)) == ErrorCode.FENCED_STATE_EPOCH
    ok = s.write_state(KEY, 2, [StateBatch(0, 1, ACKED, 1)], state_epoch=1, leader_epoch=4)
    assert ok.response(AppendResult(ErrorCode.NONE)) == ErrorCode.NONE
    log += list(ok.records)
    assert s.initialize_state(KEY, 0, state_epoch=0).response(AppendResult(ErrorCode.NONE)) == ErrorCode.FENCED_STATE_EPOCH
    replayed = shard()
    for offset, (k, v) in enumerate(log):
        replayed.replay(offset, None, k, v)
    state = replayed.read_state(KEY)[1]
    assert state is not None and (state.state_epoch, state.leader_epoch, state.start_offset) == (1, 4, 2)
    assert replayed.write_state(KEY, 2, [], state_epoch=1, leader_epoch=3).response(AppendResult(ErrorCode.NONE)) == ErrorCode.FENCED_LEADER_EPOCH
