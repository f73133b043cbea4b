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
from dataclasses import dataclass
from typing import Iterable, Iterator

from odradek.protocol.compression import CompressionType, compress, compression_type, decompress
from odradek.protocol.record_batch import (
    COMPRESSION_MASK,
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    CorruptRecordError,
    InvalidRecordError,
    TimestampType,
    UnsupportedCompressionTypeError,
    iter_batch_positions,
    read_batch_header,
)
from odradek.protocol.records import Record, RecordLike, build_batch, complete_records, iter_records_unchecked

Bytes = bytes | bytearray | memoryview

RECORD_OVERHEAD = {MAGIC_V0: 14, MAGIC_V1: 22}  # crc, magic, attributes, [timestamp], key and value lengths
_ENTRY_PREFIX = struct.Struct(">qi")  # offset, messageSize
_MESSAGE_HEAD = {MAGIC_V0: struct.Struct(">Ibb"), MAGIC_V1: struct.Struct(">Ibbq")}  # crc .. [timestamp]
_CRC = struct.Struct(">I")
_INT32 = struct.Struct(">i")
_NULL = _INT32.pack(-1)


@dataclass(slots=True)
class LegacyMessage:
    offset: int
    magic: int
    attributes: int
    timestamp: int  # NO_TIMESTAMP for magic 0
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == MAGIC_V0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType((self.attributes & TIMESTAMP_TYPE_MASK) >> 3)


# --- parsing ----------------------------------------------------------------------------------------------


def iter_messages(buf: Bytes, *, partial_tail: bool = False) -> Iterator[LegacyMessage]:
    """The top-level messages of a message set, compressed wrappers as they are; every CRC is checked.

    ``partial_tail`` ends the set quietly at a message cut short, as Kafka reads a compressed wrapper's
    inner messages (its DataLogInputStream ends where a whole message no longer fits).
    """
    view = memoryview(buf)
    pos = 0
    while pos < len(view):
        if partial_tail and _is_partial(view, pos):
            return
        message, pos = _parse_entry(view, pos)
        yield message


def _is_partial(view: memoryview, pos: int) -> bool:
    """Too few bytes left for the entry's offset and size, or for the message its (plausible) size declares."""
    left = len(view) - pos
    if left < LOG_OVERHEAD:
        return True
    size = _ENTRY_PREFIX.unpack_from(view, pos)[1]
    return size >= RECORD_OVERHEAD[MAGIC_V0] and LOG_OVERHEAD + size > left


def _parse_entry(view: memoryview, pos: int) -> tuple[LegacyMessage, int]:
    if len(view) - pos < LOG_OVERHEAD:
        raise CorruptRecordError(f"partial message: {len(view) - pos} bytes left at position {pos}")
    offset, size = _ENTRY_PREFIX.unpack_from(view, pos)
    if size < RECORD_OVERHEAD[MAGIC_V0]:
        raise CorruptRecordError(f"message size {size} is less than the minimum message overhead")
    start = pos + LOG_OVERHEAD
    end = start + size
    if end > len(view):
        raise CorruptRecordError(f"partial message: size {size} overruns the data at position {pos}")
    magic = view[start + 4]
    if magic == MAGIC_V2:
        raise InvalidRecordError("a magic-2 record batch is not a message set entry")
    if magic not in _MESSAGE_HEAD:
        raise CorruptRecordError(f"invalid magic {magic} at position {pos}")
    head = _MESSAGE_HEAD[magic]
    if size < RECORD_OVERHEAD[magic]:
        raise CorruptRecordError(f"message size {size} is less than the magic {magic} message overhead")
    crc, _, attributes, *timestamp = head.unpack_from(view, start)
    if zlib.crc32(view[start + 4 : end]) != crc:
        raise CorruptRecordError(f"message is corrupt (stored crc = {crc})")
    key, field_pos = _read_bytes(view, start + head.size, end)
    value, field_pos = _read_bytes(view, field_pos, end)
    if field_pos != end:
        raise CorruptRecordError(f"message declares {size} bytes but its fields end {end - field_pos} bytes early")
    message_timestamp = timestamp[0] if timestamp else NO_TIMESTAMP
    return LegacyMessage(offset, magic, attributes, message_timestamp, key, value), end


def _read_bytes(view: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError("message ends inside a length field")
    (length,) = _INT32.unpack_from(view, pos)
    pos += 4
    if length == -1:
        return None, pos
    if length < 0 or pos + length > end:
        raise CorruptRecordError(f"message field length {length} does not fit the message")
    return bytes(view[pos : pos + length]), pos + length


def iter_deep(buf: Bytes) -> Iterator[LegacyMessage]:
    """Every message of a message set with compressed wrappers opened, offsets made absolute.

    Follows Kafka's deep iterator: inner messages take the wrapper's timestamp type, and its timestamp when
    that type is LogAppendTime; a magic-1 wrapper's offset of 0 (some librdkafka versions) means the inner
    relative offsets are absolute.
    """
    for message in iter_messages(buf):
        if message.compression:
            yield from _open_wrapper(message)
        else:
            yield message


def _open_wrapper(wrapper: LegacyMessage) -> list[LegacyMessage]:
    codec = compression_type(wrapper.compression)
    if codec is CompressionType.ZSTD:
        raise InvalidRecordError("zstd cannot wrap a magic 0/1 message set")
    if wrapper.value is None:
        raise InvalidRecordError(f"compressed message set with null value (magic {wrapper.magic})")
    inner = list(iter_messages(decompress(codec, wrapper.value, magic=wrapper.magic), partial_tail=True))
    if not inner:
        raise InvalidRecordError("compressed message set with no inner messages")
    for message in inner:
        if message.magic != wrapper.magic:
            raise InvalidRecordError(f"inner message magic {message.magic} does not match wrapper magic {wrapper.magic}")
        if message.compression:
            raise InvalidRecordError("inner messages must not be compressed")
    if wrapper.magic == MAGIC_V0:
        return inner
    last_inner = inner[-1].offset
    if wrapper.offset != 0 and wrapper.offset < last_inner:
        raise InvalidRecordError(
            f"wrapper offset {wrapper.offset} is less than the last inner message offset {last_inner} and not zero"
        )
    base = wrapper.offset - last_inner if wrapper.offset != 0 else 0
    log_append_time = wrapper.timestamp_type is TimestampType.LOG_APPEND_TIME
    wrapper_type_bit = wrapper.attributes & TIMESTAMP_TYPE_MASK
    for message in inner:
        message.offset += base
        message.attributes = (message.attributes & ~TIMESTAMP_TYPE_MASK) | wrapper_type_bit
        if log_append_time:
            message.timestamp = wrapper.timestamp
    return inner


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
    if magic not in _MESSAGE_HEAD:
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
    broker assigns real ones with ``set_base_offset``); ``keep_offsets`` keeps the messages' absolute
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
    messages = _open_wrapper(shallow[0]) if codecs else shallow
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
        records = [
            Record(r.offset, r.timestamp, r.key, r.value)
            for r in iter_records_unchecked(view, pos, header)  # read_batch_header just checked the CRC
            if header.compression or r.offset >= first_offset
        ]
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
