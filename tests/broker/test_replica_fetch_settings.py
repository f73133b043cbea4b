"""The ``replica.fetch.*`` and ``replica.socket.timeout.ms`` broker keys reach the replica fetcher.

The keys are parsed and checked as Kafka's ``KafkaConfig`` does (the socket timeout and the lag time bound
``replica.fetch.wait.max.ms``), and a fetcher configured from them behaves as they say against an odradek
leader over real sockets: ``replica.fetch.response.max.bytes`` bounds each fetch to its first batch,
``replica.fetch.min.bytes`` with ``replica.fetch.wait.max.ms`` makes the leader hold a fetch until enough
bytes came or the wait passed, ``replica.fetch.backoff.ms`` delays a partition after an error, and
``replica.socket.timeout.ms`` bounds the wait for a leader that never answers.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Callable, Iterator

import anyio
import anyio.from_thread
import pytest
from confluent_kafka import Producer

from odradek import Broker
from odradek.broker.config import BrokerConfig
from odradek.broker.network.kafka_client import Node
from odradek.broker.replication.replica_fetcher import SETTING_KEYS, FetcherConfig, InitialFetchState, ReplicaFetcherManager, initial_fetch_offset
from odradek.controller.metadata_image import PartitionState
from odradek.storage.config_types import ConfigError
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from tests.following import follower_partition

TOPIC = "fetched"
FOLLOWER = 2
BATCHES = 8


def test_every_fetcher_setting_comes_from_its_key() -> None:
    values = {"replica.fetch.wait.max.ms": "700", "replica.fetch.min.bytes": "11", "replica.fetch.response.max.bytes": "12345",
              "replica.fetch.max.bytes": "2345", "replica.fetch.backoff.ms": "77", "replica.socket.timeout.ms": "9000"}
    assert set(values) == set(SETTING_KEYS.values())
    config = FetcherConfig.from_broker_config(FOLLOWER, BrokerConfig(values).values)
    assert config == FetcherConfig(FOLLOWER, max_wait_ms=700, min_bytes=11, max_bytes=12345, partition_max_bytes=2345, backoff_ms=77, socket_timeout_ms=9000)
    assert FetcherConfig.from_broker_config(FOLLOWER, BrokerConfig({}).values) == FetcherConfig(FOLLOWER)  # Kafka's defaults, as the table's


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replica.fetch.wait.max.ms": "5000", "replica.socket.timeout.ms": "4000"}, "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms"),
        ({"replica.fetch.wait.max.ms": "5000", "replica.lag.time.max.ms": "4000"}, "replica.fetch.wait.max.ms should always be less than or equal to replica.lag.time.max.ms"),
        ({"replica.fetch.backoff.ms": "-1"}, "replica.fetch.backoff.ms"),
        ({"replica.fetch.response.max.bytes": "-1"}, "replica.fetch.response.max.bytes"),
    ],
    ids=["socket-timeout-below-wait", "lag-time-below-wait", "negative-backoff", "negative-response-max"],
)
def test_settings_kafka_refuses_stop_the_start(values: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(values)


@pytest.fixture(scope="module")
def leader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """An odradek broker leading ``fetched-0`` with broker 2 as its follower in the ISR, holding
    :data:`BATCHES` batches of one record each."""
    with Broker(log_dir=tmp_path_factory.mktemp("leader"), config={"broker.id": "0"}) as broker:
        assert broker.server is not None
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1", "linger.ms": 0, "log_level": 0})
        for i in range(BATCHES):
            producer.produce(TOPIC, b"batch-%d" % i)
            assert producer.flush(30) == 0  # each record its own batch
        lead_with_follower(broker, TOPIC)
        yield broker


def lead_with_follower(broker: Broker, topic: str) -> None:
    """A LeaderAndIsr giving ``topic``-0 broker 2 as a follower in its ISR, in leader epoch 1 (called from the
    test's thread or a worker thread of the broker's event loop)."""
    partition = broker.server.replica_manager.partitions[(topic, 0)]  # type: ignore[union-attr]
    state = PartitionState(0, 1, [0, FOLLOWER], [0, FOLLOWER], 1)
    anyio.from_thread.run_sync(lambda: partition.become_leader(state, False, int(time.time() * 1000)), token=broker._token)


def follow(
    leader: Broker, config: FetcherConfig, follower_dir: Path, caught_up: Callable[[Log], bool], work: Callable[[list[tuple[float, int]]], None] = lambda ends: None, topic: str = TOPIC
) -> list[tuple[float, int]]:
    """Follow ``topic``-0 in leader epoch 1 from an empty log with ``config`` on the broker's event loop, ``work``
    (given the list below as it grows) in a thread meanwhile, until ``caught_up``; the follower's (time, log
    end offset) after each append that moved it. A topic the leader does not have yet is fetched by name."""
    partition = leader.server.replica_manager.partitions.get((topic, 0))  # type: ignore[union-attr]
    host, port = leader.bootstrap.split(":")
    local = Log.open(follower_dir / f"{topic}-0", LogConfig())
    ends: list[tuple[float, int]] = []

    def appended() -> None:
        if local.log_end_offset > (ends[-1][1] if ends else 0):  # not a high watermark's update alone
            ends.append((time.monotonic(), local.log_end_offset))

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            following = follower_partition(local, FOLLOWER, 0, 1, lambda p: appended())
            manager = ReplicaFetcherManager(config, 1, {(topic, 0): following}.__getitem__, tg)
            topic_id = partition.topic_id if partition is not None else None
            manager.add_fetcher_for_partitions({(topic, 0): InitialFetchState(topic_id, Node(0, host, int(port)), 1, initial_fetch_offset(following))})
            await anyio.to_thread.run_sync(work, ends)
            with anyio.fail_after(30):
                while not caught_up(local):
                    await anyio.sleep(0.02)
            manager.close_all()
            tg.cancel_scope.cancel()

    try:
        anyio.from_thread.run(run, token=leader._token)
        return ends
    finally:
        local.close()


def produce_to(leader: Broker, topic: str, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": leader.bootstrap, "acks": "1", "log_level": 0})
    producer.produce(topic, value)
    assert producer.flush(30) == 0


def test_response_max_bytes_bounds_each_fetch_to_its_first_batch(leader: Broker, tmp_path: Path) -> None:
    whole = follow(leader, FetcherConfig.from_broker_config(FOLLOWER, BrokerConfig({}).values), tmp_path / "default", lambda log: log.log_end_offset >= BATCHES)
    assert [end for _, end in whole] == [BATCHES]  # one fetch brings every batch
    one_each = follow(leader, FetcherConfig.from_broker_config(FOLLOWER, BrokerConfig({"replica.fetch.response.max.bytes": "1"}).values), tmp_path / "bounded", lambda log: log.log_end_offset >= BATCHES)
    assert [end for _, end in one_each] == list(range(1, BATCHES + 1))  # the first batch comes whatever its size, and only it


@pytest.mark.parametrize(("min_bytes", "held"), [("1", False), ("1048576", True)], ids=["min-1-byte", "min-1-MiB"])
def test_min_bytes_holds_the_fetch_until_the_wait_passes(leader: Broker, tmp_path: Path, min_bytes: str, held: bool) -> None:
    """A record written while the caught-up follower's fetch waits at the leader reaches the follower at once
    with ``replica.fetch.min.bytes`` 1, and only when ``replica.fetch.wait.max.ms`` has passed with more."""
    wait_s = 2.0
    settings = {"replica.fetch.min.bytes": min_bytes, "replica.fetch.wait.max.ms": str(int(wait_s * 1000))}
    end = leader.server.replica_manager.partitions[(TOPIC, 0)].log_end_offset  # type: ignore[union-attr]
    produced_at: list[float] = []

    def produce_when_caught_up(ends: list[tuple[float, int]]) -> None:
        deadline = time.monotonic() + 30
        while not (ends and ends[-1][1] >= end) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)  # the follower's next fetch is out, waiting at the leader
        produced_at.append(time.monotonic())
        produce_to(leader, TOPIC, b"one more")

    ends = follow(leader, FetcherConfig.from_broker_config(FOLLOWER, BrokerConfig(settings).values), tmp_path / "follower", lambda log: log.log_end_offset > end, produce_when_caught_up)
    took = next(t for t, e in ends if e > end) - produced_at[0]
    assert (took >= 0.75 * wait_s) is held, f"the record reached the follower {took:.2f}s after it was written"


@pytest.mark.parametrize(("backoff_ms", "held"), [("50", False), ("3000", True)], ids=["backoff-50-ms", "backoff-3-s"])
def test_backoff_delays_a_partition_after_an_error(leader: Broker, tmp_path: Path, backoff_ms: str, held: bool) -> None:
    """A follower's first fetch of a partition its leader does not have yet is answered
    UNKNOWN_TOPIC_OR_PARTITION; once the leader has it, the follower gets its record within a few tries of
    ``replica.fetch.backoff.ms`` 50, and only when the 3 s of the first error's backoff have passed with 3000."""
    topic = f"late-{backoff_ms}"
    ready_at: list[float] = []

    def create_and_lead(ends: list[tuple[float, int]]) -> None:
        time.sleep(0.2)  # the follower's first fetch has been refused
        produce_to(leader, topic, b"late")
        lead_with_follower(leader, topic)
        ready_at.append(time.monotonic())

    ends = follow(leader, FetcherConfig.from_broker_config(FOLLOWER, BrokerConfig({"replica.fetch.backoff.ms": backoff_ms}).values), tmp_path, lambda log: log.log_end_offset >= 1, create_and_lead, topic)
    took = ends[0][0] - ready_at[0]
    assert (took >= 1.0) is held, f"the record reached the follower {took:.2f}s after the leader had it"


@pytest.mark.parametrize(("timeout_ms", "gives_up"), [("1000", True), ("4000", False)], ids=["socket-timeout-1-s", "socket-timeout-4-s"])
def test_socket_timeout_bounds_the_wait_for_a_leader_that_never_answers(tmp_path: Path, timeout_ms: str, gives_up: bool) -> None:
    """A leader that accepts the follower's connection and never answers: the follower gives up after
    ``replica.socket.timeout.ms``, waits ``replica.fetch.backoff.ms`` and connects again."""
    silent = socket.create_server(("127.0.0.1", 0))
    accepted: list[float] = []
    held: list[socket.socket] = []

    def accept() -> None:
        silent.settimeout(0.2)
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            try:
                connection, _ = silent.accept()
            except TimeoutError:
                continue
            accepted.append(time.monotonic())
            held.append(connection)

    local = Log.open(tmp_path / f"{TOPIC}-0", LogConfig())
    config = FetcherConfig.from_broker_config(FOLLOWER, BrokerConfig({"replica.socket.timeout.ms": timeout_ms, "replica.fetch.backoff.ms": "100"}).values)

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            manager = ReplicaFetcherManager(config, 1, {(TOPIC, 0): follower_partition(local, FOLLOWER, 0, 1)}.__getitem__, tg)
            manager.add_fetcher_for_partitions({(TOPIC, 0): InitialFetchState(None, Node(0, "127.0.0.1", silent.getsockname()[1]), 1, 0)})
            await anyio.to_thread.run_sync(accept)
            manager.close_all()

    try:
        anyio.run(run)
    finally:
        for connection in held:
            connection.close()
        silent.close()
        local.close()
    assert accepted, "the follower never connected"
    again = [later - accepted[0] for later in accepted[1:]]
    assert bool(again) is gives_up, f"connections {again} s after the first"
    if gives_up:
        assert 0.9 <= again[0] <= 2.0, f"connected again {again[0]:.2f}s after the first (the timeout, then the backoff)"
