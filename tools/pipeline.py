"""``odradek pipeline clickstream``: a PySpark Structured Streaming pipeline on odradek, end to end.

1. A generator produces page-view events to ``page-views`` with confluent-kafka: JSON
   ``{"user": ..., "page": ..., "timestamp": <epoch ms>}``, keyed by user, with the event time as the
   record timestamp too.
2. A Structured Streaming job reads them with Spark's Kafka source (``format("kafka")``), parses the JSON,
   counts views per page in one-minute event-time windows behind a watermark, and writes the counts to
   ``page-view-counts`` with Spark's Kafka sink. It runs in update mode, so ``page-view-counts`` is a
   changelog: the last record of a key (``<window start>|<page>``) holds that window's final count.
3. The counts are read back (``format("kafka")`` again), checked against the counts computed directly from
   the generated events, and printed as a table.

Without ``--bootstrap-server`` the command starts its own odradek broker for the run. Spark's Kafka
connector must be available (see odradek.tools.spark_session). docs/spark.md shows the commands.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Callable, Iterable

from odradek.tools.spark_session import HOW_TO_ENABLE_KAFKA, build_session, kafka_connector_conf

PAGE_VIEWS = "page-views"
PAGE_VIEW_COUNTS = "page-view-counts"
PAGES = ("/", "/pricing", "/docs", "/docs/quickstart", "/blog", "/signup", "/login", "/careers")
PAGE_WEIGHTS = (30, 12, 18, 9, 10, 6, 12, 3)
"""How often each page is viewed, relative to the others: real traffic is anything but uniform."""

MINUTE_MS = 60_000
JITTER_MS = 20_000
"""Events arrive up to this much out of event-time order: less than any sensible watermark delay."""

PAGE_VIEW_SCHEMA = "user string, page string, timestamp long"
ISO_MINUTE = "yyyy-MM-dd'T'HH:mm:ss'Z'"
"""Window bounds in page-view-counts, in UTC (the session's time zone, see spark_session.LOCAL_CONF)."""

WindowKey = tuple[int, str]  # (window start, epoch ms; page)


@dataclass(frozen=True)
class PageView:
    user: str
    page: str
    timestamp: int  # event time, epoch ms

    def to_json(self) -> bytes:
        return json.dumps({"user": self.user, "page": self.page, "timestamp": self.timestamp}).encode()


@dataclass(frozen=True)
class ClickstreamConfig:
    bootstrap: str
    checkpoint: Path
    events: int = 3000
    users: int = 40
    minutes: int = 5
    partitions: int = 3
    watermark: str = "2 minutes"
    max_offsets_per_trigger: int = 800
    seed: int = 1
    start_ms: int | None = None  # first minute of event time; None: ``minutes`` before now


@dataclass(frozen=True)
class ClickstreamResult:
    events: list[PageView]
    counts: dict[WindowKey, int]  # what the pipeline wrote to page-view-counts (last value per key)

    def expected_counts(self) -> dict[WindowKey, int]:
        """The ground truth: views per page per one-minute window, counted straight from the events."""
        return dict(Counter((v.timestamp - v.timestamp % MINUTE_MS, v.page) for v in self.events))

    @property
    def correct(self) -> bool:
        return self.counts == self.expected_counts()


# --- generating ---------------------------------------------------------------------------------------------


def generate_page_views(config: ClickstreamConfig) -> list[PageView]:
    """``config.events`` views spread over ``config.minutes`` of event time, slightly out of order."""
    rng = random.Random(config.seed)
    span = config.minutes * MINUTE_MS
    start = config.start_ms
    if start is None:
        now = int(datetime.now(UTC).timestamp() * 1000)
        start = now - now % MINUTE_MS - span
    views = []
    for i in range(config.events):
        on_time = start + span * i // config.events
        timestamp = min(max(on_time + rng.randint(-JITTER_MS, JITTER_MS), start), start + span - 1)
        page = rng.choices(PAGES, PAGE_WEIGHTS)[0]
        views.append(PageView(f"user-{rng.randrange(config.users)}", page, timestamp))
    return views


def ensure_topics(bootstrap: str, partitions: dict[str, int]) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, count, 1) for topic, count in partitions.items()])
    for future in futures.values():
        try:
            future.result(30)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's high watermark: where this run's records will start."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "odradek-pipeline-offsets", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
    finally:
        consumer.close()


def produce_page_views(bootstrap: str, views: list[PageView]) -> None:
    from confluent_kafka import Producer

    failures: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10, "compression.type": "lz4"})
    for view in views:
        producer.produce(
            PAGE_VIEWS,
            key=view.user.encode(),
            value=view.to_json(),
            timestamp=view.timestamp,
            on_delivery=lambda err, msg: failures.append(err) if err is not None else None,
        )
        producer.poll(0)
    if producer.flush(60) or failures:
        raise RuntimeError(f"could not produce every page view: {failures[:3] or 'flush timed out'}")


# --- the Spark jobs -----------------------------------------------------------------------------------------


def page_view_count_records(page_views: Any, watermark: str) -> Any:
    """The transformation at the heart of the job, from any stream with a ``value`` column of page-view JSON
    (binary or string) to the ``key``/``value`` records of page-view-counts."""
    from pyspark.sql import functions as F

    views = page_views.select(F.from_json(F.col("value").cast("string"), PAGE_VIEW_SCHEMA).alias("view")).select(
        "view.page", F.expr("timestamp_millis(view.timestamp)").alias("event_time")
    )
    counts = views.withWatermark("event_time", watermark).groupBy(F.window("event_time", "1 minute"), "page").count()
    window_start = F.date_format("window.start", ISO_MINUTE)
    value = F.struct(
        window_start.alias("window_start"),
        F.date_format("window.end", ISO_MINUTE).alias("window_end"),
        "page",
        F.col("count").alias("views"),
    )
    return counts.select(F.concat_ws("|", window_start, "page").alias("key"), F.to_json(value).alias("value"))


def count_page_views(spark: Any, config: ClickstreamConfig, starting_offsets: dict[int, int]) -> None:
    """The streaming job: page-views -> per-page counts in one-minute windows -> page-view-counts.

    Runs with an availableNow trigger: it processes what was produced when it started, in micro-batches of
    at most ``max_offsets_per_trigger`` records, and stops. ``starting_offsets`` applies to a new
    checkpoint; a checkpoint that exists resumes where its last run stopped. Update mode: each
    micro-batch writes the windows whose counts changed.
    """
    page_views = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", config.bootstrap)
        .option("subscribe", PAGE_VIEWS)
        .option("startingOffsets", json.dumps({PAGE_VIEWS: {str(p): o for p, o in starting_offsets.items()}}))
        .option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
        .load()
    )
    query = (
        page_view_count_records(page_views, config.watermark)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", config.bootstrap)
        .option("topic", PAGE_VIEW_COUNTS)
        .option("checkpointLocation", str(config.checkpoint))
        .outputMode("update")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the streaming job failed: {query.exception()}")


def final_counts(values: Iterable[str]) -> dict[WindowKey, int]:
    """The count of each (window, page) from page-view-counts values in log order: the last one wins, as
    in a compacted topic."""
    counts: dict[WindowKey, int] = {}
    for value in values:
        record = json.loads(value)
        start = datetime.fromisoformat(record["window_start"]).timestamp()
        counts[(int(start * 1000), record["page"])] = record["views"]
    return counts


def read_page_view_counts(spark: Any, bootstrap: str, starting_offsets: dict[int, int]) -> dict[WindowKey, int]:
    """What the job wrote to page-view-counts since ``starting_offsets``, read with Spark's Kafka source.

    A key always goes to the same partition, so ordering by (partition, offset) keeps each key's log order.
    """
    rows = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", PAGE_VIEW_COUNTS)
        .option("startingOffsets", json.dumps({PAGE_VIEW_COUNTS: {str(p): o for p, o in starting_offsets.items()}}))
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .orderBy("partition", "offset")
        .collect()
    )
    return final_counts(row.value for row in rows)


def run_clickstream(spark: Any, config: ClickstreamConfig) -> ClickstreamResult:
    """Generate, stream, read back: the whole pipeline against ``config.bootstrap``."""
    ensure_topics(config.bootstrap, {PAGE_VIEWS: config.partitions, PAGE_VIEW_COUNTS: 2})
    views_from = end_offsets(config.bootstrap, PAGE_VIEWS)
    counts_from = end_offsets(config.bootstrap, PAGE_VIEW_COUNTS)
    views = generate_page_views(config)
    produce_page_views(config.bootstrap, views)
    count_page_views(spark, config, views_from)
    return ClickstreamResult(views, read_page_view_counts(spark, config.bootstrap, counts_from))


# --- the command --------------------------------------------------------------------------------------------


def summary_table(result: ClickstreamResult) -> str:
    """Views per page (rows) and minute (columns), then whether they match the generated events."""
    minutes = sorted({start for start, _ in result.counts})
    header = ["page"] + [datetime.fromtimestamp(m / 1000, UTC).strftime("%H:%M") for m in minutes] + ["total"]
    lines = []
    for page in PAGES:
        cells = [result.counts.get((m, page), 0) for m in minutes]
        lines.append([page] + [str(c) for c in cells] + [str(sum(cells))])
    widths = [max(len(row[i]) for row in [header] + lines) for i in range(len(header))]

    def fmt(row: list[str]) -> str:
        return "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))

    expected = result.expected_counts()
    verdict = (
        f"counts match the {len(result.events)} generated events"
        if result.correct
        else f"MISMATCH: {sum(1 for k in expected.keys() | result.counts.keys() if expected.get(k) != result.counts.get(k))} "
        f"(window, page) counts differ from the generated events"
    )
    day = datetime.fromtimestamp(minutes[0] / 1000, UTC).strftime("%Y-%m-%d") if minutes else "-"
    return "\n".join(
        [f"page views per minute (UTC, {day}) from {PAGE_VIEW_COUNTS}:", fmt(header)]
        + [fmt(r) for r in lines]
        + [verdict]
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline", choices=sorted(PIPELINES), help="the pipeline to run")
    parser.add_argument("--bootstrap-server", help="a running broker (default: start an odradek broker for the run)")
    defaults = ClickstreamConfig(bootstrap="", checkpoint=Path())
    parser.add_argument(
        "--events", type=int, default=defaults.events, help="page views to generate (default %(default)s)"
    )
    parser.add_argument("--users", type=int, default=defaults.users, help="distinct users (default %(default)s)")
    parser.add_argument(
        "--minutes", type=int, default=defaults.minutes, help="minutes of event time (default %(default)s)"
    )
    parser.add_argument(
        "--partitions", type=int, default=defaults.partitions, help="partitions of page-views if created"
    )
    parser.add_argument("--watermark", default=defaults.watermark, help="watermark delay (default %(default)s)")
    parser.add_argument(
        "--max-offsets-per-trigger", type=int, default=defaults.max_offsets_per_trigger, help="records per micro-batch"
    )
    parser.add_argument("--seed", type=int, default=defaults.seed, help="random seed of the generator")
    parser.add_argument("--checkpoint", type=Path, help="checkpoint directory (default: a new temporary one)")
    parser.add_argument("--packages", action="store_true", default=None, help="load Spark's Kafka connector from Maven")
    parser.add_argument("--jars", help="comma-separated paths of the Kafka connector jars and their dependencies")


def run_clickstream_command(args: argparse.Namespace) -> int:
    connector = kafka_connector_conf(packages=args.packages, jars=args.jars)
    if connector is None:
        print(f"odradek pipeline: {HOW_TO_ENABLE_KAFKA} (or pass --packages / --jars)", file=sys.stderr)
        return 2
    with ExitStack() as stack:
        bootstrap = args.bootstrap_server
        if bootstrap is None:
            from odradek import Broker

            bootstrap = stack.enter_context(Broker()).bootstrap
            print(f"started an odradek broker at {bootstrap}")
        checkpoint = args.checkpoint or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clickstream-")))
        config = ClickstreamConfig(
            bootstrap=bootstrap,
            checkpoint=checkpoint,
            events=args.events,
            users=args.users,
            minutes=args.minutes,
            partitions=args.partitions,
            watermark=args.watermark,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
            seed=args.seed,
        )
        result = run_clickstream(build_session("odradek-clickstream", connector), config)
        print(summary_table(result))
        return 0 if result.correct else 1


PIPELINES: dict[str, Callable[[argparse.Namespace], int]] = {"clickstream": run_clickstream_command}


def main(args: argparse.Namespace) -> int:
    return PIPELINES[args.pipeline](args)
