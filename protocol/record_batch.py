"""Record batches (magic 2): the unit the broker stores and serves.

The broker never decodes records into Python objects on the produce or fetch path. It reads the fixed
61-byte batch header with ``struct`` (construct's compiled parser is ~10x slower for this, see
benchmarks/bench_record_batch.py), checks the CRC32C, and patches the base offset, partition leader epoch
and max timestamp in place on the raw bytes. The produce path's walk over every record is ``record_walk``
(in C); record-level encoding and decoding live in ``records``.

Layout (big-endian), from Kafka's implementation docs::

    baseOffset: int64            @0
    batchLength: int32           @8   (bytes after this field)
    partitionLeaderEpoch: int32  @12
    magic: int8                  @16  (2)
    crc: uint32                  @17  (CRC-32C of everything from attributes to the end)
    attributes: int16            @21
    lastOffsetDelta: int32       @23
    baseTimestamp: int64         @27
    maxTimestamp: int64          @35
    producerId: int64            @43
    producerEpoch: int16         @51
    baseSequence: int32          @53
    recordsCount: int32          @57
    records                      @61
"""

from __future__ import annotations

import struct
from typing import Callable, ClassVar, Iterator

from odradek.protocol._records import batch_header as _batch_header, header_class
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.values import CodeEnum, Fields, plain_init

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
MAGIC_V0 = 0
MAGIC_V1 = 1
MAGIC_V2 = 2
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
PARTITION_LEADER_EPOCH_OFFSET = 12
MAX_TIMESTAMP_OFFSET = 35

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

COMPRESSION_MASK = 0x07
_MAX_COMPRESSION_ID = 4  # zstd; ids 5-7 are unassigned
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength: enough to walk a log
_PREFIX_WITH_MAGIC = struct.Struct(">qiib")  # ... partitionLeaderEpoch, magic
_CRC_COVERED_HEADER = struct.Struct(">hiqqqhii")  # attributes .. recordsCount
_INT64 = struct.Struct(">q")
_BASE_LENGTH_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch: the first 16 bytes
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")


class CompressionType(CodeEnum):
    """Attribute bits 0-2 of a batch or legacy message. The codecs are :mod:`.compression`'s, imported at the
    first compressed batch: a broker whose clients do not compress never loads them."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(CodeEnum):
    NO_TIMESTAMP_TYPE = -1  # magic 0 messages
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class RecordsError(KafkaError):
    """Record data that is malformed or that Kafka refuses; ``code`` is the error a produce is answered with.

    Everything in odradek.protocol that parses batches, records, legacy message sets or compressed data
    raises only subclasses of this on bad input, whatever the bytes are.
    """

    error_code: ClassVar[ErrorCode]

    def __init__(self, message: str) -> None:
        super().__init__(self.error_code, message)


class CorruptRecordError(RecordsError):
    """Bad CRC, sizes that do not add up, undecodable compressed data (Kafka's CorruptRecordException)."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class UndecompressableRecordsError(CorruptRecordError):
    """Compressed records the codec cannot decode. Kafka's record stream turns the codec's IOException into a
    plain KafkaException ("Failed to decompress record stream"), which it answers with UNKNOWN_SERVER_ERROR."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


DEFAULT_MAX_DECOMPRESSED_SIZE = 128 * 1024 * 1024
"""The decompression bound: far above what real batches expand to (producers cap requests at ~1 MiB compressed
by default)."""


class DecompressedTooLargeError(CorruptRecordError):
    """Compressed records that expand beyond the decompression bound: a bomb, refused before it is expanded."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class InvalidRecordError(RecordsError):
    """Well-formed bytes that break Kafka's rules: offsets vs count, record structure, magic mismatch."""

    error_code = ErrorCode.INVALID_RECORD


class NegativeTimestampError(ValueError):
    """A record to write with a timestamp below zero other than -1 (NO_TIMESTAMP). Kafka's
    ``MemoryRecordsBuilder`` refuses to write one ("Invalid negative timestamp"), so where Kafka's broker
    rebuilds records it fails: a produce that must be up-converted or recompressed is answered
    UNKNOWN_SERVER_ERROR for the partition, a fetch that must down-convert such a record as a whole. (A batch
    appended as it came keeps any timestamp.) Here, not in :mod:`.records` which raises it, so that the
    produce and fetch paths that catch it need not import the record codec."""


class UnsupportedCompressionTypeError(RecordsError):
    """A codec the target format cannot carry (zstd in magic 0/1 message sets)."""

    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def _first_crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """Loads the C implementation (the crc32c package's) at the first checksum: a broker starting with no
    batch to check does not wait for it."""
    global _crc32c
    _crc32c = _crc32c_extension()
    return _crc32c(data, value)


def _crc32c_extension() -> Callable[..., int]:
    """The crc32c package's C function, from its extension module alone: the package's ``__init__`` asks
    ``importlib.metadata`` for its own version, which reads every installed distribution's metadata (~84 M
    instructions, 20-40 ms: most of what a broker's first produce cost). A layout this does not recognise
    gets the package's own import."""
    import importlib.machinery
    import importlib.util
    import os

    package = importlib.util.find_spec("crc32c")  # found, not imported
    for directory in (package.submodule_search_locations or ()) if package is not None else ():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(directory, f"_crc32c{suffix}")
            if os.path.exists(path):
                spec = importlib.util.spec_from_file_location("crc32c._crc32c", path)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                implementation: Callable[..., int] = module.crc32c
                return implementation
    from crc32c import crc32c as implementation

    return implementation


_crc32c: Callable[..., int] = _first_crc32c


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli) through a C implementation."""
    return _crc32c(data)


@plain_init
class BatchHeader(Fields):
    """A record batch's header as parsed: its fields in their order on the wire, then three values worked out from
    them (:func:`_header`)."""

    __slots__ = _FIELDS = (
        "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes", "last_offset_delta",
        "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "records_count",
        "size", "compression", "timestamp_type",
    )

    def __init__(
        self, base_offset: int, batch_length: int, partition_leader_epoch: int, magic: int, crc: int, attributes: int,
        last_offset_delta: int, base_timestamp: int, max_timestamp: int, producer_id: int, producer_epoch: int,
        base_sequence: int, records_count: int, size: int, compression: int, timestamp_type: int,
    ) -> None:
        self.base_offset = base_offset
        self.batch_length = batch_length
        self.partition_leader_epoch = partition_leader_epoch
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.records_count = records_count
        self.size = size
        """Total bytes of the batch on the wire and on disk."""
        self.compression = compression
        self.timestamp_type = timestamp_type
        """0 = CreateTime, 1 = LogAppendTime."""

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


header_class(BatchHeader)  # the C checks hand over their headers made whole (protocol/_records.c)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``; raises ``struct.error`` if fewer bytes remain."""
    return _header(_HEADER.unpack_from(buf, pos))


def _header(fields: tuple[int, ...]) -> BatchHeader:
    """The header of the fields in their order on the wire. The size, codec and timestamp type are worked out
    here, once: the produce path reads them about fifteen times per batch."""
    attributes = fields[5]
    return BatchHeader(*(*fields, fields[1] + LOG_OVERHEAD, attributes & COMPRESSION_MASK, (attributes & TIMESTAMP_TYPE_MASK) >> 3))


def read_prefix(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(base offset, total batch size) from the first 12 bytes: all a log walk needs."""
    base_offset, batch_length = _PREFIX.unpack_from(buf, pos)
    return base_offset, batch_length + LOG_OVERHEAD


def compute_crc(buf: bytes | bytearray | memoryview, pos: int = 0, size: int | None = None) -> int:
    """CRC-32C over attributes..end of the batch starting at ``pos``."""
    if size is None:
        size = _INT32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
    view = memoryview(buf)
    return _crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])  # the implementation itself: a call fewer per batch


def verify_crc(buf: bytes | bytearray | memoryview, pos: int = 0, header: BatchHeader | None = None) -> bool:
    if header is None:
        header = parse_header(buf, pos)
    return compute_crc(buf, pos, header.size) == header.crc


def assign_offset_and_epoch(buf: bytearray | memoryview, pos: int, header: BatchHeader, base_offset: int, epoch: int) -> None:
    """Give the batch at ``pos`` its base offset and partition leader epoch, in its bytes and in ``header``.

    Both fields are outside the CRC, so no CRC update is needed; they sit either side of the batch length,
    which is written back as it is, so the three go in one ``pack_into`` (the leader's append does this for
    every batch)."""
    _BASE_LENGTH_EPOCH.pack_into(buf, pos, base_offset, header.batch_length, epoch)
    header.base_offset = base_offset
    header.partition_leader_epoch = epoch


def set_max_timestamp(buf: bytearray | memoryview, pos: int, timestamp_type: int, timestamp: int) -> None:
    """Set a batch's timestamp type and max timestamp, then re-CRC (Kafka's DefaultRecordBatch.setMaxTimestamp).

    Both fields are inside the CRC, so a change costs a CRC pass; when both already hold these values, the
    batch is left alone (as Kafka leaves it).
    """
    attributes = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    wanted = attributes | TIMESTAMP_TYPE_MASK if timestamp_type == TimestampType.LOG_APPEND_TIME else attributes & ~TIMESTAMP_TYPE_MASK
    if wanted == attributes and _INT64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0] == timestamp:
        return
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, wanted)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos))


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Stamp a batch with LogAppendTime (topics with ``message.timestamp.type=LogAppendTime``)."""
    set_max_timestamp(buf, pos, TimestampType.LOG_APPEND_TIME, timestamp)


def iter_batch_positions(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, int, int]]:
    """Yield (position, base offset, size) of each complete batch; stop at a partial trailing batch."""
    if end is None:
        end = len(buf)
    while pos + LOG_OVERHEAD <= end:
        base_offset, size = read_prefix(buf, pos)
        if size < HEADER_SIZE or pos + size > end:
            return
        yield pos, base_offset, size
        pos += size


def peek_magic(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """The magic of the batch or legacy message at ``pos``: both formats keep it at byte 16.

    The produce path uses it to tell a legacy message set (produce v0-v2 clients) from magic-2 batches.
    """
    if len(buf) - pos <= MAGIC_OFFSET:
        raise CorruptRecordError(f"{len(buf) - pos} bytes are too few to hold a record batch")
    magic: int = _PREFIX_WITH_MAGIC.unpack_from(buf, pos)[3]
    return magic


def encode_batch(
    records: bytes | bytearray | memoryview,
    *,
    base_offset: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    records_count: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A complete batch around already encoded (and possibly compressed) ``records``, CRC included."""
    covered = _CRC_COVERED_HEADER.pack(
        attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
        base_sequence, records_count,
    )
    crc = _crc32c(records, _crc32c(covered))
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(records)
    prefix = _PREFIX_WITH_MAGIC.pack(base_offset, batch_length, partition_leader_epoch, MAGIC_V2)
    return b"".join((prefix, _UINT32.pack(crc), covered, records))


@plain_init
class ValidatedBatches:
    """What the produce path needs from a validated ``records`` field, read from the batch headers alone."""

    __slots__ = ("batches", "record_count", "max_timestamp", "size")

    def __init__(self, batches: list[tuple[int, BatchHeader]], record_count: int, max_timestamp: int, size: int) -> None:
        self.batches = batches  # (position in the buffer, header), in order
        self.record_count = record_count
        self.max_timestamp = max_timestamp
        self.size = size

    @property
    def first(self) -> BatchHeader:
        return self.batches[0][1]

    @property
    def producer_id(self) -> int:
        return self.first.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.first.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.first.base_sequence

    @property
    def is_transactional(self) -> bool:
        return self.first.is_transactional

    @property
    def is_control(self) -> bool:
        return self.first.is_control

    @property
    def compression(self) -> int:
        """The last non-zero codec id, as Kafka picks the "source compression" of an append."""
        codecs = [header.compression for _, header in self.batches if header.compression]
        return codecs[-1] if codecs else 0


def validate_batches(buf: bytes | bytearray | memoryview, *, from_client: bool = True) -> ValidatedBatches:
    """Check the magic-2 batches of a produce request's ``records`` without decoding a single record.

    Structure and CRC are checked for every origin (Kafka's ``analyzeAndValidateRecords``); with
    ``from_client`` also the rules Kafka's ``LogValidator`` applies to client appends: exactly one batch,
    base offset 0, ``recordsCount == lastOffsetDelta + 1 > 0``, no control batches, and a base sequence for
    idempotent batches. A legacy (magic 0/1) message set is refused here: convert it with
    ``legacy_records.up_convert`` first (``peek_magic`` tells them apart).

    Raises CorruptRecordError (CORRUPT_MESSAGE) for sizes, magic or CRC, InvalidRecordError (INVALID_RECORD)
    for the rest. Record size limits (message.max.bytes) and timestamp bounds are broker config, checked by
    the caller from the returned headers.
    """
    view = memoryview(buf)
    end = len(view)
    batches: list[tuple[int, BatchHeader]] = []
    record_count = 0
    max_timestamp = NO_TIMESTAMP
    pos = 0
    if 0 < end and (end < LOG_OVERHEAD or LOG_OVERHEAD + _INT32.unpack_from(view, 8)[0] > end):
        # Kafka's batch iterator (ByteBufferLogInputStream.nextBatch) yields no batch when the first is cut
        # short, and the produce request is refused for having none (ProduceRequest.validateRecords):
        # INVALID_RECORD. A length below a batch header's size is corrupt instead (read_batch_header).
        raise InvalidRecordError("the records hold no whole record batch")
    while pos < end:
        header = _batch_header(view, pos, from_client)
        if header is None:  # something to refuse (or a processor without the CRC instruction): the checks in Python say what
            header = read_batch_header(view, pos)
            if from_client:
                _check_client_batch(header)
        batches.append((pos, header))
        record_count += header.records_count
        max_timestamp = max(max_timestamp, header.max_timestamp)
        pos += header.size
    if not batches:
        raise InvalidRecordError("no record batches")
    if from_client and len(batches) > 1:
        raise InvalidRecordError("a produce request may carry only one record batch per partition")
    return ValidatedBatches(batches, record_count, max_timestamp, end)


def read_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the magic-2 batch at ``pos`` once its size, magic, codec and CRC are known good.

    A legacy message (magic 0/1) raises InvalidRecordError, anything else wrong CorruptRecordError.
    """
    end = len(buf)
    if end - pos <= MAGIC_OFFSET:
        raise CorruptRecordError(f"partial record batch: {end - pos} bytes left at position {pos}")
    _, batch_length, _, magic = _PREFIX_WITH_MAGIC.unpack_from(buf, pos)
    if magic in (MAGIC_V0, MAGIC_V1):
        raise InvalidRecordError(f"record batches must have magic 2, found magic {magic}")
    if magic != MAGIC_V2:
        raise CorruptRecordError(f"invalid magic {magic} at position {pos}")
    if batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {batch_length} is below the batch header size")
    if pos + LOG_OVERHEAD + batch_length > end:
        raise CorruptRecordError(f"partial record batch: length {batch_length} overruns the data")
    header = parse_header(buf, pos)
    if header.compression > _MAX_COMPRESSION_ID:
        raise CorruptRecordError(f"unknown compression type id {header.compression}")
    if compute_crc(buf, pos, header.size) != header.crc:
        raise CorruptRecordError(f"record batch is corrupt (stored crc = {header.crc})")
    return header


def _check_client_batch(header: BatchHeader) -> None:
    if header.base_offset != 0:
        raise InvalidRecordError(f"the base offset of a produced batch must be 0, not {header.base_offset}")
    if header.last_offset_delta < 0:
        raise InvalidRecordError(f"batch has an invalid offset range: last offset delta {header.last_offset_delta}")
    if header.records_count <= 0:
        raise InvalidRecordError(f"invalid reported count for record batch: {header.records_count}")
    if header.records_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"inconsistent batch offset range [0, {header.last_offset_delta}] and count of records "
            f"{header.records_count}"
        )
    if header.attributes & CONTROL_FLAG:
        raise InvalidRecordError("clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence number {header.base_sequence} in record batch with producerId {header.producer_id}"
        )
