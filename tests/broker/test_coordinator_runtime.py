"""The coordinator runtime driven directly (sans-IO): shards per partition, writes answered once
committed, loading with transactional batches and markers, timers per shard, FindCoordinator's lookup.

The shard here is a small key-value coordinator; its writer keeps batches in memory and completes
appends when told, as a partition whose followers have not caught up yet.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field

import anyio
import pytest

from odradek.broker.coordinator.runtime import (
    AppendResult,
    CoordinatorResult,
    CoordinatorRuntime,
    CoordinatorShard,
    CoordinatorTopic,
    LoadedBatch,
    Producer,
    ShardContext,
    now_ms,
    partition_for,
)
from odradek.broker.coordinator.deferred import Deferred
from odradek.controller.metadata_image import BrokerInfo, PartitionState, TopicInfo
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.java_hash import java_string_hash
from odradek.protocol.record_batch import read_batch_header
from odradek.protocol.records import iter_records_unchecked

E = ErrorCode
TOPIC = CoordinatorTopic("__kv_state", 3, 1, {"cleanup.policy": "compact"})


class ManualClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


class MemoryWriter:
    """Keeps each appended batch; with ``hold`` the appends complete only on :meth:`release`."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, bytearray]] = []
        self.hold = False
        self.held: list[tuple[Deferred[AppendResult], int]] = []

    def append(self, partition: int, batch: bytearray) -> Deferred[AppendResult]:
        self.batches.append((partition, batch))
        out: Deferred[AppendResult] = Deferred()
        if self.hold:
            self.held.append((out, len(self.batches) - 1))
        else:
            out.complete(AppendResult(E.NONE, len(self.batches) - 1))
        return out

    def release(self, error: ErrorCode = E.NONE) -> None:
        held, self.held = self.held, []
        for deferred, offset in held:
            deferred.complete(AppendResult(error, offset))

    def records(self, index: int) -> list[tuple[bytes, bytes | None]]:
        batch = bytes(self.batches[index][1])
        return [(r.key, r.value) for r in iter_records_unchecked(batch, 0, read_batch_header(batch))]


@dataclass
class KvShard(CoordinatorShard):
    """Values by key; a put is visible once committed, pending until then; transactional puts wait for
    their producer's marker."""

    context: ShardContext
    values: dict[bytes, bytes] = field(default_factory=dict)
    pending: dict[bytes, bytes] = field(default_factory=dict)
    txn: dict[int, dict[bytes, bytes]] = field(default_factory=dict)
    replayed: list[tuple[int, Producer | None, bytes, bytes | None]] = field(default_factory=list)
    loaded: bool = False
    unloaded: bool = False
    deleted: list = field(default_factory=list)

    def replay(self, offset: int, producer: Producer | None, key: bytes, value: bytes | None) -> None:
        self.replayed.append((offset, producer, key, value))
        target = self.values if producer is None else self.txn.setdefault(producer.producer_id, {})
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value

    def replay_end_transaction_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        written = self.txn.pop(producer_id, {})
        if committed:
            self.values.update(written)

    def on_loaded(self) -> None:
        self.loaded = True

    def on_unloaded(self) -> None:
        self.unloaded = True

    def on_partitions_deleted(self, partitions: list[tuple[str, int]]) -> None:
        self.deleted.extend(partitions)

    def put(self, key: bytes, value: bytes, producer: Producer | None = None) -> CoordinatorResult[ErrorCode]:
        self.pending[key] = value

        def response(result: AppendResult) -> ErrorCode:
            del self.pending[key]
            if result.error == E.NONE:
                if producer is None:
                    self.values[key] = value
                else:
                    self.txn.setdefault(producer.producer_id, {})[key] = value
            return result.error

        return CoordinatorResult([(key, value)], response, producer)


def runtime(writer: MemoryWriter | None = None, clock: ManualClock | None = None, **kw) -> CoordinatorRuntime[KvShard]:
    return CoordinatorRuntime(TOPIC, KvShard, writer or MemoryWriter(), broker_id=1, clock=clock or ManualClock(), **kw)


def test_keys_map_to_partitions_as_kafkas_utils_abs_of_string_hash_code():
    assert partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE; Utils.abs maps it to 0
    assert partition_for("hello", 50) == 99162322 % 50 == 22
    negative = next(s for s in (f"group-{i}" for i in range(1000)) if java_string_hash(s) < 0)
    assert partition_for(negative, 50) == (-java_string_hash(negative)) % 50


def test_a_partition_serves_only_once_loaded_and_until_unloaded():
    rt = runtime()
    assert rt.status(0) == E.NOT_COORDINATOR
    rt.load(0, [LoadedBatch(0, -1, -1, False, [(b"k", b"v")])])
    assert rt.status(0) is None and rt.owned_partitions == {0}
    shard = rt.shard(0)
    assert shard.loaded and shard.values == {b"k": b"v"}
    with pytest.raises(KafkaError) as err:
        rt.shard(1)
    assert err.value.code == E.NOT_COORDINATOR
    rt.unload(0)
    assert shard.unloaded and rt.status(0) == E.NOT_COORDINATOR


def test_a_failed_load_leaves_the_partition_unserved():
    rt = runtime()

    class Broken(list):
        def __iter__(self):
            yield LoadedBatch(0, -1, -1, False, [(b"k", b"v")])
            raise OSError("disk")

    with pytest.raises(OSError):
        rt.load(0, Broken())
    assert rt.status(0) == E.NOT_COORDINATOR


class LogReader:
    """Batches read from a log: the runtime replays them on a worker thread, here held at a gate."""

    def __init__(self, batches: list[LoadedBatch], fail: bool = False) -> None:
        self.batches = batches
        self.fail = fail
        self.gate = threading.Event()
        self.thread: threading.Thread | None = None

    def __iter__(self):
        self.thread = threading.current_thread()
        assert self.gate.wait(5)
        yield from self.batches
        if self.fail:
            raise OSError("disk")


async def until(condition, timeout: float = 5) -> None:
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.005)


def test_a_partition_read_from_its_log_loads_off_the_event_loop():
    rt = runtime(clock=now_ms)
    loaded = LogReader([LoadedBatch(0, -1, -1, False, [(b"k", b"v")])])
    failing = LogReader([], fail=True)
    abandoned = LogReader([LoadedBatch(0, -1, -1, False, [(b"old", b"x")])])
    statuses = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            rt.load(0, loaded)  # asked for before the runtime runs, as at start-up
            await tg.start(rt.run)
            rt.load(1, failing)
            rt.load(2, abandoned)
            await anyio.sleep(0.05)
            statuses.extend(rt.status(p) for p in (0, 1, 2))
            rt.unload(2)  # leadership lost while loading
            for reader in (loaded, failing, abandoned):
                reader.gate.set()
            await until(lambda: rt.status(0) is None and rt.status(1) == E.NOT_COORDINATOR)
            await anyio.sleep(0.05)
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert statuses == [E.COORDINATOR_LOAD_IN_PROGRESS] * 3
    assert loaded.thread is not threading.main_thread()
    assert rt.shard(0).values == {b"k": b"v"} and rt.shard(0).loaded
    assert rt.status(2) == E.NOT_COORDINATOR, "a shard resigned while loading does not serve"


def test_a_write_is_answered_once_committed_and_reverted_when_the_append_fails():
    writer = MemoryWriter()
    rt = runtime(writer)
    rt.load(1, [])
    writer.hold = True
    answer = rt.write(1, lambda shard: shard.put(b"a", b"1"))
    assert not answer.done and rt.shard(1).pending == {b"a": b"1"} and rt.shard(1).values == {}
    assert writer.batches[0][0] == 1 and writer.records(0) == [(b"a", b"1")]
    writer.release()
    assert answer.value == E.NONE and rt.shard(1).values == {b"a": b"1"} and not rt.shard(1).pending

    failed = rt.write(1, lambda shard: shard.put(b"b", b"2"))
    writer.release(E.NOT_LEADER_OR_FOLLOWER)
    assert failed.value == E.NOT_LEADER_OR_FOLLOWER and b"b" not in rt.shard(1).values and not rt.shard(1).pending


def test_a_result_without_records_appends_nothing_and_answers_at_once():
    writer = MemoryWriter()
    rt = runtime(writer)
    rt.load(0, [])
    assert rt.write(0, lambda shard: CoordinatorResult.of("read only")).value == "read only"
    assert rt.read(0, lambda shard: len(shard.values)) == 0
    assert writer.batches == []


def test_a_write_to_a_partition_not_served_raises_its_status():
    rt = runtime()
    with pytest.raises(KafkaError) as err:
        rt.write(2, lambda shard: shard.put(b"a", b"1"))
    assert err.value.code == E.NOT_COORDINATOR


def test_a_transactional_write_is_one_transactional_batch_of_its_producer():
    writer = MemoryWriter()
    rt = runtime(writer)
    rt.load(0, [])
    rt.write(0, lambda shard: shard.put(b"t", b"x", Producer(4000, 3)))
    header = read_batch_header(bytes(writer.batches[0][1]))
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.is_transactional) == (4000, 3, 0, True)
    assert rt.shard(0).values == {}
    rt.complete_transaction(0, 4000, 3, committed=True)
    assert rt.shard(0).values == {b"t": b"x"}
    plain = MemoryWriter()
    rt2 = runtime(plain)
    rt2.load(0, [])
    rt2.write(0, lambda shard: shard.put(b"p", b"y"))
    header = read_batch_header(bytes(plain.batches[0][1]))
    assert (header.producer_id, header.is_transactional) == (-1, False)


def test_loading_replays_transactional_batches_and_their_markers():
    rt = runtime()
    rt.load(
        0,
        [
            LoadedBatch(0, -1, -1, False, [(b"a", b"1")]),
            LoadedBatch(1, 7, 0, True, [(b"b", b"2")]),
            LoadedBatch(2, 8, 0, True, [(b"c", b"3")]),
            LoadedBatch(3, 7, 0, True, [], commit=True),
            LoadedBatch(4, 8, 0, True, [], commit=False),
            LoadedBatch(5, 9, 1, True, [(b"d", b"4")]),
        ],
    )
    shard = rt.shard(0)
    assert shard.values == {b"a": b"1", b"b": b"2"}
    assert shard.txn == {9: {b"d": b"4"}}, "a transaction without its marker stays pending"
    assert shard.replayed[1] == (1, Producer(7, 0), b"b", b"2")
    rt.complete_transaction(0, 9, 1, committed=False)
    assert shard.txn == {} and b"d" not in shard.values


def test_timers_run_per_shard_and_go_with_it():
    clock = ManualClock()
    rt = runtime(clock=clock)
    rt.load(0, [])
    rt.load(1, [])
    fired = []
    rt.shard(0).context.timers.schedule("a", 100, lambda: fired.append(0))
    rt.shard(1).context.timers.schedule("a", 50, lambda: fired.append(1))
    assert rt.next_deadline() == clock.now + 50
    clock.now += 60
    assert rt.run_due_timers() == 1 and fired == [1]
    rt.unload(0)
    assert rt.next_deadline() is None
    clock.now += 100
    assert rt.run_due_timers() == 0 and fired == [1]


def test_a_failing_timer_is_handed_to_its_shard_and_the_others_still_run():
    clock = ManualClock()
    rt = runtime(clock=clock)
    rt.load(0, [])
    failures = []
    shard = rt.shard(0)
    shard.on_timer_failed = lambda timer, exc: failures.append((timer.key, str(exc)))  # type: ignore[method-assign]

    def boom() -> None:
        raise RuntimeError("boom")

    ran = []
    shard.context.timers.schedule("bad", 0, boom)
    shard.context.timers.schedule("good", 0, lambda: ran.append(True))
    rt.run_due_timers()
    assert failures == [("bad", "boom")] and ran == [True]


def test_a_shard_writes_on_its_own_from_a_timer():
    writer = MemoryWriter()
    clock = ManualClock()
    rt = runtime(writer, clock)
    rt.load(2, [])
    shard = rt.shard(2)
    shard.context.timers.schedule("expire", 10, lambda: shard.context.write(CoordinatorResult([(b"gone", None)], lambda r: r.error)))
    clock.now += 10
    rt.run_due_timers()
    assert writer.batches[0][0] == 2 and writer.records(0) == [(b"gone", None)]


def topic_info(leaders: list[int], name: str = TOPIC.name) -> TopicInfo:
    return TopicInfo(name, uuid.uuid4(), {i: PartitionState(leader, 0, [leader], [leader]) for i, leader in enumerate(leaders)})


def test_leadership_changes_load_and_unload_shards():
    loads = []

    def load(partition: int):
        loads.append(partition)
        return [LoadedBatch(0, -1, -1, False, [(b"p", str(partition).encode())])]

    rt = runtime(load=load)
    rt.on_partitions_changed(topic_info([1, 2, 1]), [0, 1, 2])
    assert rt.owned_partitions == {0, 2} and loads == [0, 2]
    assert rt.shard(2).values == {b"p": b"2"}
    rt.on_partitions_changed(topic_info([1, 1, 2]), [1, 2])
    assert rt.owned_partitions == {0, 1} and loads == [0, 2, 1]
    rt.on_partitions_changed(topic_info([2], name="other"), [0])
    assert rt.owned_partitions == {0, 1}
    shard = rt.shard(0)
    rt.on_topic_deleted(topic_info([1, 1], name="payments"))
    assert shard.deleted == [("payments", 0), ("payments", 1)]
    rt.on_topic_deleted(topic_info([1, 1, 2]))
    assert rt.owned_partitions == set() and shard.unloaded


@dataclass
class Image:
    topics: dict = field(default_factory=dict)
    brokers: dict = field(default_factory=dict)


def test_find_coordinator_creates_the_topic_then_names_the_keys_partition_leader():
    image = Image(brokers={1: BrokerInfo(1, "h1", 9092), 2: BrokerInfo(2, "h2", 9093)})
    created = []
    rt = runtime(metadata=lambda: image, create_topic=created.append)
    assert rt.locate("hello") == (E.COORDINATOR_NOT_AVAILABLE, None)
    assert created == [TOPIC]
    image.topics[TOPIC.name] = topic_info([1, 2, 2])
    error, broker = rt.locate("hello")
    assert error == E.NONE and broker.node_id == [1, 2, 2][partition_for("hello", 3)]
    image.topics[TOPIC.name] = topic_info([-1, -1, -1])
    assert rt.locate("hello") == (E.COORDINATOR_NOT_AVAILABLE, None)


def test_on_the_event_loop_timers_fire_when_due_and_answers_are_awaited():
    rt = CoordinatorRuntime(TOPIC, KvShard, MemoryWriter(), broker_id=1)
    rt.load(0, [])
    fired = anyio.Event()
    pending: Deferred[str] = Deferred()

    async def main() -> str:
        async with anyio.create_task_group() as tg:
            await tg.start(rt.run)
            # Scheduled while the loop sleeps with nothing due: the runtime wakes for it.
            rt.shard(0).context.timers.schedule("soon", 20, fired.set)
            with anyio.fail_after(5):
                await fired.wait()
            answer = rt.respond(pending, str.upper)
            pending.complete("done")
            result = await answer  # type: ignore[misc]
            tg.cancel_scope.cancel()
        return result

    assert anyio.run(main) == "DONE"
    assert rt.respond(Deferred.completed("now"), str.upper) == "NOW"


def test_the_runtime_and_the_group_coordinator_import_no_server():
    """They receive what they need: importing them loads neither the server nor the handlers (no cycle)."""
    code = (
        "import sys\n"
        "import odradek.broker.coordinator.runtime, odradek.broker.coordinator.partitions, odradek.broker.coordinator.group.group_coordinator\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split())
    assert "odradek.broker.coordinator.group.group_coordinator" in loaded
    assert not {m for m in loaded if m in ("odradek.broker.kafka_server", "odradek.broker.kafka_apis") or m.startswith("odradek.broker.handlers")}
