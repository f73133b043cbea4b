"""Offset and timestamp lookups over a log of a million records spread over many segments."""

from __future__ import annotations

import random
import struct

import pytest

from odradek.protocol.record_batch import CRC_OFFSET, compute_crc, parse_header
from odradek.protocol.records import Record, build_batch
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from tests.validated import validated

RECORDS_PER_BATCH = 1000
BATCHES = 1000
T_BASE = 1_600_000_000_000


@pytest.fixture(scope="module")
def million(tmp_path_factory):
    """1,000,000 records in 1000 batches; the record at offset o has timestamp T_BASE + o, epoch o // 100,000."""
    template = bytearray(build_batch([Record(timestamp=T_BASE + i, key=None, value=b"v%d" % i) for i in range(RECORDS_PER_BATCH)]))
    log = Log.open(tmp_path_factory.mktemp("lookups") / "big-0", LogConfig.from_props({"segment.bytes": str(512 * 1024)}))
    for k in range(BATCHES):
        batch = bytearray(template)
        struct.pack_into(">qq", batch, 27, T_BASE + k * RECORDS_PER_BATCH, T_BASE + k * RECORDS_PER_BATCH + RECORDS_PER_BATCH - 1)
        struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch))
        log.append_as_leader(validated(batch), leader_epoch=k // 100)
    log.high_watermark = log.log_end_offset
    yield log
    log.close()


def test_the_log_spans_many_segments(million):
    assert million.log_end_offset == RECORDS_PER_BATCH * BATCHES
    assert len(million.segments) >= 20


def test_offset_lookups_land_on_the_batch_holding_the_offset(million):
    for offset in random.Random(1).sample(range(million.log_end_offset), 2000):
        info = million.read(offset, 1)
        header = parse_header(info.read()[:61])
        assert header.base_offset == offset // RECORDS_PER_BATCH * RECORDS_PER_BATCH
        assert header.base_offset <= offset <= header.last_offset
        segment = next(s for s in reversed(million.segments) if s.base_offset <= offset)
        assert info.fetch_offset_metadata.segment_base_offset == segment.base_offset


def test_timestamp_lookups_find_the_first_record_at_or_after(million):
    for offset in random.Random(2).sample(range(million.log_end_offset), 300):
        found = million.offset_for_timestamp(T_BASE + offset)
        assert (found.timestamp, found.offset, found.leader_epoch) == (T_BASE + offset, offset, offset // 100_000)
    assert million.offset_for_timestamp(T_BASE - 10**6).offset == 0
    assert million.offset_for_timestamp(T_BASE + million.log_end_offset) is None


def test_the_max_timestamp_lookup_finds_the_first_record_carrying_it(million):
    assert million.max_timestamp_and_offset() == (T_BASE + 999_999, 999_999, 9)
