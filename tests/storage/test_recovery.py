"""Crash recovery: exactly the valid prefix survives, nothing invalid is served, indexes come back."""

from __future__ import annotations

import gc
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from odradek.protocol.record_batch import parse_header, verify_crc
from odradek.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, OffsetCheckpointFile
from tests.validated import validated

SEGMENT = {"segment.bytes": "3000", "index.interval.bytes": "300"}


def _crash(log) -> None:
    """Drop a log without closing it: indexes stay preallocated, nothing is trimmed or snapshotted."""
    del log
    gc.collect()


@pytest.fixture
def written(open_log, make_batch):
    """A log of 4+ segments whose every batch is remembered as (base offset, bytes on disk)."""
    log = open_log(SEGMENT)
    for i in range(60):
        log.append_as_leader(validated(make_batch(1 + i % 5, value_size=60)), leader_epoch=i // 20)
    batches = []
    for segment in log.segments:
        data = segment.log.read(0, segment.size)
        position = 0
        while position < len(data):
            header = parse_header(data, position)
            batches.append((segment.base_offset, header.base_offset, data[position : position + header.size]))
            position += header.size
    assert len(log.segments) >= 4
    return log, batches


def _assert_log_holds(log, batches) -> None:
    """The log holds exactly ``batches``, readable at every offset, and accepts new appends after them."""
    end = batches[-1][2] and parse_header(batches[-1][2]).last_offset + 1 if batches else 0
    assert log.log_end_offset == end
    log.high_watermark = end
    expected = b"".join(data for _, _, data in batches)
    assert b"".join(s.log.read(0, s.size) for s in log.segments) == expected
    for _, base, data in batches:
        header = parse_header(data)
        assert log.read(header.last_offset, 1).read()[: len(data)] == data


def test_a_tail_cut_mid_batch_is_truncated_to_the_last_whole_batch(written, open_log, make_batch):
    log, batches = written
    last_segment = log.segments[-1]
    path, size = last_segment.path(".log"), last_segment.size
    last_batch = batches[-1][2]
    _crash(log)
    os.truncate(path, size - len(last_batch) // 2)
    recovered = open_log(SEGMENT, recovery_point=0)
    _assert_log_holds(recovered, batches[:-1])
    info = recovered.append_as_leader(validated(make_batch(2)), leader_epoch=5)
    assert info.first_offset == parse_header(batches[-2][2]).last_offset + 1


def test_a_flipped_byte_after_the_recovery_point_cuts_the_log_there(written, open_log):
    log, batches = written
    victim = len(batches) // 2
    segment_base, base_offset, data = batches[victim]
    position = sum(len(d) for s, _, d in batches[:victim] if s == segment_base)
    path = log.dir / f"{segment_base:020d}.log"
    _crash(log)
    with open(path, "r+b") as f:
        f.seek(position + len(data) - 3)
        byte = f.read(1)
        f.seek(position + len(data) - 3)
        f.write(bytes([byte[0] ^ 0x40]))
    recovered = open_log(SEGMENT, recovery_point=batches[1][1])
    _assert_log_holds(recovered, batches[:victim])
    assert [s.base_offset for s in recovered.segments][-1] == segment_base  # later segments are gone
    epochs = recovered.epoch_cache.entries
    assert all(start < recovered.log_end_offset for _, start in epochs)
    # The loader's truncation is written at the cache's next flush (the log manager's checkpoint, or here
    # the log's close), as Kafka flushes it asynchronously: until then a crash finds the old file, which the
    # next load truncates the same way.
    recovered.close()
    assert (recovered.dir / LEADER_EPOCH_CHECKPOINT).read_text().splitlines()[1] == str(len(epochs))


def test_a_deleted_index_is_rebuilt_byte_for_byte(written, open_log):
    log, batches = written
    log.close()
    middle = log.segments[1].base_offset
    index_path = log.dir / f"{middle:020d}.index"
    time_index_path = log.dir / f"{middle:020d}.timeindex"
    original = index_path.read_bytes(), time_index_path.read_bytes()
    assert original[0]
    index_path.unlink()
    recovered = open_log(SEGMENT, had_clean_shutdown=True)
    assert (index_path.read_bytes(), time_index_path.read_bytes()) == original
    _assert_log_holds(recovered, batches)


def test_a_garbage_index_is_detected_and_rebuilt(written, open_log):
    log, batches = written
    log.close()
    middle = log.segments[1].base_offset
    index_path = log.dir / f"{middle:020d}.index"
    original = index_path.read_bytes()
    index_path.write_bytes(random.Random(3).randbytes(len(original)))
    recovered = open_log(SEGMENT, had_clean_shutdown=True)
    _assert_log_holds(recovered, batches)
    assert index_path.read_bytes() == original


def test_an_index_pointing_inside_a_batch_is_rebuilt_on_lookup(written, open_log):
    log, batches = written
    log.close()
    middle = log.segments[1]
    index_path = log.dir / f"{middle.base_offset:020d}.index"
    original = bytearray(index_path.read_bytes())
    original[4:8] = (int.from_bytes(original[4:8], "big") + 5).to_bytes(4, "big")  # still ordered, but off a batch start
    index_path.write_bytes(bytes(original))
    recovered = open_log(SEGMENT, had_clean_shutdown=True)
    _assert_log_holds(recovered, batches)


def test_the_active_segment_left_preallocated_by_a_crash_is_recovered(written, open_log, make_batch):
    log, batches = written
    active = log.active_segment.path(".index")
    _crash(log)
    assert os.path.getsize(active) == 10 * 1024 * 1024  # still preallocated
    recovered = open_log(SEGMENT, recovery_point=0)
    _assert_log_holds(recovered, batches)
    recovered.append_as_leader(validated(make_batch(1)), leader_epoch=9)
    assert recovered.read(recovered.log_end_offset - 1, 1).size > 0


def test_a_clean_shutdown_opens_without_scanning(written, open_log, open_segment_files):
    log, batches = written
    log.close()
    first = log.dir / "00000000000000000000.log"
    with open(first, "r+b") as f:  # corruption a scan would find and cut
        f.seek(100)
        f.write(b"\xff\xff")
    reopened = open_log(SEGMENT, had_clean_shutdown=True)
    assert reopened.log_end_offset == parse_header(batches[-1][2]).last_offset + 1
    assert open_segment_files(reopened.dir) == set()  # the last one read for the log end, then released
    assert os.path.getsize(first) == sum(len(d) for s, _, d in batches if s == 0)


def test_producer_state_and_epochs_survive_a_crash(open_log, make_batch):
    log = open_log(SEGMENT)
    for seq in range(0, 40, 4):
        log.append_as_leader(validated(make_batch(4, value_size=80, producer_id=7, producer_epoch=2, base_sequence=seq)), leader_epoch=3)
    _crash(log)
    recovered = open_log(SEGMENT, recovery_point=0)
    assert recovered.producer_state.last_entry(7).last_seq == 39
    duplicate = recovered.append_as_leader(validated(make_batch(4, producer_id=7, producer_epoch=2, base_sequence=36)), leader_epoch=3)
    assert duplicate.duplicate and duplicate.first_offset == 36
    assert recovered.end_offset_for_epoch(3) == (3, 40)


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from odradek.protocol.records import build_batch
    from odradek.storage.log import Log
    from odradek.storage.log_config import LogConfig
    from tests.validated import validated
    log = Log.open(Path(sys.argv[1]), LogConfig.from_props({"segment.bytes": "20000", "flush.messages": "50"}))
    i = 0
    while True:
        log.append_as_leader(validated(build_batch([(b"k", b"v" * (i % 300))] * (1 + i % 7))), leader_epoch=i // 500)
        if i == 0:  # once a batch is in: the first append (its imports, the epoch checkpoint) can take a loaded machine a second
            print("ready", flush=True)
        i += 1
    """
)


def test_a_writer_killed_at_random_leaves_a_recoverable_valid_log(tmp_path, open_log):
    for attempt in range(3):
        name = f"killed-{attempt}"
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / name)], stdout=subprocess.PIPE)
        assert child.stdout.readline().strip() == b"ready"
        time.sleep(0.2 + random.random() * 0.3)
        child.send_signal(signal.SIGKILL)
        child.wait()
        log = open_log({"segment.bytes": "20000"}, name=name, recovery_point=0)
        assert log.log_end_offset > 0
        expected_offset = 0
        for segment in log.segments:
            data = segment.log.read(0, segment.size)
            position = 0
            while position < len(data):
                header = parse_header(data, position)
                assert header.base_offset == expected_offset and verify_crc(data, position, header)
                expected_offset = header.last_offset + 1
                position += header.size
        assert expected_offset == log.log_end_offset
        log.high_watermark = log.log_end_offset
        assert log.read(log.log_end_offset - 1, 1).size > 0


CHECKPOINTER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from odradek.storage.checkpoints import OffsetCheckpointFile
    checkpoint = OffsetCheckpointFile(Path(sys.argv[1]))
    print("ready", flush=True)
    i = 0
    while True:
        i += 1
        checkpoint.write({("topic-%d" % p, p): i for p in range(1 + i % 500)})
    """
)


def test_checkpoint_files_survive_a_crash_mid_write(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    for _ in range(4):
        child = subprocess.Popen([sys.executable, "-c", CHECKPOINTER, str(path)], stdout=subprocess.PIPE)
        assert child.stdout.readline().strip() == b"ready"
        time.sleep(0.05 + random.random() * 0.2)
        child.send_signal(signal.SIGKILL)
        child.wait()
        offsets = OffsetCheckpointFile(path).read()  # never torn: parses completely
        values = set(offsets.values())
        assert len(values) == 1
        (i,) = values
        assert len(offsets) == 1 + i % 500
