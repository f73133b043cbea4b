"""``odradek-log``: a PySpark data source that reads a broker's segment files directly, for offline analytics.

::

    from odradek.tools.spark_source import register
    register(spark)
    df = (spark.read.format("odradek-log")
          .option("subscribe", "page-views")
          .option("startingOffsets", '{"page-views": {"0": 1000}}')
          .load("/var/lib/odradek/data"))

The rows have exactly the schema of Spark's Kafka source, so a job written against ``format("kafka")`` runs
unchanged on the files: only the format differs, and the log directories given to ``load`` take the place
of the ``kafka.*`` options. One Spark partition reads one segment. The option vocabulary is Spark's Kafka source's (``subscribe``,
``subscribePattern``, ``assign``, ``startingOffsets``, ``endingOffsets``, ``includeHeaders``,
``failOnDataLoss``), plus ``topics`` (same as ``subscribe``), ``partitions`` (which partition numbers of the
selected topics) and ``startingOffset``/``endingOffset`` (one offset for every selected partition).
docs/spark.md documents every option. See :mod:`odradek.tools.log_dir_reader` for how a live broker's
directory is read safely.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.tools.log_dir_reader import (
    CorruptSegmentError,
    DataLossError,
    PartitionLog,
    TopicPartition,
    read_segment,
    scan_log_dirs,
)

FORMAT = "odradek-log"

EARLIEST = -2
LATEST = -1
"""Spark's Kafka source spells "earliest" and "latest" as -2 and -1 in per-partition offset JSON."""

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
"""Read only when named (subscribe, topics or assign); a pattern or no selection at all leaves them out."""


class OptionError(ValueError):
    """An option the source does not know, or a value it cannot use."""


# --- options ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetSpec:
    """Where reading starts or ends in each partition: offsets, or EARLIEST / LATEST.

    ``default`` None leaves partitions that ``per_partition`` does not name at the side's own default
    (earliest for starting offsets, latest for ending ones). This is laxer than Spark's batch Kafka source,
    which requires per-partition JSON to name every partition it reads: a job that relies on it needs the
    full JSON when switched to ``format("kafka")``.
    """

    default: int | None = None
    per_partition: Mapping[TopicPartition, int] = field(default_factory=dict)

    def offset_for(self, tp: TopicPartition, fallback: int) -> int:
        offset = self.per_partition.get(tp, self.default)
        return fallback if offset is None else offset


def _parse_offset_spec(text: str) -> OffsetSpec:
    """Spark's startingOffsets/endingOffsets: "earliest", "latest" or ``{"topic": {"0": 23, "1": -2}}``."""
    keyword = {"earliest": EARLIEST, "latest": LATEST}.get(text.strip().lower())
    if keyword is not None:
        return OffsetSpec(keyword)
    try:
        parsed = json.loads(text)
        per_partition = {
            (topic, int(partition)): int(offset)
            for topic, offsets in parsed.items()
            for partition, offset in offsets.items()
        }
    except (ValueError, AttributeError, TypeError):
        raise OptionError(
            f'expected "earliest", "latest" or JSON like {{"topicA":{{"0":23,"1":-2}}}}, got {text!r}'
        ) from None
    if any(offset < EARLIEST for offset in per_partition.values()):
        raise OptionError(f"offsets must be >= 0, or -2 (earliest) or -1 (latest): {text!r}")
    return OffsetSpec(None, per_partition)


def _parse_single_offset(text: str) -> OffsetSpec:
    try:
        offset = int(text)
    except ValueError:
        raise OptionError(f"expected an offset (an integer), got {text!r}") from None
    if offset < 0:
        raise OptionError(f"offsets are not negative, got {offset}")
    return OffsetSpec(offset)


def _parse_names(text: str) -> frozenset[str]:
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise OptionError(f"expected a comma-separated list of topics, got {text!r}")
    return names


def _parse_partition_numbers(text: str) -> frozenset[int]:
    try:
        return frozenset(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise OptionError(f"expected comma-separated partition numbers, got {text!r}") from None


def _parse_assign(text: str) -> frozenset[TopicPartition]:
    """Spark's ``assign``: ``{"topicA": [0, 1], "topicB": [2]}``."""
    try:
        return frozenset((topic, int(p)) for topic, partitions in json.loads(text).items() for p in partitions)
    except (ValueError, AttributeError, TypeError):
        raise OptionError(f'expected JSON like {{"topicA":[0,1],"topicB":[2,4]}}, got {text!r}') from None


def _parse_pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as e:
        raise OptionError(f"invalid topic pattern {text!r}: {e}") from None


def _parse_bool(text: str) -> bool:
    value = {"true": True, "false": False}.get(text.strip().lower())
    if value is None:
        raise OptionError(f'expected "true" or "false", got {text!r}')
    return value


def _parse_paths(text: str) -> tuple[Path, ...]:
    return tuple(Path(p.strip()) for p in text.split(",") if p.strip())


# Option (lower case, as Spark hands them over) -> (parser, attribute of ReadOptions it sets).
_OPTIONS: dict[str, tuple[Callable[[str], Any], str]] = {
    "path": (_parse_paths, "log_dirs"),
    "paths": (lambda text: tuple(Path(p) for p in json.loads(text)), "log_dirs"),  # load(a, b) passes JSON
    "subscribe": (_parse_names, "topics"),
    "topics": (_parse_names, "topics"),
    "subscribepattern": (_parse_pattern, "topic_pattern"),
    "assign": (_parse_assign, "assigned"),
    "partitions": (_parse_partition_numbers, "partition_numbers"),
    "startingoffsets": (_parse_offset_spec, "starting"),
    "startingoffset": (_parse_single_offset, "starting"),
    "endingoffsets": (_parse_offset_spec, "ending"),
    "endingoffset": (_parse_single_offset, "ending"),
    "includeheaders": (_parse_bool, "include_headers"),
    "failondataloss": (_parse_bool, "fail_on_data_loss"),
}


@dataclass(frozen=True)
class ReadOptions:
    log_dirs: tuple[Path, ...] = ()
    topics: frozenset[str] | None = None
    topic_pattern: re.Pattern[str] | None = None
    assigned: frozenset[TopicPartition] | None = None
    partition_numbers: frozenset[int] | None = None
    starting: OffsetSpec = OffsetSpec()
    ending: OffsetSpec = OffsetSpec()
    include_headers: bool = False
    fail_on_data_loss: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        values: dict[str, Any] = {}
        for name, text in options.items():
            if name.lower() not in _OPTIONS:
                known = ", ".join(sorted(_OPTIONS))
                raise OptionError(
                    f"unknown option {name!r} for format {FORMAT!r} (options are case-insensitive: {known})"
                )
            parse, attribute = _OPTIONS[name.lower()]
            if attribute in values:
                raise OptionError(f"option {name!r} sets what another option already set ({attribute})")
            try:
                values[attribute] = parse(text)
            except OptionError as e:
                raise OptionError(f"option {name!r}: {e}") from None
        read = cls(**values)
        read._check()
        return read

    def _check(self) -> None:
        if not self.log_dirs:
            raise OptionError(f'{FORMAT} needs the log directories: .load("<log.dirs>")')
        if sum(x is not None for x in (self.topics, self.topic_pattern, self.assigned)) > 1:
            raise OptionError("only one of subscribe (topics), subscribePattern and assign can be given")
        if self.assigned is not None and self.partition_numbers is not None:
            raise OptionError("assign already names the partitions: partitions cannot be given with it")
        # Spark's Kafka source refuses these for batch queries, for the same reasons.
        if self.starting.default == LATEST or LATEST in self.starting.per_partition.values():
            raise OptionError("starting offset can't be latest for batch queries")
        if self.ending.default == EARLIEST or EARLIEST in self.ending.per_partition.values():
            raise OptionError("ending offset can't be earliest for batch queries")

    def selects(self, tp: TopicPartition) -> bool:
        topic, partition = tp
        if self.assigned is not None:
            return tp in self.assigned
        if self.topics is not None and topic not in self.topics:
            return False
        if self.topic_pattern is not None and not self.topic_pattern.fullmatch(topic):
            return False
        if self.topics is None and topic in INTERNAL_TOPICS:
            return False  # as consumers leave internal topics out of pattern subscriptions by default
        return self.partition_numbers is None or partition in self.partition_numbers


# --- planning ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentSlice(InputPartition):
    """One Spark partition: the records of one segment file with offsets in [start, end)."""

    topic: str
    partition: int
    log_path: str
    start: int
    end: int | None  # None: up to the end of the valid data (a directory without a high watermark)
    active: bool  # the partition's last segment, whose tail may be torn by a write in progress
    fail_on_data_loss: bool


def plan_slices(options: ReadOptions) -> list[SegmentSlice]:
    logs = scan_log_dirs(options.log_dirs)
    selected = {tp: log for tp, log in logs.items() if options.selects(tp)}
    _check_named_partitions_exist(options, logs)
    slices = []
    for tp, log in sorted(selected.items()):
        start, end = _offset_range(options, log)
        if end is not None and start >= end:
            continue
        for base, following in log.segments_overlapping(start, end):
            path = str(log.segment_path(base))
            slices.append(SegmentSlice(tp[0], tp[1], path, start, end, following is None, options.fail_on_data_loss))
    return slices


def _check_named_partitions_exist(options: ReadOptions, logs: Mapping[TopicPartition, PartitionLog]) -> None:
    """Offline, a misspelt topic would silently read nothing, so names that match nothing are errors."""
    present_topics = {topic for topic, _ in logs}
    named = {
        "topics": sorted((options.topics or frozenset()) - present_topics),
        "partitions": sorted(f"{t}-{p}" for t, p in (options.assigned or frozenset()) - logs.keys()),
        "offsets for partitions": sorted(
            f"{t}-{p}"
            for t, p in {*options.starting.per_partition, *options.ending.per_partition}
            if (t, p) not in logs or not options.selects((t, p))
        ),
    }
    missing = "; ".join(f"{what} {', '.join(names)}" for what, names in named.items() if names)
    if missing:
        where = ", ".join(map(str, options.log_dirs))
        raise OptionError(f"not among the selected partitions in {where}: {missing}")


def _offset_range(options: ReadOptions, log: PartitionLog) -> tuple[int, int | None]:
    """[start, end) to read from ``log``: requested offsets resolved and bounded by what the log holds."""
    tp = (log.topic, log.partition)
    latest = log.high_watermark
    start = options.starting.offset_for(tp, EARLIEST)
    if start == EARLIEST:
        start = log.log_start_offset
    elif start < log.log_start_offset:
        if options.fail_on_data_loss:
            raise DataLossError(
                f"offset {start} of {log.topic}-{log.partition} was requested but the log starts at "
                f"{log.log_start_offset}: the records were deleted. Set failOnDataLoss to false to read from there."
            )
        start = log.log_start_offset
    end = options.ending.offset_for(tp, LATEST)
    if end == LATEST:
        return start, latest
    if latest is not None:
        end = min(end, latest)  # never past the checkpointed high watermark
    return start, end


# --- reading ---------------------------------------------------------------------------------------------

ARROW_BATCH_ROWS = 8192
"""Rows per Arrow batch handed to Spark: columns are built in bulk rather than converted row by row."""


def kafka_source_schema(include_headers: bool) -> StructType:
    """The schema of Spark's Kafka source (KafkaRecordToRowConverter), headers column included on request."""
    columns = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        columns.append(StructField("headers", ArrayType(header)))
    return StructType(columns)


def _header_key(key: str) -> str:
    """Header keys as Java's ``new String(bytes, UTF_8)`` reads them: invalid bytes become U+FFFD."""
    return key if key.isascii() else key.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def read_slice(part: SegmentSlice, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The records of one segment as Arrow batches of ``schema`` (Spark's Kafka source columns)."""
    records = read_segment(Path(part.log_path), part.start, part.end, active=part.active)
    include_headers = "headers" in schema.names
    try:
        while chunk := list(itertools.islice(records, ARROW_BATCH_ROWS)):
            offsets, timestamps, timestamp_types, keys, values, headers = zip(*chunk)
            n = len(chunk)
            columns = [
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
                pa.array([part.topic] * n, pa.string()),
                pa.array([part.partition] * n, pa.int32()),
                pa.array(offsets, pa.int64()),
                pa.array(timestamps, pa.timestamp("ms", tz="UTC")).cast(schema.field("timestamp").type),
                pa.array(timestamp_types, pa.int32()),
            ]
            if include_headers:
                # Null, not an empty array, for a record without headers, as Spark's Kafka source gives.
                header_lists = [
                    [(_header_key(k), v) for k, v in record_headers] if record_headers else None
                    for record_headers in headers
                ]
                columns.append(pa.array(header_lists, schema.field("headers").type))
            yield pa.RecordBatch.from_arrays(columns, schema=schema)
    except FileNotFoundError:
        if part.fail_on_data_loss:
            raise DataLossError(
                f"segment {part.log_path} of {part.topic}-{part.partition} was deleted (retention or compaction) "
                "while the query ran. Set failOnDataLoss to false to skip it."
            ) from None
    except CorruptSegmentError as e:
        if part.fail_on_data_loss:
            raise DataLossError(
                f"{e}: the records after it cannot be read. Set failOnDataLoss to false to skip them."
            ) from None


class OdradekLogReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[SegmentSlice]:
        return plan_slices(self.options)

    def read(self, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
        if partition is None:  # Spark plans one partition of None when partitions() found nothing to read
            return iter(())
        assert isinstance(partition, SegmentSlice)
        return read_slice(partition, to_arrow_schema(self.schema))


class OdradekLogDataSource(DataSource):
    """``spark.read.format("odradek-log").load("<log.dirs>")``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return kafka_source_schema(ReadOptions.parse(self.options).include_headers)

    def reader(self, schema: StructType) -> OdradekLogReader:
        return OdradekLogReader(ReadOptions.parse(self.options), schema)


def register(spark: Any) -> None:
    """Make ``format("odradek-log")`` available in ``spark`` (a SparkSession)."""
    spark.dataSource.register(OdradekLogDataSource)
