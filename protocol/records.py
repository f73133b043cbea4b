"""Records inside magic-2 batches: decode, encode, and the control records of transactions and KRaft.

The produce and fetch paths never come here: they move whole batches (see record_batch). This module is for
the places that must look inside a batch -- coordinators loading their internal topics, transaction
markers, format conversion for old clients, the log cleaner, tools and tests.

Record layout (implementation docs, "Record")::

    length: varint             (bytes after this field)
    attributes: int8           (unused)
    timestampDelta: varlong    (from the batch's baseTimestamp)
    offsetDelta: varint        (from the batch's baseOffset)
    keyLength: varint, key     (-1: null)
    valueLength: varint, value (-1: null)
    headerCount: varint, then per header: keyLength varint, key (UTF-8), valueLength varint, value

Varints are protobuf's zigzag varints. Malformed record bytes raise InvalidRecordError, as Kafka's
``DefaultRecord.readFrom`` answers them with InvalidRecordException.
"""

from __future__ import annotations

import struct
import time
from typing import Iterable, Iterator

from odradek.protocol.record_batch import (
    CONTROL_FLAG,
    HEADER_SIZE,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    CompressionType,
    InvalidRecordError,
    NegativeTimestampError,
    TimestampType,
    encode_batch,
    read_batch_header,
)
from odradek.protocol.java_hash import int64
from odradek.protocol.values import CodeEnum, Fields, FrozenFields

Bytes = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]


class Record(Fields):
    """One record. When building a batch, ``offset`` None means "the next offset" and ``timestamp`` None
    means "now"; decoded records always carry both."""

    __slots__ = _FIELDS = ("offset", "timestamp", "key", "value", "headers", "attributes")

    def __init__(
        self,
        offset: int | None = None,
        timestamp: int | None = None,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: list[Header] | None = None,
        attributes: int = 0,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers: list[Header] = [] if headers is None else headers
        self.attributes = attributes


class PlacedRecord(Record):
    """A record whose offset and timestamp are known: what ``complete_records`` returns, so that code
    computing deltas from them needs no None checks."""

    __slots__ = ()
    offset: int
    timestamp: int

    def __init__(
        self,
        offset: int = 0,
        timestamp: int = 0,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: list[Header] | None = None,
        attributes: int = 0,
    ) -> None:
        super().__init__(offset, timestamp, key, value, headers, attributes)


RecordLike = Record | tuple[bytes | None, bytes | None]
"""What ``build_batch`` accepts: a Record, or a bare (key, value) pair."""


# --- zigzag varints ---------------------------------------------------------------------------------------

_INT32_RANGE = range(-(1 << 31), 1 << 31)
_INT64_RANGE = range(-(1 << 63), 1 << 63)
_SINGLE_BYTES = [bytes((b,)) for b in range(0x80)]


def _encode_zigzag(value: int, bits: int) -> bytes:
    unsigned = (value << 1) ^ (value >> (bits - 1))
    if unsigned < 0x80:
        return _SINGLE_BYTES[unsigned]
    out = bytearray()
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of an int32 (Kafka's ``ByteUtils.writeVarint``)."""
    if value not in _INT32_RANGE:
        raise ValueError(f"{value} does not fit a varint (int32)")
    return _encode_zigzag(value, 32)


def encode_varlong(value: int) -> bytes:
    """Zigzag varint of an int64 (Kafka's ``ByteUtils.writeVarlong``)."""
    if value not in _INT64_RANGE:
        raise ValueError(f"{value} does not fit a varlong (int64)")
    return _encode_zigzag(value, 64)


def _read_zigzag(buf: Bytes, pos: int, bits: int) -> tuple[int, int]:
    """Raw decoder: IndexError when the buffer ends mid-varint, ValueError when it runs too long."""
    byte = buf[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    unsigned = byte & 0x7F
    for i in range(1, (bits + 6) // 7):
        byte = buf[pos + i]
        unsigned |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            unsigned &= (1 << bits) - 1  # Java's int/long arithmetic drops what does not fit; so do we
            return (unsigned >> 1) ^ -(unsigned & 1), pos + i + 1
    raise ValueError(f"varint longer than {(bits + 6) // 7} bytes")


def decode_varint(buf: Bytes, pos: int = 0) -> tuple[int, int]:
    """(value, position after it) of the int32 zigzag varint at ``pos``."""
    return _decode_public(buf, pos, 32)


def decode_varlong(buf: Bytes, pos: int = 0) -> tuple[int, int]:
    """(value, position after it) of the int64 zigzag varint at ``pos``."""
    return _decode_public(buf, pos, 64)


def _decode_public(buf: Bytes, pos: int, bits: int) -> tuple[int, int]:
    try:
        return _read_zigzag(buf, pos, bits)
    except (IndexError, ValueError) as e:
        raise InvalidRecordError(f"invalid varint at position {pos}: {e or 'truncated'}") from None


# --- decoding ---------------------------------------------------------------------------------------------


def iter_records(buf: Bytes, pos: int = 0) -> Iterator[Record]:
    """The records of the magic-2 batch at ``pos``, decoded one at a time.

    The batch header and CRC are checked and a compressed batch is decompressed before this returns, so
    those errors surface at the call; malformed records surface while iterating.
    """
    view = memoryview(buf)
    return iter_records_unchecked(view, pos, read_batch_header(view, pos))


def iter_records_unchecked(buf: Bytes, pos: int, header: BatchHeader) -> Iterator[Record]:
    """The records of the batch at ``pos`` whose ``header`` the caller read, without checking magic or CRC.

    For tools that show damaged data as it is: Kafka's own record iterator does not check the CRC, so
    kafka-dump-log prints the records of a batch it reports as ``isvalid: false``. Everything else wants
    ``iter_records``.
    """
    if header.records_count < 0:
        raise InvalidRecordError(f"invalid record count {header.records_count}")
    payload = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    if header.compression:
        from odradek.protocol.compression import decompress  # the codecs at the first compressed batch

        payload = memoryview(decompress(header.compression, payload))
    return _decode_records(payload, header)


def _decode_records(payload: memoryview, header: BatchHeader) -> Iterator[Record]:
    log_append_time = header.max_timestamp if header.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    pos = 0
    for _ in range(header.records_count):
        try:
            record, pos = _decode_record(payload, pos, header, log_append_time)
        except (IndexError, ValueError) as e:
            raise InvalidRecordError(f"found invalid record structure at byte {pos} of the records: {e}") from None
        yield record
    if pos != len(payload):
        raise InvalidRecordError("incorrect declared batch size, records still remaining")


def _decode_record(buf: memoryview, pos: int, header: BatchHeader, log_append_time: int | None) -> tuple[Record, int]:
    size, pos = _read_zigzag(buf, pos, 32)
    end = pos + size
    if size < 0 or end > len(buf):
        raise ValueError(f"record size {size} overruns the batch")
    attributes = buf[pos]
    timestamp_delta, pos = _read_zigzag(buf, pos + 1, 64)
    offset_delta, pos = _read_zigzag(buf, pos, 32)
    key, pos = _read_bytes(buf, pos, end)
    value, pos = _read_bytes(buf, pos, end)
    header_count, pos = _read_zigzag(buf, pos, 32)
    if header_count < 0:
        raise ValueError(f"invalid number of record headers {header_count}")
    headers: list[Header] = []
    for _ in range(header_count):
        header_key, pos = _read_bytes(buf, pos, end)
        if header_key is None:
            raise ValueError("negative header key size")
        header_value, pos = _read_bytes(buf, pos, end)
        # Java decodes header keys leniently; surrogateescape keeps odd bytes intact for re-encoding.
        headers.append((header_key.decode("utf-8", "surrogateescape"), header_value))
    if pos != end:
        raise ValueError(f"record declares {size} bytes but holds {size + pos - end}")
    # A Java long sum, as Kafka's DefaultRecord: a delta past Long.MAX_VALUE wraps to a negative timestamp.
    timestamp = int64(header.base_timestamp + timestamp_delta) if log_append_time is None else log_append_time
    return Record(header.base_offset + offset_delta, timestamp, key, value, headers, attributes), pos


def _read_bytes(buf: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = _read_zigzag(buf, pos, 32)
    if length < 0:
        return None, pos
    if pos + length > end:
        raise ValueError(f"field of {length} bytes overruns the record")
    return bytes(buf[pos : pos + length]), pos + length


# --- encoding ---------------------------------------------------------------------------------------------


def _encode_bytes(data: bytes | None) -> list[bytes]:
    if data is None:
        return [_encode_zigzag(-1, 32)]
    return [encode_varint(len(data)), bytes(data)]


def encode_record(record: Record, offset_delta: int, timestamp_delta: int) -> bytes:
    """One record as it sits in a batch, length prefix included."""
    parts = [bytes((record.attributes,)), encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    parts += _encode_bytes(record.key)
    parts += _encode_bytes(record.value)
    parts.append(encode_varint(len(record.headers)))
    for header_key, header_value in record.headers:
        parts += _encode_bytes(header_key.encode("utf-8", "surrogateescape"))
        parts += _encode_bytes(header_value)
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def complete_records(records: Iterable[RecordLike], base_offset: int) -> list[PlacedRecord]:
    """Records with every offset and timestamp filled in, the way the batch builders number them.

    A missing offset is the previous one plus one (the first: ``base_offset``); a missing timestamp is now.
    Offsets must increase and not precede ``base_offset``; a negative timestamp other than -1 raises
    :class:`NegativeTimestampError`, as Kafka's builder refuses it.
    """
    current_time = _now_ms()
    completed: list[PlacedRecord] = []
    next_offset = base_offset
    for item in records:
        record = item if isinstance(item, Record) else Record(key=item[0], value=item[1])
        offset = next_offset if record.offset is None else record.offset
        if offset < next_offset:
            raise ValueError(f"record offset {offset} does not follow offset {next_offset - 1} (base {base_offset})")
        timestamp = current_time if record.timestamp is None else record.timestamp
        if timestamp < 0 and timestamp != NO_TIMESTAMP:
            raise NegativeTimestampError(f"Invalid negative timestamp {timestamp}")
        completed.append(PlacedRecord(offset, timestamp, record.key, record.value, record.headers, record.attributes))
        next_offset = offset + 1
    return completed


def build_batch(
    records: Iterable[RecordLike],
    *,
    base_offset: int = 0,
    compression: int = CompressionType.NONE,
    timestamp_type: int = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytes:
    """One magic-2 batch holding ``records``, as Kafka's ``MemoryRecordsBuilder`` would write it.

    Records without an offset take the next one (the first ``base_offset``); explicit offsets may leave
    gaps, as in compacted batches, but must increase. The base timestamp is the first record's, the max
    timestamp the largest; records without a timestamp get the current time.
    """
    items = complete_records(records, base_offset)
    if not items:
        raise ValueError("a record batch holds at least one record")
    base_timestamp = items[0].timestamp
    payload = b"".join(encode_record(r, r.offset - base_offset, r.timestamp - base_timestamp) for r in items)
    if compression:
        from odradek.protocol.compression import compress  # the codecs at the first compressed batch

        payload = compress(compression, payload)
    attributes = (
        CompressionType(compression)
        | (timestamp_type << 3)
        | (TRANSACTIONAL_FLAG if is_transactional else 0)
        | (CONTROL_FLAG if is_control else 0)
    )
    return encode_batch(
        payload,
        base_offset=base_offset,
        attributes=attributes,
        last_offset_delta=items[-1].offset - base_offset,
        base_timestamp=base_timestamp,
        max_timestamp=max(r.timestamp for r in items),
        records_count=len(items),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
    )


# --- control records --------------------------------------------------------------------------------------


class ControlRecordType(CodeEnum):
    """The ``type`` in a control record's key (Kafka's ControlRecordType)."""

    UNKNOWN = -1  # a type this broker does not know; readers skip such records
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2  # KRaft
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_MARKER_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch


def control_record_key(record_type: ControlRecordType) -> bytes:
    if record_type is ControlRecordType.UNKNOWN:
        raise ValueError("cannot write an UNKNOWN control record type")
    return _CONTROL_KEY.pack(CONTROL_RECORD_KEY_VERSION, record_type)


def parse_control_record_type(key: Bytes | None) -> ControlRecordType:
    """The type of a control record from its key; newer key versions keep the type where version 0 has it."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise InvalidRecordError(f"control record key must have at least {_CONTROL_KEY.size} bytes")
    version, type_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return ControlRecordType.UNKNOWN


class EndTransactionMarker(FrozenFields):
    """The COMMIT or ABORT a transaction coordinator writes to each partition a transaction touched."""

    __slots__ = _FIELDS = ("control_type", "coordinator_epoch")
    control_type: ControlRecordType
    coordinator_epoch: int

    def __init__(self, control_type: ControlRecordType, coordinator_epoch: int) -> None:
        if control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            raise ValueError(f"{control_type!r} is not a transaction marker type")
        self._set(control_type, coordinator_epoch)

    def to_record(self, timestamp: int | None = None) -> Record:
        value = _END_TXN_MARKER_VALUE.pack(END_TXN_MARKER_VERSION, self.coordinator_epoch)
        return Record(timestamp=timestamp, key=control_record_key(self.control_type), value=value)

    @classmethod
    def from_record(cls, record: Record) -> EndTransactionMarker:
        control_type = parse_control_record_type(record.key)
        if control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            raise InvalidRecordError(f"{control_type.name} control record is not a transaction marker")
        value = record.value
        if value is None or len(value) < _END_TXN_MARKER_VALUE.size:
            raise InvalidRecordError(f"end transaction marker value must have at least {_END_TXN_MARKER_VALUE.size} bytes")
        version, coordinator_epoch = _END_TXN_MARKER_VALUE.unpack_from(value)
        if version < 0:
            raise InvalidRecordError(f"invalid end transaction marker version {version}")
        return cls(control_type, coordinator_epoch)


def build_end_txn_marker_batch(
    marker: EndTransactionMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp: int | None = None,
) -> bytes:
    """The one-record transactional control batch Kafka's ``MemoryRecords.withEndTransactionMarker`` writes."""
    return build_batch(
        [marker.to_record(timestamp)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )
