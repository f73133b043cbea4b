"""The produce path's record walk (protocol/_records.c through record_walk) agrees with the record decoder:
it accepts exactly the records sections the decoder decodes, whatever the bytes, and reports what Kafka's
LogValidator takes from them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.compression import CompressionType, compress
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import HEADER_SIZE, InvalidRecordError, encode_batch, parse_header, set_log_append_time
from odradek.protocol.record_walk import RecordErrorKind, TimestampBounds, walk_batch
from odradek.protocol.records import Record, build_batch, encode_record, iter_records

BASE = 1_700_000_000_000


def batch_around(records: bytes, count: int, codec: int = CompressionType.NONE) -> bytes:
    payload = compress(codec, records) if codec else records
    return encode_batch(payload, base_offset=0, attributes=codec, last_offset_delta=max(count - 1, 0), base_timestamp=BASE, max_timestamp=BASE, records_count=count)


def walk(data: bytes, **kwargs):
    return walk_batch(data, 0, parse_header(data), timestamps=kwargs.get("timestamps"), require_keys=kwargs.get("require_keys", False))


records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=8)),
        st.one_of(st.none(), st.binary(max_size=8)),
        st.lists(st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=3))), max_size=2),
        st.integers(-(2**40), 2**40),
        st.integers(0, 5),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=250, deadline=None)
@given(records=records_strategy, edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 2), st.integers(0, 255)), max_size=3), count_change=st.integers(-1, 1))
def test_walk_accepts_exactly_what_the_decoder_decodes(records, edits, count_change):
    body = bytearray(b"".join(encode_record(Record(key=k, value=v, headers=h), i + gap, ts) for i, (k, v, h, ts, gap) in enumerate(records)))
    for position, action, byte in edits:  # overwrite, insert or delete one byte
        position %= len(body) + 1
        if action == 0 and position < len(body):
            body[position] = byte
        elif action == 1:
            body.insert(position, byte)
        elif position < len(body):
            del body[position]
    count = max(len(records) + count_change, 1)
    data = batch_around(bytes(body), count)
    try:
        decoded = list(iter_records(data))
    except InvalidRecordError:
        decoded = None
    try:
        walked = walk(data)
    except (InvalidRecordError, KafkaError) as exc:
        assert decoded is None, f"the walk refused records the decoder reads: {exc}"
        return
    assert decoded is not None, "the walk accepted records the decoder refuses"
    assert walked.max_timestamp == max([-1] + [r.timestamp for r in decoded])
    assert walked.offsets_in_sequence == all(r.offset == i for i, r in enumerate(decoded))
    assert walked.problems == []


def test_keys_and_timestamps_are_reported_per_record():
    batch = build_batch([Record(timestamp=BASE, key=None, value=b"a"), Record(timestamp=BASE - 10_000, key=b"k", value=b"b"), Record(timestamp=BASE, key=b"k", value=b"c")])
    walked = walk(batch, timestamps=TimestampBounds(BASE, 5_000, 5_000), require_keys=True)
    assert [(p.index, p.kind, p.timestamp, p.offset_delta) for p in walked.problems] == [
        (0, RecordErrorKind.MISSING_KEY, BASE, 0),
        (1, RecordErrorKind.TIMESTAMP_OUT_OF_RANGE, BASE - 10_000, 1),
    ]


@pytest.mark.parametrize(
    ("length", "code"),
    [
        (b"\x80\x80\x80\x80\x80\x01", ErrorCode.UNKNOWN_SERVER_ERROR),  # six bytes: Kafka's reader throws outside its catch
        (b"\xff\xff\xff\xff\x0f", ErrorCode.INVALID_RECORD),  # five bytes: -2^31, a negative length
        (b"\x80", ErrorCode.INVALID_RECORD),  # the records end inside the varint
    ],
)
def test_record_length_varints(length, code):
    with pytest.raises(KafkaError) as raised:
        walk(batch_around(length + b"\x00" * 8, 1))
    assert raised.value.code == code


def test_an_overlong_length_in_a_compressed_batch_is_invalid_record():
    """Kafka's stream reader wraps the same varint error as InvalidRecordException."""
    with pytest.raises(InvalidRecordError):
        walk(batch_around(b"\x80\x80\x80\x80\x80\x01" + b"\x00" * 8, 1, CompressionType.GZIP))


def test_a_log_append_time_batch_gives_every_record_its_max_timestamp():
    data = bytearray(build_batch([Record(timestamp=BASE, value=b"a"), Record(timestamp=BASE + 1, value=b"b")]))
    set_log_append_time(data, 0, BASE + 99)
    assert walk(bytes(data)).max_timestamp == BASE + 99


def test_the_walk_reads_the_records_section_only():
    data = build_batch([Record(timestamp=BASE, value=b"a")])
    assert len(data) > HEADER_SIZE
    assert walk(data + b"trailing bytes of the next batch").max_timestamp == BASE
