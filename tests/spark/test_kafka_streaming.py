"""Spark's built-in Kafka source in Structured Streaming against an odradek broker.

Micro-batches are collected with foreachBatch, so each test sees exactly which offsets every batch held.
Needs the spark-sql-kafka-0-10 connector (see test_kafka_source.py).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

Batch = list[tuple[int, int, bytes]]  # (partition, offset, value) of each row of one micro-batch


class Collector:
    """A foreachBatch function that keeps every non-empty micro-batch's (partition, offset, value) rows, and
    the id of the last one."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.last_batch_id = -1
        self._lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = sorted(
            (r.partition, r.offset, bytes(r.value)) for r in frame.select("partition", "offset", "value").collect()
        )
        if rows:
            with self._lock:
                self.batches.append(rows)
                self.last_batch_id = batch_id

    def rows(self) -> Batch:
        with self._lock:
            return sorted(row for batch in self.batches for row in batch)


def start_query(
    spark: Any,
    bootstrap: str,
    topic: str,
    checkpoint: Path,
    collector: Collector,
    *,
    available_now: bool = True,
    **options: str,
) -> Any:
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    writer = reader.load().writeStream.foreachBatch(collector).option("checkpointLocation", str(checkpoint))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="200 milliseconds")
    return writer.start()


def run_available_now(spark: Any, bootstrap: str, topic: str, checkpoint: Path, **options: str) -> Collector:
    """Run the query until it has processed what was available when it started; return what it saw."""
    collector = Collector()
    query = start_query(spark, bootstrap, topic, checkpoint, collector, **options)
    try:
        assert query.awaitTermination(120), "the availableNow query did not finish in 120s"
    finally:
        query.stop()
    return collector


def produced_rows(produced: list[tuple]) -> Batch:
    return sorted((r[1], r[2], r[4]) for r in produced)


def test_a_restarted_query_resumes_where_it_left_off(kafka_spark, cluster, topic_name, tmp_path: Path) -> None:
    topic = topic_name()
    cluster.clients.create_topic(topic, 2)
    first = cluster.clients.produce(topic, 100)
    checkpoint = tmp_path / "checkpoint"

    seen_first = run_available_now(kafka_spark, cluster.bootstrap, topic, checkpoint, startingOffsets="earliest").rows()
    assert seen_first == produced_rows(first)

    second = cluster.clients.produce(topic, 60, seed=1)
    # startingOffsets only applies to a new query: the checkpoint decides where a restart begins.
    seen_second = run_available_now(
        kafka_spark, cluster.bootstrap, topic, checkpoint, startingOffsets="earliest"
    ).rows()
    assert seen_second == produced_rows(second)

    assert run_available_now(kafka_spark, cluster.bootstrap, topic, checkpoint).rows() == []


def test_a_new_query_starts_at_latest_by_default(kafka_spark, broker, clients, topic_name, tmp_path: Path) -> None:
    topic = topic_name()
    clients.create_topic(topic, 1)
    clients.produce(topic, 10)
    assert run_available_now(kafka_spark, broker.bootstrap, topic, tmp_path / "checkpoint").rows() == []
    later = clients.produce(topic, 5, seed=1)
    assert run_available_now(kafka_spark, broker.bootstrap, topic, tmp_path / "checkpoint").rows() == produced_rows(
        later
    )


def test_max_offsets_per_trigger(kafka_spark, broker, clients, topic_name, tmp_path: Path) -> None:
    topic = topic_name()
    clients.create_topic(topic, 1)
    produced = clients.produce(topic, 100)
    collector = run_available_now(
        kafka_spark,
        broker.bootstrap,
        topic,
        tmp_path / "checkpoint",
        startingOffsets="earliest",
        maxOffsetsPerTrigger="30",
    )
    assert [len(batch) for batch in collector.batches] == [30, 30, 30, 10]
    assert [row[1] for batch in collector.batches for row in batch] == list(range(100))
    assert collector.rows() == produced_rows(produced)


def test_new_partitions_are_picked_up_from_their_start(
    kafka_spark, broker, clients, topic_name, tmp_path: Path, wait
) -> None:
    topic = topic_name()
    clients.create_topic(topic, 1)
    expected = clients.produce(topic, 10)
    collector = Collector()
    query = start_query(
        kafka_spark,
        broker.bootstrap,
        topic,
        tmp_path / "checkpoint",
        collector,
        available_now=False,
        startingOffsets="earliest",
    )
    try:
        wait(lambda: collector.rows() == produced_rows(expected), timeout=60, what="the first partition's records")
        clients.add_partitions(topic, 3)
        expected += clients.produce(topic, 10, partition=2, seed=1) + clients.produce(topic, 10, partition=1, seed=2)
        wait(lambda: collector.rows() == produced_rows(expected), timeout=60, what="the new partitions' records")
    finally:
        query.stop()
    assert query.exception() is None


def test_data_deleted_before_a_restart_is_data_loss(
    kafka_spark, cluster, topic_name, data_loss_error, tmp_path: Path
) -> None:
    """The checkpoint says offset 20 is next, but DeleteRecords moved the log start to 35."""
    topic = topic_name()
    cluster.clients.create_topic(topic, 1)
    cluster.clients.produce(topic, 20)
    checkpoint = tmp_path / "checkpoint"
    assert (
        len(run_available_now(kafka_spark, cluster.bootstrap, topic, checkpoint, startingOffsets="earliest").rows())
        == 20
    )

    later = cluster.clients.produce(topic, 30, seed=1)
    cluster.clients.delete_records_before(topic, 0, 35)
    with pytest.raises(Exception, match=data_loss_error):
        run_available_now(kafka_spark, cluster.bootstrap, topic, checkpoint)

    kept = run_available_now(kafka_spark, cluster.bootstrap, topic, checkpoint, failOnDataLoss="false").rows()
    assert kept == [row for row in produced_rows(later) if row[1] >= 35]


def committed(query: Any, collector: Collector) -> bool:
    """Whether the query has committed its last batch with rows: its progress is reported after the commit,
    so stopping now cannot leave that batch to be run again."""
    progress = query.lastProgress
    if progress is None or query.status["isTriggerActive"]:
        return False
    return progress["batchId"] >= collector.last_batch_id


def test_a_running_query_stopped_and_restarted_loses_and_repeats_nothing(
    kafka_spark, cluster, topic_name, tmp_path: Path, wait
) -> None:
    """A query on a processing-time trigger, stopped while records keep coming, restarted from its checkpoint:
    every record is seen exactly once over both runs."""
    topic = topic_name()
    cluster.clients.create_topic(topic, 2)
    checkpoint = tmp_path / "checkpoint"
    produced = cluster.clients.produce(topic, 50)
    runs = [Collector(), Collector()]

    query = start_query(
        kafka_spark, cluster.bootstrap, topic, checkpoint, runs[0], available_now=False, startingOffsets="earliest"
    )
    try:
        wait(lambda: runs[0].rows() == produced_rows(produced), timeout=60, what="the first records")
        produced += cluster.clients.produce(topic, 30, seed=1)
        wait(lambda: runs[0].rows() == produced_rows(produced), timeout=60, what="records produced meanwhile")
        wait(lambda: committed(query, runs[0]), timeout=30, what="the last batch's commit")
    finally:
        query.stop()
    assert query.exception() is None

    produced += cluster.clients.produce(topic, 40, seed=2)  # while no query runs
    query = start_query(kafka_spark, cluster.bootstrap, topic, checkpoint, runs[1], available_now=False)
    try:
        produced += cluster.clients.produce(topic, 20, seed=3)
        wait(lambda: len(runs[1].rows()) >= 60, timeout=60, what="the restarted query's records")
    finally:
        query.stop()
    assert query.exception() is None

    seen = runs[0].rows() + runs[1].rows()
    assert sorted(seen) == produced_rows(produced)
    assert runs[1].rows() == produced_rows(produced[80:])


def test_starting_offsets_by_timestamp(kafka_spark, cluster, topic_name, tmp_path: Path) -> None:
    """A new query starts at each partition's first record stamped at or after the given time."""
    topic = topic_name()
    cluster.clients.create_topic(topic, 2)
    t0 = 1_700_000_000_000
    stamps = [t0 + 1000 * i for i in range(20)]
    produced = cluster.clients.produce(topic, 20, partition=0, timestamps=stamps)
    produced += cluster.clients.produce(topic, 20, partition=1, timestamps=stamps, seed=1)
    starting = json.dumps({topic: {"0": t0 + 5_000, "1": t0 + 12_500}})
    seen = run_available_now(
        kafka_spark, cluster.bootstrap, topic, tmp_path / "checkpoint", startingOffsetsByTimestamp=starting
    ).rows()
    assert seen == [row for row in produced_rows(produced) if row[1] >= (5 if row[0] == 0 else 13)]


def test_read_committed_stream_reads_every_non_transactional_record(
    kafka_spark, cluster, topic_name, tmp_path: Path
) -> None:
    """A stream with ``kafka.isolation.level=read_committed`` reads non-transactional records up to the last
    stable offset (here the high watermark), and a restart reads the ones produced since."""
    topic = topic_name()
    cluster.clients.create_topic(topic, 2)
    checkpoint = tmp_path / "checkpoint"
    options = {"startingOffsets": "earliest", "kafka.isolation.level": "read_committed"}
    first = cluster.clients.produce(topic, 60)
    seen_first = run_available_now(kafka_spark, cluster.bootstrap, topic, checkpoint, **options).rows()
    assert seen_first == produced_rows(first)
    second = cluster.clients.produce(topic, 25, seed=1)
    assert run_available_now(kafka_spark, cluster.bootstrap, topic, checkpoint, **options).rows() == produced_rows(
        second
    )


def test_data_removed_by_retention_before_a_restart_is_data_loss(
    kafka_spark, broker, clients, topic_name, data_loss_error, tmp_path: Path, wait
) -> None:
    """Retention deletes the segments holding offsets the checkpoint still needed. Only on odradek: the
    shared Apache Kafka checks retention every 5 minutes (log.retention.check.interval.ms is not dynamic)."""
    topic = topic_name()
    clients.create_topic(topic, 1)
    old = [1_700_000_000_000 + i for i in range(50)]  # 2023: older than any retention.ms below
    clients.produce(topic, 20, timestamps=old[:20])
    checkpoint = tmp_path / "checkpoint"
    first = run_available_now(kafka_spark, broker.bootstrap, topic, checkpoint, startingOffsets="earliest")
    assert len(first.rows()) == 20

    clients.produce(topic, 30, timestamps=old[20:], seed=1)
    clients.set_topic_config(topic, "retention.ms", str(7 * 24 * 3600 * 1000))
    wait(lambda: clients.watermarks(topic, 0) == (50, 50), what="retention to delete every record")
    kept = clients.produce(topic, 10, seed=2)  # stamped now: retention keeps these

    with pytest.raises(Exception, match=data_loss_error):
        run_available_now(kafka_spark, broker.bootstrap, topic, checkpoint)
    seen = run_available_now(kafka_spark, broker.bootstrap, topic, checkpoint, failOnDataLoss="false").rows()
    assert seen == produced_rows(kept)
