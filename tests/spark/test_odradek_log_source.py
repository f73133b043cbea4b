"""The odradek-log data source on log directories written byte by byte in Kafka's layout.

Each test writes segments with build_batch (and legacy message sets, garbage, torn tails and checkpoint
files where it needs them), reads them back through Spark and compares with the records it wrote.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.compression import CompressionType
from odradek.protocol.legacy_records import build_message_set
from odradek.protocol.record_batch import TimestampType
from odradek.protocol.records import ControlRecordType, EndTransactionMarker, Record, build_end_txn_marker_batch

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000  # a fixed record timestamp base (2023-11-14), so expectations do not depend on "now"


def without_headers(rows: list[tuple]) -> list[tuple]:
    return sorted(row[:7] for row in rows)


def records(n: int, *, start: int = 0, prefix: bytes = b"v") -> list[Record]:
    return [
        Record(timestamp=T0 + start + i, key=b"k%d" % ((start + i) % 7), value=prefix + b"%d" % (start + i))
        for i in range(n)
    ]


def test_schema_is_spark_kafka_sources(log_dir, log_frame) -> None:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )
    from pyspark.sql.types import (
        TimestampType as SparkTimestamp,
    )

    log_dir.append("t", 0, records(1))
    kafka_columns = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", SparkTimestamp()),
        StructField("timestampType", IntegerType()),
    ]
    headers = StructField(
        "headers", ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
    )
    assert log_frame(log_dir.root).schema == StructType(kafka_columns)
    assert log_frame(log_dir.root, includeHeaders="true").schema == StructType(kafka_columns + [headers])


def test_reads_every_codec_across_segments_and_partitions(log_dir, log_frame, read_log) -> None:
    """Three partitions of several segments each, every codec, null keys and values, headers, LogAppendTime."""
    segments = 0
    for partition in range(3):
        for i, codec in enumerate(CompressionType):
            batch = records(40, start=100 * i + partition, prefix=codec.name.encode())
            batch[0].key = None
            batch[1].value = None
            batch[2].headers = [("trace", b"\x00\x01"), ("empty", None), ("trace", b"again")]
            roll = i % 2 == 0  # two batches per segment
            segments += roll
            log_dir.append("clicks", partition, batch, compression=codec, roll=roll)
        log_dir.append("clicks", partition, records(5, start=900), timestamp_type=TimestampType.LOG_APPEND_TIME)
    log_dir.append("other", 0, records(3), compression=CompressionType.ZSTD)
    segments += 1

    assert read_log(log_dir.root, includeHeaders="true") == sorted(log_dir.rows)
    assert log_frame(log_dir.root).rdd.getNumPartitions() == segments


def test_never_reads_past_the_checkpointed_high_watermark(log_dir, read_log) -> None:
    for _ in range(4):
        log_dir.append("t", 0, records(10))
        log_dir.append("t", 1, records(10))
    log_dir.append("t", 2, records(10))

    # Partition 0's high watermark falls inside a batch; partition 2 is not checkpointed yet, which Kafka
    # reads as a high watermark of 0.
    log_dir.checkpoint_high_watermarks({("t", 0): 25, ("t", 1): 40})
    expected = [r for r in log_dir.rows if (r[1] == 0 and r[2] < 25) or r[1] == 1]
    assert read_log(log_dir.root, includeHeaders="true") == sorted(expected)
    # An ending offset past the high watermark is held to it.
    assert without_headers(read_log(log_dir.root, endingOffsets='{"t": {"0": 35}}')) == without_headers(expected)


def test_a_copied_directory_without_checkpoint_is_read_to_its_end(log_dir, read_log) -> None:
    log_dir.append("t", 0, records(10))
    log_dir.append("t", 0, records(10, start=10), roll=True)
    assert read_log(log_dir.root, includeHeaders="true") == sorted(log_dir.rows)


@pytest.mark.parametrize("cut", [5, 30, 70], ids=["inside-prefix", "inside-header", "inside-records"])
def test_stops_at_a_torn_tail(log_dir, read_log, cut: int) -> None:
    log_dir.append("t", 0, records(10))
    log_dir.append("t", 0, records(10, start=10), roll=True)
    complete = list(log_dir.rows)
    torn = log_dir.append("t", 0, records(10, start=20))
    segment = log_dir.current_segment[("t", 0)]
    segment.write_bytes(segment.read_bytes()[: -len(torn) + cut])
    assert read_log(log_dir.root, includeHeaders="true") == sorted(complete)


def test_stops_at_a_batch_whose_crc_fails_in_the_active_segment(log_dir, read_log) -> None:
    log_dir.append("t", 0, records(10))
    log_dir.append("t", 0, records(10, start=10), roll=True)
    before = list(log_dir.rows)
    bad = log_dir.append("t", 0, records(10, start=20))
    log_dir.append("t", 0, records(10, start=30))
    segment = log_dir.current_segment[("t", 0)]
    data = bytearray(segment.read_bytes())
    data[data.index(bad) + len(bad) - 1] ^= 0xFF  # the last value byte: the CRC no longer matches
    segment.write_bytes(bytes(data))
    assert read_log(log_dir.root, includeHeaders="true") == sorted(before)


def test_a_corrupt_rolled_segment_is_data_loss(log_dir, read_log) -> None:
    """Only the active segment can end in a write in progress; a broken rolled segment is corruption."""
    bad = log_dir.append("t", 0, records(10))
    log_dir.append("t", 0, records(10, start=10))
    log_dir.append("t", 0, records(10, start=20), roll=True)
    first = log_dir.partition_dir("t", 0) / f"{0:020d}.log"
    data = bytearray(first.read_bytes())
    data[len(bad) - 1] ^= 0xFF
    first.write_bytes(bytes(data))

    with pytest.raises(Exception, match="failOnDataLoss"):
        read_log(log_dir.root)
    assert [r[2] for r in read_log(log_dir.root, failOnDataLoss="false")] == list(range(20, 30))


def test_skips_control_batches(log_dir, read_log) -> None:
    producer = {"producer_id": 7, "producer_epoch": 0, "base_sequence": 0}
    log_dir.append("t", 0, records(3), is_transactional=True, **producer)
    commit = EndTransactionMarker(ControlRecordType.COMMIT, coordinator_epoch=0).to_record(T0)
    log_dir.append("t", 0, [commit], is_transactional=True, is_control=True, producer_id=7, producer_epoch=0)
    log_dir.append("t", 0, records(2, start=4))
    marker = build_end_txn_marker_batch(
        EndTransactionMarker(ControlRecordType.ABORT, 0), producer_id=8, producer_epoch=0, base_offset=6, timestamp=T0
    )
    log_dir.append_raw("t", 0, marker, 6)

    rows = read_log(log_dir.root, includeHeaders="true")
    assert [r[2] for r in rows] == [0, 1, 2, 4, 5]
    assert rows == sorted(log_dir.rows)


def test_legacy_message_sets(log_dir, read_log) -> None:
    """Segments from brokers before Kafka 0.11 hold magic 0/1 message sets; consumers still read them."""
    v0 = build_message_set([(b"a", b"0"), (None, b"1")], magic=0)
    v1 = build_message_set(
        [Record(timestamp=T0, key=b"b", value=b"2"), Record(timestamp=T0 + 5, key=b"c", value=b"3")],
        magic=1,
        compression=CompressionType.GZIP,
        base_offset=2,
    )
    log_dir.append_raw("old", 0, v0 + v1, 0)
    assert read_log(log_dir.root) == [
        ("old", 0, 0, b"a", b"0", -1, -1),
        ("old", 0, 1, None, b"1", -1, -1),
        ("old", 0, 2, b"b", b"2", T0, 0),
        ("old", 0, 3, b"c", b"3", T0 + 5, 0),
    ]


def three_topics(log_dir) -> None:
    for topic in ("orders", "order-returns", "payments"):
        for partition in range(3):
            log_dir.append(topic, partition, records(4))
    log_dir.append("__consumer_offsets", 0, records(2))


@pytest.mark.parametrize(
    "options, expected",
    [
        (
            {},
            {("orders", p) for p in range(3)}
            | {("order-returns", p) for p in range(3)}
            | {("payments", p) for p in range(3)},
        ),
        ({"subscribe": "orders,payments"}, {("orders", p) for p in range(3)} | {("payments", p) for p in range(3)}),
        ({"topics": "orders", "partitions": "0,2"}, {("orders", 0), ("orders", 2)}),
        ({"subscribePattern": "order.*"}, {("orders", p) for p in range(3)} | {("order-returns", p) for p in range(3)}),
        ({"subscribePattern": ".*", "partitions": "1"}, {("orders", 1), ("order-returns", 1), ("payments", 1)}),
        ({"assign": '{"orders": [1], "payments": [0, 2]}'}, {("orders", 1), ("payments", 0), ("payments", 2)}),
        ({"topics": "__consumer_offsets"}, {("__consumer_offsets", 0)}),
    ],
    ids=[
        "all-but-internal",
        "subscribe",
        "topics-partitions",
        "pattern",
        "pattern-partitions",
        "assign",
        "internal-by-name",
    ],
)
def test_topic_and_partition_selection(log_dir, read_log, options: dict[str, str], expected: set) -> None:
    three_topics(log_dir)
    rows = read_log(log_dir.root, **options)
    assert {(r[0], r[1]) for r in rows} == expected
    assert rows == sorted(r[:7] for r in log_dir.rows if (r[0], r[1]) in expected)


def test_offset_ranges(log_dir, log_frame, read_log) -> None:
    for partition in range(2):
        for i in range(5):
            log_dir.append("t", partition, records(10, start=10 * i), roll=i in (0, 2, 4))  # segments at 0, 20, 40
    log_dir.checkpoint_high_watermarks({("t", 0): 50, ("t", 1): 50})

    def offsets(**options: str) -> dict[int, list[int]]:
        found: dict[int, list[int]] = {0: [], 1: []}
        for row in read_log(log_dir.root, **options):
            found[row[1]].append(row[2])
        return found

    assert offsets(startingOffset="15", endingOffset="42") == {0: list(range(15, 42)), 1: list(range(15, 42))}
    assert offsets(startingOffsets='{"t": {"0": 33}}', endingOffsets='{"t": {"1": 3}}') == {
        0: list(range(33, 50)),
        1: list(range(3)),
    }
    assert offsets(startingOffsets='{"t": {"0": -2, "1": 48}}', endingOffsets='{"t": {"0": -1, "1": 70}}') == {
        0: list(range(50)),
        1: [48, 49],
    }
    assert offsets(startingOffsets="earliest", endingOffsets="latest") == {0: list(range(50)), 1: list(range(50))}
    # Only the segments that can hold the range are read: [20, 40) is one segment per partition.
    assert log_frame(log_dir.root, startingOffset="20", endingOffset="40").rdd.getNumPartitions() == 2
    assert read_log(log_dir.root, startingOffset="60") == []


def test_log_start_offset_and_data_loss(log_dir, read_log) -> None:
    """Records below the log start offset (DeleteRecords, retention) are gone, as for a consumer."""
    log_dir.append("t", 0, records(10))
    log_dir.append("t", 0, records(10, start=10))
    log_dir.checkpoint_log_start_offsets({("t", 0): 12})

    assert [r[2] for r in read_log(log_dir.root)] == list(range(12, 20))
    with pytest.raises(Exception, match="log starts at 12"):
        read_log(log_dir.root, startingOffset="5")
    assert [r[2] for r in read_log(log_dir.root, startingOffset="5", failOnDataLoss="false")] == list(range(12, 20))


def test_a_wrong_offset_index_does_not_change_what_is_read(log_dir, read_log) -> None:
    """The reader seeks with the .index file, but checks it: a stale or garbage index only costs time."""
    batches = [log_dir.append("t", 0, records(10, start=10 * i)) for i in range(6)]
    index = log_dir.partition_dir("t", 0) / f"{0:020d}.index"
    position_of_30 = sum(len(b) for b in batches[:3])
    expected = [r[:7] for r in log_dir.rows if r[2] >= 35]

    index.write_bytes(struct.pack(">ii", 30, position_of_30) + bytes(8 * 10))  # right, then preallocated zeros
    assert read_log(log_dir.root, startingOffset="35") == expected
    for garbage in (
        struct.pack(">ii", 30, position_of_30 + 3),  # inside a batch
        struct.pack(">ii", 30, 1 << 30),  # past the end of the log
        struct.pack(">ii", 10, sum(len(b) for b in batches[:4])),  # a valid batch, but of offsets 40-49
    ):
        index.write_bytes(garbage)
        assert read_log(log_dir.root, startingOffset="15") == [r[:7] for r in log_dir.rows if r[2] >= 15]


def test_several_log_dirs(tmp_path: Path, read_log) -> None:
    from odradek.protocol.records import build_batch

    for i, name in enumerate(("disk1", "disk2")):
        (tmp_path / name / f"t-{i}").mkdir(parents=True)
        (tmp_path / name / f"t-{i}" / f"{0:020d}.log").write_bytes(build_batch(records(3)))
    expected = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert [(r[1], r[2]) for r in read_log(f"{tmp_path / 'disk1'},{tmp_path / 'disk2'}")] == expected  # as in log.dirs
    assert [
        (r[1], r[2]) for r in read_log([str(tmp_path / "disk1"), str(tmp_path / "disk2")])
    ] == expected  # load(a, b)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"startingOffst": "3"}, "(?i)unknown option 'startingOffst'"),
        ({"subscribe": "a", "assign": '{"a": [0]}'}, "only one of subscribe"),
        ({"startingOffsets": "latest"}, "starting offset can't be latest"),
        ({"endingOffsets": '{"t": {"0": -2}}'}, "ending offset can't be earliest"),
        ({"topics": "orderz"}, "topics orderz"),
        ({"assign": '{"t": [9]}'}, "partitions t-9"),
        ({"includeHeaders": "yes"}, 'expected "true" or "false"'),
        ({"startingOffsets": "{not json"}, 'expected "earliest", "latest" or JSON'),
    ],
)
def test_option_errors_say_what_is_wrong(log_dir, read_log, options: dict[str, str], message: str) -> None:
    log_dir.append("t", 0, records(1))
    with pytest.raises(Exception, match=message):
        read_log(log_dir.root, **options)


def test_a_missing_log_dir_is_an_error(tmp_path: Path, read_log) -> None:
    with pytest.raises(Exception, match="does not exist"):
        read_log(tmp_path / "nowhere")


def test_timestamps_are_the_records_in_utc(log_dir, spark: Any, log_frame) -> None:
    log_dir.append("t", 0, [Record(timestamp=T0 + 123, key=None, value=b"x")])
    row = log_frame(log_dir.root).selectExpr("date_format(timestamp, \"yyyy-MM-dd'T'HH:mm:ss.SSS\") AS ts").first()
    assert row.ts == "2023-11-14T22:13:20.123"
