"""Every record of a produced batch, checked before the batch may reach the log.

Kafka's LogValidator iterates over every record of every batch a client appends: it is what refuses a
record whose length runs past the batch, a last record cut short, a record count the records do not match,
and compressed data that does not decompress; it also checks each record's key (compacted topics) and
timestamp (KIP-937 bounds), and takes the batch's max timestamp from the records rather than from the
header. ``walk_batch`` is that loop. The walk itself runs in C (``_records.walk``) with no Python object
per record; only a compressed batch costs more, its decompression (at most
``record_batch.DEFAULT_MAX_DECOMPRESSED_SIZE`` bytes, so a decompression bomb is refused, not expanded).

What Kafka answers, and so what ``walk_batch`` raises:

* malformed records: INVALID_RECORD (InvalidRecordException from DefaultRecord.readFrom and the batch's
  record iterator); Kafka leaves error_message null;
* a record length varint longer than five bytes in an uncompressed batch: UNKNOWN_SERVER_ERROR (Kafka's
  uncompressed iterator lets the varint reader's IllegalArgumentException escape);
* compressed data that does not decompress: UNKNOWN_SERVER_ERROR (Kafka's "Failed to decompress record
  stream" KafkaException);
* records that decompress beyond the bound: MESSAGE_TOO_LARGE (Kafka has no bound; see
  compat-tests/README.md).

Per-record errors (no key, timestamp out of range) are returned, not raised: the caller reports them all,
as Kafka's ProduceResponse v8+ ``record_errors``.
"""

from __future__ import annotations


from odradek.protocol import _records
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.values import CodeEnum, Fields, plain_init
from odradek.protocol.record_batch import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    HEADER_SIZE,
    BatchHeader,
    InvalidRecordError,
    TimestampType,
)

Bytes = bytes | bytearray | memoryview

_OVERLONG_LENGTH = 1
"""``MalformedRecords`` kind: a record length varint of more than five bytes."""


class RecordErrorKind(CodeEnum):
    """What ``_records.walk`` reports about one record."""

    MISSING_KEY = 0
    TIMESTAMP_OUT_OF_RANGE = 1


class TimestampBounds(Fields):
    """KIP-937: a CreateTime record's timestamp must lie within [now - before_max, now + after_max]."""

    __slots__ = _FIELDS = ("now", "before_max", "after_max")

    def __init__(self, now: int, before_max: int, after_max: int) -> None:
        self.now = now
        self.before_max = before_max
        self.after_max = after_max


_UNBOUNDED = TimestampBounds(0, 0, 0)
"""What the walk is given when no timestamp is bounded (it then reads none of them): one for all walks."""


class RecordProblem:
    """One record the topic refuses, for ProduceResponse's ``record_errors``."""

    __slots__ = ("index", "kind", "timestamp", "offset_delta")

    def __init__(self, index: int, kind: RecordErrorKind, timestamp: int, offset_delta: int) -> None:
        self.index = index
        self.kind = kind
        self.timestamp = timestamp
        self.offset_delta = offset_delta


@plain_init
class WalkedBatch(Fields):
    __slots__ = _FIELDS = ("max_timestamp", "offsets_in_sequence", "problems")

    def __init__(self, max_timestamp: int, offsets_in_sequence: bool, problems: list[RecordProblem]) -> None:
        self.max_timestamp = max_timestamp
        """The largest record timestamp (-1 when none is larger): what Kafka stores as the batch's."""
        self.offsets_in_sequence = offsets_in_sequence
        """Offset deltas 0, 1, 2, ...: otherwise Kafka rebuilds a compressed batch with offsets assigned."""
        self.problems = problems


def walk_batch(
    buf: Bytes, pos: int, header: BatchHeader, *, timestamps: TimestampBounds | None, require_keys: bool,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> WalkedBatch:
    """Walk every record of the batch at ``pos`` whose ``header`` (CRC included) was validated.

    ``timestamps`` None skips the timestamp bounds (LogAppendTime topics); ``require_keys`` reports records
    without a key (compacted topics). Records that decompress beyond ``max_decompressed`` raise
    DecompressedTooLargeError: with a bound below the default, the caller's sign to walk the batch elsewhere.
    """
    payload: bytes | bytearray | memoryview = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    if header.compression:
        from odradek.protocol.compression import decompress  # the codecs at the first compressed batch

        payload = decompress(header.compression, payload, max_size=max_decompressed)
    bounds = timestamps or _UNBOUNDED
    try:
        max_timestamp, in_sequence, problems = _records.walk(
            payload, header.records_count, header.base_timestamp,
            header.timestamp_type == TimestampType.LOG_APPEND_TIME, header.max_timestamp,
            bounds.now, bounds.before_max, bounds.after_max, timestamps is not None, require_keys,
        )
    except _records.MalformedRecords as exc:
        kind, message = exc.args
        if kind == _OVERLONG_LENGTH and not header.compression:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, message) from None
        raise InvalidRecordError(message) from None
    found = [RecordProblem(index, RecordErrorKind(kind), ts, delta) for index, kind, ts, delta in problems] if problems else []
    return WalkedBatch(max_timestamp, in_sequence, found)
