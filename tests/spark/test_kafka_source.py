"""Spark's built-in Kafka source, unchanged, reading an odradek broker in batch queries.

Needs the spark-sql-kafka-0-10 connector: the session loads it from ``make jvm-deps``'s cache, or as
ODRADEK_SPARK_PACKAGES=1 / ODRADEK_SPARK_KAFKA_JARS say (see conftest.py); without it the tests fail.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000


def kafka_frame(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_subscribe_reads_every_record_with_headers(
    kafka_spark, cluster, broker, rows_of, read_log, topic_name, wait
) -> None:
    """Every codec; records without headers have null ``headers`` (on Apache Kafka too)."""
    topic = topic_name()
    cluster.clients.create_topic(topic, 3)
    expected = []
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        expected += cluster.clients.produce(topic, 200, compression=codec, seed=len(expected))

    frame = kafka_frame(kafka_spark, cluster.bootstrap, subscribe=topic, includeHeaders="true")
    assert rows_of(frame) == sorted(expected)
    assert any(row[7] is None for row in expected) and any(row[7] for row in expected)
    if cluster.name != "odradek":
        return
    # The same query over the broker's files gives the same rows, once the high watermark is checkpointed.
    from odradek.storage.checkpoints import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile

    ends = {p: 1 + max(r[2] for r in expected if r[1] == p) for p in range(3)}
    checkpoint = OffsetCheckpointFile(broker.log_dir / REPLICATION_OFFSET_CHECKPOINT)
    wait(
        lambda: all(checkpoint.read().get((topic, p), 0) >= end for p, end in ends.items()),
        what="checkpointed high watermarks",
    )
    assert read_log(broker.log_dir, subscribe=topic, includeHeaders="true") == sorted(expected)


def test_without_include_headers_the_schema_has_no_headers(kafka_spark, broker, clients, log_frame, topic_name) -> None:
    topic = topic_name()
    clients.create_topic(topic, 1)
    clients.produce(topic, 3)
    frame = kafka_frame(kafka_spark, broker.bootstrap, subscribe=topic)
    assert "headers" not in frame.columns
    assert frame.schema == log_frame(broker.log_dir, subscribe=topic).schema
    assert kafka_frame(kafka_spark, broker.bootstrap, subscribe=topic, includeHeaders="true").schema == (
        log_frame(broker.log_dir, subscribe=topic, includeHeaders="true").schema
    )


def test_subscribe_pattern_and_assign(kafka_spark, broker, clients, rows_of, topic_name) -> None:
    prefix = topic_name()
    produced = {}
    for suffix in ("orders", "returns"):
        clients.create_topic(f"{prefix}-{suffix}", 3)
        produced[suffix] = clients.produce(f"{prefix}-{suffix}", 60)
    clients.create_topic(f"{prefix}x-unrelated", 1)
    clients.produce(f"{prefix}x-unrelated", 5)

    by_pattern = kafka_frame(kafka_spark, broker.bootstrap, subscribePattern=f"{prefix}-.*")
    assert rows_of(by_pattern) == sorted(r[:7] for r in produced["orders"] + produced["returns"])

    assign = json.dumps({f"{prefix}-orders": [0, 2], f"{prefix}-returns": [1]})
    by_assign = kafka_frame(kafka_spark, broker.bootstrap, assign=assign)
    wanted = {(f"{prefix}-orders", 0), (f"{prefix}-orders", 2), (f"{prefix}-returns", 1)}
    assert rows_of(by_assign) == sorted(
        r[:7] for r in produced["orders"] + produced["returns"] if (r[0], r[1]) in wanted
    )


def test_starting_and_ending_offsets(kafka_spark, broker, clients, rows_of, topic_name) -> None:
    topic = topic_name()
    clients.create_topic(topic, 2)
    expected = clients.produce(topic, 30, partition=0) + clients.produce(topic, 30, partition=1, seed=1)

    def offsets(**options: str) -> dict[int, list[int]]:
        found: dict[int, list[int]] = {0: [], 1: []}
        for row in rows_of(kafka_frame(kafka_spark, broker.bootstrap, subscribe=topic, **options)):
            found[row[1]].append(row[2])
        return found

    everything = {0: list(range(30)), 1: list(range(30))}
    assert offsets() == everything
    assert offsets(startingOffsets="earliest", endingOffsets="latest") == everything
    assert offsets(
        startingOffsets=json.dumps({topic: {"0": 5, "1": -2}}), endingOffsets=json.dumps({topic: {"0": 20, "1": -1}})
    ) == {0: list(range(5, 20)), 1: list(range(30))}
    rows = rows_of(
        kafka_frame(
            kafka_spark, broker.bootstrap, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 28, "1": 29}})
        )
    )
    assert rows == sorted(r[:7] for r in expected if r[2] >= (28 if r[1] == 0 else 29))


def test_offsets_by_timestamp(kafka_spark, cluster, rows_of, topic_name) -> None:
    """Offsets by timestamp go through ListOffsets: the first offset whose timestamp is >= the one asked."""
    topic = topic_name()
    cluster.clients.create_topic(topic, 2)
    stamps = [T0 + 1000 * i for i in range(50)]
    cluster.clients.produce(topic, 50, partition=0, timestamps=stamps)
    cluster.clients.produce(topic, 50, partition=1, timestamps=stamps, seed=1)

    def offsets(**options: str) -> dict[int, list[int]]:
        found: dict[int, list[int]] = {0: [], 1: []}
        for row in rows_of(kafka_frame(kafka_spark, cluster.bootstrap, subscribe=topic, **options)):
            found[row[1]].append(row[2])
        return found

    assert offsets(startingTimestamp=str(T0 + 40_500)) == {0: list(range(41, 50)), 1: list(range(41, 50))}
    assert offsets(
        startingOffsetsByTimestamp=json.dumps({topic: {"0": T0 + 10_000, "1": T0 + 20_000}}),
        endingOffsetsByTimestamp=json.dumps({topic: {"0": T0 + 15_000, "1": T0 + 99_000_000}}),
    ) == {0: list(range(10, 15)), 1: list(range(20, 50))}  # no timestamp that late: the ending is latest
    assert offsets(endingTimestamp=str(T0 + 3_000)) == {0: [0, 1, 2], 1: [0, 1, 2]}


def test_a_starting_timestamp_past_every_record_fails_by_default(kafka_spark, cluster, topic_name) -> None:
    topic = topic_name()
    cluster.clients.create_topic(topic, 1)
    cluster.clients.produce(topic, 5, timestamps=[T0 + i for i in range(5)])
    with pytest.raises(Exception, match="No offset matched"):
        kafka_frame(kafka_spark, cluster.bootstrap, subscribe=topic, startingTimestamp=str(T0 + 10_000)).collect()
    late = kafka_frame(
        kafka_spark,
        cluster.bootstrap,
        subscribe=topic,
        startingTimestamp=str(T0 + 10_000),
        startingOffsetsByTimestampStrategy="latest",
    )
    assert late.collect() == []


def test_min_partitions_splits_a_kafka_partition(kafka_spark, broker, clients, rows_of, topic_name) -> None:
    topic = topic_name()
    clients.create_topic(topic, 1)
    expected = clients.produce(topic, 400)
    frame = kafka_frame(kafka_spark, broker.bootstrap, subscribe=topic, minPartitions="4")
    assert frame.rdd.getNumPartitions() >= 4
    assert rows_of(frame) == sorted(r[:7] for r in expected)


def test_data_deleted_below_the_starting_offset_fails_unless_told_otherwise(
    kafka_spark, cluster, topic_name, data_loss_error
) -> None:
    topic = topic_name()
    cluster.clients.create_topic(topic, 1)
    cluster.clients.produce(topic, 40)
    cluster.clients.delete_records_before(topic, 0, 25)
    start_at_10 = json.dumps({topic: {"0": 10}})

    with pytest.raises(Exception, match=data_loss_error):
        kafka_frame(kafka_spark, cluster.bootstrap, subscribe=topic, startingOffsets=start_at_10).collect()
    rows = kafka_frame(
        kafka_spark, cluster.bootstrap, subscribe=topic, startingOffsets=start_at_10, failOnDataLoss="false"
    )
    assert sorted(r.offset for r in rows.collect()) == list(range(25, 40))
    assert sorted(r.offset for r in kafka_frame(kafka_spark, cluster.bootstrap, subscribe=topic).collect()) == list(
        range(25, 40)
    )


def test_read_committed_reads_non_transactional_records_up_to_the_last_stable_offset(
    kafka_spark, cluster, rows_of, topic_name
) -> None:
    """``kafka.isolation.level=read_committed``: with no transaction open the last stable offset is the high
    watermark, so every record is read (Spark then ends at the LSO that ListOffsets answers under
    READ_COMMITTED). Reading across aborted transactions: test_kafka_source_transactions.py."""
    topic = topic_name()
    cluster.clients.create_topic(topic, 2)
    expected = cluster.clients.produce(topic, 80)
    frame = kafka_frame(
        kafka_spark,
        cluster.bootstrap,
        subscribe=topic,
        includeHeaders="true",
        **{"kafka.isolation.level": "read_committed"},
    )
    assert rows_of(frame) == sorted(expected)
