"""Byte-level checks of what the log writes: the exact files Kafka would have on disk."""

from __future__ import annotations

import os
import struct
import uuid

from odradek.protocol.record_batch import assign_offset_and_epoch, parse_header, verify_crc
from odradek.protocol.records import iter_records
from tests.validated import validated


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_log_file_is_exactly_the_batches_with_assigned_offsets_and_epoch(open_log, make_batch, tmp_path):
    log = open_log()
    sent = [make_batch(n, value_size=7 * n) for n in (1, 3, 10, 2, 5)]
    expected = bytearray()
    offset = 0
    for batch in sent:
        original = bytearray(batch)
        info = log.append_as_leader(validated(batch), leader_epoch=7)
        assert (info.first_offset, info.last_offset) == (offset, offset + parse_header(original).last_offset_delta)
        assign_offset_and_epoch(original, 0, parse_header(original), offset, 7)
        expected += original
        offset = info.last_offset + 1
    log.close()

    on_disk = _read(tmp_path / "topic-0" / "00000000000000000000.log")
    assert on_disk == bytes(expected)
    assert log.log_end_offset == 21
    position = 0
    while position < len(on_disk):
        header = parse_header(on_disk, position)
        assert header.partition_leader_epoch == 7
        assert verify_crc(on_disk, position, header)  # offsets and epoch live outside the CRC
        position += header.size


def test_offset_index_entries_point_at_batch_starts_every_interval(open_log, make_batch, tmp_path):
    log = open_log({"index.interval.bytes": "1000"})
    for i in range(200):
        log.append_as_leader(validated(make_batch(1 + i % 4, value_size=100)), leader_epoch=0)
    log.close()
    data = _read(tmp_path / "topic-0" / "00000000000000000000.log")
    index = _read(tmp_path / "topic-0" / "00000000000000000000.index")
    entries = list(struct.iter_unpack(">ii", index))
    assert len(entries) > 20
    positions = [position for _, position in entries]
    assert all(b - a > 1000 for a, b in zip(positions, positions[1:]))
    for relative, position in entries:
        header = parse_header(data, position)  # a batch starts exactly there ...
        assert header.last_offset == relative  # ... and the entry names the last offset of that append


def test_time_index_holds_the_running_max_timestamp(open_log, make_batch, tmp_path):
    log = open_log({"index.interval.bytes": "500"})
    timestamps = [1000, 5000, 3000, 7000, 7000, 2000, 9000, 8000] * 10
    for ts in timestamps:
        log.append_as_leader(validated(make_batch(2, value_size=200, timestamp=ts)), leader_epoch=0)
    log.close()
    data = _read(tmp_path / "topic-0" / "00000000000000000000.log")
    entries = list(struct.iter_unpack(">qi", _read(tmp_path / "topic-0" / "00000000000000000000.timeindex")))
    assert entries and [ts for ts, _ in entries] == sorted({ts for ts, _ in entries})
    max_through = {}
    running = -1
    position = 0
    while position < len(data):
        header = parse_header(data, position)
        running = max(running, header.max_timestamp)
        max_through[header.last_offset] = running
        position += header.size
    for ts, relative in entries:
        assert max_through[relative] == ts
    assert entries[-1][0] == 9001  # closing the segment records its largest timestamp


def test_indexes_are_preallocated_while_active_and_trimmed_on_roll_and_close(open_log, make_batch, tmp_path):
    log = open_log({"segment.index.bytes": "8192", "segment.bytes": "4000", "index.interval.bytes": "100"})
    dir = tmp_path / "topic-0"
    log.append_as_leader(validated(make_batch(1, value_size=50)), leader_epoch=0)
    assert os.path.getsize(dir / "00000000000000000000.index") == 8192
    assert os.path.getsize(dir / "00000000000000000000.timeindex") == 8184  # 682 whole 12-byte entries
    while len(log.segments) == 1:
        log.append_as_leader(validated(make_batch(1, value_size=200)), leader_epoch=0)
    rolled = log.segments[0]
    assert os.path.getsize(dir / "00000000000000000000.index") == rolled.offset_index.entries * 8 > 0
    assert os.path.getsize(dir / "00000000000000000000.timeindex") == rolled.time_index.entries * 12 > 0
    active_name = f"{log.active_segment.base_offset:020d}"
    assert os.path.getsize(dir / f"{active_name}.index") == 8192
    log.close()
    assert os.path.getsize(dir / f"{active_name}.index") == 0  # no index entry yet in the new segment
    assert os.path.getsize(dir / f"{active_name}.timeindex") == 12  # its max timestamp


def test_segment_and_snapshot_files_are_named_by_20_digit_base_offsets(open_log, make_batch, tmp_path):
    log = open_log({"segment.bytes": "1000"})
    for _ in range(10):
        log.append_as_leader(validated(make_batch(3, value_size=150)), leader_epoch=0)
    bases = [segment.base_offset for segment in log.segments]
    log.close()
    names = set(os.listdir(tmp_path / "topic-0"))
    for base in bases:
        assert {f"{base:020d}.log", f"{base:020d}.index", f"{base:020d}.timeindex"} <= names
    assert f"{bases[-1]:020d}.snapshot" in names
    assert f"{log.log_end_offset:020d}.snapshot" in names


def test_log_append_time_is_stamped_into_the_batch(open_log, make_batch, tmp_path):
    log = open_log({"message.timestamp.type": "LogAppendTime"})
    info = log.append_as_leader(validated(make_batch(3, timestamp=5)), leader_epoch=0, log_append_time=123456)
    assert (info.log_append_time, info.max_timestamp) == (123456, 123456)
    log.close()
    data = _read(tmp_path / "topic-0" / "00000000000000000000.log")
    header = parse_header(data)
    assert header.timestamp_type == 1 and header.max_timestamp == 123456
    assert verify_crc(data, 0, header)
    assert [r.timestamp for r in iter_records(data)] == [123456] * 3


def test_partition_metadata_records_the_topic_id(open_log, tmp_path):
    topic_id = uuid.UUID("3c9d4b1a-7f0e-4d4c-9a3b-1e2f3a4b5c6d")
    open_log(topic_id=topic_id).close()
    text = (tmp_path / "topic-0" / "partition.metadata").read_text()
    assert text == "version: 0\ntopic_id: PJ1LGn8OTUyaOx4vOktcbQ"
    assert open_log().topic_id == topic_id
