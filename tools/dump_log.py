"""``odradek dump-log``: log segments, indexes and their consistency, line for line as Kafka 3.9's kafka-dump-log.sh.

Kafka's ``kafka.tools.DumpLogSegments`` is the reference: the same options, the same lines on stdout, the
same reports on stderr at the end, and the same leniency. It prints what is on disk, batches whose CRC
fails included (``isvalid: false``) with their records, so that it can be pointed at damaged segments.
Where Kafka's tool dies with an exception (a header it cannot read, records that do not decode), this one
stops there too, after the output so far (a line it was printing stays unfinished, as Kafka leaves it),
prints the error on stderr and exits with 1 -- without the final reports, which Kafka never reaches either.

Values are written as the JVM writes them: ``true``/``false``, ``OptionalLong.empty``, JSON as Jackson
writes it, and Kafka's final reports in the iteration order of the Scala hash maps that collect them.

Files are read with ``pread`` a batch at a time and never memory-mapped: the tool is often pointed at a
running broker's log directory, and a segment truncated under a mapping would kill it with SIGBUS.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import struct
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar, Union

from odradek.protocol.compression import CompressionType, compression_type
from odradek.protocol.java_hash import int32, java_string_hash, topic_partition_hash
from odradek.protocol.legacy_records import LegacyMessage, open_wrapper
from odradek.protocol.messages import data
from odradek.protocol.messages.coordinator_records import (
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    TRANSACTION_LOG_KEY,
    TRANSACTION_LOG_VALUE,
)
from odradek.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    RecordsError,
    TimestampType,
    compute_crc,
    parse_header,
)
from odradek.protocol.records import (
    ControlRecordType,
    EndTransactionMarker,
    Record,
    iter_records_unchecked,
    parse_control_record_type,
)
from odradek.protocol.schema import Array, DecodeError, F, Message, S, decode, snake_case
from odradek.storage.file_records import FileRecords, walk_entries
from odradek.storage.indexes import OffsetIndex, TimeIndex
from odradek.storage.producer_state import CorruptSnapshotError, read_snapshot

INT32_MAX = 2**31 - 1
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
HEADER_SIZE_UP_TO_MAGIC = 17  # offset, size, then a batch's leader epoch or a message's crc, then magic
MIN_MESSAGE_SIZE = 14  # LegacyRecord.RECORD_OVERHEAD_V0: the smallest entry a log may hold
BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"
STRING_DECODER = "org.apache.kafka.tools.api.StringDecoder"


class DumpError(Exception):
    """Where Kafka's DumpLogSegments dies with an exception; the message says what it hit."""


# --- values as the JVM prints them ----------------------------------------------------------------------


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _parse_long(text: str) -> int:
    """``Long.parseLong``, which Kafka applies to the part of a file name before its first dot."""
    if not re.fullmatch(r"[+-]?[0-9]+", text) or not -(2**63) <= int(text) < 2**63:
        raise DumpError(f'NumberFormatException: For input string: "{text}"')
    return int(text)


def _java_path(path: str) -> str:
    """A path as ``java.io.File`` prints it: repeated slashes collapsed, no trailing slash."""
    path = re.sub(r"/+", "/", path)
    return path[:-1] if len(path) > 1 and path.endswith("/") else path


def _absolute(path: str) -> str:
    """``File.getAbsolutePath``: a relative path put under the working directory, nothing else resolved."""
    if path.startswith("/"):
        return path
    return f"{os.getcwd()}/{path}" if path else os.getcwd()


def _codec_name(codec_id: int) -> str:
    """``CompressionType.name``; the ids Kafka does not know (5-7) are fatal, as ``forId`` throws."""
    try:
        return compression_type(codec_id).name.lower()
    except RecordsError:
        raise DumpError(f"IllegalArgumentException: Unknown compression type id: {codec_id}") from None


def _increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: sequences wrap from Int32 max back to 0."""
    if sequence > int32(INT32_MAX - increment):
        return int32(increment - (INT32_MAX - sequence) - 1)
    return int32(sequence + increment)


TIMESTAMP_TYPE_NAMES = {
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


# --- JSON as Kafka's generated JsonConverters and Jackson write it ------------------------------------------

Json = Union[None, bool, int, str, bytes, list["Json"], dict[str, "Json"]]

_JSON_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_JSON_ESCAPED = re.compile(r'[\x00-\x1f"\\]')


def _json_string(text: str) -> str:
    """Jackson escapes quotes, backslashes and control characters (``\\u00XX`` in upper case), nothing else."""
    return '"' + _JSON_ESCAPED.sub(lambda m: _JSON_SHORT_ESCAPES.get(m[0]) or f"\\u{ord(m[0]):04X}", text) + '"'


def to_json(node: Json) -> str:
    """``JsonNode.toString()``: compact, fields in insertion order, bytes in Base64 (Jackson's BinaryNode)."""
    if node is None:
        return "null"
    if isinstance(node, bool):
        return _java_bool(node)
    if isinstance(node, int):
        return str(node)
    if isinstance(node, str):
        return _json_string(node)
    if isinstance(node, bytes):
        return '"' + base64.b64encode(node).decode("ascii") + '"'
    if isinstance(node, list):
        return "[" + ",".join(map(to_json, node)) + "]"
    return "{" + ",".join(f"{_json_string(name)}:{to_json(value)}" for name, value in node.items()) + "}"


def message_json(fields: Iterable[F], version: int, data: Any) -> dict[str, Json]:
    """What Kafka's generated ``<Message>JsonConverter.write(message, version)`` builds from decoded data.

    The fields present at ``version``, in declaration order, named as in the spec with the first letter in
    lower case (``KRaftVersion`` becomes ``kRaftVersion``); uuids in Kafka's Base64 form.
    """
    return {
        f.name[:1].lower() + f.name[1:]: _field_json(f.type, version, data[snake_case(f.name)])
        for f in fields
        if version in f.versions
    }


def _field_json(kind: str | S | Array, version: int, value: Any) -> Json:
    if value is None:
        return None
    if isinstance(kind, S):
        return message_json(kind.fields, version, value)
    if isinstance(kind, Array):
        return [_field_json(kind.element, version, element) for element in value]
    if kind == "uuid":
        return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")
    if kind == "bytes":
        return bytes(value)
    return value


def _read_version(message: Message, version: int) -> int:
    """The declared version whose fields Kafka's generated reader takes for ``version``.

    Generated readers accept any version and read a field when the version is within the field's range,
    so a version past the newest reads as the newest and one below the oldest as the oldest.
    """
    assert message.valid.high is not None
    return min(max(version, message.valid.low), message.valid.high)


_VERSION = struct.Struct(">h")


# --- consumer protocol and KRaft control records (declared in protocol/messages/data.py from Kafka's specs) --

CONSUMER_PROTOCOL_SUBSCRIPTION = data.CONSUMER_PROTOCOL_SUBSCRIPTION
CONSUMER_PROTOCOL_ASSIGNMENT = data.CONSUMER_PROTOCOL_ASSIGNMENT

KRAFT_CONTROL_RECORDS = {
    ControlRecordType.SNAPSHOT_HEADER: ("SnapshotHeader", data.SNAPSHOT_HEADER_RECORD),
    ControlRecordType.SNAPSHOT_FOOTER: ("SnapshotFooter", data.SNAPSHOT_FOOTER_RECORD),
    ControlRecordType.KRAFT_VERSION: ("KRaftVersion", data.K_RAFT_VERSION_RECORD),
    ControlRecordType.KRAFT_VOTERS: ("KRaftVoters", data.VOTERS_RECORD),
}
"""The KRaft control records DumpLogSegments prints as JSON, by type: (label, declaration)."""


# --- Scala hash map order -------------------------------------------------------------------------------------


def _table_size_for(capacity: int) -> int:
    return min(1 << (max(capacity - 1, 4).bit_length() - 1) << 1, 1 << 30)


class ScalaHashOrder:
    """The iteration order of a Scala 2.13 ``mutable.HashMap`` or ``HashSet``, which Kafka's output follows.

    Entries sit in buckets by ``improved hash & (slots - 1)``, sorted within a bucket by improved hash
    (ties in insertion order). The table starts with 16 slots and doubles whenever a put or add -- of a new
    key or not -- would reach three quarters of them.
    """

    def __init__(self, hash_code: Callable[[Any], int]) -> None:
        self._hash_code = hash_code
        self._hashes: dict[Any, int] = {}  # key -> improved hash, in insertion order
        self._slots = 16

    def _improved_hash(self, key: Any) -> int:
        h = self._hash_code(key) & 0xFFFFFFFF
        return int32(h ^ (h >> 16))

    def add(self, key: Any) -> None:
        if len(self._hashes) + 1 >= int(self._slots * 0.75):
            self._slots *= 2
        self._hashes.setdefault(key, self._improved_hash(key))

    def add_set(self, keys: list[Any]) -> None:
        """``++=`` of an immutable Set: a size hint first; sets of more than four are then added without
        growing the table, smaller ones (Set1..Set4) one ``add`` at a time."""
        self._slots = max(self._slots, _table_size_for(int((len(keys) + 1) / 0.75)))
        for key in keys:
            if len(keys) <= 4:
                self.add(key)
            else:
                self._hashes.setdefault(key, self._improved_hash(key))

    def __iter__(self) -> Iterator[Any]:
        mask = self._slots - 1
        return iter(sorted(self._hashes, key=lambda key: (self._hashes[key] & mask, self._hashes[key])))


class PairsByFile:
    """One of DumpLogSegments' reports: (a, b) pairs per file, in a Scala map keyed by absolute path.

    ``newest_first`` reports hold an immutable List (new pairs prepended) put back into the map every
    time; the others an ArrayBuffer (appended) put into the map once, when created.
    """

    def __init__(self, *, newest_first: bool) -> None:
        self._newest_first = newest_first
        self._order = ScalaHashOrder(java_string_hash)
        self._pairs: dict[str, list[tuple[int, int]]] = {}

    def add(self, path: str, pair: tuple[int, int]) -> None:
        pairs = self._pairs.setdefault(path, [])
        if self._newest_first:
            pairs.insert(0, pair)
            self._order.add(path)
        else:
            if not pairs:
                self._order.add(path)
            pairs.append(pair)

    def items(self) -> Iterator[tuple[str, list[tuple[int, int]]]]:
        return ((path, self._pairs[path]) for path in self._order)


# --- records and batches in a file ------------------------------------------------------------------------------


@dataclass(slots=True)
class ShownRecord:
    """A record of a magic-2 batch or a legacy message, with what kafka-dump-log prints of it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    sequence: int = NO_SEQUENCE
    header_keys: list[str] = field(default_factory=list)
    legacy_check: tuple[bool, int] | None = None  # (isValid, stored crc) of a magic 0/1 message

    @property
    def key_size(self) -> int:
        return -1 if self.key is None else len(self.key)

    @property
    def value_size(self) -> int:
        return -1 if self.value is None else len(self.value)


@dataclass(slots=True)
class RecordBatch:
    """A batch of magic 2 or more, as Kafka's DefaultFileChannelRecordBatch reads it."""

    data: bytes  # the batch; when it is shorter than a batch header, followed by the file's next bytes
    size: int
    header: BatchHeader = field(init=False)

    def __post_init__(self) -> None:
        self.header = parse_header(self.data)

    @property
    def magic(self) -> int:
        return self.header.magic

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def timestamp_type(self) -> str:
        return TIMESTAMP_TYPE_NAMES[TimestampType(self.header.timestamp_type)]

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def codec(self) -> int:
        return self.header.compression

    @property
    def checksum(self) -> int:
        return self.header.crc

    @property
    def is_valid(self) -> bool:
        return self.size >= HEADER_SIZE and compute_crc(self.data, 0, self.size) == self.header.crc

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    def describe(self) -> str:
        h = self.header
        last_sequence = NO_SEQUENCE if h.base_sequence == NO_SEQUENCE else _increment_sequence(h.base_sequence, h.last_offset_delta)
        delete_horizon = h.base_timestamp if h.has_delete_horizon else None
        return (
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {last_sequence} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {_java_bool(h.is_transactional)} isControl: {_java_bool(h.is_control)} "
            f"deleteHorizonMs: {_optional_long(delete_horizon)}"
        )

    def records(self) -> Iterator[ShownRecord]:
        h = self.header
        if self.size < HEADER_SIZE:
            raise DumpError(f"record batch of {self.size} bytes is smaller than a batch header ({HEADER_SIZE})")
        if h.records_count == 0:  # Kafka iterates nothing, whatever the batch holds
            return
        for record in iter_records_unchecked(memoryview(self.data)[: self.size], 0, h):
            assert record.offset is not None and record.timestamp is not None  # a decoded record carries both
            offset_delta = record.offset - h.base_offset
            sequence = _increment_sequence(h.base_sequence, offset_delta) if h.base_sequence >= 0 else NO_SEQUENCE
            header_keys = [key.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for key, _ in record.headers]
            yield ShownRecord(record.offset, record.timestamp, record.key, record.value, sequence, header_keys)


@dataclass(slots=True)
class LegacyBatch:
    """A top-level magic 0/1 message: one record, or a compressed wrapper around several. Read as stored,
    damaged or not: the CRC is reported (``isvalid``), never enforced."""

    message: LegacyMessage

    @property
    def magic(self) -> int:
        return self.message.magic

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + len(self.message.body)

    @property
    def last_offset(self) -> int:
        return self.message.offset

    @property
    def timestamp_type(self) -> str:
        return TIMESTAMP_TYPE_NAMES[self.message.timestamp_type]

    @property
    def max_timestamp(self) -> int:
        return self.message.timestamp

    @property
    def codec(self) -> int:
        return self.message.compression

    @property
    def checksum(self) -> int:
        return self.message.crc

    @property
    def is_valid(self) -> bool:
        return self.message.is_valid

    is_control = False

    def describe(self) -> str:
        return f"offset: {self.message.offset}"

    def records(self) -> Iterator[ShownRecord]:
        if self.message.compression == CompressionType.NONE:
            inner: Iterable[LegacyMessage] = (self.message,)
        else:
            inner = open_wrapper(self.message, ensure_matching_magic=False, verify=False)
        for message in inner:
            yield ShownRecord(message.offset, message.timestamp, message.key, message.value, legacy_check=(message.is_valid, message.crc))


FileBatch = RecordBatch | LegacyBatch
_FILE_ENTRY = struct.Struct(">qi")  # offset (a batch's base offset), size
_FILE_ENTRY_UP_TO_MAGIC = struct.Struct(">qi4xb")


class LogFile:
    """A segment as Kafka's FileRecords reads it, through the one walk over segment files (never mapped)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = FileRecords.open(Path(path), writable=False)
        self.size = self._file.size

    def __enter__(self) -> LogFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def __str__(self) -> str:
        return f"FileRecords(size={self.size}, file={self.path}, start=0, end={self.size})"

    def slice_end(self, position: int, size: int) -> int:
        """The end of ``FileRecords.slice(position, size)``, refused where Kafka refuses it."""
        if position < 0:
            raise DumpError(f"IllegalArgumentException: Invalid position: {position} in read from {self}")
        if position > self.size:
            raise DumpError(f"IllegalArgumentException: Slice from position {position} exceeds end position of {self}")
        if size < 0:
            raise DumpError(f"IllegalArgumentException: Invalid size: {size} in read from {self}")
        return min(position + size, self.size)

    def batches(self, start: int, end: int) -> Iterator[FileBatch]:
        """Kafka's FileLogInputStream over ``[start, end)``: the entries that fit, magic < 2 read as legacy
        messages; an entry too small to be one is fatal, a partial one at the end just ends the walk."""
        position = start
        for position, batch in walk_entries(self._file.read, start, end, min_size=MIN_MESSAGE_SIZE + LOG_OVERHEAD, whole=True, entry=self._entry):
            yield batch
            position += batch.size
        # The walk stops quietly at an entry too small to be one; Kafka's stream fails there, if it got that far.
        if position < end - HEADER_SIZE_UP_TO_MAGIC:
            _, size, _ = _FILE_ENTRY_UP_TO_MAGIC.unpack(self._file.read(position, HEADER_SIZE_UP_TO_MAGIC))
            if size < MIN_MESSAGE_SIZE:
                raise DumpError(
                    f"CorruptRecordException: Found record size {size} smaller than minimum record overhead "
                    f"({MIN_MESSAGE_SIZE}) in file {self.path}."
                )

    def _entry(self, position: int, total: int, buf: bytes, at: int) -> tuple[int, FileBatch]:
        offset, size, magic = _FILE_ENTRY_UP_TO_MAGIC.unpack_from(buf, at)
        if magic < MAGIC_V2:
            return position, LegacyBatch(LegacyMessage(offset, buf[at + LOG_OVERHEAD : at + total]))
        if len(buf) - at >= HEADER_SIZE:
            return position, RecordBatch(buf[at : at + max(total, HEADER_SIZE)], total)
        data = self._file.read(position, HEADER_SIZE)  # a batch shorter than its header: Kafka reads on
        if len(data) < HEADER_SIZE:
            raise DumpError(
                f"EOFException: Failed to read `record batch header` from file channel of {self.path}. Expected "
                f"to read {HEADER_SIZE} bytes, but reached end of file after reading {len(data)} bytes. "
                f"Started read from position {position}."
            )
        return position, RecordBatch(data, total)


# --- indexes --------------------------------------------------------------------------------------------------


AnyIndex = TypeVar("AnyIndex", OffsetIndex, TimeIndex)


def _open_index(kind: type[AnyIndex], path: str, base_offset: int) -> AnyIndex:
    """An index as Kafka opens it read-only for the dump: every whole entry in the file counts, the zeroed ones
    at the end of a preallocated (active) index included."""
    return kind(Path(path), base_offset, 0, writable=False)


def _check_index_length(index: OffsetIndex | TimeIndex, kind: str) -> None:
    if index.size_in_bytes % index.ENTRY.size:
        raise DumpError(
            f"CorruptIndexException: {kind} {_absolute(str(index.path))} is corrupt, found {index.size_in_bytes} "
            f"bytes which is neither positive nor a multiple of {index.ENTRY.size}"
        )


def sanity_check_offset_index(index: OffsetIndex) -> None:
    """Kafka's OffsetIndex.sanityCheck, with its messages (the broker's own check is stricter)."""
    if index.entries and index.last_offset < index.base_offset:
        raise DumpError(
            f"CorruptIndexException: Corrupt index found, index file {_absolute(str(index.path))} has non-zero size "
            f"but the last offset is {index.last_offset} which is less than the base offset {index.base_offset}"
        )
    _check_index_length(index, "Index file")


def sanity_check_time_index(index: TimeIndex) -> None:
    """Kafka's TimeIndex.sanityCheck, with its messages."""
    if index.entries:
        last_timestamp, last_offset = index.last_entry
        first_timestamp = index.entry(0)[0]
        path = _absolute(str(index.path))
        if last_timestamp < first_timestamp:
            raise DumpError(
                f"CorruptIndexException: Corrupt time index found, time index file ({path}) has non-zero "
                f"size but the last timestamp is {last_timestamp} which is less than the first timestamp "
                f"{first_timestamp}"
            )
        if last_offset < index.base_offset:
            raise DumpError(
                f"CorruptIndexException: Corrupt time index found, time index file ({path}) has non-zero "
                f"size but the last offset is {last_offset} which is less than the first offset {index.base_offset}"
            )
    _check_index_length(index, "Time index file")


_ABORTED_TXN = struct.Struct(">hqqqq")  # version, producerId, firstOffset, lastOffset, lastStableOffset


# --- what records say: key and value parsers ------------------------------------------------------------------

Parsed = tuple[str | None, str | None]
MessageParser = Callable[[ShownRecord], Parsed]


def _string_decoder(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _number_decoder(layout: struct.Struct) -> Callable[[bytes], str]:
    def decode_number(data: bytes) -> str:
        if len(data) < layout.size:
            raise DumpError(f"BufferUnderflowException: {len(data)} bytes are too few for a {layout.size}-byte number")
        return str(layout.unpack_from(data)[0])

    return decode_number


DECODERS: dict[str, Callable[[bytes], str]] = {
    STRING_DECODER: _string_decoder,
    "org.apache.kafka.tools.api.LongDecoder": _number_decoder(struct.Struct(">q")),
    "org.apache.kafka.tools.api.IntegerDecoder": _number_decoder(struct.Struct(">i")),
}
"""The decoder classes of ``--key-decoder-class``/``--value-decoder-class`` this tool can honour."""

DEPRECATED_DECODERS = {
    f"kafka.serializer.{name}": f"org.apache.kafka.tools.api.{name}" for name in ("StringDecoder", "LongDecoder", "IntegerDecoder")
}


def decoder_parser(key_decoder: Callable[[bytes], str], value_decoder: Callable[[bytes], str]) -> MessageParser:
    """DumpLogSegments' DecoderMessageParser: each of key and value decoded when present."""

    def parse(record: ShownRecord) -> Parsed:
        key = None if record.key is None else key_decoder(record.key)
        return key, None if record.value is None else value_decoder(record.value)

    return parse


GROUP_RECORD_TYPES: dict[int, tuple[Message, Message]] = {
    0: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    1: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    2: (GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
}
"""__consumer_offsets records by the type (version) at the front of their key, as GroupCoordinatorRecordSerde
reads them. Types 3 and up are KIP-848 consumer group records, which odradek has no declarations for."""


class _SkippedRecord(Exception):
    """A __consumer_offsets record the offsets decoder reports as an error and skips."""


def _coordinator_version(data: bytes, what: str) -> int:
    if len(data) < _VERSION.size:
        raise _SkippedRecord(f"Could not read version from {what}'s buffer.")
    return _VERSION.unpack_from(data)[0]


def _coordinator_message(message: Message, version: int, data: bytes, what: str) -> dict[str, Json]:
    read_as = _read_version(message, version)
    try:
        value, _ = decode(message, read_as, data, _VERSION.size, exact=False)
    except DecodeError as e:
        raise _SkippedRecord(f"Could not read record with version {version} from {what}'s buffer due to: {e}.") from None
    return message_json(message.fields, read_as, value)


def parse_offsets_record(record: ShownRecord) -> Parsed:
    """``--offsets-decoder`` (DumpLogSegments.OffsetsMessageParser): key and value as JSON, tagged with the
    key's record type and the value's version; a tombstone as ``<DELETE>``."""
    if record.key is None:
        raise DumpError(
            f"Failed to decode message at offset {record.offset} using offset topic decoder (message had a missing key)"
        )
    try:
        record_type = _coordinator_version(record.key, "key")
        if record_type not in GROUP_RECORD_TYPES:
            return f"Unknown record type {record_type} at offset {record.offset}, skipping.", None
        key_message, value_message = GROUP_RECORD_TYPES[record_type]
        key = to_json({"type": str(record_type), "data": _coordinator_message(key_message, record_type, record.key, "key")})
        if record.value is None:
            return key, "<DELETE>"
        version = _coordinator_version(record.value, "value")
        data = _coordinator_message(value_message, version, record.value, "value")
    except _SkippedRecord as e:
        return f"Error at offset {record.offset}, skipping. {e}", None
    if value_message is GROUP_METADATA_VALUE and data["protocolType"] == "consumer":
        _expand_consumer_protocol(data)
    return key, to_json({"version": str(version), "data": data})


def _expand_consumer_protocol(group: dict[str, Json]) -> None:
    """For "consumer" groups Kafka shows each member's subscription and assignment decoded (each starts with
    its own version), keeping the raw bytes where they do not decode."""
    members = group["members"]
    assert isinstance(members, list)  # message_json of a GroupMetadataValue
    for member in members:
        assert isinstance(member, dict)
        for name, message in (("subscription", CONSUMER_PROTOCOL_SUBSCRIPTION), ("assignment", CONSUMER_PROTOCOL_ASSIGNMENT)):
            raw = member[name]
            if not isinstance(raw, bytes) or len(raw) < _VERSION.size:
                continue
            read_as = _read_version(message, _VERSION.unpack_from(raw)[0])
            try:
                decoded, _ = decode(message, read_as, raw, _VERSION.size, exact=False)
            except DecodeError:
                continue
            member[name] = message_json(message.fields, read_as, decoded)


TRANSACTION_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence")
"""Kafka's TransactionState names by id, as TransactionLogValue.TransactionStatus stores them."""


def parse_transaction_record(record: ShownRecord) -> Parsed:
    """``--transaction-log-decoder`` (Kafka 3.9's TransactionLog.formatRecordKeyAndValue)."""
    if record.key is None or len(record.key) < _VERSION.size:
        raise DumpError(f"transaction log record at offset {record.offset} has no key version")
    key_version = _VERSION.unpack_from(record.key)[0]
    if key_version not in TRANSACTION_LOG_KEY.valid:
        return f"unknown::version={key_version}", None
    key, _ = decode(TRANSACTION_LOG_KEY, key_version, record.key, _VERSION.size, exact=False)
    key_text = f"transaction_metadata::transactionalId={key.transactional_id}"
    if record.value is None:
        return key_text, "<DELETE>"
    if len(record.value) < _VERSION.size:
        raise DumpError(f"transaction log value at offset {record.offset} has no version")
    version = _VERSION.unpack_from(record.value)[0]
    if version not in TRANSACTION_LOG_VALUE.valid:
        raise DumpError(f"IllegalStateException: Unknown version {version} from the transaction log message value")
    value, _ = decode(TRANSACTION_LOG_VALUE, version, record.value, _VERSION.size, exact=False)
    if not 0 <= value.transaction_status < len(TRANSACTION_STATES):
        raise DumpError(
            f"IllegalStateException: Unknown transaction state id {value.transaction_status} from the transaction status message"
        )
    state = TRANSACTION_STATES[value.transaction_status]
    # TransactionMetadata keeps its partitions in a Scala mutable.HashSet, filled topic by topic.
    partitions = ScalaHashOrder(lambda tp: topic_partition_hash(*tp))
    if state != "Empty":
        if value.transaction_partitions is None:
            raise DumpError(f"NullPointerException: {state} transaction at offset {record.offset} has null partitions")
        for topic in value.transaction_partitions:
            partitions.add_set(list(dict.fromkeys((topic.topic, partition) for partition in topic.partition_ids)))
    partitions_text = ",".join(f"{topic}-{partition}" for topic, partition in partitions)
    return key_text, (
        f"producerId:{value.producer_id},producerEpoch:{value.producer_epoch},state={state},"
        f"partitions=[{partitions_text}],txnLastUpdateTimestamp={value.transaction_last_update_timestamp_ms},"
        f"txnTimeoutMs={value.transaction_timeout_ms}"
    )


def describe_control_record(record: ShownRecord) -> str:
    """What DumpLogSegments appends for a record of a control batch."""
    control_type = parse_control_record_type(record.key)
    assert record.key is not None
    type_id = _VERSION.unpack_from(record.key, 2)[0]
    if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        marker = EndTransactionMarker.from_record(Record(key=record.key, value=record.value))
        return f" endTxnMarker: {marker.control_type.name} coordinatorEpoch: {marker.coordinator_epoch}"
    if control_type in KRAFT_CONTROL_RECORDS:
        label, message = KRAFT_CONTROL_RECORDS[control_type]
        if record.value is None:
            raise DumpError(f"NullPointerException: {label} control record at offset {record.offset} has no value")
        value, _ = decode(message, 0, record.value, exact=False)
        return f" {label} {to_json(message_json(message.fields, _read_version(message, value.version), value))}"
    return f" controlType: {control_type.name}({type_id})"


# --- the tool ------------------------------------------------------------------------------------------------


def _split_files(files: str) -> list[str]:
    """``String.split(",")``: trailing empty strings dropped, unless nothing was split at all."""
    parts = files.split(",")
    if len(parts) == 1:
        return parts
    while parts and not parts[-1]:
        parts.pop()
    return parts


@dataclass(frozen=True)
class Report:
    heading: str
    line: str
    newest_first: bool


REPORTS = {
    "index_mismatches": Report("Mismatches in :{path}", "  Index offset: {0}, log offset: {1}", newest_first=True),
    "timestamp_mismatches": Report(
        "Found timestamp mismatch in :{path}", "  Index timestamp: {0}, log timestamp: {1}", newest_first=False
    ),
    "out_of_order_timestamps": Report(
        "Found out of order timestamp in :{path}", "  Index timestamp: {0}, Previously indexed timestamp: {1}", newest_first=False
    ),
    "offsets_not_found": Report(
        "The following indexed offsets are not found in the log.", "Indexed offset: {0}, found log offset: {1}", newest_first=False
    ),
    "non_consecutive_offsets": Report("Non-consecutive offsets in {path}", "  {0} is followed by {1}", newest_first=True),
}
"""The reports DumpLogSegments prints on stderr after all files, in this order."""


class DumpLogSegments:
    """One run of the tool over ``args.files``."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.out = out
        self.err = err
        decoder_given = args.value_decoder_class is not None or args.key_decoder_class is not None
        self.print_contents = args.print_data_log or args.offsets_decoder or args.transaction_log_decoder or decoder_given
        self.deep_iteration = args.deep_iteration or self.print_contents
        self.reports = {name: PairsByFile(newest_first=report.newest_first) for name, report in REPORTS.items()}

    def run(self) -> None:
        handlers: dict[str, Callable[[str], None]] = {
            ".log": self.dump_log,
            ".checkpoint": self.dump_log,
            ".index": self.dump_index,
            ".timeindex": self.dump_time_index,
            ".snapshot": self.dump_producer_snapshot,
            ".txnindex": self.dump_transaction_index,
        }
        for file in _split_files(self.args.files):
            path = _java_path(file)
            self.out.write(f"Dumping {path}\n")
            name = os.path.basename(path)
            if "." not in name:  # Kafka takes the suffix from the last dot without looking for one
                raise DumpError(f"StringIndexOutOfBoundsException: begin -1, end {len(name)}, length {len(name)}")
            handler = handlers.get(name[name.rfind(".") :])
            if handler is None:
                self.err.write(f"Ignoring unknown file {path}\n")
            else:
                handler(path)
        for name, report in REPORTS.items():
            for path, pairs in self.reports[name].items():
                self.err.write(report.heading.format(path=path) + "\n")
                for pair in pairs:
                    self.err.write(report.line.format(*pair) + "\n")

    # -- .log and .checkpoint -------------------------------------------------------------------------------------

    def message_parser(self) -> MessageParser:
        """Built per log file, as Kafka builds it (so a deprecated decoder name is reported for each)."""
        if self.args.offsets_decoder:
            return parse_offsets_record
        if self.args.transaction_log_decoder:
            return parse_transaction_record
        value_decoder = self._decoder(self.args.value_decoder_class)
        return decoder_parser(self._decoder(self.args.key_decoder_class), value_decoder)

    def _decoder(self, class_name: str | None) -> Callable[[bytes], str]:
        class_name = class_name or STRING_DECODER
        if class_name in DEPRECATED_DECODERS:
            replacement = DEPRECATED_DECODERS[class_name]
            self.out.write(f"{class_name} is deprecated. Please use {replacement} instead\n")
            class_name = replacement
        if class_name not in DECODERS:
            raise DumpError(f"decoder class {class_name} is not available; odradek offers {', '.join(DECODERS)}")
        return DECODERS[class_name]

    def dump_log(self, path: str) -> None:
        parser = self.message_parser()  # Kafka builds it first: deprecation notices come before the header
        name = os.path.basename(path)
        if name.endswith(".log"):
            self.out.write(f"Log starting offset: {_parse_long(name.split('.')[0])}\n")
        elif name == BOOTSTRAP_SNAPSHOT:
            self.out.write("KRaft bootstrap snapshot\n")
        else:  # <end offset, 20 digits>-<epoch, 10 digits>.checkpoint
            self.out.write(f"Snapshot end offset: {_parse_long(name[:20])}, epoch: {_parse_long(name[21:31])}\n")
        with LogFile(path) as log:
            end = log.slice_end(0, self.args.max_bytes)
            valid_bytes = 0
            last_offset = -1
            for batch in log.batches(0, end):
                self._print_batch(batch, valid_bytes)
                if self.deep_iteration:
                    for record in batch.records():
                        if last_offset != -1 and record.offset != last_offset + 1:
                            self.reports["non_consecutive_offsets"].add(_absolute(path), (last_offset, record.offset))
                        last_offset = record.offset
                        self._print_record(batch, record, parser)
                valid_bytes += batch.size
            trailing = end - valid_bytes
            if trailing > 0 and self.args.max_bytes == INT32_MAX:
                self.out.write(f"Found {trailing} invalid bytes at the end of {name}\n")

    def _print_batch(self, batch: FileBatch, position: int) -> None:
        self.out.write(batch.describe())
        self.out.write(
            f" position: {position} {batch.timestamp_type}: {batch.max_timestamp} size: {batch.size} "
            f"magic: {batch.magic} compresscodec: {_codec_name(batch.codec)} crc: {batch.checksum} "
            f"isvalid: {_java_bool(batch.is_valid)}\n"
        )

    def _print_record(self, batch: FileBatch, record: ShownRecord, parser: MessageParser) -> None:
        """Written in pieces, as Kafka prints them, so that a failure leaves the line where Kafka leaves it."""
        write = self.out.write
        prefix = "| "
        if not self.args.skip_record_metadata:
            write(
                f"| offset: {record.offset} {batch.timestamp_type}: {record.timestamp} "
                f"keySize: {record.key_size} valueSize: {record.value_size}"
            )
            prefix = " "
            if batch.magic >= MAGIC_V2:
                write(f" sequence: {record.sequence} headerKeys: [{','.join(record.header_keys)}]")
            if record.legacy_check is not None:
                valid, crc = record.legacy_check
                write(f" isValid: {_java_bool(valid)} crc: {crc}}}")  # the stray brace is Kafka's
            if batch.is_control:
                write(describe_control_record(record))
        if self.print_contents and not batch.is_control:
            key, payload = parser(record)
            if key is not None:
                write(f"{prefix}key: {key}")
            if payload is not None:
                write(f" payload: {payload}")
        write("\n")

    # -- indexes ------------------------------------------------------------------------------------------------

    def _segment_files(self, path: str) -> tuple[str, int]:
        """(the segment's path without suffix, its base offset) for an index file of it."""
        stem = os.path.basename(path).split(".")[0]
        return f"{os.path.dirname(_absolute(path))}/{stem}", _parse_long(stem)

    def dump_index(self, path: str) -> None:
        segment, base_offset = self._segment_files(path)
        with LogFile(segment + ".log") as log:
            index = _open_index(OffsetIndex, path, base_offset)
            index_path = _absolute(path)
            if index.entries == 0:
                self.out.write(f"{path} is empty.\n")
                return
            if self.args.index_sanity_check:
                sanity_check_offset_index(index)
                self.out.write(f"{path} passed sanity check.\n")
                return
            for n in range(index.entries):
                relative, position = index.entry(n)
                offset = base_offset + relative
                if offset == base_offset and n > 0:  # the zeroed, unused tail of a preallocated index
                    return
                first = next(log.batches(position, log.slice_end(position, self.args.max_message_size)), None)
                if first is None:
                    raise DumpError(
                        f"NoSuchElementException: no complete batch at position {position} within "
                        f"{self.args.max_message_size} bytes (--max-message-size) of {log.path}"
                    )
                if first.last_offset != offset:
                    self.reports["index_mismatches"].add(index_path, (offset, first.last_offset))
                if not self.args.verify_index_only:
                    self.out.write(f"offset: {offset} position: {position}\n")

    def dump_time_index(self, path: str) -> None:
        segment, base_offset = self._segment_files(path)
        with LogFile(segment + ".log") as log:
            index = _open_index(OffsetIndex, segment + ".index", base_offset)
            time_index = _open_index(TimeIndex, path, base_offset)
            time_index_path = _absolute(path)
            if self.args.index_sanity_check:
                sanity_check_time_index(time_index)
                self.out.write(f"{path} passed sanity check.\n")
                return
            previous = NO_TIMESTAMP
            for n in range(time_index.entries):
                timestamp, relative = time_index.entry(n)
                offset = base_offset + relative
                if offset == base_offset and n > 0:
                    return
                position = index.lookup(offset)[1]
                batches = log.batches(position, log.slice_end(position, INT32_MAX))
                batch = next((b for b in batches if b.last_offset >= offset), None)
                if batch is None or batch.last_offset != offset:
                    found = -1 if batch is None else batch.last_offset
                    self.reports["offsets_not_found"].add(time_index_path, (offset, found))
                else:
                    max_timestamp = max([NO_TIMESTAMP, *(record.timestamp for record in batch.records())])
                    if max_timestamp != timestamp:
                        self.reports["timestamp_mismatches"].add(time_index_path, (timestamp, max_timestamp))
                    if previous >= timestamp:
                        self.reports["out_of_order_timestamps"].add(time_index_path, (timestamp, previous))
                if not self.args.verify_index_only:
                    self.out.write(f"timestamp: {timestamp} offset: {offset}\n")
                previous = timestamp

    # -- producer snapshots and transaction indexes ----------------------------------------------------------------

    def dump_producer_snapshot(self, path: str) -> None:
        try:
            entries = read_snapshot(Path(path))
        except CorruptSnapshotError as e:
            self.err.write(f"{e}\n")
            return
        for entry in entries:
            line = (
                f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
                f"coordinatorEpoch: {entry.coordinator_epoch} "
                f"currentTxnFirstOffset: {_optional_long(entry.current_txn_first_offset)} "
                f"lastTimestamp: {entry.last_timestamp} "
            )
            if entry.batches:
                batch = entry.batches[0]
                line += (
                    f"firstSequence: {batch.first_seq} lastSequence: {batch.last_seq} lastOffset: {batch.last_offset} "
                    f"offsetDelta: {batch.offset_delta} timestamp: {batch.timestamp}"
                )
            self.out.write(line + "\n")

    def dump_transaction_index(self, path: str) -> None:
        """Aborted transactions; Kafka creates a missing index (empty), so a missing one prints nothing."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        for position in range(0, len(data) - _ABORTED_TXN.size + 1, _ABORTED_TXN.size):
            version, producer_id, first_offset, last_offset, last_stable_offset = _ABORTED_TXN.unpack_from(data, position)
            if version > 0:
                raise DumpError(
                    f"KafkaException: Unexpected aborted transaction version {version} in transaction index "
                    f"{_absolute(path)}, current version is 0"
                )
            self.out.write(
                f"version: {version} producerId: {producer_id} firstOffset: {first_offset} "
                f"lastOffset: {last_offset} lastStableOffset: {last_stable_offset}\n"
            )


# --- command line ------------------------------------------------------------------------------------------------


def _java_int(text: str) -> int:
    value = int(text)
    if not -(2**31) <= value <= INT32_MAX:
        raise argparse.ArgumentTypeError(f"{text} is not a 32-bit integer")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--files", required=True, metavar="file1,file2,...",
                        help="REQUIRED: the comma separated list of data and index log files to be dumped")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print the messages' content (implied by any decoder option)")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="iterate the records inside batches (implied by --print-data-log)")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="only verify the index against the log, without printing its content")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only run the sanity check a broker runs on startup to decide whether to rebuild an index")
    parser.add_argument("--max-message-size", type=_java_int, default=DEFAULT_MAX_MESSAGE_SIZE, metavar="size",
                        help="size of the largest message (default: %(default)s)")
    parser.add_argument("--max-bytes", type=_java_int, default=INT32_MAX, metavar="size",
                        help="read at most this many bytes of each .log file")
    parser.add_argument("--value-decoder-class", nargs="?", const=STRING_DECODER, metavar="class",
                        help=f"decoder for values: one of {', '.join(DECODERS)} (or their kafka.serializer names)")
    parser.add_argument("--key-decoder-class", nargs="?", const=STRING_DECODER, metavar="class",
                        help="decoder for keys, as --value-decoder-class")
    parser.add_argument("--offsets-decoder", action="store_true",
                        help="parse records as __consumer_offsets offset commits and group metadata")
    parser.add_argument("--transaction-log-decoder", action="store_true",
                        help="parse records as __transaction_state transaction metadata")
    parser.add_argument("--skip-record-metadata", action="store_true", help="do not print each record's metadata")


def main(args: argparse.Namespace) -> int:
    try:
        DumpLogSegments(args, sys.stdout, sys.stderr).run()
    except BrokenPipeError:
        raise  # the reader went away (``| head``): the command ends quietly (odradek.cli)
    except (DumpError, DecodeError, OSError) as e:
        sys.stdout.flush()
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except RecordsError as e:
        sys.stdout.flush()
        print(f"Error: {e.message}", file=sys.stderr)
        return 1
    return 0
