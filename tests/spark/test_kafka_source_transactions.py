"""Spark's built-in Kafka source reading across transactions, on odradek and on Apache Kafka.

With ``kafka.isolation.level=read_committed`` a batch query reads up to the last stable offset and gets the
committed records only: the aborted ones and the markers leave gaps in the offsets, which Spark must not
take for lost data (``failOnDataLoss`` stays on). With the default read_uncommitted it gets every record
but the markers.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer

pytestmark = pytest.mark.spark

TRANSACTIONS = [(True, [b"c1", b"c2"]), (False, [b"a1"]), (True, [b"c3"]), (False, [b"a2", b"a3"]), (True, [b"c4"])]


def write_transactions(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"spark-{topic}", "log_level": 3})
    producer.init_transactions(30)
    for commit, values in TRANSACTIONS:
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value=value, partition=0)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


def read_values(spark: Any, bootstrap: str, topic: str, **options: str) -> list[tuple[int, bytes]]:
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).option("failOnDataLoss", "true")
    for key, value in options.items():
        reader = reader.option(key, value)
    return sorted((row.offset, bytes(row.value)) for row in reader.load().select("offset", "value").collect())


def test_read_committed_skips_aborted_transactions_without_data_loss(kafka_spark: Any, cluster: Any, topic_name: Any) -> None:
    topic = topic_name()
    cluster.clients.create_topic(topic, 1)
    write_transactions(cluster.bootstrap, topic)
    # Offsets: c1 c2 COMMIT a1 ABORT c3 COMMIT a2 a3 ABORT c4 COMMIT
    assert read_values(kafka_spark, cluster.bootstrap, topic, **{"kafka.isolation.level": "read_committed"}) == [
        (0, b"c1"), (1, b"c2"), (5, b"c3"), (10, b"c4"),
    ]
    assert read_values(kafka_spark, cluster.bootstrap, topic) == [
        (0, b"c1"), (1, b"c2"), (3, b"a1"), (5, b"c3"), (7, b"a2"), (8, b"a3"), (10, b"c4"),
    ]
