"""Produce requests whose batch CRC is right but whose records are not: refused as Kafka refuses them, and
nothing of them reaches the log.

Each raw request goes to odradek and to the real Kafka 3.9 (``real_kafka``); the error codes must agree,
except where odradek is stricter on purpose (compat-tests/README.md). After all cases every segment of
odradek's partitions must still parse, every record of every batch.
"""

from __future__ import annotations

import itertools
import re
import struct
import time
import zlib
from pathlib import Path

import pytest

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.compression import CompressionType, compress
from odradek.protocol.errors import ErrorCode
from odradek.protocol.legacy_records import build_message_set
from odradek.protocol.record_batch import encode_batch, iter_batch_positions, parse_header, set_log_append_time
from odradek.protocol.records import Record, encode_record, encode_varint, iter_records

NOW = int(time.time() * 1000)
KEYED = encode_record(Record(key=b"k", value=b"v"), 0, 0)  # length 7: 0e 00 00 00 02 6b 02 76 00


def batch(records: bytes, *, count: int = 1, codec: int = CompressionType.NONE, max_timestamp: int = NOW) -> bytes:
    """A batch around ``records`` as given (compressed with ``codec``), its header and CRC consistent."""
    payload = compress(codec, records) if codec else records
    return encode_batch(payload, base_offset=0, attributes=codec, last_offset_delta=count - 1, base_timestamp=NOW, max_timestamp=max_timestamp, records_count=count)


def with_codec_header(codec: int, payload: bytes) -> bytes:
    """A batch flagged ``codec`` whose records section is ``payload`` as is (not a valid frame of it)."""
    return encode_batch(payload, base_offset=0, attributes=codec, last_offset_delta=0, base_timestamp=NOW, max_timestamp=NOW, records_count=1)


def legacy_wrapper(codec: int, value: bytes) -> bytes:
    """A magic-1 wrapper message holding ``value`` as its (supposedly compressed) message set, CRC right."""
    body = struct.pack(">bbqi", 1, codec, NOW, -1) + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 1, len(message)) + message


LONG_LENGTH = encode_varint(2**31 - 1) + KEYED[1:]
CUT = KEYED + encode_record(Record(key=b"k", value=b"v"), 1, 0)[:-2]
ONE_BYTE_TOO_LONG = encode_varint(len(KEYED)) + KEYED[1:] + b"\x00"
SIX_BYTE_LENGTH = b"\x80\x80\x80\x80\x80\x01" + KEYED[1:]
NEGATIVE_HEADERS = encode_varint(6) + b"\x00\x00\x00\x01\x01" + encode_varint(-1)
NULL_HEADER_KEY = encode_varint(8) + b"\x00\x00\x00\x01\x01\x02" + encode_varint(-1) + b"\x00"
_legacy_bad_crc = bytearray(build_message_set([Record(0, NOW, b"k", b"v")], magic=1))
_legacy_bad_crc[-1] ^= 0xFF
_inner = build_message_set([Record(0, NOW, b"k", b"v"), Record(1, NOW, b"k", b"v")], magic=1)
_inner_bad_crc = bytearray(_inner)
_inner_bad_crc[-1] ^= 0xFF

# name: (records, produce version, the code both brokers answer)
SAME_AS_KAFKA = {
    "record length 2^31-1": (batch(LONG_LENGTH), 9, ErrorCode.INVALID_RECORD),
    "last record cut short": (batch(CUT, count=2), 9, ErrorCode.INVALID_RECORD),
    "record length one byte beyond its fields": (batch(ONE_BYTE_TOO_LONG), 9, ErrorCode.INVALID_RECORD),
    "bytes after the last record": (batch(KEYED + b"\x00\x00"), 9, ErrorCode.INVALID_RECORD),
    "record count above the records": (batch(KEYED, count=2), 9, ErrorCode.INVALID_RECORD),
    "negative header count": (batch(NEGATIVE_HEADERS), 9, ErrorCode.INVALID_RECORD),
    "header with a null key": (batch(NULL_HEADER_KEY), 9, ErrorCode.INVALID_RECORD),
    "record length varint of six bytes": (batch(SIX_BYTE_LENGTH), 9, ErrorCode.UNKNOWN_SERVER_ERROR),
    "zstd payload that does not decompress": (with_codec_header(CompressionType.ZSTD, b"\x28\xb5\x2f\xfd" + b"garbage" * 5), 9, ErrorCode.UNKNOWN_SERVER_ERROR),
    "lz4 payload that does not decompress": (with_codec_header(CompressionType.LZ4, b"garbage" * 5), 9, ErrorCode.UNKNOWN_SERVER_ERROR),
    "gzip payload that does not decompress": (with_codec_header(CompressionType.GZIP, b"\x1f\x8b" + b"garbage" * 5), 9, ErrorCode.UNKNOWN_SERVER_ERROR),
    "snappy payload that does not decompress": (with_codec_header(CompressionType.SNAPPY, b"garbage" * 5), 9, ErrorCode.UNKNOWN_SERVER_ERROR),
    "zstd: last record cut short": (batch(KEYED[:-2], codec=CompressionType.ZSTD), 9, ErrorCode.INVALID_RECORD),
    "zstd: bytes after the last record": (batch(KEYED + b"\x00\x00", codec=CompressionType.ZSTD), 9, ErrorCode.INVALID_RECORD),
    "gzip: last record cut short": (batch(KEYED[:-2], codec=CompressionType.GZIP), 9, ErrorCode.INVALID_RECORD),
    "magic 1 message with a bad CRC": (bytes(_legacy_bad_crc), 2, ErrorCode.CORRUPT_MESSAGE),
    "magic 1 gzip wrapper that does not decompress": (legacy_wrapper(CompressionType.GZIP, b"\x1f\x8b" + b"garbage" * 4), 2, ErrorCode.UNKNOWN_SERVER_ERROR),
    "magic 1 gzip wrapper whose inner message has a bad CRC": (legacy_wrapper(CompressionType.GZIP, compress(CompressionType.GZIP, _inner_bad_crc)), 2, ErrorCode.CORRUPT_MESSAGE),
    # Kafka's inner reader ends at a message cut short: the whole ones are appended
    "magic 1 gzip wrapper whose last inner message is cut short": (legacy_wrapper(CompressionType.GZIP, compress(CompressionType.GZIP, _inner[:-3])), 2, ErrorCode.NONE),
    "valid batch": (batch(KEYED), 9, ErrorCode.NONE),
}

# Kafka 3.9 appends these: a compressed batch kept as it came is read with DefaultRecord.readPartiallyFrom,
# which never compares a record's length with its fields. The segment then holds a batch no reader parses.
STRICTER_THAN_KAFKA = {
    "zstd: record length 2^31-1": (batch(LONG_LENGTH, codec=CompressionType.ZSTD), 9, ErrorCode.INVALID_RECORD),
    "lz4: record length 2^31-1": (batch(LONG_LENGTH, codec=CompressionType.LZ4), 9, ErrorCode.INVALID_RECORD),
}

_topics = itertools.count()
RENUMBERED = f"renumbered-{NOW % 10**7}"
RECOMPRESSED = f"recompressed-{NOW % 10**7}"
OLD_RECORD = f"old-record-{NOW % 10**7}"
LYING_MAX_TIMESTAMP = f"lying-max-timestamp-{NOW % 10**7}"
RUN = f"{NOW % 10**7}"  # topic names of their own when the real Kafka outlives a run (ODRADEK_COMPAT_KAFKA)


@pytest.fixture(scope="module")
def odradek(tmp_path_factory):
    with Broker(log_dir=tmp_path_factory.mktemp("produce-validation")) as broker:
        yield broker


def create_topic(wire, name: str, configs: dict[str, str] | None = None) -> None:
    body = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}], "timeout_ms": 10000}
    assert wire.call(ApiKey.CreateTopics, 4, body).topics[0].error_code == ErrorCode.NONE


def produce(wire, topic: str, records: bytes, version: int = 9):
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}
    return wire.call(ApiKey.Produce, version, body).responses[0].partition_responses[0]


def produce_when_ready(wire, topic: str, records: bytes, version: int = 9):
    """Kafka elects the leader of a new topic a moment after CreateTopics answers."""
    deadline = time.monotonic() + 15
    while True:
        answer = produce(wire, topic, records, version)
        if answer.error_code not in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def fetch_batches(wire, topic: str) -> bytes:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1, "log_start_offset": -1}]}]}
    partition = wire.call(ApiKey.Fetch, 11, body).responses[0].partitions[0]
    assert partition.error_code == ErrorCode.NONE
    return bytes(partition.records or b"")


def assert_segments_parse(log_dir: Path) -> int:
    """Every batch of every segment has a good CRC and every record in it decodes; the records read."""
    records = 0
    for segment in sorted(log_dir.glob("*-*/*.log")):
        data = segment.read_bytes()
        end = 0
        for position, _, size in iter_batch_positions(data):
            records += len(list(iter_records(data, position)))
            end = position + size
        assert end == len(data), f"{segment}: {len(data) - end} bytes after the last whole batch"
    return records


@pytest.mark.parametrize("name", list(SAME_AS_KAFKA))
def test_malformed_records_are_answered_as_kafka_answers(name, odradek, real_kafka, connect):
    records, version, expected = SAME_AS_KAFKA[name]
    topic = f"malformed-{RUN}-{next(_topics)}"
    answers = {}
    for broker, bootstrap in (("odradek", odradek.bootstrap), ("kafka", real_kafka.bootstrap)):
        wire = connect(bootstrap)
        create_topic(wire, topic)
        answers[broker] = produce_when_ready(wire, topic, records, version)
    assert (answers["odradek"].error_code, answers["kafka"].error_code) == (expected, expected)
    if version >= 8:  # Kafka fills these for record-by-record refusals only, not for malformed records
        assert (answers["odradek"].error_message, answers["odradek"].record_errors) == (answers["kafka"].error_message, answers["kafka"].record_errors) == (None, [])
    if expected != ErrorCode.NONE:
        assert answers["odradek"].base_offset == -1
        assert fetch_batches(connect(odradek.bootstrap), topic) == b"", "the refused batch reached the log"
    assert_segments_parse(odradek.log_dir)


@pytest.mark.parametrize("name", list(STRICTER_THAN_KAFKA))
def test_compressed_records_with_a_lying_length_are_refused_where_kafka_stores_them(name, odradek, real_kafka, connect):
    records, version, expected = STRICTER_THAN_KAFKA[name]
    topic = f"stricter-{RUN}-{next(_topics)}"
    wire = connect(real_kafka.bootstrap)
    create_topic(wire, topic)
    assert produce_when_ready(wire, topic, records, version).error_code == ErrorCode.NONE  # the difference, as written down
    wire = connect(odradek.bootstrap)
    create_topic(wire, topic)
    assert produce(wire, topic, records, version).error_code == expected
    assert fetch_batches(wire, topic) == b""
    assert_segments_parse(odradek.log_dir)


def test_a_decompression_bomb_is_refused_without_expanding_it(odradek, connect):
    """One record of 200 MiB of zeros compresses to a few KiB; the broker refuses it at its 128 MiB bound
    (the zstd frame declares its size, so nothing is expanded). Built in 1 MiB steps, not in memory."""
    import io

    import zstandard

    size = 200 * 1024 * 1024
    body_head = b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(1) + b"k" + encode_varint(size)
    body_tail = encode_varint(0)  # no headers
    record_head = encode_varint(len(body_head) + size + len(body_tail)) + body_head
    out = io.BytesIO()
    with zstandard.ZstdCompressor(level=1).stream_writer(out, size=len(record_head) + size + len(body_tail), closefd=False) as writer:
        writer.write(record_head)
        zeros = bytes(1 << 20)
        for _ in range(size >> 20):
            writer.write(zeros)
        writer.write(body_tail)
    payload = out.getvalue()
    assert zstandard.frame_content_size(payload) > 128 * 1024 * 1024 and len(payload) < 1 << 20
    bomb = encode_batch(payload, base_offset=0, attributes=CompressionType.ZSTD, last_offset_delta=0, base_timestamp=NOW, max_timestamp=NOW, records_count=1)
    wire = connect(odradek.bootstrap)
    create_topic(wire, "bomb")
    assert produce(wire, "bomb", bomb).error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert fetch_batches(wire, "bomb") == b""


def test_a_batch_takes_its_max_timestamp_from_its_records(odradek, real_kafka, connect):
    """A header claiming a max timestamp 1,000 s beyond its records is stored with the records' max, CRC
    recomputed, as Kafka stores it; the time index follows (ListOffsets for the max timestamp)."""
    lying = batch(KEYED + encode_record(Record(key=b"k2", value=b"v2"), 1, 5), count=2, max_timestamp=NOW + 1_000_000)
    stored = {}
    for broker, bootstrap in (("odradek", odradek.bootstrap), ("kafka", real_kafka.bootstrap)):
        wire = connect(bootstrap)
        create_topic(wire, LYING_MAX_TIMESTAMP)
        assert produce_when_ready(wire, LYING_MAX_TIMESTAMP, lying).error_code == ErrorCode.NONE
        data = fetch_batches(wire, LYING_MAX_TIMESTAMP)
        header = parse_header(data)
        stored[broker] = (header.max_timestamp, [r.timestamp for r in iter_records(data)])  # iter_records checks the CRC
        for target in (NOW + 1, -3):  # the first record at or after a time; the max timestamp (KIP-734)
            lookup = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": LYING_MAX_TIMESTAMP, "partitions": [{"partition_index": 0, "timestamp": target}]}]}
            found = wire.call(ApiKey.ListOffsets, 7, lookup).topics[0].partitions[0]
            stored[broker] += ((found.timestamp, found.offset),)
    assert stored["odradek"] == stored["kafka"] == (NOW + 5, [NOW, NOW + 5], (NOW + 5, 1), (NOW + 5, 1))


def test_record_timestamps_are_checked_one_by_one(odradek, real_kafka, connect):
    """KIP-937 bounds apply to each record, not to the header's max timestamp: the response names the
    records out of range (ProduceResponse v8+ record_errors) and the batch is refused."""
    config = {"message.timestamp.before.max.ms": "3600000"}
    old = encode_record(Record(key=b"old", value=b"v"), 1, -7_200_000)
    records = batch(KEYED + old, count=2)
    answers = {}
    for broker, bootstrap in (("odradek", odradek.bootstrap), ("kafka", real_kafka.bootstrap)):
        wire = connect(bootstrap)
        create_topic(wire, OLD_RECORD, config)
        answer = produce_when_ready(wire, OLD_RECORD, records)
        answers[broker] = (answer.error_code, answer.error_message, [e.batch_index for e in answer.record_errors])
        assert answer.record_errors[0].batch_index_error_message.startswith(f"Timestamp {NOW - 7_200_000} of message with offset 1 is out of range.")
    assert answers["odradek"] == answers["kafka"] == (ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp", [1])


def test_compressed_offsets_out_of_sequence(odradek, real_kafka, connect):
    """A compressed batch whose offset deltas are not 0, 1, 2, ...: kept in its codec, Kafka fails to rebuild
    it (UNKNOWN_SERVER_ERROR); recompressed into the topic's codec, its records get offsets assigned."""
    records = batch(encode_record(Record(key=b"a", value=b"1"), 3, 0) + encode_record(Record(key=b"b", value=b"2"), 7, 0), count=2, codec=CompressionType.GZIP)
    answers = {}
    for broker, bootstrap in (("odradek", odradek.bootstrap), ("kafka", real_kafka.bootstrap)):
        wire = connect(bootstrap)
        create_topic(wire, RENUMBERED)
        create_topic(wire, RECOMPRESSED, {"compression.type": "lz4"})
        kept = produce_when_ready(wire, RENUMBERED, records).error_code
        assert produce_when_ready(wire, RECOMPRESSED, records).error_code == ErrorCode.NONE
        data = fetch_batches(wire, RECOMPRESSED)
        answers[broker] = (kept, parse_header(data).compression, [(r.offset, r.key) for r in iter_records(data)])
    assert answers["odradek"] == answers["kafka"] == (ErrorCode.UNKNOWN_SERVER_ERROR, CompressionType.LZ4, [(0, b"a"), (1, b"b")])


@pytest.mark.parametrize(("topic_type", "max_timestamp"), [("LogAppendTime", NOW), ("CreateTime", -1)], ids=["LogAppendTime", "CreateTime"])
def test_a_client_may_not_send_log_append_time(odradek, real_kafka, connect, topic_type, max_timestamp):
    """A batch flagged LogAppendTime is refused record by record (INVALID_TIMESTAMP) unless it is a CreateTime
    topic's and its max timestamp can stand for its records' CreateTime, as Kafka's validateTimestamp rules."""
    records = bytearray(batch(KEYED + encode_record(Record(key=b"k2", value=b"vv"), 1, 0), count=2, max_timestamp=max_timestamp))
    set_log_append_time(records, 0, max_timestamp)
    topic = f"client-lat-{topic_type}-{RUN}"
    answers = {}
    for broker, bootstrap in (("odradek", odradek.bootstrap), ("kafka", real_kafka.bootstrap)):
        wire = connect(bootstrap)
        create_topic(wire, topic, {"message.timestamp.type": topic_type})
        answer = produce_when_ready(wire, topic, bytes(records))
        answers[broker] = (answer.error_code, answer.error_message, [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors])
    assert answers["odradek"] == answers["kafka"]
    assert answers["odradek"][:2] == (ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp")
    assert [index for index, _ in answers["odradek"][2]] == [0, 1]


@pytest.mark.parametrize("old_record", [False, True])
def test_a_compacted_topic_refuses_records_without_keys(odradek, real_kafka, connect, old_record):
    """Each keyless record is named; a timestamp error among them makes the answer INVALID_TIMESTAMP."""
    keyless = encode_record(Record(key=None, value=b"v"), 1, 0) + encode_record(Record(key=None, value=b"w"), 2, 0)
    old = encode_record(Record(key=b"old", value=b"v"), 3, -7_200_000)
    records = batch(KEYED + keyless + (old if old_record else b""), count=4 if old_record else 3)
    topic = f"compacted-{int(old_record)}-{RUN}"
    answers = {}
    for broker, bootstrap in (("odradek", odradek.bootstrap), ("kafka", real_kafka.bootstrap)):
        wire = connect(bootstrap)
        create_topic(wire, topic, {"cleanup.policy": "compact", "message.timestamp.before.max.ms": "3600000"})
        answer = produce_when_ready(wire, topic, records)
        # the bounds in a timestamp error are each broker's own clock's
        answers[broker] = (answer.error_code, answer.error_message, [(e.batch_index, re.sub(r"within \[-?\d+, -?\d+\]", "within [..]", e.batch_index_error_message)) for e in answer.record_errors])
    assert answers["odradek"] == answers["kafka"]
    assert answers["odradek"][0] == (ErrorCode.INVALID_TIMESTAMP if old_record else ErrorCode.INVALID_RECORD)
    assert [index for index, _ in answers["odradek"][2]] == ([1, 2, 3] if old_record else [1, 2])
