"""The odradek-log data source on the log directory of a real odradek broker, written by a real client.

confluent-kafka (librdkafka) produces; its delivery reports say which offset each record got, which is the
ground truth the rows read from the segment files must match.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest

from odradek.storage.checkpoints import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile

pytestmark = pytest.mark.spark

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def checkpointed_high_watermarks(log_dir: Path) -> dict[tuple[str, int], int]:
    path = log_dir / REPLICATION_OFFSET_CHECKPOINT
    return OffsetCheckpointFile(path).read() if path.exists() else {}


def wait_for_checkpoint(wait: Any, log_dir: Path, rows: list[tuple]) -> None:
    """Until the broker has checkpointed high watermarks covering every produced record."""
    ends: dict[tuple[str, int], int] = {}
    for row in rows:
        ends[(row[0], row[1])] = max(ends.get((row[0], row[1]), 0), row[2] + 1)
    wait(
        lambda: all(checkpointed_high_watermarks(log_dir).get(tp, -1) >= end for tp, end in ends.items()),
        what=f"high watermarks {ends} in {log_dir / REPLICATION_OFFSET_CHECKPOINT}",
    )


def test_reads_what_a_client_produced_with_every_codec(
    broker: Any, clients, read_log, log_frame, topic_name, wait
) -> None:
    expected: list[tuple] = []
    topics = []
    for codec in CODECS:
        topic = topic_name(codec)
        topics.append(topic)
        clients.create_topic(topic, 3)
        expected += clients.produce(topic, 1500, compression=codec)
    wait_for_checkpoint(wait, broker.log_dir, expected)

    assert read_log(broker.log_dir, subscribe=",".join(topics), includeHeaders="true") == sorted(expected)


def test_reads_every_segment_of_a_large_topic(broker: Any, clients, read_log, log_frame, topic_name, wait) -> None:
    """About 4.5 MiB over three partitions against 1 MiB segments, 1.5 MiB to each partition, so that every one
    spans two segments or more. (Produced by key, a partition could get under 1 MiB: the keyed records split
    unevenly, and the null-keyed ones go to any partition.)"""
    topic = topic_name("large")
    clients.create_topic(topic, 3)
    expected = [row for p in range(3) for row in clients.produce(topic, 3000, value_size=500, seed=p, partition=p)]
    wait_for_checkpoint(wait, broker.log_dir, expected)

    segments = sorted(broker.log_dir.glob(f"{topic}-*/*.log"))
    assert len(segments) >= 6
    assert log_frame(broker.log_dir, topics=topic).rdd.getNumPartitions() == len(segments)
    assert read_log(broker.log_dir, topics=topic, includeHeaders="true") == sorted(expected)
    # A range across a segment boundary, in one partition only.
    partition, partition_segments = next(
        (p, files) for p in range(3) if len(files := sorted(broker.log_dir.glob(f"{topic}-{p}/*.log"))) >= 2
    )
    boundary = int(partition_segments[1].stem)
    rows = read_log(
        broker.log_dir, topics=topic, partitions=str(partition), startingOffset=str(boundary - 5), endingOffset=str(boundary + 5)
    )
    assert rows == sorted(r[:7] for r in expected if r[1] == partition and boundary - 5 <= r[2] < boundary + 5)


def test_reads_a_live_broker_while_it_is_written(broker: Any, clients, read_log, topic_name, wait) -> None:
    """Reads taken while a producer appends see, in each partition, a gap-free prefix of what was produced."""
    topic = topic_name("live")
    clients.create_topic(topic, 2)
    produced: list[tuple] = []
    done = threading.Event()

    def keep_producing() -> None:
        seed = 0
        while not done.is_set():
            produced.extend(clients.produce(topic, 400, compression=random.choice(CODECS), seed=seed))
            seed += 1

    producer = threading.Thread(target=keep_producing)
    producer.start()
    snapshots = []
    try:
        wait(lambda: len(produced) >= 800, what="the first records")
        for _ in range(2):
            snapshots.append(read_log(broker.log_dir, topics=topic, includeHeaders="true"))
    finally:
        done.set()
        producer.join(60)

    truth = {(r[0], r[1], r[2]): r for r in produced}
    for rows in snapshots:
        assert rows, "a read while producing found nothing"
        for partition in (0, 1):
            offsets = [r[2] for r in rows if r[1] == partition]
            assert offsets == list(range(len(offsets)))
        assert all(truth[(r[0], r[1], r[2])] == r for r in rows)
    assert len(snapshots[-1]) >= len(snapshots[0])


def test_reads_a_stopped_brokers_directory(tmp_path: Path, read_log, clients_of) -> None:
    """After a clean shutdown the directory is a plain copy of the log: everything produced is there."""
    from odradek import Broker

    with Broker(tmp_path / "data", config={"log.segment.bytes": "1048576"}) as b:
        stopped = clients_of(b)
        stopped.create_topic("kept", 2)
        expected = stopped.produce("kept", 2000, compression="zstd")
    assert read_log(tmp_path / "data", includeHeaders="true") == sorted(expected)
