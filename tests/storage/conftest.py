"""Fixtures for storage tests: real logs in temporary directories, batches built by the protocol layer."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Callable

import pytest

from odradek.protocol.record_batch import CRC_OFFSET, MAX_TIMESTAMP_OFFSET, compute_crc, parse_header
from odradek.protocol.records import ControlRecordType, EndTransactionMarker, Record, build_batch, build_end_txn_marker_batch
from odradek.storage.log import Log
from odradek.storage.log import AppendInfo
from odradek.storage.log_config import LogConfig
from odradek.storage.producer_state import AppendOrigin
from tests.validated import validated

T0 = 1_700_000_000_000
BASE_TIMESTAMP_OFFSET = 27


class Clock:
    """A settable millisecond clock: segment.ms, retention.ms and flush.ms are about elapsed time."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _make_batch(count: int = 1, *, value_size: int = 16, timestamp: int = T0, **kwargs: object) -> bytearray:
    """``count`` records with timestamps ``timestamp``, ``timestamp + 1``, ... (so offset i of a log built from
    such batches can carry timestamp T0 + i)."""
    records = [Record(timestamp=timestamp + i, key=b"k%d" % i, value=bytes([i % 251]) * value_size) for i in range(count)]
    return bytearray(build_batch(records, **kwargs))  # type: ignore[arg-type]


def _shift_timestamps(batch: bytearray, timestamp: int) -> bytearray:
    """A copy of ``batch`` whose records start at ``timestamp`` (record timestamps are deltas from the base)."""
    copy = bytearray(batch)
    header = parse_header(copy)
    struct.pack_into(">q", copy, BASE_TIMESTAMP_OFFSET, timestamp)
    struct.pack_into(">q", copy, MAX_TIMESTAMP_OFFSET, timestamp + header.max_timestamp - header.base_timestamp)
    struct.pack_into(">I", copy, CRC_OFFSET, compute_crc(copy))
    return copy


@pytest.fixture
def open_log(tmp_path: Path, clock: Clock) -> Callable[..., Log]:
    """Open (or reopen) ``tmp_path/<name>`` as a Log with topic overrides, on the test clock."""

    def factory(overrides: dict[str, str] | None = None, name: str = "topic-0", **kwargs: object) -> Log:
        return Log.open(tmp_path / name, LogConfig.from_props(overrides or {}), time_ms=clock, **kwargs)  # type: ignore[arg-type]

    return factory


def _batches_in(data: bytes) -> list[tuple[int, int, int]]:
    """(position, base offset, last offset) of each whole batch in ``data``."""
    found = []
    position = 0
    while position + 61 <= len(data):
        header = parse_header(data, position)
        if position + header.size > len(data):
            break
        found.append((position, header.base_offset, header.last_offset))
        position += header.size
    return found


@pytest.fixture
def make_batch() -> Callable[..., bytearray]:
    return _make_batch


def _write_marker(log: Log, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool) -> AppendInfo:
    """A transaction's COMMIT or ABORT, appended as the leader appends WriteTxnMarkers' batch (COORDINATOR origin)."""
    marker = EndTransactionMarker(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, coordinator_epoch)
    batch = build_end_txn_marker_batch(marker, producer_id=producer_id, producer_epoch=producer_epoch, timestamp=T0)
    return log.append_as_leader(validated(batch, AppendOrigin.COORDINATOR), leader_epoch=0)


@pytest.fixture
def write_marker() -> Callable[..., AppendInfo]:
    return _write_marker


@pytest.fixture
def shift_timestamps() -> Callable[[bytearray, int], bytearray]:
    return _shift_timestamps


@pytest.fixture
def batches_in() -> Callable[[bytes], list[tuple[int, int, int]]]:
    return _batches_in


def _open_segment_files(dir: Path) -> set[str]:
    """Names of ``.log`` files under ``dir`` this process holds open (from /proc/self/fd)."""
    names = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(dir)) and target.endswith(".log"):
            names.add(target)
    return names


@pytest.fixture
def open_segment_files() -> Callable[[Path], set[str]]:
    return _open_segment_files
