"""Spark's built-in Kafka sink, batch and streaming, writing to an odradek broker.

A confluent-kafka consumer reads back what Spark wrote. Needs the spark-sql-kafka-0-10 connector (see
test_kafka_source.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

SINK_SCHEMA = "key binary, value binary, headers array<struct<key: string, value: binary>>, topic string, partition int"


def written(rows: list[tuple]) -> list[tuple]:
    """(topic, partition, key, value, headers) of consumed rows, in offset order per partition."""
    return [(r[0], r[1], r[3], r[4], r[7]) for r in sorted(rows)]


def test_batch_write_with_key_value_headers_topic_and_partition(kafka_spark, cluster, topic_name) -> None:
    orders, audit = topic_name("orders"), topic_name("audit")
    cluster.clients.create_topic(orders, 3)
    cluster.clients.create_topic(audit, 2)
    data = [
        (
            b"k%d" % i if i % 4 else None,
            b"value-%d" % i,
            [("n", b"%d" % i), ("empty", None)] if i % 2 else [],
            orders if i % 3 else audit,
            i % 2,
        )
        for i in range(60)
    ]
    frame = kafka_spark.createDataFrame(data, SINK_SCHEMA).coalesce(1)  # one writer task keeps the row order
    frame.write.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap).save()

    # Written without headers, a record has none: a consumer sees None, not an empty list.
    expected = [(topic, partition, key, value, headers or None) for key, value, headers, topic, partition in data]
    consumed = written(cluster.clients.consume_all(orders) + cluster.clients.consume_all(audit))
    for tp in {(t, p) for t, p, *_ in expected}:
        assert [row for row in consumed if row[:2] == tp] == [row for row in expected if row[:2] == tp]
    assert len(consumed) == len(expected)


def test_the_topic_option_overrides_the_topic_column(kafka_spark, broker, clients, topic_name) -> None:
    target = topic_name()
    clients.create_topic(target, 2)
    frame = kafka_spark.createDataFrame([("somewhere-else", f"v{i}") for i in range(20)], "topic string, value string")
    frame.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", target).save()
    consumed = clients.consume_all(target)
    assert sorted(r[4] for r in consumed) == sorted(f"v{i}".encode() for i in range(20))
    assert all(r[3] is None for r in consumed)  # no key column: null keys


def test_stream_write_from_files_to_kafka(kafka_spark, broker, clients, topic_name, tmp_path: Path) -> None:
    """A file source stream into the Kafka sink; a restart from the checkpoint writes only the new files."""
    target = topic_name()
    clients.create_topic(target, 2)
    inbox = tmp_path / "inbox"
    inbox.mkdir()

    def drop_file(name: str, events: list[dict[str, Any]]) -> None:
        (inbox / name).write_text("".join(json.dumps(e) + "\n" for e in events))

    def run() -> None:
        stream = kafka_spark.readStream.schema("user string, page string, n int").json(str(inbox))
        query = (
            stream.selectExpr(
                "CAST(user AS BINARY) AS key",
                "to_json(struct(page, n)) AS value",
                "array(named_struct('key', 'source', 'value', CAST('files' AS BINARY))) AS headers",
                "n % 2 AS partition",
            )
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", target)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(120)
        finally:
            query.stop()

    first = [{"user": f"u{i % 3}", "page": f"/p{i}", "n": i} for i in range(10)]
    drop_file("a.json", first)
    run()
    second = [{"user": "u9", "page": f"/q{i}", "n": 100 + i} for i in range(5)]
    drop_file("b.json", second)
    run()

    def as_record(event: dict[str, Any]) -> tuple:
        value = json.dumps({"page": event["page"], "n": event["n"]}, separators=(",", ":")).encode()
        return (target, event["n"] % 2, event["user"].encode(), value, [("source", b"files")])

    consumed = written(clients.consume_all(target))
    assert sorted(consumed) == sorted(as_record(e) for e in first + second)
