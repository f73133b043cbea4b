"""Loading a coordinator partition from a real log: offset commits in plain and transactional batches,
COMMIT and ABORT markers written as WriteTxnMarkers writes them, read back by the replica-manager loader
and replayed into the group coordinator's shard."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.coordinator.partitions import ReplicaManagerPartitions
from odradek.broker.coordinator.runtime import CoordinatorRuntime, CoordinatorTopic
from odradek.broker.coordinator.group.group_coordinator import GroupConfig, GroupCoordinator, GroupCoordinatorShard
from odradek.broker.coordinator.group.group_metadata_records import OffsetAndMetadata, offset_commit_key, offset_commit_value
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import ControlRecordType, EndTransactionMarker, Record, build_batch, build_end_txn_marker_batch
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from odradek.storage.producer_state import AppendOrigin
from tests.validated import validated

TOPIC = "__consumer_offsets"
T0 = 1_700_000_000_000


class OneLog:
    """The replica manager as the loader asks it: for the one partition's log."""

    def __init__(self, log: Log) -> None:
        self.log = log

    def get_log(self, topic: str, index: int) -> Log:
        assert (topic, index) == (TOPIC, 0)
        return self.log


def commit(group: str, offset: int, *, producer_id: int = -1) -> bytearray:
    record = Record(timestamp=T0, key=offset_commit_key(group, "t", 0), value=offset_commit_value(OffsetAndMetadata(offset, commit_timestamp=T0)))
    return bytearray(build_batch([record], producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1, base_sequence=0 if producer_id >= 0 else -1, is_transactional=producer_id >= 0))


def marker(producer_id: int, committed: bool) -> bytearray:
    end = EndTransactionMarker(ControlRecordType.COMMIT if committed else ControlRecordType.ABORT, 0)
    return bytearray(build_end_txn_marker_batch(end, producer_id=producer_id, producer_epoch=0, timestamp=T0))


@pytest.fixture
def log(tmp_path: Path):
    opened = Log.open(tmp_path / f"{TOPIC}-0", LogConfig.from_props({"cleanup.policy": "compact"}))
    yield opened
    opened.close()


def loader(log: Log) -> ReplicaManagerPartitions:
    return ReplicaManagerPartitions(OneLog(log), TOPIC, commit_timeout_ms=5000, load_buffer_size=300, spawn=lambda wait: None)  # type: ignore[arg-type]


def test_transactional_offset_commits_load_with_their_markers(log: Log) -> None:
    for batch in (commit("plain", 3), commit("txn", 7, producer_id=5), marker(5, True), commit("txn", 9, producer_id=6), marker(6, False), commit("open", 11, producer_id=8)):
        log.append_as_leader(validated(batch, AppendOrigin.COORDINATOR), leader_epoch=0)

    batches = list(loader(log).load(0))
    assert [(b.producer_id, b.is_transactional, b.commit, len(b.records)) for b in batches] == [
        (-1, False, None, 1), (5, True, None, 1), (5, True, True, 0), (6, True, None, 1), (6, True, False, 0), (8, True, None, 1),
    ]  # fmt: skip

    runtime = CoordinatorRuntime(CoordinatorTopic(TOPIC, 1, 1, {}), lambda context: GroupCoordinatorShard(context, GroupConfig()), loader(log), broker_id=0)
    coordinator = GroupCoordinator(runtime)
    runtime.load(0, batches)

    def offset(group: str, stable: bool) -> int | ErrorCode:
        result = coordinator.fetch_offsets(group, stable, [("t", 0)])[1][("t", 0)]
        return result.error if result.error != ErrorCode.NONE else result.offset

    assert offset("plain", True) == 3
    assert offset("txn", True) == 7, "the committed transaction's offset; the aborted one's is dropped"
    assert offset("open", True) == ErrorCode.UNSTABLE_OFFSET_COMMIT and offset("open", False) == -1
    coordinator.complete_transaction(8, 0, [0], committed=True)
    assert offset("open", True) == 11


def test_an_empty_partition_has_nothing_to_read(log: Log) -> None:
    assert loader(log).load(0) == []
