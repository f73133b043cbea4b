"""Magic-2 record batches: golden bytes from the spec, round trips, kafka-python interop, validation, damage."""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from odradek.protocol import _records
from odradek.protocol.compression import CompressionType
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    RecordsError,
    TimestampType,
    assign_offset_and_epoch,
    _check_client_batch,
    compute_crc,
    iter_batch_positions,
    parse_header,
    peek_magic,
    read_batch_header,
    read_prefix,
    set_log_append_time,
    validate_batches,
    verify_crc,
)
from odradek.protocol.records import (
    ControlRecordType,
    EndTransactionMarker,
    Record,
    build_batch,
    build_end_txn_marker_batch,
    control_record_key,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    iter_records,
    parse_control_record_type,
)

FUZZ = settings(
    max_examples=int(os.environ.get("ODRADEK_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# One batch written out by hand from docs/implementation.html ("Record Batch", "Record"); the CRC is the
# CRC-32C of everything from attributes on, computed by the crc32c package below as a cross-check.
GOLDEN_COVERED = bytes.fromhex(
    "0000"  # attributes: no compression, CreateTime, not transactional, not control
    "00000001"  # lastOffsetDelta
    "0000010000000000"  # baseTimestamp
    "000001000000012c"  # maxTimestamp (base + 300)
    "00000000000003e8"  # producerId 1000
    "0002"  # producerEpoch
    "0000000a"  # baseSequence 10
    "00000002"  # recordsCount
    # record 0: length 8, attributes 0, timestampDelta 0, offsetDelta 0, key "k", value "v", 0 headers
    "10" "00" "00" "00" "02" "6b" "02" "76" "00"
    # record 1: length 12, attributes 0, timestampDelta 300 (zigzag 600 = d8 04), offsetDelta 1, null key,
    # value "hi", 1 header: key "h", null value
    "18" "00" "d804" "02" "01" "04" "6869" "02" "02" "68" "01"
)
GOLDEN_CRC = 0xF8175511
GOLDEN = (
    bytes.fromhex(
        "0000000000000005"  # baseOffset 5
        "00000047"  # batchLength 71 = 83 - 12
        "00000007"  # partitionLeaderEpoch
        "02"  # magic
    )
    + struct.pack(">I", GOLDEN_CRC)
    + GOLDEN_COVERED
)
GOLDEN_RECORDS = [
    Record(offset=5, timestamp=0x010000000000, key=b"k", value=b"v", headers=[]),
    Record(offset=6, timestamp=0x010000000000 + 300, key=None, value=b"hi", headers=[("h", None)]),
]


def build_golden() -> bytes:
    return build_batch(
        GOLDEN_RECORDS,
        base_offset=5,
        partition_leader_epoch=7,
        producer_id=1000,
        producer_epoch=2,
        base_sequence=10,
    )


# --- golden bytes -------------------------------------------------------------------------------------------


FIRST_CHECKSUM = """
import sys
from odradek.protocol.record_batch import crc32c
print(crc32c(b"123456789"), "crc32c" in sys.modules, "importlib.metadata" in sys.modules)
"""


def test_the_first_checksum_loads_the_c_crc32c_without_the_packages_metadata_read() -> None:
    """The crc32c package's ``__init__`` reads every installed distribution's metadata for its version (~84 M
    instructions): the broker's first checksum loads only its C extension, and computes the same value."""
    done = subprocess.run([sys.executable, "-c", FIRST_CHECKSUM], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == [str(crc32c.crc32c(b"123456789")), "False", "False"]


def test_golden_crc_is_crc32c_of_attributes_to_end() -> None:
    assert len(GOLDEN) == 83
    assert crc32c.crc32c(GOLDEN_COVERED) == GOLDEN_CRC


def test_golden_batch_header_decodes() -> None:
    header = parse_header(GOLDEN)
    assert (header.base_offset, header.batch_length, header.partition_leader_epoch, header.magic) == (5, 71, 7, 2)
    assert header.crc == GOLDEN_CRC and verify_crc(GOLDEN)
    assert (header.last_offset_delta, header.records_count, header.size) == (1, 2, 83)
    assert (header.base_timestamp, header.max_timestamp) == (0x010000000000, 0x010000000000 + 300)
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence) == (1000, 2, 10, 11)
    assert header.compression == 0 and header.timestamp_type == 0
    assert not (header.is_transactional or header.is_control or header.has_delete_horizon)
    assert (header.last_offset, header.next_offset) == (6, 7)
    assert read_prefix(GOLDEN) == (5, 83)
    assert peek_magic(GOLDEN) == 2


def test_golden_batch_records_decode() -> None:
    assert list(iter_records(GOLDEN)) == GOLDEN_RECORDS


def test_builder_writes_the_golden_bytes_exactly() -> None:
    assert build_golden() == GOLDEN


def test_kafka_python_reads_the_golden_batch() -> None:
    batch = DefaultRecordBatch(GOLDEN)
    assert batch.validate_crc()
    records = list(batch)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (5, 0x010000000000, b"k", b"v", []),
        (6, 0x010000000000 + 300, None, b"hi", [("h", None)]),
    ]


# --- round trips --------------------------------------------------------------------------------------------

optional_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=10), optional_bytes), max_size=3)
timestamps = st.integers(min_value=0, max_value=2**41)


@st.composite
def record_lists(draw: st.DrawFn) -> list[Record]:
    count = draw(st.integers(min_value=1, max_value=20))
    offset = draw(st.integers(min_value=0, max_value=2**40))
    records = []
    for _ in range(count):
        records.append(Record(offset, draw(timestamps), draw(optional_bytes), draw(optional_bytes), draw(headers)))
        offset += draw(st.sampled_from([1, 1, 1, 2, 1000]))  # mostly dense, sometimes compacted gaps
    return records


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=record_lists(),
    codec=st.sampled_from(list(CompressionType)),
    timestamp_type=st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME]),
    producer=st.tuples(st.integers(-1, 2**40), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1)),
    leader_epoch=st.integers(-1, 2**31 - 1),
    transactional=st.booleans(),
)
def test_build_then_iterate_round_trips(records, codec, timestamp_type, producer, leader_epoch, transactional) -> None:
    producer_id, producer_epoch, base_sequence = producer
    base_offset = records[0].offset
    batch = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        timestamp_type=timestamp_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=leader_epoch,
        is_transactional=transactional,
    )
    header = parse_header(batch)
    assert verify_crc(batch)
    assert header.size == len(batch)
    assert header.base_offset == base_offset
    assert header.last_offset == records[-1].offset
    assert header.records_count == len(records)
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert (header.compression, header.timestamp_type, header.is_transactional) == (codec, timestamp_type, transactional)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    assert header.partition_leader_epoch == leader_epoch
    decoded = list(iter_records(batch))
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        # Kafka reads every record of a LogAppendTime batch at the batch's max timestamp.
        assert all(r.timestamp == header.max_timestamp for r in decoded)
        for r in decoded:
            r.timestamp = None
        expected = [Record(r.offset, None, r.key, r.value, r.headers) for r in records]
    else:
        expected = records
    assert decoded == expected
    validated = validate_batches(batch, from_client=False)
    assert validated.record_count == len(records) and validated.size == len(batch)


@pytest.mark.parametrize("codec", list(CompressionType))
def test_kafka_python_reads_our_batches(codec: CompressionType) -> None:
    records = [Record(i, 1_700_000_000_000 + i, b"key%d" % i, b"value" * i, [("h", b"%d" % i)]) for i in range(50)]
    batch = build_batch(records, compression=codec, producer_id=7, producer_epoch=1, base_sequence=0)
    theirs = DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in records
    ]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_we_read_kafka_python_batches(codec: CompressionType) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )
    for i in range(50):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v" * i * 10, headers=[("a", b"b")])
    batch = bytes(builder.build())
    validated = validate_batches(batch)
    assert validated.record_count == 50 and validated.compression == codec
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(batch)] == [
        (i, 1_700_000_000_000 + i, b"k%d" % i, b"v" * i * 10, [("a", b"b")]) for i in range(50)
    ]


def test_records_without_offsets_or_timestamps_are_numbered_and_stamped() -> None:
    batch = build_batch([(b"a", b"1"), (None, b"2"), Record(key=b"c")], base_offset=100)
    records = list(iter_records(batch))
    assert [r.offset for r in records] == [100, 101, 102]
    assert len({r.timestamp for r in records}) == 1 and records[0].timestamp > 1_600_000_000_000
    assert [(r.key, r.value) for r in records] == [(b"a", b"1"), (None, b"2"), (b"c", None)]


def test_builder_refuses_decreasing_offsets_and_empty_batches() -> None:
    with pytest.raises(ValueError):
        build_batch([Record(offset=5), Record(offset=5)], base_offset=5)
    with pytest.raises(ValueError):
        build_batch([Record(offset=4)], base_offset=5)
    with pytest.raises(ValueError):
        build_batch([])


# --- in-place patches ---------------------------------------------------------------------------------------


def test_base_offset_and_leader_epoch_patches_keep_the_crc_valid() -> None:
    buf = bytearray(GOLDEN)
    header = parse_header(buf)
    assign_offset_and_epoch(buf, 0, header, 1000, 42)
    assert verify_crc(buf)
    assert [r.offset for r in iter_records(buf)] == [1000, 1001]
    patched = parse_header(buf)
    assert (patched.base_offset, patched.batch_length, patched.partition_leader_epoch) == (1000, len(GOLDEN) - 12, 42)
    assert (header.base_offset, header.partition_leader_epoch) == (1000, 42)
    assert buf[16:] == GOLDEN[16:]


def test_log_append_time_restamps_every_record() -> None:
    buf = bytearray(GOLDEN)
    set_log_append_time(buf, 0, 1_234_567)
    header = parse_header(buf)
    assert verify_crc(buf)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME and header.max_timestamp == 1_234_567
    assert [r.timestamp for r in iter_records(buf)] == [1_234_567, 1_234_567]


# --- validation for the produce path ------------------------------------------------------------------------


def client_batch(**options) -> bytes:
    records = [Record(key=b"k", value=b"v%d" % i, timestamp=1000 + i) for i in range(3)]
    return build_batch(records, **options)


def with_header(batch: bytes, fmt: str, at: int, value: int) -> bytes:
    """The batch with one header field rewritten and the CRC fixed, as a misbehaving client would send it."""
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, at, value)
    struct.pack_into(">I", buf, 17, compute_crc(buf))
    return bytes(buf)


def test_validate_returns_producer_state_and_totals() -> None:
    batch = client_batch(producer_id=9, producer_epoch=3, base_sequence=40, is_transactional=True, compression=CompressionType.LZ4)
    result = validate_batches(batch)
    assert (result.producer_id, result.producer_epoch, result.base_sequence) == (9, 3, 40)
    assert result.is_transactional and not result.is_control
    assert (result.record_count, result.max_timestamp, result.size) == (3, 1002, len(batch))
    assert result.compression == CompressionType.LZ4
    assert result.batches == [(0, parse_header(batch))]


def test_validate_walks_several_batches_for_non_client_appends() -> None:
    first = build_batch([Record(timestamp=5, value=b"a")], base_offset=0)
    second = build_batch([Record(timestamp=9, value=b"b"), Record(timestamp=7, value=b"c")], base_offset=1)
    result = validate_batches(first + second, from_client=False)
    assert [pos for pos, _ in result.batches] == [0, len(first)]
    assert (result.record_count, result.max_timestamp) == (3, 9)
    with pytest.raises(InvalidRecordError, match="only one record batch"):
        validate_batches(first + first)


@pytest.mark.parametrize(
    "mutate, error",
    [
        (lambda b: with_header(b, ">i", 57, 4), InvalidRecordError),  # recordsCount != lastOffsetDelta + 1
        (lambda b: with_header(b, ">i", 57, 0), InvalidRecordError),
        (lambda b: with_header(b, ">i", 23, -1), InvalidRecordError),  # lastOffsetDelta
        (lambda b: with_header(b, ">q", 0, 3), InvalidRecordError),  # base offset from a client must be 0
        (lambda b: with_header(b, ">h", 21, 0x20), InvalidRecordError),  # control batch from a client
        (lambda b: with_header(b, ">q", 43, 77), InvalidRecordError),  # producer id without a sequence
        (lambda b: with_header(b, ">h", 21, 5), CorruptRecordError),  # compression id 5
        (lambda b: b[:16] + b"\x03" + b[17:], CorruptRecordError),  # magic 3
        (lambda b: b[:16] + b"\x01" + b[17:], InvalidRecordError),  # legacy magic: needs up-conversion
        (lambda b: b[:-1], InvalidRecordError),  # cut short: no whole batch (Kafka's validateRecords)
        (lambda b: b + b[:20], CorruptRecordError),
        (lambda b: b[:8] + struct.pack(">i", 10) + b[12:22], CorruptRecordError),  # length below header size
        (lambda b: b"", InvalidRecordError),
    ],
)
def test_validate_rejects_with_kafka_error(mutate, error) -> None:
    bad = mutate(client_batch())
    with pytest.raises(error) as info:
        validate_batches(bad)
    expected_code = {CorruptRecordError: ErrorCode.CORRUPT_MESSAGE, InvalidRecordError: ErrorCode.INVALID_RECORD}[error]
    assert info.value.code == expected_code


def test_validate_accepts_a_control_batch_from_the_coordinator() -> None:
    marker = build_end_txn_marker_batch(
        EndTransactionMarker(ControlRecordType.COMMIT, 5), producer_id=1, producer_epoch=0
    )
    assert validate_batches(marker, from_client=False).is_control
    with pytest.raises(InvalidRecordError, match="control"):
        validate_batches(marker)


def test_every_crc_covered_byte_flip_is_detected() -> None:
    for position in range(17, len(GOLDEN)):
        damaged = bytearray(GOLDEN)
        damaged[position] ^= 0x01
        assert not verify_crc(damaged), position
        with pytest.raises(CorruptRecordError):
            validate_batches(bytes(damaged), from_client=False)
        with pytest.raises(RecordsError):
            iter_records(bytes(damaged))


def test_iter_batch_positions_stops_at_a_partial_batch() -> None:
    data = GOLDEN + GOLDEN + GOLDEN[:40]
    assert list(iter_batch_positions(data)) == [(0, 5, 83), (83, 5, 83)]


# --- damaged input never escapes as another exception -------------------------------------------------------


def consume(buf: bytes) -> None:
    for _ in iter_records(buf):
        pass


@pytest.mark.parametrize("codec", list(CompressionType))
def test_every_truncation_raises_records_error(codec: CompressionType) -> None:
    batch = build_batch([Record(i, 1000, b"k", b"v" * 50) for i in range(10)], compression=codec)
    for cut in range(len(batch)):
        # Kafka finds no whole batch in a cut one, and refuses the produce with INVALID_RECORD.
        with pytest.raises(InvalidRecordError):
            validate_batches(batch[:cut] or b"\x00")
        with pytest.raises(RecordsError):
            consume(batch[:cut])


@FUZZ
@given(st.binary(max_size=200))
def test_garbage_raises_only_records_error(data: bytes) -> None:
    for check in (validate_batches, consume, peek_magic):
        try:
            check(data)
        except RecordsError:
            pass


@FUZZ
@given(
    codec=st.sampled_from(list(CompressionType)),
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(1, 255)), min_size=1, max_size=3),
    count_delta=st.sampled_from([0, 0, 0, 1, -1]),
)
def test_damaged_records_with_a_fixed_up_crc_raise_only_records_error(codec, flips, count_delta) -> None:
    """The CRC catches random damage; this fixes the CRC up so the record decoder itself is exercised."""
    records = [Record(i, 1000 + i, b"key", b"value %d" % i, [("h", b"x")]) for i in range(5)]
    buf = bytearray(build_batch(records, compression=codec))
    for where, mask in flips:
        buf[HEADER_SIZE + where % (len(buf) - HEADER_SIZE)] ^= mask
    struct.pack_into(">i", buf, 57, 5 + count_delta)
    struct.pack_into(">I", buf, 17, compute_crc(buf))
    try:
        consume(bytes(buf))
    except RecordsError:
        pass


def test_record_overrunning_its_declared_length_is_invalid() -> None:
    covered = bytearray(GOLDEN_COVERED)
    covered[40] = 0x0E  # record 0 claims 7 bytes instead of 8
    buf = bytearray(GOLDEN[:21]) + covered
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(covered)))
    with pytest.raises(InvalidRecordError):
        consume(bytes(buf))


# --- varints ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, encoded",
    [(0, "00"), (-1, "01"), (1, "02"), (-64, "7f"), (64, "8001"), (300, "d804"), (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")],
)
def test_varint_encodings_match_protobuf_zigzag(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    data = encode_varint(value)
    assert decode_varint(b"\xaa" + data + b"\xbb", 1) == (value, 1 + len(data))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    data = encode_varlong(value)
    assert len(data) <= 10 and decode_varlong(data) == (value, len(data))


def test_overlong_or_truncated_varints_are_invalid_records() -> None:
    with pytest.raises(InvalidRecordError):
        decode_varint(bytes.fromhex("ffffffff7f"[:-2] + "ff01"))  # 6 bytes
    with pytest.raises(InvalidRecordError):
        decode_varint(b"\x80\x80")
    with pytest.raises(ValueError):
        encode_varint(2**31)


# --- control records ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("control_type", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_end_transaction_marker_batch_matches_kafka(control_type: ControlRecordType) -> None:
    batch = build_end_txn_marker_batch(
        EndTransactionMarker(control_type, coordinator_epoch=12),
        producer_id=4000, producer_epoch=7, base_offset=88, partition_leader_epoch=3, timestamp=99,
    )
    header = parse_header(batch)
    assert header.is_control and header.is_transactional and verify_crc(batch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4000, 7, -1)
    assert (header.base_offset, header.records_count, header.partition_leader_epoch) == (88, 1, 3)
    (record,) = iter_records(batch)
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == struct.pack(">hi", 0, 12)
    assert EndTransactionMarker.from_record(record) == EndTransactionMarker(control_type, 12)
    (theirs,) = DefaultRecordBatch(batch)
    assert (theirs.commit, theirs.abort) == (control_type == 1, control_type == 0)


def test_control_record_keys() -> None:
    assert control_record_key(ControlRecordType.LEADER_CHANGE) == b"\x00\x00\x00\x02"
    assert parse_control_record_type(b"\x00\x00\x00\x06") is ControlRecordType.KRAFT_VOTERS
    assert parse_control_record_type(b"\x00\x01\x00\x63extra") is ControlRecordType.UNKNOWN
    for bad in (None, b"\x00\x00\x01", b"\xff\xff\x00\x00"):
        with pytest.raises(InvalidRecordError):
            parse_control_record_type(bad)
    with pytest.raises(InvalidRecordError):
        EndTransactionMarker.from_record(Record(key=control_record_key(ControlRecordType.COMMIT), value=b"\x00\x00"))


# -- the C checks of a batch header (protocol/_records.c's batch_header) against the Python ones ----------------


def _python_verdict(buf: bytes | bytearray, pos: int, from_client: bool) -> BatchHeader | None:
    """The header when the Python checks (``read_batch_header``, ``_check_client_batch``) pass it, None when
    they refuse it."""
    try:
        header = read_batch_header(buf, pos)
        if from_client:
            _check_client_batch(header)
    except RecordsError:
        return None
    return header


def _assert_c_agrees(buf: bytes | bytearray, pos: int = 0) -> None:
    """The C checks pass exactly what the Python checks pass, with the same header, its size, codec and
    timestamp type included (this machine has SSE4.2's crc32 instruction, so the C checks are not skipped),
    and hand everything else to them."""
    for from_client in (False, True):
        assert _records.batch_header(buf, pos, from_client) == _python_verdict(buf, pos, from_client)


def _recrc(buf: bytearray) -> bytearray:
    """The batch at 0 with its CRC made right again after a change, so the checks after the CRC's are reached."""
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0))
    return buf


_T = 1_700_000_000_000
_CLIENT_BATCHES = [
    build_batch([Record(timestamp=_T, key=b"k", value=b"v")]),
    build_batch([Record(timestamp=_T, key=None, value=b"x" * 300), Record(timestamp=_T + 1, key=b"k", value=None)], producer_id=7, producer_epoch=1, base_sequence=3),
    build_batch([Record(timestamp=_T, key=b"k", value=b"v" * 100) for _ in range(3)], compression=CompressionType.GZIP, is_transactional=True, producer_id=9, producer_epoch=0, base_sequence=0),
]


@pytest.mark.parametrize("batch", [GOLDEN, *_CLIENT_BATCHES], ids=["golden", "one-record", "idempotent", "transactional-gzip"])
def test_c_header_checks_pass_what_python_passes_and_refer_every_cut(batch: bytes) -> None:
    assert _records.batch_header(batch, 0, False) is not None
    for end in range(len(batch) + 1):
        _assert_c_agrees(batch[:end])
    _assert_c_agrees(b"\x00" * 7 + batch, 7)  # not at the buffer's start
    _assert_c_agrees(batch + batch, len(batch))  # the second of two
    for pos in (-1, len(batch), len(batch) + 100):
        assert _records.batch_header(batch, pos, True) is None


@pytest.mark.parametrize(
    ("offset", "fmt", "value"),
    [
        (0, ">q", 1),  # a client's base offset must be 0
        (0, ">q", -1),
        (8, ">i", 48),  # a length below the header's
        (8, ">i", -1),
        (8, ">i", 2**31 - 1),  # a length past the data
        (16, ">b", 0),  # legacy magics and an unknown one
        (16, ">b", 1),
        (16, ">b", 3),
        (21, ">h", 5),  # unassigned codec ids
        (21, ">h", 7),
        (21, ">h", 0x20),  # a control batch from a client
        (23, ">i", -1),  # last offset delta and record count disagreeing or invalid
        (23, ">i", 5),
        (57, ">i", 0),
        (57, ">i", -3),
        (43, ">q", 5),  # an idempotent producer without a sequence
        (53, ">i", -1),
    ],
)
def test_c_header_checks_refer_what_python_refuses(offset: int, fmt: str, value: int) -> None:
    for batch in (GOLDEN, *_CLIENT_BATCHES):
        changed = bytearray(batch)
        struct.pack_into(fmt, changed, offset, value)
        _assert_c_agrees(changed)
        _assert_c_agrees(_recrc(changed))


@FUZZ
@given(st.sampled_from([GOLDEN, *_CLIENT_BATCHES]), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=4), st.booleans())
def test_c_header_checks_agree_on_corrupted_batches(batch: bytes, changes: list[tuple[int, int]], recrc: bool) -> None:
    changed = bytearray(batch)
    for position, value in changes:
        if position < len(changed):
            changed[position] = value
    if recrc and len(changed) >= HEADER_SIZE:
        _recrc(changed)
    _assert_c_agrees(changed)


def test_validate_batches_refuses_as_the_python_checks_say() -> None:
    """A refusal found through the C checks' None is the Python checks' own, error and text."""
    changed = _recrc(bytearray(_CLIENT_BATCHES[0]))
    struct.pack_into(">i", changed, 57, 0)
    with pytest.raises(InvalidRecordError, match="invalid reported count for record batch: 0"):
        validate_batches(_recrc(changed))
    corrupt = bytearray(GOLDEN)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="record batch is corrupt"):
        validate_batches(corrupt, from_client=False)
