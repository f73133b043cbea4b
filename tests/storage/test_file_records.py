"""The one walk over a segment file (FileRecords.batch_headers / batches, walk_entries): every reader of
segment files -- fetch, recovery, the cleaner, dump-log, the Spark log source -- frames batches with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.protocol.record_batch import LOG_OVERHEAD, MAGIC_OFFSET, parse_header
from odradek.protocol.records import Record, build_batch
from odradek.storage.file_records import FileRecords


def _batch(base_offset: int, count: int, value_size: int) -> bytes:
    batch = bytearray(build_batch([Record(timestamp=i, key=None, value=bytes(value_size)) for i in range(count)]))
    batch[0:8] = base_offset.to_bytes(8, "big")  # outside the CRC
    return bytes(batch)


def _file(tmp_path: Path, *batches: bytes, tail: bytes = b"") -> FileRecords:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(batches) + tail)
    return FileRecords.open(path, writable=False)


def test_headers_and_bytes_agree_across_chunk_boundaries_and_batches_larger_than_a_chunk(tmp_path):
    # Small batches straddle the 8 KiB header chunks; a 3 MiB batch is larger than the 1 MiB byte chunk.
    batches = [_batch(i * 10, 10, 700) for i in range(30)] + [_batch(300, 3, 1 << 20)] + [_batch(303, 1, 10)]
    records = _file(tmp_path, *batches)
    positions = [sum(map(len, batches[:i])) for i in range(len(batches))]
    assert [(p, h.base_offset) for p, h in records.batch_headers()] == [(p, parse_header(b).base_offset) for p, b in zip(positions, batches)]
    assert [(p, bytes(view)) for p, _, view in records.batches()] == list(zip(positions, batches))
    assert [p for p, _, _ in records.batches(positions[5], positions[31])] == positions[5:31]


def test_a_torn_tail_ends_every_walk_quietly(tmp_path):
    whole = [_batch(0, 5, 100), _batch(5, 5, 100)]
    torn = _batch(10, 5, 100)
    for cut in (5, LOG_OVERHEAD + 3, len(torn) - 1):
        records = _file(tmp_path, *whole, tail=torn[:cut])
        assert [h.base_offset for _, h in records.batch_headers()] == [0, 5]
        assert [h.base_offset for _, h, _ in records.batches(verify=True)] == [0, 5]
        records.close()


def test_verify_stops_at_a_batch_whose_crc_fails_and_the_plain_walk_does_not(tmp_path):
    bad = bytearray(_batch(5, 5, 100))
    bad[-1] ^= 0xFF
    records = _file(tmp_path, _batch(0, 5, 100), bytes(bad), _batch(10, 5, 100))
    assert [h.base_offset for _, h, _ in records.batches(verify=True)] == [0]
    assert [h.base_offset for _, h, _ in records.batches()] == [0, 5, 10]
    wrong_magic = bytearray(_batch(0, 1, 10))
    wrong_magic[MAGIC_OFFSET] = 1
    assert list(_file(tmp_path, bytes(wrong_magic)).batches(verify=True)) == []


def test_the_read_only_mode_never_creates_a_file(tmp_path):
    missing = tmp_path / "00000000000000000042.log"
    with pytest.raises(FileNotFoundError):
        FileRecords.open(missing, writable=False)
    assert not missing.exists()
