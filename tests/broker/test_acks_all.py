"""acks=all waits on the high watermark: min LEO over the ISR. On one node the ISR is the leader alone, so
the wait ends at once; with a lagging follower in the ISR (as in a cluster) it waits for the follower."""

from __future__ import annotations

import time

import anyio.from_thread
import pytest

from odradek import Broker
from odradek.broker.replication.partition import FollowerState
from odradek.controller.metadata_image import PartitionState
from odradek.protocol.api import ApiKey, decode_response, encode_request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch


@pytest.fixture
def broker(tmp_path, connect):
    with Broker(log_dir=tmp_path) as b:
        topic = {"name": "acks", "num_partitions": 1, "replication_factor": 1, "configs": [{"name": "min.insync.replicas", "value": "2"}]}
        assert connect(b.bootstrap).call(ApiKey.CreateTopics, 7, {"topics": [topic], "timeout_ms": 5000}).topics[0].error_code == 0
        yield b


def on_broker_loop(broker: Broker, fn, *args):
    return anyio.from_thread.run_sync(fn, *args, token=broker._token)


CREATED = int(time.time() * 1000)
"""The records' timestamps start here (recent: a producer id idle past producer.id.expiration.ms is forgotten)."""


def produce_body(acks: int, timeout_ms: int, value: bytes, count: int = 1, **batch: int) -> dict:
    records = build_batch([Record(value=value, timestamp=CREATED + i) for i in range(count)], **batch)
    return {"acks": acks, "timeout_ms": timeout_ms, "topic_data": [{"name": "acks", "partition_data": [{"index": 0, "records": records}]}]}


def produce(wire, acks: int, timeout_ms: int, value: bytes, count: int = 1, **batch: int):
    return wire.call(ApiKey.Produce, 9, produce_body(acks, timeout_ms, value, count, **batch)).responses[0].partition_responses[0]


def pipelined_produces(wire, *bodies: dict) -> list:
    """Send every produce before reading any answer (as a client with several requests in flight); the
    answers, in order."""
    for correlation_id, body in enumerate(bodies, start=1000):
        wire.send(encode_request(ApiKey.Produce, 9, correlation_id, body, client_id=wire.client_id))
    return [decode_response(ApiKey.Produce, 9, wire.read_frame())[1].responses[0].partition_responses[0] for _ in bodies]


def add_lagging_follower(broker: Broker) -> object:
    partition = broker.server.replica_manager.partitions[("acks", 0)]
    assert partition.config.min_insync_replicas == 2

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


def shrink_isr_to_leader(partition) -> None:
    """The controller took the lagging follower out of the ISR: the leader alone, below min.insync.replicas 2."""
    state = partition.state
    partition.state = PartitionState(state.leader, state.leader_epoch, [state.leader], state.replicas, state.partition_epoch + 1)


def test_a_pipelined_produce_waits_for_the_answer_before_it(broker, connect):
    """Kafka handles one request of a connection at a time (the channel is muted until the answer is sent): a
    produce pipelined behind an acks=all one that waits for the ISR is appended only once that one is answered,
    and meets the ISR as it is then. Here the ISR shrinks below min.insync.replicas while the first waits: it
    times out, and the second is refused NOT_ENOUGH_REPLICAS, not appended to wait in its turn (an idempotent
    client that saw the first fail and the second succeed takes the first as written without its offset)."""
    wire = connect(broker.bootstrap)
    assert produce(wire, -1, 1000, b"alone").error_code == ErrorCode.NONE
    partition = add_lagging_follower(broker)
    with anyio.from_thread.start_blocking_portal() as portal:
        answers = portal.start_task_soon(anyio.to_thread.run_sync, lambda: pipelined_produces(wire, produce_body(-1, 1000, b"first"), produce_body(-1, 5000, b"second")))
        deadline = time.monotonic() + 5
        while partition.log_end_offset < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        assert partition.log_end_offset == 2  # the first appended and waiting, the second not handled yet
        on_broker_loop(broker, shrink_isr_to_leader, partition)
        first, second = answers.result(10)
    assert first.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert second.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert partition.log_end_offset == 2 and partition.high_watermark == 1


def test_a_retry_of_a_batch_that_timed_out_is_answered_with_its_original_offsets(broker, connect):
    """An idempotent batch appended while a follower lags times out; its retry is a duplicate of the producer's
    last batch (Kafka's findDuplicateBatch): not appended again, it waits for the high watermark to pass the
    original as acks=all does, and is answered NONE with the original base offset, the original batch's
    timestamp as log append time (Kafka answers a duplicate so on CreateTime topics too) and the log start offset."""
    wire = connect(broker.bootstrap)
    producer = wire.call(ApiKey.InitProducerId, 4, {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})
    assert producer.error_code == ErrorCode.NONE
    idempotent = {"producer_id": producer.producer_id, "producer_epoch": producer.producer_epoch}
    assert produce(wire, -1, 1000, b"before", 2, base_sequence=0, **idempotent).base_offset == 0
    partition = add_lagging_follower(broker)
    retried = produce_body(-1, 300, b"retried", 3, base_sequence=2, **idempotent)
    assert wire.call(ApiKey.Produce, 9, retried).responses[0].partition_responses[0].error_code == ErrorCode.REQUEST_TIMED_OUT
    assert partition.log_end_offset == 5
    with anyio.from_thread.start_blocking_portal() as portal:
        retry = portal.start_task_soon(anyio.to_thread.run_sync, lambda: wire.call(ApiKey.Produce, 9, {**retried, "timeout_ms": 5000}))
        time.sleep(0.3)
        assert not retry.done() and partition.log_end_offset == 5  # a duplicate: waiting, not appended again
        on_broker_loop(broker, follower_fetch, partition, partition.log_end_offset)
        answer = retry.result(10).responses[0].partition_responses[0]
    assert (answer.error_code, answer.base_offset, answer.log_append_time_ms, answer.log_start_offset) == (ErrorCode.NONE, 2, CREATED + 2, 0)
    assert partition.log_end_offset == 5 and partition.high_watermark == 5
