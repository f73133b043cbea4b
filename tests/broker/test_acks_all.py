"""acks=all waits on the high watermark: min LEO over the ISR. On one node the ISR is the leader alone, so
the wait ends at once; with a lagging follower in the ISR (as in a cluster) it waits for the follower."""

from __future__ import annotations

import time

import anyio.from_thread
import pytest

from odradek import Broker
from odradek.broker.partition import FollowerState
from odradek.controller.metadata import PartitionState
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch


@pytest.fixture
def broker(tmp_path, connect):
    with Broker(log_dir=tmp_path) as b:
        topic = {"name": "acks", "num_partitions": 1, "replication_factor": 1}
        assert connect(b.bootstrap).call(ApiKey.CreateTopics, 7, {"topics": [topic], "timeout_ms": 5000}).topics[0].error_code == 0
        yield b


def on_broker_loop(broker: Broker, fn, *args):
    return anyio.from_thread.run_sync(fn, *args, token=broker._token)


def produce(wire, acks: int, timeout_ms: int, value: bytes, count: int = 1):
    batch = build_batch([Record(value=value) for _ in range(count)])
    body = {"acks": acks, "timeout_ms": timeout_ms, "topic_data": [{"name": "acks", "partition_data": [{"index": 0, "records": batch}]}]}
    return wire.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0]


def add_lagging_follower(broker: Broker) -> object:
    partition = broker.server.replica_manager.partitions[("acks", 0)]

    def add() -> None:
        state = partition.state
        partition.state = PartitionState(state.leader, state.leader_epoch, [state.leader, 1], [state.leader, 1])
        partition.followers[1] = FollowerState(log_end_offset=partition.log_end_offset)

    on_broker_loop(broker, add)
    return partition


def follower_fetch(partition, offset: int) -> None:
    """Follower 1's fetch at ``offset``, as the leader records it."""
    partition.update_follower_fetch_state(1, partition.followers[1], offset, 0, int(time.time() * 1000), partition.log_end_offset)


def test_acks_all_waits_for_the_isr_and_times_out_when_a_follower_lags(broker, connect):
    wire = connect(broker.bootstrap)
    assert produce(wire, -1, 1000, b"alone").error_code == ErrorCode.NONE  # ISR = the leader: no wait
    partition = add_lagging_follower(broker)

    started = time.monotonic()
    lagging = produce(wire, -1, 300, b"waits")
    assert lagging.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert time.monotonic() - started >= 0.3
    assert partition.high_watermark == 1 and partition.log_end_offset == 2  # appended, not committed

    assert produce(wire, 1, 300, b"acks=1 does not wait").error_code == ErrorCode.NONE


def test_acks_all_completes_when_the_follower_catches_up(broker, connect):
    wire = connect(broker.bootstrap)
    produce(wire, -1, 1000, b"first")
    partition = add_lagging_follower(broker)
    results = []
    with anyio.from_thread.start_blocking_portal() as portal:
        future = portal.start_task_soon(anyio.to_thread.run_sync, lambda: results.append(produce(connect(broker.bootstrap), -1, 5000, b"second", count=3)))
        deadline = time.monotonic() + 10
        while partition.log_end_offset < 4 and time.monotonic() < deadline:  # offsets 1-3 appended
            time.sleep(0.01)
        time.sleep(0.1)
        assert partition.log_end_offset == 4 and not results  # appended, and waiting: the follower has none
        on_broker_loop(broker, follower_fetch, partition, 2)  # a follower fetch at offset 2: it has offset 1 only
        time.sleep(0.3)
        assert not results and partition.high_watermark == 2  # the batch is not all committed yet
        on_broker_loop(broker, follower_fetch, partition, partition.log_end_offset)  # caught up to the LEO
        future.result(10)
    assert results[0].error_code == ErrorCode.NONE and results[0].base_offset == 1
    assert partition.high_watermark == 4
