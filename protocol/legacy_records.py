"""Magic 0 and 1 message sets (Kafka before 0.11), and their conversion to and from magic-2 batches.

The broker stores only magic-2 batches. Produce v0-v2 clients send message sets, which ``up_convert`` turns
into one batch (as Kafka 3.x's LogValidator does); fetch v0-v3 clients read message sets, which
``down_convert`` makes from stored batches (as Kafka's ``RecordsUtil.downConvert`` does).

Each message set entry (implementation docs, "Old message format")::

    offset: int64
    messageSize: int32
    crc: uint32         CRC-32 (zlib's, not CRC-32C) of magic..value
    magic: int8         0 or 1
    attributes: int8    bits 0-2 codec, bit 3 timestamp type (magic 1)
    timestamp: int64    magic 1 only
    key: int32 length (-1: null) + bytes
    value: int32 length (-1: null) + bytes

Compression wraps a whole message set into the value of one "wrapper" message with a null key, whose offset
is the offset of the last inner message. Inner offsets are absolute for magic 0 and relative (0, 1, ...) for
magic 1, so that brokers could assign offsets without recompressing.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterable, Iterator

from odradek.protocol.compression import compress, compression_type, decompress
from odradek.protocol.record_batch import (
    COMPRESSION_MASK,
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    CompressionType,
    CorruptRecordError,
    InvalidRecordError,
    TimestampType,
    UnsupportedCompressionTypeError,
    iter_batch_positions,
    read_batch_header,
)
from odradek.protocol.records import PlacedRecord, Record, RecordLike, build_batch, complete_records, iter_records_unchecked

Bytes = bytes | bytearray | memoryview

RECORD_OVERHEAD = {MAGIC_V0: 14, MAGIC_V1: 22}  # crc, magic, attributes, [timestamp], key and value lengths
_ENTRY_PREFIX = struct.Struct(">qi")  # offset, messageSize
_HEAD_SIZE = {MAGIC_V0: 6, MAGIC_V1: 14}  # crc, magic, attributes, [timestamp]: where the key's length starts
_MAGIC_AT = 4
_ATTRIBUTES_AT = 5
_TIMESTAMP_AT = 6
_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
_INT32 = struct.Struct(">i")
_NULL = _INT32.pack(-1)


class LegacyMessage:
    """A magic 0 or 1 message as stored: its offset, and its bytes from the CRC to the end of the value.

    Fields are read from the bytes when asked for, as Kafka's LegacyRecord reads its buffer, so a damaged
    message can still be looked at (``odradek dump-log`` prints the stored CRC and ``is_valid`` of what it
    cannot trust); ``check`` is the broker's strict reading. A magic-1 message opened from a compressed
    wrapper carries the wrapper's timestamp and type (Kafka's ``LegacyRecord(buffer, wrapperTimestamp,
    wrapperTimestampType)``): the type replaces its own, and under LogAppendTime so does the timestamp.
    """

    __slots__ = ("offset", "body", "wrapper")

    def __init__(self, offset: int, body: bytes, wrapper: tuple[int, TimestampType] | None = None) -> None:
        self.offset = offset
        self.body = body
        self.wrapper = wrapper

    @property
    def crc(self) -> int:
        crc: int = _CRC.unpack_from(self.body)[0]
        return crc

    @property
    def magic(self) -> int:
        return self.body[_MAGIC_AT]

    @property
    def attributes(self) -> int:
        return self.body[_ATTRIBUTES_AT]

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == MAGIC_V0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.wrapper is not None:
            return self.wrapper[1]
        return TimestampType((self.attributes & TIMESTAMP_TYPE_MASK) >> 3)

    @property
    def timestamp(self) -> int:
        if self.magic == MAGIC_V0:
            return NO_TIMESTAMP
        if self.wrapper is not None and self.wrapper[1] is TimestampType.LOG_APPEND_TIME:
            return self.wrapper[0]
        timestamp: int = _TIMESTAMP.unpack_from(self.body, _TIMESTAMP_AT)[0]
        return timestamp

    @property
    def is_valid(self) -> bool:
        """The stored CRC matches (Kafka's ``LegacyRecord.isValid``)."""
        return len(self.body) >= RECORD_OVERHEAD[MAGIC_V0] and zlib.crc32(self.body[_MAGIC_AT:]) == self.crc

    @property
    def key(self) -> bytes | None:
        return self._fields()[0]

    @property
    def value(self) -> bytes | None:
        return self._fields()[1]

    def _fields(self) -> tuple[bytes | None, bytes | None, int]:
        """Key, value, and where the value ends; a length that does not fit is CorruptRecordError."""
        key, pos = _read_bytes(self.body, _HEAD_SIZE[MAGIC_V1 if self.magic == MAGIC_V1 else MAGIC_V0])
        value, pos = _read_bytes(self.body, pos)
        return key, value, pos

    def check(self) -> None:
        """The broker's reading: a known magic, the whole overhead, a matching CRC, fields filling the message."""
        size = len(self.body)
        magic = self.magic
        if magic == MAGIC_V2:
            raise InvalidRecordError("a magic-2 record batch is not a message set entry")
        if magic not in RECORD_OVERHEAD:
            raise CorruptRecordError(f"invalid magic {magic} at offset {self.offset}")
        if size < RECORD_OVERHEAD[magic]:
            raise CorruptRecordError(f"message size {size} is less than the magic {magic} message overhead")
        if not self.is_valid:
            raise CorruptRecordError(f"message is corrupt (stored crc = {self.crc})")
        if (end := self._fields()[2]) != size:
            raise CorruptRecordError(f"message declares {size} bytes but its fields end {size - end} bytes early")


# --- parsing ----------------------------------------------------------------------------------------------


def iter_messages(buf: Bytes, *, partial_tail: bool = False, verify: bool = True) -> Iterator[LegacyMessage]:
    """The top-level messages of a message set, compressed wrappers as they are.

    ``verify`` checks each message as the broker must (``LegacyMessage.check``); without it only the framing
    is read, as Kafka's DataLogInputStream reads it. ``partial_tail`` ends the set quietly at a message cut
    short, as Kafka reads a compressed wrapper's inner messages; an entry declaring less than the smallest
    message is corrupt either way.
    """
    view = memoryview(buf)
    pos = 0
    while pos < len(view):
        left = len(view) - pos
        if left < LOG_OVERHEAD:
            if partial_tail:
                return
            raise CorruptRecordError(f"partial message: {left} bytes left at position {pos}")
        offset, size = _ENTRY_PREFIX.unpack_from(view, pos)
        if size < RECORD_OVERHEAD[MAGIC_V0]:
            raise CorruptRecordError(f"Record size is less than the minimum record overhead ({RECORD_OVERHEAD[MAGIC_V0]})")
        if LOG_OVERHEAD + size > left:
            if partial_tail:
                return
            raise CorruptRecordError(f"partial message: size {size} overruns the data at position {pos}")
        message = LegacyMessage(offset, bytes(view[pos + LOG_OVERHEAD : pos + LOG_OVERHEAD + size]))
        if verify:
            message.check()
        yield message
        pos += LOG_OVERHEAD + size


def _read_bytes(body: bytes, pos: int) -> tuple[bytes | None, int]:
    end = len(body)
    if pos + 4 > end:
        raise CorruptRecordError(f"message of {end} bytes ends inside the length field at byte {pos}")
    (length,) = _INT32.unpack_from(body, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"message field of {length} bytes at byte {pos - 4} overruns the {end}-byte message")
    return body[pos : pos + length], pos + length


def iter_deep(buf: Bytes) -> Iterator[LegacyMessage]:
    """Every message of a message set, checked, with compressed wrappers opened and offsets made absolute."""
    for message in iter_messages(buf):
        if message.compression:
            yield from open_wrapper(message, ensure_matching_magic=True, verify=True)
        else:
            yield message


def open_wrapper(wrapper: LegacyMessage, *, ensure_matching_magic: bool, verify: bool) -> Iterator[LegacyMessage]:
    """The inner messages of a compressed wrapper, as Kafka's legacy DeepRecordsIterator gives them.

    The whole set is decompressed first (magic-1 inner offsets are relative to the last one); a magic-1
    wrapper's offset of 0 (some librdkafka versions) means they are absolute already. The broker asks for
    inner messages of the wrapper's magic, each checked (``ensure_matching_magic``, ``verify``); the dump
    tool takes them as stored. A compressed inner message fails when its turn comes, as in Kafka.
    """
    magic = wrapper.magic
    if magic not in RECORD_OVERHEAD:
        raise InvalidRecordError(f"Invalid wrapper magic found in legacy deep record iterator {magic}")
    codec = compression_type(wrapper.compression)
    if codec is CompressionType.ZSTD:
        raise InvalidRecordError(f"Invalid wrapper compressionType found in legacy deep record iterator {magic}")
    compressed = wrapper.value
    if compressed is None:
        raise InvalidRecordError(f"Found invalid compressed record set with null value (magic = {magic})")
    stamp = (wrapper.timestamp, wrapper.timestamp_type)
    inner = []
    for message in iter_messages(decompress(codec, compressed, magic=magic), partial_tail=True, verify=verify):
        if ensure_matching_magic and message.magic != magic:
            raise InvalidRecordError(f"Compressed message magic {message.magic} does not match wrapper magic {magic}")
        if message.magic == MAGIC_V1:
            message.wrapper = stamp
        inner.append(message)
    if not inner:
        raise InvalidRecordError("Found invalid compressed record set with no inner records")
    base = 0
    if magic == MAGIC_V1 and wrapper.offset != 0:
        last_inner = inner[-1].offset
        if wrapper.offset < last_inner:
            raise InvalidRecordError(
                f"Found invalid wrapper offset in compressed v1 message set, wrapper offset '{wrapper.offset}' is "
                f"less than the last inner message offset '{last_inner}' and it is not zero."
            )
        base = wrapper.offset - last_inner
    for message in inner:
        if magic == MAGIC_V1:
            message.offset += base
        if message.compression:
            raise InvalidRecordError("Inner messages must not be compressed")
        yield message


# --- building ---------------------------------------------------------------------------------------------


def _encode_message(magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    fields = [bytes((magic, attributes))]
    if magic == MAGIC_V1:
        fields.append(struct.pack(">q", timestamp))
    for data in (key, value):
        fields.append(_NULL if data is None else _INT32.pack(len(data)) + bytes(data))
    body = b"".join(fields)
    return _CRC.pack(zlib.crc32(body)) + body


def _encode_entry(offset: int, message: bytes) -> bytes:
    return _ENTRY_PREFIX.pack(offset, len(message)) + message


def build_message_set(
    records: Iterable[RecordLike],
    *,
    magic: int,
    compression: int = CompressionType.NONE,
    timestamp_type: int = TimestampType.CREATE_TIME,
    base_offset: int = 0,
) -> bytes:
    """A magic 0 or 1 message set as Kafka's ``MemoryRecordsBuilder`` writes it.

    Uncompressed, every record is its own message; compressed, all records go into one wrapper. Offsets and
    timestamps are filled in as for ``records.build_batch``; magic 0 has no timestamps. Legacy messages have
    no headers, so records with headers are refused (``down_convert`` drops them, as Kafka does).
    """
    if magic not in RECORD_OVERHEAD:
        raise ValueError(f"message sets have magic 0 or 1, not {magic}")
    codec = CompressionType(compression)
    if codec is CompressionType.ZSTD:
        raise UnsupportedCompressionTypeError(f"zstd cannot be used with magic {magic} message sets")
    items = complete_records(records, base_offset)
    if not items:
        raise ValueError("a message set holds at least one message")
    if any(record.headers for record in items):
        raise ValueError(f"magic {magic} messages cannot carry record headers")
    type_bit = (timestamp_type << 3) if magic == MAGIC_V1 else 0
    if codec is CompressionType.NONE:
        return b"".join(
            _encode_entry(r.offset, _encode_message(magic, type_bit, r.timestamp, r.key, r.value)) for r in items
        )
    first_offset = items[0].offset
    inner = b"".join(
        _encode_entry(
            r.offset - first_offset if magic == MAGIC_V1 else r.offset,
            _encode_message(magic, type_bit, r.timestamp, r.key, r.value),
        )
        for r in items
    )
    wrapper_timestamp = max(r.timestamp for r in items)
    wrapper = _encode_message(magic, codec | type_bit, wrapper_timestamp, None, compress(codec, inner, magic=magic))
    return _encode_entry(items[-1].offset, wrapper)


# --- conversion -------------------------------------------------------------------------------------------


def up_convert(message_set: Bytes, *, compression: int | None = None, keep_offsets: bool = False) -> bytes:
    """One magic-2 batch holding every message of a legacy message set, as Kafka 3.x stores produce v0-v2.

    By default the records get offsets 0, 1, 2, ... (Kafka ignores the offsets old producers send; the
    broker assigns real ones with ``assign_offset_and_epoch``); ``keep_offsets`` keeps the messages' absolute
    offsets instead, which must then increase. The batch uses ``compression``, or by default the message
    set's own codec. Timestamps are kept (magic 0 has none: -1) and the batch is CreateTime; a broker with
    LogAppendTime stamps it afterwards with ``set_log_append_time``.

    Kafka's rules for the input apply: one magic throughout, and a compressed wrapper must be the only
    message (InvalidRecordError); bad CRCs and sizes raise CorruptRecordError.
    """
    shallow = list(iter_messages(message_set))
    if not shallow:
        raise InvalidRecordError("message set has no messages")
    magic = shallow[0].magic
    if any(message.magic != magic for message in shallow):
        raise InvalidRecordError(f"message magic differs from the first message's magic {magic}")
    codecs = [message.compression for message in shallow if message.compression]
    if codecs and len(shallow) > 1:
        raise InvalidRecordError("compressed outer message must be the only message of the set")
    messages = list(open_wrapper(shallow[0], ensure_matching_magic=True, verify=True)) if codecs else shallow
    if keep_offsets and any(b.offset <= a.offset for a, b in zip(messages, messages[1:])):
        raise InvalidRecordError("message offsets do not increase")
    records = [
        Record(message.offset if keep_offsets else None, message.timestamp, message.key, message.value)
        for message in messages
    ]
    target = (codecs[-1] if codecs else CompressionType.NONE) if compression is None else compression
    return build_batch(records, base_offset=messages[0].offset if keep_offsets else 0, compression=target)


def down_convert(batches: Bytes, magic: int, *, first_offset: int = 0) -> bytes:
    """Stored magic-2 batches as a magic 0 or 1 message set, for fetch v0-v3 (Kafka's ``RecordsUtil.downConvert``).

    Control batches are dropped, and so are record headers. A compressed batch becomes one wrapper with the
    same codec; an uncompressed one becomes one message per record, skipping records before
    ``first_offset`` (the fetch offset -- some librdkafka versions rely on it). Zstd batches cannot be
    expressed and raise UnsupportedCompressionTypeError (Kafka answers such fetches with
    UNSUPPORTED_COMPRESSION_TYPE). A partial batch at the end, normal in fetched data, is ignored.
    """
    view = memoryview(batches)
    parts = []
    for pos, _, _ in iter_batch_positions(view):
        header = read_batch_header(view, pos)
        if header.is_control:
            continue
        if header.compression == CompressionType.ZSTD:
            raise UnsupportedCompressionTypeError(f"zstd batches cannot be down-converted to magic {magic}")
        records: list[PlacedRecord] = []
        for r in iter_records_unchecked(view, pos, header):  # read_batch_header just checked the CRC
            assert r.offset is not None and r.timestamp is not None  # a decoded record carries both
            if header.compression or r.offset >= first_offset:
                records.append(PlacedRecord(r.offset, r.timestamp, r.key, r.value))
        if records:
            parts.append(
                build_message_set(
                    records,
                    magic=magic,
                    compression=header.compression,
                    timestamp_type=header.timestamp_type,
                    base_offset=records[0].offset,
                )
            )
    return b"".join(parts)
