"""Fixtures of the Spark tests: one small SparkSession for the whole run, brokers, and log directories.

Every test here needs PySpark and Java, and skips without them. Tests of Spark's own Kafka source and sink
(and of the clickstream pipeline, which uses them) also need the connector jars: they take the
``kafka_spark`` fixture, which skips with instructions when neither ODRADEK_SPARK_PACKAGES=1 nor
ODRADEK_SPARK_KAFKA_JARS is set (see odradek.tools.spark_session).
"""

from __future__ import annotations

import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from odradek.protocol.record_batch import TimestampType
from odradek.protocol.records import Record, build_batch, complete_records
from odradek.storage.checkpoints import LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile

@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="PySpark is not installed (pip install -e '.[test]')")
    pytest.importorskip("pyarrow", reason="pyarrow (Python data sources need it) is not installed")
    if shutil.which("java") is None:
        pytest.skip("PySpark needs Java (17): install openjdk-17-jre-headless")
    from odradek.tools.spark_session import build_session, kafka_connector_conf
    from odradek.tools.spark_source import register

    session = build_session("odradek-tests", kafka_connector_conf())
    register(session)
    yield session
    session.stop()


@pytest.fixture
def kafka_spark(spark: Any) -> Any:
    """The session, for tests of Spark's Kafka source and sink; skips when the connector is not configured."""
    from odradek.tools.spark_session import HOW_TO_ENABLE_KAFKA, kafka_connector_conf

    if kafka_connector_conf() is None:
        pytest.skip(HOW_TO_ENABLE_KAFKA)
    return spark


@pytest.fixture(scope="module")
def broker() -> Iterator[Any]:
    """A real odradek broker shared by a module's tests (each test uses topics of its own).

    Small segments, so a few hundred KiB of records span several; high watermarks checkpointed often, so
    the odradek-log source sees new data within a fraction of a second.
    """
    from odradek import Broker

    config = {
        "log.segment.bytes": "1048576",
        "replica.high.watermark.checkpoint.interval.ms": "100",
        "log.flush.offset.checkpoint.interval.ms": "100",
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
    }
    with Broker(config=config) as b:
        yield b


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Topic names unique to the test, so tests can share one broker."""
    prefix = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:60]
    return lambda suffix="": f"{prefix}-{suffix}-{uuid.uuid4().hex[:6]}".replace("--", "-")


# --- log directories written by hand -----------------------------------------------------------------------


ExpectedRow = tuple[str, int, int, bytes | None, bytes | None, int, int, list[tuple[str, bytes | None]]]
"""(topic, partition, offset, key, value, timestamp ms, timestamp type, headers): a record as a reader sees it."""


@dataclass
class LogDirWriter:
    """Writes Kafka's on-disk layout: ``<dir>/<topic>-<partition>/<20-digit base offset>.log`` segments.

    ``append`` adds one batch to a partition at its next offset, rolling to a new segment when ``roll`` is
    true, and keeps the rows a consumer would see in ``rows`` (none for control batches).
    """

    root: Path
    rows: list[ExpectedRow] = field(default_factory=list)
    next_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    current_segment: dict[tuple[str, int], Path] = field(default_factory=dict)

    def partition_dir(self, topic: str, partition: int) -> Path:
        path = self.root / f"{topic}-{partition}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def append(self, topic: str, partition: int, records: list[Record], *, roll: bool = False, **batch_args: Any) -> bytes:
        """Append ``records`` as one batch (``build_batch`` arguments in ``batch_args``); returns its bytes."""
        base = self.next_offsets.get((topic, partition), 0)
        items = complete_records(records, base)
        batch = build_batch(items, base_offset=base, **batch_args)
        self.append_raw(topic, partition, batch, base, roll=roll)
        self.next_offsets[(topic, partition)] = items[-1].offset + 1
        if not batch_args.get("is_control"):
            timestamp_type = batch_args.get("timestamp_type", TimestampType.CREATE_TIME)
            log_append_time = max(r.timestamp for r in items)
            self.rows += [
                (topic, partition, r.offset, r.key, r.value,
                 log_append_time if timestamp_type == TimestampType.LOG_APPEND_TIME else r.timestamp,
                 int(timestamp_type), list(r.headers))
                for r in items
            ]
        return batch

    def append_raw(self, topic: str, partition: int, data: bytes, base_offset: int, *, roll: bool = False) -> Path:
        """Append bytes as they are to the partition's current segment (a new one at ``base_offset`` if ``roll``)."""
        tp = (topic, partition)
        if roll or tp not in self.current_segment:
            self.current_segment[tp] = self.partition_dir(topic, partition) / f"{base_offset:020d}.log"
        with open(self.current_segment[tp], "ab") as f:
            f.write(data)
        return self.current_segment[tp]

    def checkpoint_high_watermarks(self, offsets: dict[tuple[str, int], int]) -> None:
        OffsetCheckpointFile(self.root / REPLICATION_OFFSET_CHECKPOINT).write(offsets)

    def checkpoint_log_start_offsets(self, offsets: dict[tuple[str, int], int]) -> None:
        OffsetCheckpointFile(self.root / LOG_START_OFFSET_CHECKPOINT).write(offsets)


@pytest.fixture
def log_dir(tmp_path: Path) -> LogDirWriter:
    root = tmp_path / "kafka-logs"
    root.mkdir()
    return LogDirWriter(root)


def wait_until(condition: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def wait() -> Callable[..., None]:
    return wait_until


def _plain(value: Any) -> Any:
    """Spark's Python values as the tests' expectations spell them: bytes, tuples, lists of tuples."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list):
        return [tuple(_plain(v) for v in item) for item in value]
    return value


@pytest.fixture
def read_log(spark: Any) -> Callable[..., list[tuple]]:
    """``read_log(path, **options)``: the rows of ``format("odradek-log")`` as sorted ExpectedRow tuples."""

    def read(path: Path | str | list[str], **options: str) -> list[tuple]:
        df = odradek_log_frame(spark, path, **options)
        columns = ["topic", "partition", "offset", "key", "value", "unix_millis(timestamp)", "timestampType"]
        if "headers" in df.columns:
            columns.append("headers")
        return sorted(tuple(_plain(v) for v in row) for row in df.selectExpr(*columns).collect())

    return read


def odradek_log_frame(spark: Any, path: Path | str | list[str], **options: str) -> Any:
    reader = spark.read.format("odradek-log")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(path if isinstance(path, list) else str(path))


@pytest.fixture
def log_frame(spark: Any) -> Callable[..., Any]:
    """``log_frame(path, **options)``: the DataFrame of ``format("odradek-log")``, not yet read."""
    return lambda path, **options: odradek_log_frame(spark, path, **options)
