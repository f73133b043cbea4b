"""Fixtures of the Spark tests: one small SparkSession for the whole run, brokers, and log directories.

Every test here needs PySpark, pyarrow and Java (``make test`` installs them) and fails without them. Tests of Spark's own Kafka source and sink
(and of the clickstream pipeline, which uses them) also need the connector jars: they take the
``kafka_spark`` fixture. The session loads the connector as ODRADEK_SPARK_PACKAGES=1 or
ODRADEK_SPARK_KAFKA_JARS say (see odradek.tools.spark_session), and otherwise from the jars ``make
jvm-deps`` put in ``.cache/jvm/spark-kafka``; without any of these the ``kafka_spark`` tests fail.
"""

from __future__ import annotations

import importlib.util
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import kafka_jvm
import pytest

from odradek.protocol.record_batch import TimestampType
from odradek.protocol.records import Record, build_batch, complete_records
from odradek.storage.checkpoints import LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    missing = [name for name in ("pyspark", "pyarrow") if importlib.util.find_spec(name) is None]
    if missing:  # pyarrow: Python data sources need it
        pytest.fail(f"{', '.join(missing)} not installed: pip install -e '.[test]'", pytrace=False)
    if shutil.which("java") is None:
        pytest.fail("PySpark needs Java (17): install openjdk-17-jre-headless", pytrace=False)
    from odradek.tools.spark_session import build_session
    from odradek.tools.spark_source import register

    connector = kafka_connector()
    session = build_session("odradek-tests", connector if isinstance(connector, dict) else None)
    register(session)
    yield session
    session.stop()


def kafka_connector() -> dict[str, str] | str:
    """The Spark settings that load the Kafka connector, or why there are none.

    The environment's choice first; else the connector's jars in the cache ``make jvm-deps`` fills.
    """
    from odradek.tools.spark_session import connector_jars_in, kafka_connector_conf

    configured = kafka_connector_conf()
    if configured is not None:
        return configured
    try:
        return kafka_connector_conf(jars=connector_jars_in(kafka_jvm.jar_dir("spark-kafka")))
    except kafka_jvm.JvmUnavailable as exc:  # says to run make jvm-deps
        return f"Spark's Kafka connector is missing: {exc}"
    except FileNotFoundError as exc:
        return f"Spark's Kafka connector is missing: {exc}: run make jvm-deps"


@pytest.fixture
def kafka_spark(spark: Any) -> Any:
    """The session, for tests of Spark's Kafka source and sink; fails when it has no connector."""
    connector = kafka_connector()
    if not isinstance(connector, dict):
        pytest.fail(connector, pytrace=False)
    return spark


@pytest.fixture
def connector_flags(kafka_spark: Any) -> list[str]:
    """The ``odradek pipeline`` flags that load the connector the session loaded."""
    connector = kafka_connector()
    assert isinstance(connector, dict)
    return ["--packages"] if "spark.jars.packages" in connector else ["--jars", connector["spark.jars"]]


@pytest.fixture(scope="module")
def broker() -> Iterator[Any]:
    """A real odradek broker shared by a module's tests (each test uses topics of its own).

    Small segments, so a few hundred KiB of records span several; high watermarks checkpointed often, so
    the odradek-log source sees new data within a fraction of a second. Logs are kept forever (the tests'
    records are stamped in 2023) unless a topic sets ``retention.ms``, which is then acted on within half
    a second.
    """
    from odradek import Broker

    config = {
        "log.retention.ms": "-1",
        "log.retention.check.interval.ms": "500",
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


ExpectedRow = tuple[str, int, int, bytes | None, bytes | None, int, int, list[tuple[str, bytes | None]] | None]
"""(topic, partition, offset, key, value, timestamp ms, timestamp type, headers): a record as a reader sees it.

Headers are None for a record without any: Spark's Kafka source gives a null ``headers`` then (Kafka's
record has an empty header array; KafkaRecordToRowConverter maps it to null), as confluent-kafka's
``Message.headers()`` does."""


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

    def append(
        self, topic: str, partition: int, records: list[Record], *, roll: bool = False, **batch_args: Any
    ) -> bytes:
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
                (
                    topic,
                    partition,
                    r.offset,
                    r.key,
                    r.value,
                    log_append_time if timestamp_type == TimestampType.LOG_APPEND_TIME else r.timestamp,
                    int(timestamp_type),
                    list(r.headers) or None,
                )
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
        return frame_rows(odradek_log_frame(spark, path, **options))

    return read


def frame_rows(df: Any) -> list[tuple]:
    """The rows of a DataFrame with the Kafka source's columns, as sorted ExpectedRow tuples (headers only
    if the frame has them)."""
    columns = ["topic", "partition", "offset", "key", "value", "unix_millis(timestamp)", "timestampType"]
    if "headers" in df.columns:
        columns.append("headers")
    return sorted(tuple(_plain(v) for v in row) for row in df.selectExpr(*columns).collect())


@pytest.fixture
def rows_of() -> Callable[[Any], list[tuple]]:
    """``rows_of(df)``: a Kafka-source-shaped DataFrame's rows as sorted ExpectedRow tuples."""
    return frame_rows


def odradek_log_frame(spark: Any, path: Path | str | list[str], **options: str) -> Any:
    reader = spark.read.format("odradek-log")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(path if isinstance(path, list) else str(path))


@pytest.fixture
def log_frame(spark: Any) -> Callable[..., Any]:
    """``log_frame(path, **options)``: the DataFrame of ``format("odradek-log")``, not yet read."""
    return lambda path, **options: odradek_log_frame(spark, path, **options)


# --- real clients --------------------------------------------------------------------------------------------


@dataclass
class KafkaClients:
    """confluent-kafka (librdkafka) clients of one broker: what the tests produce with and check with.

    ``produce`` returns the rows a reader must see (ExpectedRow), built from the delivery reports: they
    say which partition and offset each record got.
    """

    bootstrap: str

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
        """Create ``topic``, kept forever unless ``config`` says otherwise: tests produce records stamped in
        2023, which retention would delete at its next check, on either broker."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()  # kept referenced until the answer arrives
        config = {"retention.ms": "-1", **(config or {})}
        admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(30)

    def add_partitions(self, topic: str, total: int) -> None:
        from confluent_kafka.admin import NewPartitions

        admin = self.admin()
        admin.create_partitions([NewPartitions(topic, total)])[topic].result(30)

    def set_topic_config(self, topic: str, key: str, value: str) -> None:
        """IncrementalAlterConfigs SET of one topic config."""
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        admin = self.admin()
        entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, high watermark) of one partition."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"check-{uuid.uuid4().hex}"})
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        finally:
            consumer.close()

    def delete_records_before(self, topic: str, partition: int, offset: int) -> None:
        from confluent_kafka import TopicPartition

        admin = self.admin()
        for future in admin.delete_records([TopicPartition(topic, partition, offset)]).values():
            future.result(30)

    def produce(
        self,
        topic: str,
        count: int,
        *,
        compression: str = "none",
        value_size: int = 40,
        seed: int = 0,
        partition: int | None = None,
        timestamps: list[int] | None = None,
    ) -> list[ExpectedRow]:
        """Produce ``count`` records (keys, some null; hex values; headers on every third) and wait for them."""
        import functools
        import random

        from confluent_kafka import Producer

        rng = random.Random(seed)
        delivered: list[ExpectedRow] = []
        errors: list[Any] = []

        def on_delivery(headers: list[tuple[str, bytes | None]], err: Any, msg: Any) -> None:
            """Delivery reports carry no headers, so the ones produced are passed along."""
            if err is not None:
                errors.append(err)
                return
            # confluent-kafka numbers timestamp types from "not available" = 0: CreateTime is 1, Kafka's 0.
            timestamp_type, timestamp = msg.timestamp()
            delivered.append(
                (
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    timestamp,
                    timestamp_type - 1,
                    headers or None,
                )
            )

        producer = Producer({"bootstrap.servers": self.bootstrap, "compression.type": compression, "linger.ms": 5})
        for i in range(count):
            key = None if i % 10 == 0 else f"user-{rng.randrange(50)}".encode()
            value = rng.randbytes(value_size // 2).hex().encode()
            headers = [("seq", str(i).encode()), ("none", None)] if i % 3 == 0 else []
            extra: dict[str, Any] = {}
            if partition is not None:
                extra["partition"] = partition
            if timestamps is not None:
                extra["timestamp"] = timestamps[i]
            producer.produce(
                topic,
                key=key,
                value=value,
                headers=headers,
                on_delivery=functools.partial(on_delivery, headers),
                **extra,
            )
            producer.poll(0)
        assert producer.flush(60) == 0
        assert not errors, errors[:3]
        return delivered

    def consume_all(self, topic: str) -> list[ExpectedRow]:
        """Every record of ``topic`` between its log start offsets and high watermarks, read by a consumer."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": f"check-{uuid.uuid4().hex}", "enable.auto.commit": False}
        )
        try:
            partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
            ranges = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in partitions}
            consumer.assign([TopicPartition(topic, p, low) for p, (low, high) in ranges.items() if high > low])
            expected = sum(high - low for low, high in ranges.values())
            rows: list[ExpectedRow] = []
            deadline = time.monotonic() + 60
            while len(rows) < expected:
                if time.monotonic() > deadline:
                    raise AssertionError(f"consumed {len(rows)} of the {expected} records of {topic}")
                msg = consumer.poll(0.5)
                if msg is None or msg.error() or msg.offset() >= ranges[msg.partition()][1]:
                    continue
                timestamp_type, timestamp = msg.timestamp()
                rows.append(
                    (
                        msg.topic(),
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        timestamp,
                        timestamp_type - 1,
                        msg.headers(),
                    )
                )
            return sorted(rows)
        finally:
            consumer.close()


SPARK_DATA_LOSS = "Some data may have been lost because they are not available in Kafka any more"
"""How Spark's Kafka source's data-loss error begins (KafkaExceptions), batch or streaming."""


@pytest.fixture
def data_loss_error() -> str:
    """What ``pytest.raises(match=...)`` looks for when Spark's Kafka source must fail on data loss."""
    return SPARK_DATA_LOSS


@pytest.fixture(scope="module")
def clients(broker: Any) -> KafkaClients:
    return KafkaClients(broker.bootstrap)


@dataclass(frozen=True)
class Cluster:
    """A broker a test runs against, and its clients: odradek, or Apache Kafka to show the same test passes
    there (what Spark shows is then Spark's and Kafka's behaviour, not an artefact of odradek)."""

    name: str
    bootstrap: str
    clients: KafkaClients


@pytest.fixture(params=["odradek", "kafka"])
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """The module's odradek broker, then the run's real Kafka (tests/conftest.py's ``real_kafka``)."""
    if request.param == "odradek":
        bootstrap = request.getfixturevalue("broker").bootstrap
    else:
        bootstrap = request.getfixturevalue("real_kafka").bootstrap
    return Cluster(request.param, bootstrap, KafkaClients(bootstrap))


@pytest.fixture
def clients_of() -> Callable[[Any], KafkaClients]:
    """Clients for a broker a test starts itself."""
    return lambda broker: KafkaClients(broker.bootstrap)
