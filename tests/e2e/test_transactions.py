"""Transactions with real clients against the session broker: confluent-kafka's transactional producer
commits and aborts, in every codec; a read_committed consumer sees only committed records, a
read_uncommitted one all of them; a producer killed mid-transaction (SIGKILL) is fenced when its transactional id starts again, and its
open transaction is aborted; consume-transform-produce commits the input offsets with the output.

Across a broker crash (kill -9) and a clean restart, on a broker of the module's own: the coordinator
reloads ``__transaction_state`` and aborts a transaction left open once its timeout passes, with no client
involved; a committed one stays committed; a producer resuming a transactional id fences the epoch that was
open before the crash; a transaction that timed out while the broker was down is aborted, not committed,
when its producer commits after the restart. The same crash on the real Kafka gives the same outcome, and odradek started on the
log directory of a Kafka stopped with a transaction open aborts it at its timeout.

Each scenario ends with a committed sentinel record, so a consumer knows it has read everything before it
(the last stable offset is past the sentinel only once every earlier transaction is decided).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any, Callable, Iterator

import kafka_jvm
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import Broker
from odradek.protocol.api import ApiKey
from tests.polling import wait_for

SENTINEL = b"sentinel"


def transactional_producer(bootstrap: str, transactional_id: str, **config: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5, "log_level": 3, **config})
    producer.init_transactions(30)
    return producer


def in_transaction(producer: Producer, topic: str, values: list[bytes], *, commit: bool, partition: int = 0) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def read_until_sentinel(bootstrap: str, topic: str, isolation: str, partition: int = 0, timeout: float = 30.0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}", "isolation.level": isolation, "enable.auto.commit": False, "fetch.wait.max.ms": 100, "log_level": 3})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None, msg.error()
                if msg.value() == SENTINEL:
                    return values
                values.append(msg.value())
        raise AssertionError(f"no sentinel within {timeout} s; read {values}")
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_commit_and_abort_as_read_committed_and_read_uncommitted_consumers_see_them(bootstrap: str, new_topic: Callable[..., str], codec: str) -> None:
    topic = new_topic()
    producer = transactional_producer(bootstrap, f"txn-{topic}", **{"compression.type": codec})
    in_transaction(producer, topic, [b"c1", b"c2", b"c3"], commit=True)
    in_transaction(producer, topic, [b"a1", b"a2"], commit=False)
    in_transaction(producer, topic, [b"c4"], commit=True)
    in_transaction(producer, topic, [SENTINEL], commit=True)
    assert read_until_sentinel(bootstrap, topic, "read_committed") == [b"c1", b"c2", b"c3", b"c4"]
    assert read_until_sentinel(bootstrap, topic, "read_uncommitted") == [b"c1", b"c2", b"c3", b"a1", b"a2", b"c4"]


def test_an_open_transaction_holds_back_read_committed_consumers(bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    producer = transactional_producer(bootstrap, f"txn-{topic}")
    producer.begin_transaction()
    producer.produce(topic, value=b"pending", partition=0)
    producer.flush(30)
    with closing(Consumer({"bootstrap.servers": bootstrap, "group.id": f"w-{topic}", "isolation.level": "read_committed", "log_level": 3})) as consumer:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)
    # The high watermark a read_committed consumer is told is the last stable offset: the open transaction's start.
    assert (low, high) == (0, 0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value=SENTINEL, partition=0)
    producer.commit_transaction(30)
    assert read_until_sentinel(bootstrap, topic, "read_committed") == [b"pending"]


KILLED_PRODUCER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Producer
    bootstrap, topic, transactional_id = sys.argv[1:]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "log_level": 3})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"zombie", partition=0)
    producer.flush(30)
    print("in transaction", flush=True)
    time.sleep(600)
    """
)


def test_a_killed_producer_is_fenced_and_its_open_transaction_aborted_when_its_id_returns(bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    transactional_id = f"txn-{topic}"
    child = subprocess.Popen([sys.executable, "-c", KILLED_PRODUCER, bootstrap, topic, transactional_id], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "in transaction"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    restarted = transactional_producer(bootstrap, transactional_id)
    in_transaction(restarted, topic, [b"after restart", SENTINEL], commit=True)
    assert read_until_sentinel(bootstrap, topic, "read_committed") == [b"after restart"]
    assert read_until_sentinel(bootstrap, topic, "read_uncommitted") == [b"zombie", b"after restart"]


def test_a_zombie_producer_cannot_commit_after_its_id_is_taken_over(bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    transactional_id = f"txn-{topic}"
    zombie = transactional_producer(bootstrap, transactional_id)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    zombie.flush(30)
    successor = transactional_producer(bootstrap, transactional_id)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(30)
    assert raised.value.args[0].fatal()
    in_transaction(successor, topic, [b"successor", SENTINEL], commit=True)
    assert read_until_sentinel(bootstrap, topic, "read_committed") == [b"successor"]


def test_consume_transform_produce_commits_input_offsets_with_its_output_exactly_once(bootstrap: str, new_topic: Callable[..., str]) -> None:
    source, sink = new_topic(), new_topic()
    group = f"ctp-{source}"
    feeder = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    for i in range(6):
        feeder.produce(source, value=b"in-%d" % i, partition=0)
    feeder.flush(30)

    def transform(values_per_transaction: int, commit: bool) -> int:
        """Read from the group's committed position, write the transformed records and the consumed
        offsets in one transaction; returns how many records it consumed."""
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest", "isolation.level": "read_committed", "log_level": 3})
        producer = transactional_producer(bootstrap, f"ctp-{sink}")
        try:
            consumer.subscribe([source])
            taken: list[Any] = []
            deadline = time.monotonic() + 30
            while len(taken) < values_per_transaction and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    taken.append(msg)
            producer.begin_transaction()
            for msg in taken:
                producer.produce(sink, value=msg.value().replace(b"in", b"out"), partition=0)
            position = [TopicPartition(source, 0, taken[-1].offset() + 1)]
            producer.send_offsets_to_transaction(position, consumer.consumer_group_metadata(), 30)
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
            return len(taken)
        finally:
            consumer.close()

    assert transform(3, commit=True) == 3
    assert transform(3, commit=False) == 3  # aborted: neither its output nor its offsets count
    assert transform(3, commit=True) == 3  # so the same three are read again
    closing = transactional_producer(bootstrap, f"ctp-close-{sink}")
    in_transaction(closing, sink, [SENTINEL], commit=True)
    assert read_until_sentinel(bootstrap, sink, "read_committed") == [b"out-%d" % i for i in range(6)]
    checker = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    try:
        [committed] = checker.committed([TopicPartition(source, 0)], 10)
        assert committed.offset == 6
    finally:
        checker.close()


# -- across restarts ------------------------------------------------------------------------------------

TXN_TIMEOUT_MS = 3000


@pytest.fixture(scope="module")
def restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A broker of this module's own, to kill and restart; it checks for timed-out transactions every 200 ms."""
    config = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200", "log.retention.ms": "-1"}
    with Broker(log_dir=tmp_path_factory.mktemp("txn-restart"), subprocess=True, config=config) as b:
        yield b


def topic_on(bootstrap: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def open_transaction_across_restart(bootstrap: str, restart: Callable[[], None], topic: str) -> dict[str, Any]:
    """A committed transaction and one left open when the broker restarts: what read_committed reads once a
    later transaction commits, and how the open one's producer fails when it tries to commit after."""
    committed = transactional_producer(bootstrap, f"committed-{topic}")
    in_transaction(committed, topic, [b"before"], commit=True)
    hanging = transactional_producer(bootstrap, f"hanging-{topic}", **{"transaction.timeout.ms": TXN_TIMEOUT_MS})
    hanging.begin_transaction()
    hanging.produce(topic, value=b"lost", partition=0)
    hanging.flush(30)
    restart()
    # No client ends the open transaction: the reloaded coordinator aborts it when it times out.
    in_transaction(transactional_producer(bootstrap, f"after-{topic}"), topic, [b"after", SENTINEL], commit=True)
    read = read_until_sentinel(bootstrap, topic, "read_committed", timeout=TXN_TIMEOUT_MS / 1000 + 30)
    try:
        hanging.commit_transaction(10)
        late_commit = "committed"
    except KafkaException as exc:
        late_commit = exc.args[0].name()
    return {"read_committed": read, "late_commit": late_commit}


AFTER_RESTART = {"read_committed": [b"before", b"after"], "late_commit": "_FENCED"}
"""The open transaction was aborted with its producer's epoch bumped: its records are never read, and its
producer is fenced (librdkafka reports its own _FENCED)."""


@pytest.mark.parametrize("crash", [True, False], ids=["kill-9", "clean-restart"])
def test_open_transaction_is_aborted_after_restart_and_committed_one_kept(restartable: Broker, crash: bool) -> None:
    broker = restartable

    def restart() -> None:
        if crash:
            broker.kill()
            broker.start()
        else:
            broker.restart()

    topic = topic_on(broker.bootstrap, f"restart-{'kill' if crash else 'clean'}")
    assert open_transaction_across_restart(broker.bootstrap, restart, topic) == AFTER_RESTART


def test_a_transactional_id_resumed_after_a_crash_fences_the_epoch_open_before_it(restartable: Broker) -> None:
    broker = restartable
    topic = topic_on(broker.bootstrap, "restart-resume")
    transactional_id = f"resume-{topic}"
    before = transactional_producer(broker.bootstrap, transactional_id)
    before.begin_transaction()
    before.produce(topic, value=b"zombie", partition=0)
    before.flush(30)
    broker.kill()
    broker.start()
    resumed = transactional_producer(broker.bootstrap, transactional_id)
    in_transaction(resumed, topic, [b"resumed", SENTINEL], commit=True)
    assert read_until_sentinel(broker.bootstrap, topic, "read_committed") == [b"resumed"]
    with pytest.raises(KafkaException) as raised:
        before.commit_transaction(10)
    assert raised.value.args[0].fatal()


def kill_and_start_kafka(kafka: kafka_jvm.KafkaBroker, down_s: float = 0.0) -> None:
    """SIGKILL, ``down_s`` seconds down, then start again on the same directory. Until ZooKeeper expires the
    killed broker's session, its registration stands and a new start exits at once ("node already exists"):
    start again, as a supervisor would."""
    kafka.kill()
    time.sleep(down_s)
    deadline = time.monotonic() + 60
    while True:
        try:
            kafka.start()
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def test_on_kafka_too_and_odradek_on_its_directory(real_kafka, tmp_path: Path) -> None:
    """The same crash on the real Kafka (a broker of its own, under a ZooKeeper chroot, with a short ZooKeeper
    session so that its restart need not wait out the dead one's registration) gives the same outcome.

    Then a transaction is left open when that Kafka stops: odradek, started on (a copy of) Kafka's log
    directory, loads Kafka's ``__transaction_state`` and aborts it at its timeout, so read_committed readers
    get past it; the committed one stays, and the transactional id carries on."""
    if real_kafka.zookeeper is None:
        pytest.fail("a ZooKeeper of this run is needed (ODRADEK_COMPAT_KAFKA points at a Kafka this run did not start)", pytrace=False)
    settings = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200", "zookeeper.session.timeout.ms": "6000"}
    kafka = kafka_jvm.KafkaBroker(tmp_path / "kafka", real_kafka.zookeeper.connect + f"/txn-restart-{uuid.uuid4().hex[:8]}", settings=settings).start()
    try:
        crashed = topic_on(kafka.bootstrap, "restart-kill-kafka")
        assert open_transaction_across_restart(kafka.bootstrap, lambda: kill_and_start_kafka(kafka), crashed) == AFTER_RESTART

        moved = topic_on(kafka.bootstrap, "moved")
        in_transaction(transactional_producer(kafka.bootstrap, "moved-committed"), moved, [b"before"], commit=True)
        hanging = transactional_producer(kafka.bootstrap, "moved-hanging", **{"transaction.timeout.ms": TXN_TIMEOUT_MS})
        hanging.begin_transaction()
        hanging.produce(moved, value=b"lost", partition=0)
        hanging.flush(30)
    finally:
        kafka.stop()
    copy = tmp_path / "odradek-logs"
    shutil.copytree(kafka.log_dir, copy)
    meta = dict(line.split("=", 1) for line in (copy / "meta.properties").read_text().splitlines() if "=" in line)
    config = {**kafka_jvm.BROKER_SETTINGS, "broker.id": meta["broker.id"], "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}
    with Broker(log_dir=copy, subprocess=True, config=config) as broker:
        in_transaction(transactional_producer(broker.bootstrap, "moved-after"), moved, [b"after", SENTINEL], commit=True)
        assert read_until_sentinel(broker.bootstrap, moved, "read_committed", timeout=TXN_TIMEOUT_MS / 1000 + 30) == [b"before", b"after"]
        # The id Kafka gave out carries on: its next producer initializes and commits.
        in_transaction(transactional_producer(broker.bootstrap, "moved-hanging"), moved, [b"resumed"], commit=True)


def described(connect: Callable[..., Any], bootstrap: str, transactional_id: str) -> Any:
    """The transaction as DescribeTransactions shows it; None while the broker is not serving it yet."""
    try:
        (state,) = connect(bootstrap).call(ApiKey.DescribeTransactions, 0, {"transactional_ids": [transactional_id]}).transaction_states
    except OSError:
        return None
    return state if state.error_code == 0 else None


@pytest.mark.parametrize("kind", ["odradek", "kafka"])
def test_a_transaction_that_timed_out_while_the_broker_was_down_is_never_committed(real_kafka, connect, tmp_path: Path, kind: str) -> None:
    """The broker is killed with a transaction open and stays down longer than its timeout; when it is back,
    the producer tries to commit. The transaction's start time comes back from ``__transaction_state``, the
    timeout check finds it too old and aborts it, fencing the producer's epoch: the commit fails (_FENCED),
    the records are never read committed.

    Kafka checks on a schedule from its coordinator's start, which its load of ``__transaction_state`` comes
    seconds after; a commit sent the moment the load ends could still race its first check, so on Kafka the
    producer commits once DescribeTransactions shows the abort. odradek checks as the load ends: there the
    producer commits the moment the broker is back (the check interval is 5 s, longer than it takes)."""
    settings = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "5000"}
    if kind == "kafka":
        if real_kafka.zookeeper is None:
            pytest.fail("a ZooKeeper of this run is needed (ODRADEK_COMPAT_KAFKA points at a Kafka this run did not start)", pytrace=False)
        chroot = f"/txn-expired-{uuid.uuid4().hex[:8]}"
        kafka = kafka_jvm.KafkaBroker(tmp_path / "kafka", real_kafka.zookeeper.connect + chroot, settings={**settings, "zookeeper.session.timeout.ms": "6000"}).start()
        bootstrap, stop = kafka.bootstrap, kafka.stop
        kill_and_restart = lambda down_s: kill_and_start_kafka(kafka, down_s)  # noqa: E731
    else:
        broker = Broker(log_dir=tmp_path / "odradek", subprocess=True, config=settings).__enter__()
        bootstrap, stop = broker.bootstrap, lambda: broker.__exit__(None, None, None)

        def kill_and_restart(down_s: float) -> None:
            broker.kill()
            time.sleep(down_s)
            broker.start()
    try:
        topic = topic_on(bootstrap, "expired-while-down")
        transactional_id = f"expired-{uuid.uuid4().hex[:8]}"
        producer = transactional_producer(bootstrap, transactional_id, **{"transaction.timeout.ms": TXN_TIMEOUT_MS})
        producer.begin_transaction()
        producer.produce(topic, value=b"expired", partition=0)
        producer.flush(30)
        before = described(connect, bootstrap, transactional_id)
        assert before.transaction_state == "Ongoing"
        kill_and_restart(TXN_TIMEOUT_MS / 1000 + 1)
        if kind == "kafka":
            wait_for(lambda: (d := described(connect, bootstrap, transactional_id)) and d.transaction_state != "Ongoing", 30, "the abort of the expired transaction")
        with pytest.raises(KafkaException) as raised:
            producer.commit_transaction(30)
        assert raised.value.args[0].name() == "_FENCED"
        after = wait_for(lambda: (d := described(connect, bootstrap, transactional_id)) and d.transaction_state == "CompleteAbort" and d, 30, "CompleteAbort")
        assert (after.transaction_start_time_ms, after.producer_id, after.producer_epoch) == (before.transaction_start_time_ms, before.producer_id, before.producer_epoch + 1)
        in_transaction(transactional_producer(bootstrap, f"after-{transactional_id}"), topic, [SENTINEL], commit=True)
        assert read_until_sentinel(bootstrap, topic, "read_committed") == []
    finally:
        stop()
