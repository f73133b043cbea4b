"""Storage throughput: leader appends (MB/s) with 1 MiB and 16 KiB batches, and read-slice lookups per second.

Run: ``python benchmarks/bench_storage.py``. Each figure is measured for a fixed wall-clock budget on a fresh
log in a temporary directory (page cache, no fsync: Kafka's defaults leave flushing to the OS).
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from odradek.protocol.records import Record, build_batch
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from odradek.storage.log_validator import ValidationResult, check_batches, validate_records
from odradek.storage.producer_state import AppendOrigin

BUDGET_S = 4.0


def _batch(total_bytes: int, record_bytes: int = 1024) -> bytes:
    count = max(1, total_bytes // (record_bytes + 16))
    value = bytes(random.Random(0).randrange(256) for _ in range(record_bytes))
    return build_batch([Record(timestamp=1_700_000_000_000 + i, key=None, value=value) for i in range(count)])


def _validated(template: bytes, config: LogConfig) -> ValidationResult:
    """A copy of ``template`` through the validator, as a broker-built (trusted) append: framing and CRC."""
    return validate_records(check_batches(template, config, AppendOrigin.COORDINATOR, 0, "bench-0"), None)


def bench_append(root: Path, batch_bytes: int) -> tuple[float, int]:
    """MB/s of append_as_leader with ``batch_bytes`` batches (each append patches offsets into a copy)."""
    template = _batch(batch_bytes)
    config = LogConfig.from_props({"segment.bytes": str(256 * 1024 * 1024)})
    log = Log.open(root / f"append{batch_bytes}-0", config)
    written = 0
    appends = 0
    started = time.perf_counter()
    while time.perf_counter() - started < BUDGET_S:
        for _ in range(16):
            log.append_as_leader(_validated(template, config), leader_epoch=0)
        appends += 16
        written += 16 * len(template)
    elapsed = time.perf_counter() - started
    log.close()
    return written / elapsed / 1e6, appends


def bench_reads(root: Path) -> tuple[float, int]:
    """Random-offset reads per second over a multi-segment log of 16 KiB batches of 16 records."""
    template = _batch(16 * 1024)
    config = LogConfig.from_props({"segment.bytes": str(8 * 1024 * 1024)})
    log = Log.open(root / "reads-0", config)
    for _ in range(4000):
        log.append_as_leader(_validated(template, config), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    rng = random.Random(1)
    offsets = [rng.randrange(log.log_end_offset) for _ in range(10_000)]
    reads = 0
    started = time.perf_counter()
    while time.perf_counter() - started < BUDGET_S:
        for offset in offsets[:1000]:
            info = log.read(offset, 1024 * 1024, log.high_watermark)
            assert info.size > 0
        reads += 1000
        offsets = offsets[1000:] + offsets[:1000]
    elapsed = time.perf_counter() - started
    segments = len(log.segments)
    log.close()
    return reads / elapsed, segments


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="odradek-bench-"))
    try:
        for size, label in ((1024 * 1024, "1 MiB"), (16 * 1024, "16 KiB")):
            rate, appends = bench_append(root, size)
            print(f"append {label:>6} batches: {rate:8.1f} MB/s  ({appends / BUDGET_S:,.0f} appends/s)")
        per_second, segments = bench_reads(root)
        print(f"read-slice lookups:      {per_second:8,.0f} /s  (random offsets, {segments} segments)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
