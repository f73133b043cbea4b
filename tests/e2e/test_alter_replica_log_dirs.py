"""Moving a replica between a broker's log directories (AlterReplicaLogDirs), odradek and Kafka 3.9.1 side by
side, each with two log directories: the answers to the same requests, the partition found in its new
directory once moved (DescribeLogDirs), every record still read in order, records produced during the move
included, and on odradek the move kept over a restart."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Iterator

import kafka_jvm
from kafka_jvm import free_port
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import Broker
from odradek.protocol.api import ApiKey
from tests.conftest import Wire
from tests.polling import wait_for

TOPIC = "moving"
RECORDS = 2000


@pytest.fixture(scope="module")
def brokers(real_kafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, list[Path]]]]:
    """(bootstrap, log directories) of each broker."""
    ours_root, theirs_root = tmp_path_factory.mktemp("odradek-jbod"), tmp_path_factory.mktemp("kafka-jbod")
    ours_dirs, theirs_dirs = [ours_root / "a", ours_root / "b"], [theirs_root / "a", theirs_root / "b"]
    port = free_port()
    kafka = kafka_jvm.KafkaBroker(theirs_root, real_kafka.zookeeper.connect + "/jbod", settings={"log.dirs": ",".join(map(str, theirs_dirs))}, port=free_port()).start()
    try:
        with Broker(log_dir=ours_dirs[0], subprocess=True, port=port, config={"log.dirs": ",".join(map(str, ours_dirs))}) as broker:
            yield {"odradek": (broker.bootstrap, ours_dirs), "kafka": (kafka.bootstrap, theirs_dirs)}
    finally:
        kafka.stop()


def where(bootstrap: str) -> dict[str, list[tuple[str, int, bool]]]:
    """DescribeLogDirs: per directory, the (topic, partition, is future) it holds of the test's topic."""
    answer = Wire.call_once(bootstrap, ApiKey.DescribeLogDirs, 1, {"topics": None})
    return {r.log_dir: sorted((t.name, p.partition_index, p.is_future_key) for t in r.topics if t.name == TOPIC for p in t.partitions) for r in answer.results}


def alter(bootstrap: str, path: str, topic: str, partition: int) -> list[tuple[str, int, int]]:
    answer = Wire.call_once(bootstrap, ApiKey.AlterReplicaLogDirs, 1, {"dirs": [{"path": path, "topics": [{"name": topic, "partitions": [partition]}]}]})
    return [(t.topic_name, p.partition_index, p.error_code) for t in answer.results for p in t.partitions]


def produce(bootstrap: str, start: int, count: int, pause_s: float = 0.0) -> None:
    """Records ``start`` to ``start + count``, in batches that fit the topic's 64 KiB segments."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, "batch.size": 16384})
    failures: list[str] = []
    for n in range(start, start + count):
        producer.produce(TOPIC, f"{n:06d}".encode() + b"x" * 1000, partition=0, on_delivery=lambda err, _msg: err and failures.append(str(err)))
        producer.poll(0)
        if pause_s:
            time.sleep(pause_s)
    assert producer.flush(30) == 0
    assert failures == []


def consume(bootstrap: str, count: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"jbod-{time.monotonic_ns()}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[int] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    got.append(int(message.value()[:6]))
    finally:
        consumer.close()
    return got


def scenario(bootstrap: str, dirs: list[Path]) -> list[Any]:
    seen: list[Any] = []
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={"segment.bytes": "65536"})])[TOPIC].result(30)
    produce(bootstrap, 0, RECORDS)
    before = where(bootstrap)
    [source] = [d for d, held in before.items() if held]
    [destination] = [str(d.absolute()) for d in dirs if str(d.absolute()) != source]
    seen.append(("not a log dir", alter(bootstrap, "/no/such/dir", TOPIC, 0)))
    seen.append(("a partition not hosted", alter(bootstrap, destination, "no-such-topic", 0)))
    seen.append(("where it is", alter(bootstrap, source, TOPIC, 0)))
    during = threading.Thread(target=produce, args=(bootstrap, RECORDS, 300, 0.005))
    during.start()
    seen.append(("moved", alter(bootstrap, destination, TOPIC, 0)))
    during.join(60)
    wait_for(lambda: where(bootstrap) == {source: [], destination: [(TOPIC, 0, False)]}, timeout_s=60, what="the partition in its new directory only")
    seen.append(("on disk", (Path(destination) / f"{TOPIC}-0").is_dir(), (Path(source) / f"{TOPIC}-0").exists()))
    produce(bootstrap, RECORDS + 300, 100)
    got = consume(bootstrap, RECORDS + 400)
    seen.append(("every record, in order", got == list(range(RECORDS + 400))))
    return seen


def test_a_replica_moves_to_the_other_log_directory_as_on_kafka(brokers: dict[str, tuple[str, list[Path]]]) -> None:
    theirs = scenario(*brokers["kafka"])
    ours = scenario(*brokers["odradek"])
    assert ours == theirs
    assert theirs == [
        ("not a log dir", [(TOPIC, 0, 57)]),  # LOG_DIR_NOT_FOUND
        ("a partition not hosted", [("no-such-topic", 0, 3)]),  # UNKNOWN_TOPIC_OR_PARTITION
        ("where it is", [(TOPIC, 0, 0)]),
        ("moved", [(TOPIC, 0, 0)]),
        ("on disk", True, False),
        ("every record, in order", True),
    ]


class TwoDirBroker:
    """A broker of its own on two log directories, started again on the same ones and port."""

    def __init__(self, root: Path) -> None:
        self.dirs = [root / "a", root / "b"]
        self.port = free_port()

    def start(self) -> Broker:
        return Broker(log_dir=self.dirs[0], subprocess=True, port=self.port, config={"log.dirs": ",".join(map(str, self.dirs))})

    def with_topic(self, broker: Broker, records: int) -> tuple[str, str]:
        """The test's topic with ``records`` records: (its log directory, the other one)."""
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config={"segment.bytes": "65536"})])[TOPIC].result(30)
        produce(broker.bootstrap, 0, records)
        [source] = [d for d, held in where(broker.bootstrap).items() if held]
        [destination] = [str(d.absolute()) for d in self.dirs if str(d.absolute()) != source]
        return source, destination


def test_the_move_is_kept_over_a_restart(brokers: dict[str, tuple[str, list[Path]]], tmp_path: Path) -> None:
    """A second broker on two directories of its own: a move, a restart, the partition where it was moved."""
    node = TwoDirBroker(tmp_path)
    with node.start() as broker:
        source, destination = node.with_topic(broker, 500)
        assert alter(broker.bootstrap, destination, TOPIC, 0) == [(TOPIC, 0, 0)]
        wait_for(lambda: where(broker.bootstrap) == {source: [], destination: [(TOPIC, 0, False)]}, timeout_s=60, what="moved")
    with node.start() as broker:
        assert where(broker.bootstrap) == {source: [], destination: [(TOPIC, 0, False)]}
        assert consume(broker.bootstrap, 500) == list(range(500))


def test_a_move_a_stop_interrupted_goes_on_at_the_next_start(tmp_path: Path) -> None:
    """A broker stopped while a partition's copy half exists in the other directory (its ``-future``
    directory holding part of the records): the next start finds the copy, finishes it and swaps it in."""
    import shutil

    node = TwoDirBroker(tmp_path)
    with node.start() as broker:
        source, destination_path = node.with_topic(broker, 300)
    destination = Path(destination_path)
    copy = destination / f"{TOPIC}-0.0123456789abcdef0123456789abcdef-future"
    shutil.copytree(Path(source) / f"{TOPIC}-0", copy)
    for checkpoint in copy.glob("*.snapshot"):
        checkpoint.unlink()
    logs = sorted(copy.glob("*.log"))
    for later in logs[len(logs) // 2:]:  # the copy has only the first half of the segments
        for name in copy.glob(later.stem + ".*"):
            name.unlink()
    with node.start() as broker:
        wait_for(lambda: where(broker.bootstrap) == {source: [], destination_path: [(TOPIC, 0, False)]}, timeout_s=60, what="the interrupted move finished")
        assert consume(broker.bootstrap, 300) == list(range(300))
        assert not copy.exists() and (destination / f"{TOPIC}-0").is_dir()
