"""Types of the C extension protocol/_records.c, for mypy (which cannot read a compiled module)."""

from typing_extensions import Buffer

from odradek.protocol.record_batch import BatchHeader

class MalformedRecords(ValueError):
    """args: (kind, message); kind 0: Kafka's InvalidRecordException, 1: a record length varint over five bytes."""

def walk(
    payload: Buffer,
    records_count: int,
    base_timestamp: int,
    is_log_append_time: bool,
    log_append_time: int,
    now: int,
    before_max: int,
    after_max: int,
    check_timestamps: bool,
    require_keys: bool,
    /,
) -> tuple[int, bool, list[tuple[int, int, int, int]] | None]:
    """(max timestamp, offsets in sequence, problems as (index, kind, timestamp, offset delta) or None)."""

def batch_header(buf: Buffer, pos: int, from_client: bool, /) -> BatchHeader | None:
    """A magic-2 batch header that passes every check of ``record_batch.read_batch_header`` (and, ``from_client``,
    of ``_check_client_batch``), its size, codec and timestamp type worked out; None for the Python checks to
    refuse it (and before ``header_class``)."""

def header_class(cls: type[BatchHeader], /) -> None:
    """The class ``batch_header`` makes its headers of, called with its 16 fields (``BatchHeader._FIELDS``)."""
