"""The clickstream pipeline: its counts must equal the ground truth computed from the generated events.

The end-to-end tests need Spark's Kafka connector (see test_kafka_source.py). The
counting job itself -- JSON parsing, one-minute windows, watermark, update-mode changelog -- also runs here
on a file stream, which needs no connector.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from odradek.cli import main as odradek
from odradek.tools.pipeline import (
    MINUTE_MS,
    PAGE_VIEW_COUNTS,
    PAGE_VIEWS,
    ClickstreamConfig,
    PageView,
    end_offsets,
    final_counts,
    generate_page_views,
    page_view_count_records,
    run_clickstream,
)
from odradek.tools.spark_session import JARS_ENV, PACKAGES_ENV

pytestmark = pytest.mark.spark

START = 1_700_000_040_000  # 2023-11-14T22:14:00Z, a minute boundary


def ground_truth(views: list[PageView]) -> dict[tuple[int, str], int]:
    return dict(Counter((v.timestamp - v.timestamp % MINUTE_MS, v.page) for v in views))


def test_the_counting_job_on_a_file_stream(spark: Any, tmp_path: Path) -> None:
    """Four files, one micro-batch each, then a view four minutes late: the watermark drops only that one."""
    config = ClickstreamConfig(bootstrap="", checkpoint=tmp_path / "checkpoint", events=1200, minutes=4, start_ms=START)
    views = generate_page_views(config)
    assert min(v.timestamp for v in views) >= START and max(v.timestamp for v in views) < START + 4 * MINUTE_MS
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    late = PageView("user-late", "/pricing", START + 1_000)
    for i, chunk in enumerate([views[j : j + 300] for j in range(0, 1200, 300)] + [[late]]):
        path = inbox / f"{i}.json"
        path.write_text("".join(v.to_json().decode() + "\n" for v in chunk))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the file source takes files oldest first

    batches: list[list[str]] = []
    records = page_view_count_records(
        spark.readStream.option("maxFilesPerTrigger", 1).text(str(inbox)), config.watermark
    )
    query = (
        records.writeStream.foreachBatch(lambda frame, _: batches.append([r.value for r in frame.collect()]))
        .option("checkpointLocation", str(config.checkpoint))
        .outputMode("update")
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)

    assert final_counts(value for batch in batches for value in batch) == ground_truth(views)
    keys = Counter((json.loads(v)["window_start"], json.loads(v)["page"]) for batch in batches for v in batch)
    assert max(keys.values()) > 1, "update mode should have rewritten some window's count as views arrived"
    assert len([b for b in batches if b]) >= 4


def test_the_command_says_how_to_get_the_connector(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(PACKAGES_ENV, raising=False)
    monkeypatch.delenv(JARS_ENV, raising=False)
    assert odradek(["pipeline", "clickstream"]) == 2
    assert f"{JARS_ENV}" in capsys.readouterr().err


def consumed_values_in_log_order(rows: list[tuple]) -> list[str]:
    return [r[4].decode() for r in sorted(rows)]


def create_kept_topic(clients: Any, topic: str, partitions: int) -> None:
    """Create ``topic`` to be kept forever, unless it exists (a Kafka named by ODRADEK_COMPAT_KAFKA may hold
    an earlier run's): the pipeline would create it with the broker's retention, which deletes records
    stamped in 2023 at its next check."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        clients.create_topic(topic, partitions)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def test_clickstream_counts_match_the_generated_events(kafka_spark, cluster, tmp_path: Path) -> None:
    clients = cluster.clients
    create_kept_topic(clients, PAGE_VIEWS, 3)
    create_kept_topic(clients, PAGE_VIEW_COUNTS, 2)
    views_from = end_offsets(cluster.bootstrap, PAGE_VIEWS)
    config = ClickstreamConfig(
        bootstrap=cluster.bootstrap,
        checkpoint=tmp_path / "checkpoint",
        events=1500,
        minutes=4,
        max_offsets_per_trigger=300,
        start_ms=START,
    )
    result = run_clickstream(kafka_spark, config)

    assert result.counts == ground_truth(result.events)
    # The ground truth again, from what this run put in page-views rather than from the generator's list ...
    this_run = [row for row in clients.consume_all(PAGE_VIEWS) if row[2] >= views_from[row[1]]]
    assert ground_truth([PageView(**json.loads(v)) for v in consumed_values_in_log_order(this_run)]) == result.counts
    # ... and the counts again, read from page-view-counts by another client.
    counts_in_topic = final_counts(consumed_values_in_log_order(clients.consume_all(PAGE_VIEW_COUNTS)))
    assert {k: n for k, n in counts_in_topic.items() if k[0] < START + 4 * MINUTE_MS} == result.counts


def test_odradek_pipeline_clickstream_command_starts_its_own_broker(
    connector_flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``odradek pipeline clickstream`` as docs/spark.md runs it first: no broker given, it starts one."""
    assert odradek(["pipeline", "clickstream", "--events", "300", "--minutes", "2", *connector_flags]) == 0
    out = capsys.readouterr().out
    assert "started an odradek broker at 127.0.0.1:" in out
    assert "counts match the 300 generated events" in out


def test_odradek_pipeline_clickstream_command(
    connector_flags: list[str], broker, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command against a broker that already holds an earlier run's topics."""
    args = ["--bootstrap-server", broker.bootstrap, "--events", "600", "--seed", "7", *connector_flags]
    assert odradek(["pipeline", "clickstream", *args]) == 0
    out = capsys.readouterr().out
    assert "counts match the 600 generated events" in out
    assert "/pricing" in out and "total" in out
