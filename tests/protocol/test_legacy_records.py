"""Magic 0/1 message sets: golden bytes, kafka-python interop, Kafka's wrapper rules, up/down conversion."""

from __future__ import annotations

import os
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

from odradek.protocol.compression import CompressionType, compress, xxh32
from odradek.protocol.errors import ErrorCode
from odradek.protocol.legacy_records import (
    build_message_set,
    down_convert,
    iter_deep,
    iter_messages,
    up_convert,
)
from odradek.protocol.record_batch import (
    CorruptRecordError,
    InvalidRecordError,
    RecordsError,
    TimestampType,
    UnsupportedCompressionTypeError,
    parse_header,
    peek_magic,
    set_log_append_time,
    validate_batches,
)
from odradek.protocol.records import (
    ControlRecordType,
    EndTransactionMarker,
    Record,
    build_batch,
    build_end_txn_marker_batch,
    iter_records,
)

FUZZ = settings(
    max_examples=int(os.environ.get("ODRADEK_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
LEGACY_CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]

# Written out by hand from docs/implementation.html ("Old Message Format"); CRCs are zlib CRC-32 of
# magic..value (checked below).
GOLDEN_V0 = bytes.fromhex(
    "0000000000000003"  # offset 3
    "00000011"  # message size 17
    "d0a1b23e"  # crc
    "00"  # magic 0
    "00"  # attributes
    "00000001" "6b"  # key "k"
    "00000002" "6869"  # value "hi"
)
GOLDEN_V1 = bytes.fromhex(
    "0000000000000004"  # offset 4
    "00000018"  # message size 24
    "0ce6ba55"  # crc
    "01"  # magic 1
    "00"  # attributes: CreateTime
    "0000018000000000"  # timestamp
    "ffffffff"  # null key
    "00000002" "6869"  # value "hi"
)


def message(magic: int, attributes: int, key: bytes | None, value: bytes | None, timestamp: int = 0) -> bytes:
    """One message (without offset/size), written independently of the module under test."""
    body = bytes((magic, attributes)) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for data in (key, value):
        body += struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data
    return struct.pack(">I", zlib.crc32(body)) + body


def entry(offset: int, body: bytes) -> bytes:
    return struct.pack(">qi", offset, len(body)) + body


def wrapper(magic: int, codec: CompressionType, offset: int, inner: bytes, attributes: int = 0, timestamp: int = 0) -> bytes:
    return entry(offset, message(magic, codec | attributes, None, compress(codec, inner, magic=magic), timestamp))


# --- golden bytes -------------------------------------------------------------------------------------------


def test_golden_crcs_are_zlib_crc32_of_magic_to_end() -> None:
    assert zlib.crc32(GOLDEN_V0[16:]) == 0xD0A1B23E
    assert zlib.crc32(GOLDEN_V1[16:]) == 0x0CE6BA55


def test_golden_messages_parse() -> None:
    fields = [(m.offset, m.magic, m.attributes, m.timestamp, m.key, m.value) for m in iter_messages(GOLDEN_V0 + GOLDEN_V1)]
    assert fields == [(3, 0, 0, -1, b"k", b"hi"), (4, 1, 0, 0x018000000000, None, b"hi")]
    assert peek_magic(GOLDEN_V0) == 0 and peek_magic(GOLDEN_V1) == 1


def test_builder_writes_the_golden_bytes() -> None:
    assert build_message_set([Record(3, None, b"k", b"hi")], magic=0) == GOLDEN_V0
    assert build_message_set([Record(4, 0x018000000000, None, b"hi")], magic=1) == GOLDEN_V1


def test_crc_flip_is_detected() -> None:
    for position in range(16, len(GOLDEN_V1)):
        damaged = bytearray(GOLDEN_V1)
        damaged[position] ^= 0x10
        with pytest.raises(CorruptRecordError):
            list(iter_messages(bytes(damaged)))


# --- interop with kafka-python ------------------------------------------------------------------------------


def kafka_python_set(magic: int, codec: CompressionType, count: int = 20) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=1_500_000_000_000 + i, key=b"key%d" % i, value=b"value" * i)
    return bytes(builder.build())


def supported_by_kafka_python(magic: int, codec: CompressionType) -> bool:
    """kafka-python handles magic-0 lz4 (with Kafka 0.8's broken frame checksum) only when xxhash is installed."""
    import kafka.codec

    return not (magic == 0 and codec == CompressionType.LZ4) or getattr(kafka.codec, "xxhash", None) is not None


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_we_read_kafka_python_message_sets(magic: int, codec: CompressionType) -> None:
    if not supported_by_kafka_python(magic, codec):
        pytest.fail("kafka-python writes magic-0 lz4 only with xxhash installed (a test dependency)")
    messages = list(iter_deep(kafka_python_set(magic, codec)))
    # kafka-python's compressed wrappers carry offset 0 (like old librdkafka): inner offsets are then absolute.
    assert [(m.offset, m.key, m.value) for m in messages] == [(i, b"key%d" % i, b"value" * i) for i in range(20)]
    expected_timestamps = [1_500_000_000_000 + i for i in range(20)] if magic else [-1] * 20
    assert [m.timestamp for m in messages] == expected_timestamps


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_kafka_python_reads_our_message_sets(magic: int, codec: CompressionType) -> None:
    if not supported_by_kafka_python(magic, codec):
        pytest.fail("kafka-python reads magic-0 lz4 only with xxhash installed (a test dependency)")
    records = [Record(100 + i, 1_500_000_000_000 + i, b"k%d" % i, b"v" * i) for i in range(20)]
    data = build_message_set(records, magic=magic, compression=codec)
    pos, seen = 0, []
    while pos < len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        batch = LegacyRecordBatch(data[pos : pos + size], magic)
        assert batch.validate_crc()
        seen += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
        pos += size
    assert seen == [(r.offset, r.timestamp if magic else None, r.key, r.value) for r in records]


# --- Kafka's rules for compressed wrappers ------------------------------------------------------------------


def inner_set(magic: int, offsets: list[int], attributes: int = 0, timestamp: int = 0) -> bytes:
    return b"".join(entry(o, message(magic, attributes, b"k%d" % o, b"v%d" % o, timestamp + o)) for o in offsets)


def test_magic_1_wrapper_offset_is_the_last_inner_offset() -> None:
    data = wrapper(1, CompressionType.GZIP, 52, inner_set(1, [0, 1, 2]))
    assert [m.offset for m in iter_deep(data)] == [50, 51, 52]


def test_magic_1_wrapper_with_offset_zero_keeps_inner_offsets() -> None:
    data = wrapper(1, CompressionType.SNAPPY, 0, inner_set(1, [0, 1, 2]))
    assert [m.offset for m in iter_deep(data)] == [0, 1, 2]


def test_magic_0_inner_offsets_are_absolute() -> None:
    data = wrapper(0, CompressionType.LZ4, 12, inner_set(0, [10, 11, 12]))
    assert [m.offset for m in iter_deep(data)] == [10, 11, 12]


def test_log_append_time_wrapper_gives_inner_messages_its_timestamp() -> None:
    data = wrapper(1, CompressionType.GZIP, 2, inner_set(1, [0, 1, 2], timestamp=100), attributes=0x08, timestamp=777)
    messages = list(iter_deep(data))
    assert [m.timestamp for m in messages] == [777, 777, 777]
    assert all(m.timestamp_type is TimestampType.LOG_APPEND_TIME for m in messages)
    create_time = wrapper(1, CompressionType.GZIP, 2, inner_set(1, [0, 1, 2], timestamp=100), timestamp=777)
    assert [m.timestamp for m in iter_deep(create_time)] == [100, 101, 102]


@pytest.mark.parametrize(
    "data",
    [
        wrapper(1, CompressionType.GZIP, 1, inner_set(1, [0, 1, 2])),  # wrapper offset < last inner, not 0
        wrapper(1, CompressionType.GZIP, 5, inner_set(0, [0, 1])),  # inner magic differs
        wrapper(1, CompressionType.GZIP, 5, b""),  # no inner messages
        wrapper(1, CompressionType.GZIP, 5, wrapper(1, CompressionType.GZIP, 0, inner_set(1, [0]))),  # nested
        entry(5, message(1, CompressionType.GZIP, None, None)),  # null wrapper value
        entry(5, message(1, CompressionType.ZSTD, None, compress(CompressionType.ZSTD, inner_set(1, [0])))),
    ],
    ids=["wrapper-offset", "inner-magic", "empty", "nested", "null-value", "zstd"],
)
def test_bad_wrappers_are_invalid_records(data: bytes) -> None:
    with pytest.raises(InvalidRecordError) as info:
        list(iter_deep(data))
    assert info.value.code == ErrorCode.INVALID_RECORD


def test_corrupt_inner_message_is_corrupt() -> None:
    inner = bytearray(inner_set(1, [0, 1]))
    inner[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        list(iter_deep(wrapper(1, CompressionType.GZIP, 1, bytes(inner))))


def test_builder_refuses_headers_and_zstd() -> None:
    with pytest.raises(ValueError):
        build_message_set([Record(key=b"k", headers=[("h", b"v")])], magic=1)
    with pytest.raises(UnsupportedCompressionTypeError):
        build_message_set([Record(key=b"k")], magic=1, compression=CompressionType.ZSTD)


# --- up-conversion (produce v0-v2) --------------------------------------------------------------------------


def test_up_convert_assigns_fresh_offsets_and_keeps_timestamps() -> None:
    data = GOLDEN_V1 + entry(9, message(1, 0, b"x", b"y", 0x018000000005))
    batch = up_convert(data)
    validated = validate_batches(batch)  # acceptable on the client produce path as is
    assert validated.record_count == 2 and validated.compression == CompressionType.NONE
    assert [(r.offset, r.timestamp, r.key, r.value) for r in iter_records(batch)] == [
        (0, 0x018000000000, None, b"hi"),
        (1, 0x018000000005, b"x", b"y"),
    ]
    assert validated.max_timestamp == 0x018000000005


def test_up_convert_of_magic_0_has_no_timestamps() -> None:
    batch = up_convert(GOLDEN_V0)
    header = parse_header(batch)
    assert (header.base_timestamp, header.max_timestamp) == (-1, -1)
    assert [(r.timestamp, r.key, r.value) for r in iter_records(batch)] == [(-1, b"k", b"hi")]


@pytest.mark.parametrize("codec", LEGACY_CODECS[1:])
def test_up_convert_keeps_the_wrapper_codec_unless_told_otherwise(codec: CompressionType) -> None:
    data = wrapper(1, codec, 2, inner_set(1, [0, 1, 2], timestamp=10))
    assert parse_header(up_convert(data)).compression == codec
    recompressed = up_convert(data, compression=CompressionType.ZSTD)
    assert parse_header(recompressed).compression == CompressionType.ZSTD
    assert [(r.offset, r.timestamp, r.key) for r in iter_records(recompressed)] == [
        (0, 10, b"k0"), (1, 11, b"k1"), (2, 12, b"k2")
    ]


@pytest.mark.parametrize(
    "data",
    [
        GOLDEN_V0 + GOLDEN_V1,  # magic changes within the set
        wrapper(1, CompressionType.GZIP, 0, inner_set(1, [0])) + GOLDEN_V1,  # compressed wrapper not alone
        b"",
        build_batch([Record(key=b"k")]),  # a magic-2 batch is not a message set
    ],
    ids=["mixed-magic", "wrapper-not-alone", "empty", "magic-2"],
)
def test_up_convert_refuses_what_kafka_refuses(data: bytes) -> None:
    with pytest.raises(InvalidRecordError):
        up_convert(data)


def test_up_convert_keep_offsets_requires_increasing_offsets() -> None:
    with pytest.raises(InvalidRecordError):
        up_convert(GOLDEN_V1 + GOLDEN_V1, keep_offsets=True)
    assert [r.offset for r in iter_records(up_convert(GOLDEN_V1 + GOLDEN_V1))] == [0, 1]


# --- down-conversion (fetch v0-v3) --------------------------------------------------------------------------


def stored_batches() -> bytes:
    headers = [("trace", b"1")]
    return (
        build_batch([Record(10 + i, 5000 + i, b"a%d" % i, b"x" * i, headers) for i in range(4)], base_offset=10)
        + build_end_txn_marker_batch(EndTransactionMarker(ControlRecordType.COMMIT, 1), producer_id=1, producer_epoch=0, base_offset=14)
        + build_batch([Record(15 + i, 6000 + i, None, b"y%d" % i) for i in range(3)], base_offset=15, compression=CompressionType.SNAPPY)
    )


def test_down_convert_to_magic_1_keeps_offsets_keys_values_timestamps_and_drops_headers_and_markers() -> None:
    data = down_convert(stored_batches(), 1)
    shallow = list(iter_messages(data))
    assert [m.compression for m in shallow] == [0, 0, 0, 0, CompressionType.SNAPPY]
    assert shallow[-1].offset == 17 and shallow[-1].key is None
    assert [(m.offset, m.timestamp, m.key, m.value) for m in iter_deep(data)] == (
        [(10 + i, 5000 + i, b"a%d" % i, b"x" * i) for i in range(4)]
        + [(15 + i, 6000 + i, None, b"y%d" % i) for i in range(3)]
    )


def test_down_convert_to_magic_0_drops_timestamps() -> None:
    data = down_convert(stored_batches(), 0)
    messages = list(iter_deep(data))
    assert all(m.magic == 0 and m.timestamp == -1 for m in messages)
    assert [m.offset for m in messages] == [10, 11, 12, 13, 15, 16, 17]


def test_down_convert_skips_records_before_the_fetch_offset_in_uncompressed_batches_only() -> None:
    data = down_convert(stored_batches(), 1, first_offset=12)
    assert [m.offset for m in iter_deep(data)] == [12, 13, 15, 16, 17]
    compressed = build_batch([Record(i, 1, b"k", b"v") for i in range(3)], compression=CompressionType.GZIP)
    assert [m.offset for m in iter_deep(down_convert(compressed, 1, first_offset=2))] == [0, 1, 2]


def test_down_convert_keeps_log_append_time() -> None:
    batch = bytearray(build_batch([Record(i, 100 + i, b"k", b"v") for i in range(2)], compression=CompressionType.LZ4))
    set_log_append_time(batch, 0, 9999)
    messages = list(iter_deep(down_convert(bytes(batch), 1)))
    assert [(m.timestamp, m.timestamp_type) for m in messages] == [(9999, TimestampType.LOG_APPEND_TIME)] * 2


def test_down_convert_ignores_a_partial_trailing_batch() -> None:
    data = stored_batches()
    assert down_convert(data + data[:30], 1) == down_convert(data, 1)


def test_down_converted_magic_0_lz4_carries_kafka_08_header_checksum() -> None:
    batch = build_batch([Record(i, 1, b"k", b"v" * 100) for i in range(5)], compression=CompressionType.LZ4)
    (outer,) = iter_messages(down_convert(batch, 0))
    frame = outer.value
    assert frame[6] == (xxh32(frame[:6]) >> 8) & 0xFF  # what Kafka 0.8/0.9 consumers verify
    assert [m.value for m in iter_deep(down_convert(batch, 0))] == [b"v" * 100] * 5


def test_down_convert_of_zstd_is_unsupported_compression_type() -> None:
    batch = build_batch([Record(key=b"k")], compression=CompressionType.ZSTD)
    with pytest.raises(UnsupportedCompressionTypeError) as info:
        down_convert(batch, 1)
    assert info.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


# --- round trips --------------------------------------------------------------------------------------------

optional_bytes = st.none() | st.binary(max_size=200)


@st.composite
def record_lists(draw: st.DrawFn) -> list[Record]:
    offset = draw(st.integers(0, 2**40))
    records = []
    for _ in range(draw(st.integers(1, 15))):
        records.append(Record(offset, draw(st.integers(0, 2**41)), draw(optional_bytes), draw(optional_bytes)))
        offset += draw(st.sampled_from([1, 1, 3]))
    return records


@FUZZ
@given(records=record_lists(), codec=st.sampled_from(LEGACY_CODECS), magic=st.sampled_from([0, 1]))
def test_down_then_up_conversion_round_trips(records: list[Record], codec: CompressionType, magic: int) -> None:
    batch = build_batch(records, base_offset=records[0].offset, compression=codec)
    legacy = down_convert(batch, magic)
    restored = up_convert(legacy, keep_offsets=True)
    assert parse_header(restored).compression == codec
    expected = [Record(r.offset, r.timestamp if magic else -1, r.key, r.value) for r in records]
    assert list(iter_records(restored)) == expected


@FUZZ
@given(records=record_lists(), codec=st.sampled_from(LEGACY_CODECS), magic=st.sampled_from([0, 1]))
def test_message_set_build_then_parse_round_trips(records: list[Record], codec: CompressionType, magic: int) -> None:
    data = build_message_set(records, magic=magic, compression=codec)
    assert [(m.offset, m.timestamp, m.key, m.value) for m in iter_deep(data)] == [
        (r.offset, r.timestamp if magic else -1, r.key, r.value) for r in records
    ]


# --- damaged input ------------------------------------------------------------------------------------------


def test_every_truncation_raises_corrupt_record_error() -> None:
    for data in (GOLDEN_V0 + GOLDEN_V1, wrapper(1, CompressionType.GZIP, 2, inner_set(1, [0, 1, 2]))):
        for cut in range(1, len(data)):
            if cut == len(GOLDEN_V0) and data.startswith(GOLDEN_V0):
                continue  # a whole first message is a complete message set
            with pytest.raises(CorruptRecordError):
                up_convert(data[:cut])


@FUZZ
@given(st.binary(max_size=200))
def test_garbage_raises_only_records_error(data: bytes) -> None:
    for convert in (up_convert, lambda d: down_convert(d, 1), lambda d: list(iter_deep(d))):
        try:
            convert(data)
        except RecordsError:
            pass


@FUZZ
@given(
    codec=st.sampled_from(LEGACY_CODECS[1:]),
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(1, 255)), min_size=1, max_size=3),
)
def test_damaged_inner_message_sets_with_valid_outer_crc_raise_only_records_error(codec, flips) -> None:
    inner = bytearray(inner_set(1, [0, 1, 2]))
    for where, mask in flips:
        inner[where % len(inner)] ^= mask
    try:
        up_convert(wrapper(1, codec, 2, bytes(inner)))
    except RecordsError:
        pass
