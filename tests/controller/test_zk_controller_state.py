"""The ZooKeeper controller's rules without ZooKeeper (Kafka 3.9's partition and replica state machines) and
the requests they produce, checked to encode and decode at the versions Kafka 3.9's controller sends."""

from __future__ import annotations

import uuid

import pytest

from odradek.controller import zk_data as zd
from odradek.controller.zk_controller_state import (
    ControllerContext,
    Leadership,
    RequestBatch,
    imbalanced_partitions,
    initial_leadership,
    offline_election,
    preferred_election,
    without_replica,
)
from odradek.protocol.api import ApiKey, decode_request, encode_request

State = zd.LeaderIsrAndControllerEpoch


def test_a_new_partition_is_led_by_its_first_live_replica_with_every_live_replica_in_sync() -> None:
    assert initial_leadership([3, 1], 5) == State(3, 0, (3, 1), 5)
    assert initial_leadership([], 5) is None


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "unclean", "expected"),
    [
        ((1, 2, 3), (1, 2, 3), {2, 3}, False, State(2, 8, (2, 3), 9)),  # first live ISR member in assignment order
        ((3, 2, 1), (1, 2), {1, 2}, False, State(2, 8, (1, 2), 9)),  # assignment order, not ISR order
        ((1, 2, 3), (1,), {2, 3}, False, None),  # no live ISR member: offline
        ((1, 2, 3), (1,), {3}, True, State(3, 8, (3,), 9, leader_recovery_state=1)),  # unclean: recovering
        ((1, 2), (1,), set(), True, None),
    ],
)
def test_offline_election(assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], unclean: bool, expected: State | None) -> None:
    assert offline_election(assignment, State(1, 7, isr, 4), live, unclean, 9) == expected


def test_an_offline_replica_leaves_the_isr_but_the_last_member_stays() -> None:
    assert without_replica(State(1, 3, (1, 2), 4), 2, 5) == State(1, 4, (1,), 5)
    assert without_replica(State(1, 3, (1, 2), 4), 1, 5) == State(-1, 4, (2,), 5)
    assert without_replica(State(1, 3, (1,), 4), 1, 5) == State(-1, 4, (1,), 5)
    assert without_replica(State(1, 3, (1,), 4), 2, 5) is None


def broker(broker_id: int, rack: str | None = None) -> zd.BrokerRegistration:
    return zd.BrokerRegistration(broker_id, (zd.EndPoint("PLAINTEXT", "127.0.0.1", 9090 + broker_id, "PLAINTEXT"),), rack)


def context() -> ControllerContext:
    topic_id = uuid.uuid4()
    ctx = ControllerContext(1, epoch=6, epoch_zk_version=6, live_brokers={1: broker(1, "a"), 2: broker(2, "b")}, broker_epochs={1: 100, 2: 200}, topic_ids={"t": topic_id})
    ctx.assignments = {("t", 0): zd.ReplicaAssignment((1, 2)), ("t", 1): zd.ReplicaAssignment((2, 3), adding=(3,))}
    ctx.leadership = {("t", 0): Leadership(State(1, 2, (1, 2), 5), 7), ("t", 1): Leadership(State(2, 0, (2,), 6), 1)}
    return ctx


def roundtrip(api: ApiKey, version: int, body: dict) -> dict:
    frame = encode_request(api, version, 1, body, client_id="broker-1-controller")
    return decode_request(frame[4:]).body


def test_the_batch_sends_leader_and_isr_then_update_metadata_to_live_brokers_only() -> None:
    ctx = context()
    batch = RequestBatch(ctx)
    batch.add_leader_and_isr([2, 3], ("t", 1), is_new=True)  # 3 is not live
    requests = batch.requests("PLAINTEXT")
    assert [(r.broker_id, r.api_key, r.version) for r in requests] == [
        (2, ApiKey.LeaderAndIsr, 7), (1, ApiKey.UpdateMetadata, 8), (2, ApiKey.UpdateMetadata, 8),
    ]
    leader_and_isr = roundtrip(ApiKey.LeaderAndIsr, 7, requests[0].body)
    assert (leader_and_isr.controller_id, leader_and_isr.controller_epoch, leader_and_isr.broker_epoch, leader_and_isr.type) == (1, 6, 200, 0)
    [topic] = leader_and_isr.topic_states
    assert (topic.topic_name, topic.topic_id) == ("t", ctx.topic_ids["t"])
    [p] = topic.partition_states
    assert (p.partition_index, p.leader, p.leader_epoch, list(p.isr), p.partition_epoch, list(p.replicas), list(p.adding_replicas), p.is_new) == (1, 2, 0, [2], 1, [2, 3], [3], True)
    assert [(l.broker_id, l.host_name, l.port) for l in leader_and_isr.live_leaders] == [(2, "127.0.0.1", 9092)]

    update = roundtrip(ApiKey.UpdateMetadata, 8, requests[1].body)
    assert update.broker_epoch == 100
    [p] = update.topic_states[0].partition_states
    assert (p.leader, p.zk_version, list(p.offline_replicas)) == (2, 1, [3])
    assert [(b.id, b.rack, [(e.listener, e.port, e.security_protocol) for e in b.endpoints]) for b in update.live_brokers] == [
        (1, "a", [("PLAINTEXT", 9091, 0)]), (2, "b", [("PLAINTEXT", 9092, 0)]),
    ]
    assert batch.requests("PLAINTEXT") == []  # sent once


def test_a_replica_in_a_failed_log_dir_of_a_live_broker_is_offline_for_its_partition_only() -> None:
    ctx = context()
    ctx.replicas_on_offline_dirs[1] = {("t", 0)}
    assert (ctx.is_online(1, ("t", 0)), ctx.is_online(1, ("t", 1)), ctx.is_online(2, ("t", 0))) == (False, True, True)
    assert ctx.live_replicas(("t", 0)) == [2]
    assert ctx.offline_partitions() == [("t", 0)]  # its leader, broker 1, is offline there
    batch = RequestBatch(ctx)
    batch.add_update_metadata(ctx.live_brokers, [("t", 0)])
    update = roundtrip(ApiKey.UpdateMetadata, 8, batch.requests("PLAINTEXT")[0].body)
    assert list(update.topic_states[0].partition_states[0].offline_replicas) == [1]


def test_a_broker_in_controlled_shutdown_hears_of_its_partitions_but_is_neither_elected_nor_online() -> None:
    """Kafka's ``isLiveBroker`` and ``isReplicaOnline``: a broker that asked for a controlled shutdown stays
    registered until it stops, and still gets the cluster's metadata, but no election chooses it, no ISR may
    take it back, and the metadata calls its replicas offline."""
    ctx = context()
    ctx.shutting_down.add(1)
    assert ctx.live_broker_ids() == {2}
    assert (ctx.is_online(1, ("t", 0)), ctx.is_replica_online(1, ("t", 0)), ctx.is_replica_online(2, ("t", 0))) == (True, False, True)
    assert (ctx.live_replicas(("t", 0)), ctx.electable_replicas(("t", 0))) == ([1, 2], [2])
    batch = RequestBatch(ctx)
    batch.add_update_metadata(ctx.live_brokers, [("t", 0)])
    requests = batch.requests("PLAINTEXT")
    assert [r.broker_id for r in requests] == [1, 2]
    update = roundtrip(ApiKey.UpdateMetadata, 8, requests[0].body)
    assert list(update.topic_states[0].partition_states[0].offline_replicas) == [1]
    assert [b.id for b in update.live_brokers] == [1, 2]


def test_stop_replica_for_a_topic_being_deleted_carries_the_deletion_sentinel() -> None:
    ctx = context()
    ctx.topics_being_deleted.add("t")
    batch = RequestBatch(ctx)
    batch.add_update_metadata(ctx.live_brokers, [("t", 0)])
    batch.add_stop_replica([1, 2], ("t", 0), delete=True)
    requests = batch.requests("PLAINTEXT")
    update = roundtrip(ApiKey.UpdateMetadata, 8, requests[0].body)
    assert update.topic_states[0].partition_states[0].leader == -2  # LeaderDuringDelete
    stop = roundtrip(ApiKey.StopReplica, 4, next(r for r in requests if r.api_key == ApiKey.StopReplica).body)
    [p] = stop.topic_states[0].partition_states
    assert (stop.topic_states[0].topic_name, p.partition_index, p.leader_epoch, p.delete_partition) == ("t", 0, -2, True)


def test_preferred_election_only_moves_to_a_live_in_sync_first_replica() -> None:
    current = State(2, 3, (1, 2), 4)
    assert preferred_election((1, 2), current, {1, 2}, 5) == State(1, 4, (1, 2), 5)
    assert preferred_election((1, 2), current, {2}, 5) is None  # not live
    assert preferred_election((1, 2), State(2, 3, (2,), 4), {1, 2}, 5) is None  # not in sync
    assert preferred_election((2, 1), current, {1, 2}, 5) is None  # already leads


def test_imbalance_beyond_the_percentage_names_the_partitions_their_preferred_replica_can_take_back() -> None:
    ctx = context()  # t-0 preferred 1, led by 1; t-1 preferred 2, led by 2
    assert imbalanced_partitions(ctx, 10) == []
    ctx.assignments[("t", 2)] = zd.ReplicaAssignment((1, 2))
    ctx.leadership[("t", 2)] = Leadership(State(2, 1, (1, 2), 6), 3)  # broker 1 leads 1 of its 2: 50%
    assert imbalanced_partitions(ctx, 10) == [("t", 2)]
    assert imbalanced_partitions(ctx, 50) == []  # not beyond 50%
    ctx.leadership[("t", 2)] = Leadership(State(2, 1, (2,), 6), 3)  # broker 1 out of sync: it cannot lead
    assert imbalanced_partitions(ctx, 10) == []
