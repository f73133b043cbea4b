"""Both followers of a partition frozen under acks=all load: nothing acknowledged that fewer than
``min.insync.replicas`` replicas hold, and every retry answered with its original offset.

Three brokers, a topic of rf 3 with ``min.insync.replicas=2``; the idempotent acks=all producer of
checker.py writes to every partition. Each round SIGSTOPs both followers of partition 0 for
:data:`PAUSE_S` (past ``replica.lag.time.max.ms`` and the ZooKeeper session: the ISR shrinks to the leader
alone), then SIGCONTs them. A write to partition 0 acknowledged while they are frozen must be in a frozen
follower's log as well as the leader's: before the SIGCONT the test reads the followers' segment files
(what a stopped process wrote is in the page cache, and nothing changes them until it runs again) and
requires each such write at its acknowledged offset in at least one of them. A write only the leader holds
waits for a high watermark that cannot pass it (Kafka's ``DelayedProduce``; the high watermark does not
move while the ISR is below the minimum), and times out REQUEST_TIMED_OUT, or is refused
NOT_ENOUGH_REPLICAS once the ISR has shrunk: were it acknowledged instead, its offset would be past both
frozen followers' logs and the check would fail. A write the followers fetched just before the SIGSTOP may
be acknowledged seconds later, when the rest of its produce request (other partitions with the same frozen
followers) is answered at the ISR shrink: a produce request is answered when all its partitions are, in
Kafka as in odradek, so no moment after the SIGSTOP marks a limit for such an acknowledgement.

The producer retries the unacknowledged writes after SIGCONT; the leader already has them, and answers each
retry as a duplicate of one of the producer's last five batches: error NONE with the original batch's
offsets (``findDuplicateBatch``), so every acknowledgement of partition 0 carries the offset where the
record is (the other partitions' leaders are the frozen followers, whose requests time out in the client). The
checker then finds nothing lost, duplicated or reordered.

The load above meets the race that matters only now and then, so the same pause is also played at the wire,
where the order of events is fixed: two idempotent produces pipelined on one connection to the leader (the
first with a timeout past the ISR shrink, the second with a long one) while the followers are frozen. The
leader is the controller, so that the shrink does not wait for a frozen controller's session to expire and
a new controller's failover. Kafka
handles one request of a connection at a time: the first times out REQUEST_TIMED_OUT (nothing is
acknowledged while the ISR is below the minimum), and only then is the second handled, against the shrunk
ISR: NOT_ENOUGH_REPLICAS, not appended. After SIGCONT the first's retry is answered with its original offsets
and the second's is appended after it.
"""

from __future__ import annotations

import time
from pathlib import Path

from checker import ViolationKind, Workload
from harness import CLUSTER_SETTINGS, Cluster

from odradek.protocol.api import ApiKey, decode_response, encode_request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import iter_batch_positions
from odradek.protocol.records import Record, build_batch, iter_records

PARTITIONS = 3
ROUNDS = 2
PAUSE_S = 10.0
FIRST_TIMEOUT_MS = 14_000
"""The first pipelined produce's timeout: past the ISR shrink (4 to 7 s after SIGSTOP here)."""


def numbers_held(log_dir: Path, topic: str, partition: int) -> dict[int, int]:
    """The checker's numbers in a replica's segment files of ``topic``-``partition``, by offset (a batch
    still being written at the end of a segment is left out)."""
    directory = log_dir / f"{topic}-{partition}"
    assert directory.is_dir(), f"no {directory}"
    held = {}
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        held.update((record.offset, int(record.value)) for pos, _, _ in iter_batch_positions(data) for record in iter_records(data, pos) if record.value is not None)
    return held


def where_held(cluster: Cluster, topic: str, numbers: list[int], held: dict[int, dict[int, int]]) -> str:
    """Where each of ``numbers`` is, for a failed check: at which offsets of the leader's log (read now) and
    of each frozen follower's, and what the ZooKeeper state and the controller are now. An acknowledged
    offset that holds another number in the leader's log tells a wrong answer from a write acknowledged too
    early."""
    leader = cluster.leader_and_isr(topic, 0)
    logs = {"leader": numbers_held(cluster.brokers[leader.leader].log_dir, topic, 0), **{f"follower {f}": h for f, h in held.items()}}
    places = {n: {name: [o for o, v in log.items() if v == n] for name, log in logs.items()} for n in numbers}
    return f"now {leader}, controller {cluster.controller()}; where each is: {places}"


def test_nothing_acknowledged_that_only_the_leader_holds(cluster: Cluster) -> None:
    topic = "followers-paused"
    cluster.create_topic(topic, PARTITIONS)
    min_insync = int(CLUSTER_SETTINGS["min.insync.replicas"])
    assert min_insync == 2
    assert PAUSE_S > int(CLUSTER_SETTINGS["replica.lag.time.max.ms"]) / 1000 + 2
    timings = []
    with Workload(cluster.bootstrap, topic, PARTITIONS) as workload:
        workload.wait_for_progress()
        for _ in range(ROUNDS):
            # Each round starts from a full ISR: after the topic's creation or the last round's recovery, a
            # follower slowed by the machine's load may still be on its way back in.
            cluster.wait_until(lambda: len(cluster.leader_and_isr(topic, 0).isr) == 3, f"a full ISR of {topic}-0", 60)
            state = cluster.leader_and_isr(topic, 0)
            followers = [r for r in state.isr if r != state.leader]
            assert len(followers) == 2, state
            paused_at = time.monotonic()
            for follower in followers:
                cluster.pause(follower)
            try:
                cluster.wait_until(lambda: cluster.leader_and_isr(topic, 0).isr == (state.leader,), f"the ISR of {topic}-0 shrunk to {state.leader}", 30)
                shrunk = time.monotonic() - paused_at
                time.sleep(max(0.0, PAUSE_S - shrunk))
                # What the frozen followers hold, all through the pause: read before they run again.
                held = {follower: numbers_held(cluster.brokers[follower].log_dir, topic, 0) for follower in followers}
            finally:
                resumed_at = time.monotonic()
                for follower in followers:
                    cluster.resume(follower)
            acknowledged = workload.acknowledged_offsets(0, workload.acknowledged_within(0, paused_at, resumed_at))

            def replicas_holding(number: int, offset: int | None) -> int:
                """The leader (it acknowledged the write) and the frozen followers holding it where acknowledged."""
                return 1 + sum(1 for h in held.values() if (h.get(offset) == number if offset is not None else number in h.values()))

            log_ends = {f: max(h, default=-1) + 1 for f, h in held.items()}
            under = [n for n, offset in acknowledged.items() if replicas_holding(n, offset) < min_insync]
            assert not under, (
                f"leader {state.leader} acknowledged {len(under)} writes to {topic}-0 that neither of its frozen followers "
                f"{followers} holds (their logs end at {log_ends}): "
                f"{workload.describe_acknowledgements(0, under[:10], paused_at)}; {where_held(cluster, topic, under[:10], held)}"
            )
            recovered = cluster.wait_fully_replicated(topic) + workload.wait_for_progress()
            timings.append(f"ISR of {state.leader} alone after {shrunk:.1f}s, {len(acknowledged)} writes acknowledged while frozen, "
                           f"the followers' logs ending at {log_ends}, {recovered:.1f}s to recover")
        report = workload.finish()
    print(f"\n{'; '.join(timings)}\n{report}")
    # Every retry to partition 0's leader, which never stopped, carries its original offset. The other
    # partitions are led by the frozen followers: a request to them times out in the client, and librdkafka
    # then acknowledges its records without an offset once a later batch succeeds (its implicit ack, which
    # Kafka's leader faults bring about as well; checker.py).
    assert report.ok and [v for v in report.violations if v.kind is ViolationKind.NO_OFFSET and v.partition == 0] == [], str(report)
    assert report.acknowledged > 0 and not report.delivery_errors, str(report)


INIT_PRODUCER_ID = {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}


def produce_body(topic: str, producer: dict, base_sequence: int, values: list[bytes], timeout_ms: int) -> dict:
    """One idempotent batch whose records' timestamps are ``producer["created"]`` plus their sequence (recent:
    a producer whose last timestamp is older than ``producer.id.expiration.ms`` is forgotten)."""
    created = producer["created"]
    ids = {"producer_id": producer["producer_id"], "producer_epoch": producer["producer_epoch"]}
    records = build_batch([Record(value=v, timestamp=created + base_sequence + i) for i, v in enumerate(values)], base_sequence=base_sequence, **ids)
    return {"acks": -1, "timeout_ms": timeout_ms, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}


def answer_of(wire, body: dict):
    return wire.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0]


def test_a_produce_pipelined_behind_one_waiting_meets_the_shrunk_isr(cluster: Cluster, connect) -> None:
    topic = "followers-paused-wire"
    # The controller leads the partition, so the shrink is the leader's own doing (its AlterPartition, or the
    # controller dropping the expired followers), 4 to 7 s after the SIGSTOP. Were the controller one of the
    # frozen followers, the shrink would wait for its session to expire and for a new controller's failover,
    # which on a loaded machine ends too close to the first produce's timeout to tell the answers apart.
    leader = cluster.controller()
    followers = [b for b in cluster.brokers if b != leader]
    cluster.create_topic(topic, 1, assignment=[[leader, *followers]])
    state = cluster.leader_and_isr(topic, 0)
    story = [f"controller {leader}, {topic}-0 {state}"]

    def told() -> str:
        """What happened so far, for a failing assertion."""
        return "; ".join(story)

    assert state.leader == leader and set(state.isr) == set(cluster.brokers), told()
    wire = connect(cluster.brokers[leader].bootstrap)
    wire.sock.settimeout(FIRST_TIMEOUT_MS / 1000 + 15)
    inits = []
    cluster.wait_until(lambda: inits.append(wire.call(ApiKey.InitProducerId, 4, INIT_PRODUCER_ID)) or inits[-1].error_code == ErrorCode.NONE, "a producer id", 30)
    init = inits[-1]
    producer = {"producer_id": init.producer_id, "producer_epoch": init.producer_epoch, "created": int(time.time() * 1000)}
    started = answer_of(wire, produce_body(topic, producer, 0, [b"a0", b"a1"], 20_000))
    story.append(f"a0-a1 answered {ErrorCode(started.error_code).name} at {started.base_offset}")
    assert (started.error_code, started.base_offset) == (ErrorCode.NONE, 0), told()
    first = produce_body(topic, producer, 2, [b"b2", b"b3", b"b4"], FIRST_TIMEOUT_MS)
    second = produce_body(topic, producer, 5, [b"c5"], FIRST_TIMEOUT_MS + 10_000)

    paused_at = time.monotonic()
    for follower in followers:
        cluster.pause(follower)
    try:
        for correlation_id, body in enumerate((first, second), start=1000):
            wire.send(encode_request(ApiKey.Produce, 9, correlation_id, body, client_id=wire.client_id))
        cluster.wait_until(lambda: cluster.leader_and_isr(topic, 0).isr == (leader,), f"the ISR of {topic}-0 shrunk to {leader} ({told()})", 30)
        shrunk = time.monotonic() - paused_at
        story.append(f"frozen {followers}, the ISR {leader} alone after {shrunk:.1f}s")
        answers = []
        for _ in range(2):
            answers.append(decode_response(ApiKey.Produce, 9, wire.read_frame())[1].responses[0].partition_responses[0])
            story.append(f"answered {ErrorCode(answers[-1].error_code).name} at {answers[-1].base_offset} after {time.monotonic() - paused_at:.1f}s")
        answered = time.monotonic() - paused_at
        story.append(f"controller {cluster.controller()}, {topic}-0 {cluster.leader_and_isr(topic, 0)}")
    finally:
        for follower in followers:
            cluster.resume(follower)
    print(f"\n{told()}")
    assert shrunk < FIRST_TIMEOUT_MS / 1000 - 3, f"the ISR shrank too close to the first produce's timeout to tell: {told()}"
    assert answers[0].error_code == ErrorCode.REQUEST_TIMED_OUT, told()
    assert answered >= FIRST_TIMEOUT_MS / 1000, told()
    assert answers[1].error_code == ErrorCode.NOT_ENOUGH_REPLICAS, told()

    # The retry needs the followers back in the ISR: in ZooKeeper, where no broker's stale metadata (a follower
    # just resumed still has the ISR of before its pause) can claim it early.
    recovered = cluster.wait_until(lambda: set(cluster.leader_and_isr(topic, 0).isr) == set(cluster.brokers), f"a full ISR of {topic}-0 ({told()})", 60)
    story.append(f"resumed, the ISR full again after {recovered:.1f}s")
    retries = []  # NOT_ENOUGH_REPLICAS until the leader has the ISR ZooKeeper shows
    cluster.wait_until(lambda: retries.append(answer_of(wire, {**first, "timeout_ms": 20_000})) or retries[-1].error_code != ErrorCode.NOT_ENOUGH_REPLICAS, f"the retry not refused ({told()})", 30)
    retried = retries[-1]
    story.append(f"retry answered {[ErrorCode(r.error_code).name for r in retries]}: {retried}")
    assert (retried.error_code, retried.base_offset, retried.log_append_time_ms, retried.log_start_offset) == (ErrorCode.NONE, 2, producer["created"] + 4, 0), told()
    again = answer_of(wire, {**second, "timeout_ms": 20_000})
    story.append(f"second again answered {again}")
    assert (again.error_code, again.base_offset, again.log_append_time_ms) == (ErrorCode.NONE, 5, -1), told()

    fetched = wire.call(ApiKey.Fetch, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": "",
    }).responses[0].partitions[0]
    assert fetched.high_watermark == 6, told()
    values = [(record.offset, record.value) for pos, _, _ in iter_batch_positions(fetched.records) for record in iter_records(fetched.records, pos)]
    assert values == [(0, b"a0"), (1, b"a1"), (2, b"b2"), (3, b"b3"), (4, b"b4"), (5, b"c5")], told()
