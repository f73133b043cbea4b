"""Producer ids of a ZooKeeper-mode broker: the block is claimed in ZooKeeper (``/latest_producer_id_block``)
without holding the event loop, InitProducerId is answered COORDINATOR_LOAD_IN_PROGRESS while no block is
there (as Kafka 3.9's ``RPCProducerIdManager``), and blocks are claimed once, each id handed out once.

Each test has a broker of its own on a chroot of its own, on a ZooKeeper of this module's: one test stops
that ZooKeeper's process for a while, which must not touch the session's shared one.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import kafka_jvm
import pytest
from confluent_kafka import Producer
from tests.controller.zk_brokers import zk_session

from odradek import Broker
from odradek.controller import zk_data as zd
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode

ZOOKEEPER_STOPPED_S = 3.0
"""How long ZooKeeper is stopped: a claim waiting for it on the event loop held every client that long."""
IDEMPOTENT = {"transactional_id": None, "transaction_timeout_ms": -1, "producer_id": -1, "producer_epoch": -1}
PING = {"client_software_name": "ping", "client_software_version": "1"}


@pytest.fixture(scope="module")
def zookeeper_of_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_jvm.ZooKeeper]:
    try:
        zk = kafka_jvm.ZooKeeper(tmp_path_factory.mktemp("pid-zookeeper")).start()
    except kafka_jvm.JvmUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield zk
    finally:
        os.kill(zk.process.proc.pid, signal.SIGCONT)  # whatever a failed test left stopped
        zk.stop()


@pytest.fixture
def zk_broker(zookeeper_of_module: kafka_jvm.ZooKeeper, tmp_path: Path) -> Iterator[tuple[Broker, str]]:
    """A fresh broker (id 0, so its controller too) on a chroot of its own: it has no producer id block yet."""
    connect = f"{zookeeper_of_module.connect}/{tmp_path.name}"
    with Broker(tmp_path / "logs", config={"zookeeper.connect": connect, "broker.id": 0}, subprocess=True) as broker:
        kafka_jvm.wait_until_serving(broker.bootstrap, kafka_jvm.STARTUP_TIMEOUT_S)
        yield broker, connect


def latest_block(connect: str) -> tuple[dict[str, Any], int]:
    """``/latest_producer_id_block``'s JSON and its version (how many times it was written)."""
    with zk_session(connect) as zk:
        data, stat = zk.get(zd.LATEST_PRODUCER_ID_BLOCK)
    return json.loads(data), stat.version


def until_answered(call: Callable[[], Any], timeout_s: float = 30) -> Any:
    """InitProducerId asked again while it is answered COORDINATOR_LOAD_IN_PROGRESS, as clients do."""
    deadline = time.monotonic() + timeout_s
    while (answer := call()).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        assert time.monotonic() < deadline, "no producer id block came"
        time.sleep(0.01)
    return answer


def test_the_first_producer_id_is_claimed_in_zookeeper_without_holding_other_clients(zookeeper_of_module: kafka_jvm.ZooKeeper, zk_broker: tuple[Broker, str], connect: Callable[..., Any]) -> None:
    """ZooKeeper stopped while the broker claims its first block: another client's requests are answered all
    along, and so is the InitProducerId (COORDINATOR_LOAD_IN_PROGRESS, Kafka's answer while no block is
    there); once ZooKeeper is back the block is there, written as Kafka writes it."""
    broker, zk_connect = zk_broker
    pinger, wire = connect(broker.bootstrap), connect(broker.bootstrap)
    pinger.call(ApiKey.ApiVersions, 3, PING)
    longest, done = 0.0, threading.Event()

    def ping() -> None:
        nonlocal longest
        while not done.is_set():
            started = time.monotonic()
            pinger.call(ApiKey.ApiVersions, 3, PING)
            longest = max(longest, time.monotonic() - started)
            time.sleep(0.005)

    zookeeper_pid = zookeeper_of_module.process.proc.pid
    thread = threading.Thread(target=ping, daemon=True)
    thread.start()
    os.kill(zookeeper_pid, signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        first = wire.call(ApiKey.InitProducerId, 4, IDEMPOTENT)
        answered_after = time.monotonic() - stopped
        time.sleep(max(0.0, ZOOKEEPER_STOPPED_S - (time.monotonic() - stopped)))
    finally:
        os.kill(zookeeper_pid, signal.SIGCONT)
        done.set()
        thread.join(10)
    assert first.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert answered_after < ZOOKEEPER_STOPPED_S / 2, f"InitProducerId answered {answered_after:.2f} s after ZooKeeper stopped"
    # Claimed on the event loop, the block held every client until ZooKeeper came back.
    assert longest < ZOOKEEPER_STOPPED_S / 2, f"another client waited up to {longest:.2f} s while ZooKeeper was stopped"
    answer = until_answered(lambda: wire.call(ApiKey.InitProducerId, 4, IDEMPOTENT))
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (ErrorCode.NONE, 0, 0)
    # Created empty at the broker's start (as Kafka's persistent paths), written once.
    assert latest_block(zk_connect) == ({"version": 1, "broker": 0, "block_start": "0", "block_end": "999"}, 1)


def test_concurrent_producers_get_distinct_ids_and_each_block_is_claimed_once(zk_broker: tuple[Broker, str], connect: Callable[..., Any]) -> None:
    """An idempotent librdkafka producer first (it retries COORDINATOR_LOAD_IN_PROGRESS, as against Kafka), then
    1,499 InitProducerIds from four connections at once, across the end of the first block: every id from 0
    to 1499 handed out once, and the second block claimed once, ahead of the end of the first (at 90%)."""
    broker, zk_connect = zk_broker
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    producer.produce("idempotent", value=b"v")
    assert producer.flush(60) == 0
    ids: list[int] = []
    failures: list[BaseException] = []

    def init_many(count: int) -> None:
        wire = connect(broker.bootstrap)
        try:
            for _ in range(count):
                answer = until_answered(lambda: wire.call(ApiKey.InitProducerId, 4, IDEMPOTENT))
                assert (answer.error_code, answer.producer_epoch) == (ErrorCode.NONE, 0)
                ids.append(answer.producer_id)
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=init_many, args=(count,)) for count in (375, 375, 375, 374)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures, failures
    assert sorted(ids) == list(range(1, 1500))
    # Created empty at the broker's start, written for the first block, then once for the second.
    assert latest_block(zk_connect) == ({"version": 1, "broker": 0, "block_start": "1000", "block_end": "1999"}, 2)
