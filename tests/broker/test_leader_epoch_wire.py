"""OffsetForLeaderEpoch on the wire: the true end offset of each epoch, as consumers validating their
position after a leader change and followers truncating need it."""

from __future__ import annotations

import anyio.from_thread

from odradek import Broker
from odradek.controller.metadata_image import PartitionState
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch


def produce(wire, count: int) -> int:
    body = {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": "epochs", "partition_data": [{"index": 0, "records": build_batch([Record(value=b"v")] * count)}]}]}
    answer = wire.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0]
    assert answer.error_code == 0
    return answer.base_offset


def end_offset(wire, epoch: int, current: int = -1):
    body = {"replica_id": -1, "topics": [{"topic": "epochs", "partitions": [{"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]}
    p = wire.call(ApiKey.OffsetForLeaderEpoch, 4, body).topics[0].partitions[0]
    return p.error_code, p.leader_epoch, p.end_offset


def test_end_offsets_of_epochs_across_a_leader_change(tmp_path, connect) -> None:
    with Broker(log_dir=tmp_path) as broker:
        wire = connect(broker.bootstrap)
        assert wire.call(ApiKey.CreateTopics, 7, {"topics": [{"name": "epochs", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000}).topics[0].error_code == 0
        produce(wire, 3)  # offsets 0-2 in epoch 0
        topic = broker.server.metadata.topics["epochs"]
        state = topic.partitions[0]

        def new_epoch() -> None:  # what a LeaderAndIsr with the next epoch does
            topic.partitions[0] = PartitionState(state.leader, state.leader_epoch + 1, state.isr, state.replicas)
            broker.server.on_partitions_changed(topic, [0])

        anyio.from_thread.run_sync(new_epoch, token=broker._token)
        assert produce(wire, 2) == 3  # offsets 3-4 in epoch 1

        assert end_offset(wire, 0) == (ErrorCode.NONE, 0, 3)  # epoch 0 ends where epoch 1 starts
        assert end_offset(wire, 1) == (ErrorCode.NONE, 1, 5)  # the current epoch ends at the log end offset
        assert end_offset(wire, 1, current=1) == (ErrorCode.NONE, 1, 5)
        assert end_offset(wire, 1, current=0)[0] == ErrorCode.FENCED_LEADER_EPOCH  # the asker's view is stale
        assert end_offset(wire, 1, current=2)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH  # from the future
        metadata = wire.call(ApiKey.Metadata, 12, {"topics": [{"name": "epochs"}]}).topics[0].partitions[0]
        assert metadata.leader_epoch == 1

        def list_offset(timestamp: int) -> tuple[int, int]:
            body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "epochs", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]}
            p = wire.call(ApiKey.ListOffsets, 9, body).topics[0].partitions[0]
            return p.offset, p.leader_epoch

        assert list_offset(-1) == (5, 1)  # latest: the epoch cache's latest epoch, as Kafka answers
        assert list_offset(-2) == (0, 0)  # earliest: the epoch of the log start offset
