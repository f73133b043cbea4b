"""Record batches (magic 2): the unit the broker stores and serves.

The broker never decodes records on the produce or fetch path. It reads the fixed 61-byte batch header
with ``struct`` (construct is ~100x slower for this), checks the CRC32C, and patches the base offset,
partition leader epoch and (for LogAppendTime) the max timestamp in place on the raw bytes.

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
from dataclasses import dataclass
from typing import Iterator

import crc32c as _crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
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
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength: enough to walk a log
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli) through a C implementation."""
    return _crc32c.crc32c(data)


@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch on the wire and on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

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


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``; raises ``struct.error`` if fewer bytes remain."""
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def read_prefix(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(base offset, total batch size) from the first 12 bytes: all a log walk needs."""
    base_offset, batch_length = _PREFIX.unpack_from(buf, pos)
    return base_offset, batch_length + LOG_OVERHEAD


def compute_crc(buf: bytes | bytearray | memoryview, pos: int = 0, size: int | None = None) -> int:
    """CRC-32C over attributes..end of the batch starting at ``pos``."""
    if size is None:
        size = _INT32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
    view = memoryview(buf)
    return crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])


def verify_crc(buf: bytes | bytearray | memoryview, pos: int = 0, header: BatchHeader | None = None) -> bool:
    if header is None:
        header = parse_header(buf, pos)
    return compute_crc(buf, pos, header.size) == header.crc


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """The base offset is outside the CRC, so no CRC update is needed."""
    _INT64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """The partition leader epoch is outside the CRC, so no CRC update is needed."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Stamp a batch with LogAppendTime: set the timestamp-type bit and max timestamp, then re-CRC.

    Both fields are inside the CRC, so this is the one in-place change that costs a CRC pass (Kafka does the
    same for topics with ``message.timestamp.type=LogAppendTime``).
    """
    attributes = struct.unpack_from(">h", buf, pos + ATTRIBUTES_OFFSET)[0]
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos))


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
