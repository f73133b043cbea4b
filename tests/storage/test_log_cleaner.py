"""Log compaction: what a consumer reading a compacted log from the beginning finds after the cleaner ran.

Logs are real logs in temporary directories, written with batches built by the protocol layer, cleaned by
the real cleaner on the test clock; crashes are real process deaths (a forked child ``os._exit``s in the
middle of a swap) followed by the startup recovery of the directory it left.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from odradek.protocol.compression import CompressionType
from odradek.protocol.errors import KafkaError
from odradek.protocol.record_batch import TimestampType, parse_header
from odradek.protocol.records import Record, build_batch, iter_records
from odradek.storage.log import Log
from odradek.storage.log_cleaner import CLEANER_OFFSET_CHECKPOINT, CleanerConfig, LogCleaner
from odradek.storage.log_config import LogConfig
from tests.validated import validated

TP = ("topic", 0)
COMPACT = {"cleanup.policy": "compact"}


class Cleaning:
    """A LogCleaner over one log directory on the test clock."""

    def __init__(self, log_dir: Path, clock, config: CleanerConfig | None = None) -> None:
        self.log_dir = log_dir
        self.clock = clock
        self.cleaner = LogCleaner(config or CleanerConfig(), [log_dir], time_ms=clock)

    def __call__(self, log: Log) -> int:
        return self.cleaner.clean_logs([(TP, log, self.log_dir)], self.clock.now)

    @property
    def checkpoint(self) -> int | None:
        return self.cleaner.checkpoints().get(TP)


@pytest.fixture
def clean(tmp_path, clock) -> Cleaning:
    return Cleaning(tmp_path, clock)


def append(log: Log, records: list[tuple], **batch_options) -> None:
    """One batch of (key, value[, timestamp]) records, then the high watermark to the log end."""
    built = [Record(key=r[0], value=r[1], timestamp=r[2] if len(r) > 2 else None) for r in records]
    log.append_as_leader(validated(build_batch(built, **batch_options)), leader_epoch=0)
    log.high_watermark = log.log_end_offset


def fill(log: Log, updates: list[tuple], *, timestamp: int, batch: int = 1) -> None:
    for i in range(0, len(updates), batch):
        append(log, [(k, v, timestamp) for k, v in updates[i : i + batch]])


def consume(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from the log start, read through ``Log.read`` as a fetch would."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).read()
        if not data:
            break
        position = 0
        while position + 61 <= len(data):
            header = parse_header(data, position)
            out.extend((r.offset, r.key, r.value) for r in iter_records(data, position) if r.offset >= offset)
            offset = header.next_offset
            position += header.size
    return out


def batches(log: Log) -> list:
    """The headers of every batch, segment by segment."""
    headers = []
    for segment in log.segments:
        data = segment.log.read(0, segment.size)
        position = 0
        while position < len(data):
            headers.append(parse_header(data, position))
            position += headers[-1].size
    return headers


def latest_per_key(records: list[tuple[int, bytes | None, bytes | None]]) -> list[tuple[int, bytes | None, bytes | None]]:
    last = {key: (offset, key, value) for offset, key, value in records}
    return sorted(last.values())


def updates(count: int, keys: int, tag: bytes = b"v") -> list[tuple[bytes, bytes]]:
    return [(b"key-%d" % (i % keys), b"%s-%d" % (tag, i)) for i in range(count)]


# -- what compaction keeps ------------------------------------------------------------------------------------


def test_the_last_value_of_every_key_is_kept_at_its_offset(open_log, clean, clock):
    log = open_log({**COMPACT, "segment.bytes": "1200"})
    fill(log, updates(300, 7), timestamp=clock.now)
    before = consume(log)
    active_base = log.active_segment.base_offset
    active_bytes = log.active_segment.log.read(0, log.active_segment.size)
    size_before, end_before = log.size_in_bytes, log.log_end_offset

    assert clean(log) == 1

    after = consume(log)
    cleanable = [r for r in before if r[0] < active_base]
    assert after == latest_per_key(cleanable) + [r for r in before if r[0] >= active_base]
    assert log.log_end_offset == end_before
    assert log.active_segment.base_offset == active_base
    assert log.active_segment.log.read(0, log.active_segment.size) == active_bytes
    assert log.size_in_bytes < size_before / 5
    assert clean.checkpoint == active_base


def test_only_the_active_segment_is_left_alone_a_log_without_older_segments_is_not_cleaned(open_log, clean, clock):
    log = open_log(COMPACT)
    fill(log, updates(100, 3), timestamp=clock.now)
    before = consume(log)
    assert len(log.segments) == 1
    assert clean(log) == 0
    assert consume(log) == before


def test_a_cleaned_log_reads_the_same_after_a_restart(open_log, clean, clock, tmp_path):
    log = open_log({**COMPACT, "segment.bytes": "1200"})
    fill(log, updates(200, 5), timestamp=clock.now)
    clean(log)
    after = consume(log)
    log.close()
    reopened = open_log({**COMPACT, "segment.bytes": "1200"}, had_clean_shutdown=False)
    assert consume(reopened) == after
    assert not [p.name for p in (tmp_path / "topic-0").iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]


def test_the_cleaner_checkpoint_is_kafkas_text_file_and_a_clean_log_is_not_cleaned_again(open_log, clean, clock, tmp_path):
    log = open_log({**COMPACT, "segment.bytes": "1200"})
    fill(log, updates(200, 5), timestamp=clock.now)
    clean(log)
    end = log.active_segment.base_offset
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text() == f"0\n1\ntopic 0 {end}\n"
    assert Cleaning(tmp_path, clock)(log) == 0  # a new cleaner reads the checkpoint: nothing is dirty


def test_records_without_a_key_are_removed(open_log, clean, clock):
    log = open_log({**COMPACT, "segment.bytes": "600"})
    fill(log, [(b"k", b"1"), (None, b"no key"), (b"k", b"2")] * 10, timestamp=clock.now)
    active_base = log.active_segment.base_offset
    clean(log)
    assert all(key is not None for offset, key, _ in consume(log) if offset < active_base)


# -- when a log is cleaned ------------------------------------------------------------------------------------


def _dirty_ratio_after_first_clean(log, clean, clock):
    """Clean everything once, add dirty segments, and return the dirty ratio the cleaner will see."""
    clean(log)
    clean_bytes = sum(s.size for s in log.segments[:-1])
    fill(log, updates(25, 4, b"w"), timestamp=clock.now)
    dirty_bytes = sum(s.size for s in log.segments[:-1]) - clean_bytes
    return dirty_bytes / (clean_bytes + dirty_bytes)


@pytest.mark.parametrize("above", [False, True])
def test_a_log_is_cleaned_only_when_its_dirty_ratio_exceeds_min_cleanable_dirty_ratio(open_log, clean, clock, above):
    log = open_log({**COMPACT, "segment.bytes": "1200"})
    fill(log, updates(200, 4), timestamp=clock.now)
    ratio = _dirty_ratio_after_first_clean(log, clean, clock)
    assert 0.1 < ratio < 0.9
    log.config = log.config.with_overrides({**COMPACT, "segment.bytes": "1200", "min.cleanable.dirty.ratio": str(ratio - 0.01 if above else ratio)})
    before = consume(log)
    assert clean(log) == (1 if above else 0)
    assert (consume(log) == before) is not above


def test_segments_younger_than_min_compaction_lag_stay_dirty(open_log, clean, clock):
    log = open_log({**COMPACT, "segment.bytes": "1200", "min.compaction.lag.ms": "60000"})
    fill(log, updates(100, 4, b"old"), timestamp=clock.now - 120_000)
    old_end = log.roll().base_offset
    fill(log, updates(100, 4, b"new"), timestamp=clock.now - 1_000)
    before = consume(log)
    assert clean(log) == 1
    after = consume(log)
    young = [r for r in before if r[0] >= old_end]
    assert [r for r in after if r[0] >= old_end] == young  # every recent update is still there
    assert [r for r in after if r[0] < old_end] == latest_per_key([r for r in before if r[0] < old_end])
    assert clean.checkpoint == old_end

    clock.advance(60_000)
    assert clean(log) == 1
    assert len(consume(log)) < len(after)


def test_max_compaction_lag_forces_a_cleaning_below_the_dirty_ratio(open_log, clean, clock):
    log = open_log({**COMPACT, "segment.bytes": "1200", "min.cleanable.dirty.ratio": "1"})
    fill(log, updates(100, 4), timestamp=clock.now - 10_000)
    assert clean(log) == 0  # a ratio of 1 is never exceeded
    log.config = log.config.with_overrides({**COMPACT, "segment.bytes": "1200", "min.cleanable.dirty.ratio": "1", "max.compaction.lag.ms": "5000"})
    assert clean(log) == 1
    assert len(consume(log)) < 20


def test_cleanup_policy_compact_delete_applies_retention_and_compaction(open_log, clean, clock):
    log = open_log({"cleanup.policy": "compact,delete", "segment.bytes": "1200", "retention.ms": "60000"})
    fill(log, updates(100, 4, b"expired"), timestamp=clock.now - 120_000)
    log.roll()
    expired_end = log.log_end_offset
    fill(log, updates(100, 4, b"kept"), timestamp=clock.now)
    assert log.delete_old_segments(clock.now) > 0
    assert log.log_start_offset == expired_end
    before = consume(log)
    assert clean(log) == 1
    active_base = log.active_segment.base_offset
    assert consume(log) == latest_per_key([r for r in before if r[0] < active_base]) + [r for r in before if r[0] >= active_base]


def test_the_key_map_limit_splits_cleaning_into_rounds(tmp_path, open_log, clock):
    log = open_log({**COMPACT, "segment.bytes": "1200", "min.cleanable.dirty.ratio": "0.01"})
    fill(log, updates(300, 30), timestamp=clock.now)
    active_base = log.active_segment.base_offset
    cleanable = [r for r in consume(log) if r[0] < active_base]
    clean = Cleaning(tmp_path, clock, CleanerConfig(dedupe_buffer_size=24 * 10, dedupe_buffer_load_factor=1.0))

    assert clean(log) == 1
    assert clean.checkpoint is not None and clean.checkpoint < active_base  # 10 of the 30 keys mapped: part of the dirty section
    while clean(log):
        pass
    assert clean.checkpoint == active_base
    assert [r for r in consume(log) if r[0] < active_base] == latest_per_key(cleanable)


# -- tombstones -------------------------------------------------------------------------------------------------


def test_a_tombstone_outlives_its_key_for_delete_retention_ms_after_the_cleaning_that_saw_it(open_log, clean, clock):
    config = {**COMPACT, "segment.bytes": "1200", "delete.retention.ms": "100000", "min.cleanable.dirty.ratio": "0.01"}
    log = open_log(config)
    fill(log, updates(40, 4), timestamp=clock.now - 500_000)
    fill(log, [(b"key-1", None)], timestamp=clock.now - 500_000)  # written long ago: the horizon starts at cleaning
    log.roll()
    tombstone_offset = log.log_end_offset - 1

    first_clean = clock.now
    assert clean(log) == 1
    records = consume(log)
    assert (tombstone_offset, b"key-1", None) in records
    assert [r for r in records if r[1] == b"key-1"] == [(tombstone_offset, b"key-1", None)]
    marked = [h for h in batches(log) if h.base_offset <= tombstone_offset <= h.last_offset]
    assert marked[0].has_delete_horizon and marked[0].base_timestamp == first_clean + 100_000

    for advance, kept in ((99_000, True), (1_001, False)):
        clock.advance(advance)
        fill(log, [(b"other-%d" % (i % 3), b"more") for i in range(12)], timestamp=clock.now)
        log.roll()
        assert clean(log) == 1
        assert ((tombstone_offset, b"key-1", None) in consume(log)) is kept
    assert b"key-1" not in {key for _, key, _ in consume(log)}
    assert {b"key-0", b"key-2", b"key-3"} <= {key for _, key, _ in consume(log)}


# -- batches ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
@pytest.mark.parametrize("timestamp_type", list(TimestampType)[1:], ids=lambda t: t.name)
def test_rebuilt_batches_keep_codec_offsets_timestamps_and_headers(open_log, clean, clock, codec, timestamp_type):
    log = open_log({**COMPACT, "segment.bytes": "4000"})
    for n in range(40):
        records = [Record(timestamp=clock.now - 1000 + n * 10 + i, key=b"key-%d" % ((n * 10 + i) % 13), value=b"value-%d" % (n * 10 + i) * 5, headers=[("h", b"%d" % i)]) for i in range(10)]
        log.append_as_leader(validated(build_batch(records, compression=codec, timestamp_type=timestamp_type)), leader_epoch=3, log_append_time=clock.now if timestamp_type == TimestampType.LOG_APPEND_TIME else None)
    log.high_watermark = log.log_end_offset
    active_base = log.active_segment.base_offset
    original = {}
    for segment in log.segments:
        data = segment.log.read(0, segment.size)
        position = 0
        while position < len(data):
            header = parse_header(data, position)
            for record in iter_records(data, position):
                original[record.offset] = (record, header)
            position += header.size

    assert clean(log) == 1

    survivors = {offset for offset, _, _ in consume(log)}
    cleanable_keys = {original[o][0].key for o in original if o < active_base}
    assert len([o for o in survivors if o < active_base]) == len(cleanable_keys)
    for header in batches(log):
        assert header.compression == codec
        assert header.timestamp_type == timestamp_type
        assert header.partition_leader_epoch == 3
        assert (header.last_offset + 1) % 10 == 0  # each batch still ends where the producer's did
    for segment in log.segments:
        data = segment.log.read(0, segment.size)
        position = 0
        while position < len(data):
            header = parse_header(data, position)
            for record in iter_records(data, position):
                before, _ = original[record.offset]
                assert (record.key, record.value, record.headers, record.timestamp) == (before.key, before.value, before.headers, before.timestamp)
            position += header.size


def test_the_last_batch_of_an_idempotent_producer_survives_so_it_can_go_on(open_log, clean, clock):
    options = {**COMPACT, "segment.bytes": "1200"}
    log = open_log(options)
    append(log, [(b"a", b"1"), (b"b", b"1")], producer_id=7, producer_epoch=0, base_sequence=0)
    producer_batch = batches(log)[-1]
    fill(log, updates(60, 4) + [(b"a", b"2"), (b"b", b"2")], timestamp=clock.now)  # supersede both records
    log.roll()
    assert clean(log) == 1

    kept = [h for h in batches(log) if h.producer_id == 7]
    assert len(kept) == 1 and kept[0].records_count == 0
    assert (kept[0].base_offset, kept[0].last_offset, kept[0].base_sequence) == (producer_batch.base_offset, producer_batch.last_offset, 0)
    assert not [r for r in consume(log) if r[2] == b"1"]
    log.close()
    reopened = open_log(options, had_clean_shutdown=False)
    append(reopened, [(b"c", b"1")], producer_id=7, producer_epoch=0, base_sequence=2)  # in sequence: accepted
    with pytest.raises(KafkaError):
        append(reopened, [(b"c", b"1")], producer_id=7, producer_epoch=0, base_sequence=9)


def test_cleaned_segments_stay_within_segment_bytes_and_the_index_size(open_log, clean, clock):
    # 12 index entries per segment, one per batch: the index, not segment.bytes, is the limit that binds.
    options = {**COMPACT, "segment.bytes": "2000", "segment.index.bytes": "96", "index.interval.bytes": "1"}
    log = open_log(options)
    rolled: set[int] = set()
    for round_ in range(6):
        fill(log, updates(120, 40, b"r%d" % round_), timestamp=clock.now)
        rolled.update(segment.base_offset for segment in log.segments)
        assert clean(log) == 1
        for segment in log.segments[:-1]:
            assert segment.size <= 2000
            assert segment.offset_index.entries * 8 <= 96
    assert len(log.segments) < len(rolled) / 2  # segments emptied by one cleaning are merged by the next
    active_base = log.active_segment.base_offset
    cleaned = [r for r in consume(log) if r[0] < active_base]
    assert len({key for _, key, _ in cleaned}) == len(cleaned) == 40


# -- concurrency and crashes ------------------------------------------------------------------------------------


def test_appends_and_reads_go_on_while_another_thread_cleans(open_log, clean, clock):
    log = open_log({**COMPACT, "segment.bytes": "3000"})
    fill(log, updates(3000, 50), timestamp=clock.now, batch=5)
    written = consume(log)
    errors: list[BaseException] = []
    appending = threading.Event()
    appending.set()
    cleanings_while_appending = 0

    def cleaning() -> None:
        # Appends keep making new dirty segments, so "clean until nothing is left" would never end while
        # they go on: clean alongside them, then finish what they left.
        nonlocal cleanings_while_appending
        try:
            while appending.is_set():
                cleanings_while_appending += 1 if clean(log) else 0
            while clean(log):
                pass
        except BaseException as exc:  # noqa: BLE001 -- reported by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=cleaning)
    thread.start()
    for i in range(300):
        batch = updates(5, 50, b"live-%d" % i)
        append(log, batch)
        written.extend((log.log_end_offset - 5 + j, k, v) for j, (k, v) in enumerate(batch))
        assert consume(log)[-5:] == written[-5:]
    appending.clear()
    thread.join()
    assert not errors
    assert cleanings_while_appending > 0
    read = consume(log)
    assert latest_per_key(read) == latest_per_key(written)
    assert set(read) <= set(written)
    assert [o for o, _, _ in read] == sorted({o for o, _, _ in read})


def test_a_truncation_while_cleaning_abandons_the_swap(open_log, clock):
    log = open_log({**COMPACT, "segment.bytes": "1200"})
    fill(log, updates(100, 4), timestamp=clock.now)
    before = consume(log)
    truncations = log.truncations
    replaced = list(log.segments[:2])
    cleaned = log.new_cleaned_segment(replaced[0].base_offset)
    log.truncate_to(log.log_end_offset - 1)
    assert not log.replace_segments(cleaned, replaced, truncations)
    assert consume(log) == before[:-1]


def _crash_cleaning_at_rename(directory: Path, log_dir: Path, options: dict[str, str], crash_at: int) -> int:
    """Clean in a forked child that dies (``os._exit``, no cleanup) at its ``crash_at``-th rename; the exit
    status is 0 if the cleaning finished first."""
    pid = os.fork()
    if pid == 0:
        try:
            calls = 0
            real_rename = os.rename

            def dying_rename(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
                nonlocal calls
                calls += 1
                if calls == crash_at:
                    os._exit(3)
                return real_rename(src, dst, *args, **kwargs)

            os.rename = dying_rename  # type: ignore[assignment]
            log = Log.open(directory, LogConfig.from_props(options), high_watermark=2**62)
            LogCleaner(CleanerConfig(), [log_dir]).clean_logs([(TP, log, log_dir)])
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_crash_at_any_point_of_a_swap_leaves_a_recoverable_log_missing_nothing(tmp_path, clock):
    options = {**COMPACT, "segment.bytes": "4000"}
    template = tmp_path / "template" / "topic-0"
    log = Log.open(template, LogConfig.from_props(options))
    for round_ in range(4):
        fill(log, updates(25, 6, b"r%d" % round_), timestamp=clock.now)
        log.roll()  # four small segments: cleaned into groups that each replace several
    fill(log, updates(3, 6, b"active"), timestamp=clock.now)
    written = consume(log)
    end = log.log_end_offset
    log.close()

    crash_at = 1
    while True:
        log_dir = tmp_path / f"crash-{crash_at}"
        shutil.copytree(template.parent, log_dir)
        status = _crash_cleaning_at_rename(log_dir / "topic-0", log_dir, options, crash_at)
        assert status in (0, 3)
        recovered = Log.open(log_dir / "topic-0", LogConfig.from_props(options), had_clean_shutdown=False, high_watermark=end)
        records = consume(recovered)
        assert recovered.log_end_offset == end
        assert set(records) <= set(written)
        assert latest_per_key(records) == latest_per_key(written)
        assert not [p.name for p in (log_dir / "topic-0").iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
        assert Cleaning(log_dir, clock)(recovered) <= 1  # and cleaning goes on from there
        assert [r for r in consume(recovered) if r[0] < recovered.active_segment.base_offset] == latest_per_key([r for r in written if r[0] < recovered.active_segment.base_offset])
        recovered.close()
        if status == 0:
            break
        crash_at += 1
    assert crash_at > 10  # the crash points covered the whole swap: .cleaned -> .swap, old -> .deleted, .swap -> final


# -- transactions -------------------------------------------------------------------------------------------------


def markers(log: Log) -> dict[int, object]:
    """offset -> header of each transaction marker left."""
    return {h.base_offset: h for h in batches(log) if h.is_control}


def aborted_entries(log: Log) -> list[tuple[int, int, int]]:
    return [(t.producer_id, t.first_offset, t.last_offset) for t in log.collect_aborted_transactions(0, log.log_end_offset)]


def test_aborted_data_goes_at_once_and_its_marker_after_delete_retention_ms_as_kafka_cleans_transactions(open_log, clean, clock, write_marker):
    log = open_log({**COMPACT, "segment.bytes": "1200", "delete.retention.ms": "100000", "min.cleanable.dirty.ratio": "0.01"})

    def end(producer_id: int, commit: bool) -> int:
        offset = write_marker(log, producer_id, 0, 0, commit).first_offset
        log.high_watermark = log.log_end_offset
        return offset

    append(log, [(b"a", b"aborted"), (b"b", b"aborted")], producer_id=10, producer_epoch=0, base_sequence=0, is_transactional=True)
    first_abort = end(10, commit=False)
    append(log, [(b"c", b"committed")], producer_id=20, producer_epoch=0, base_sequence=0, is_transactional=True)
    commit = end(20, commit=True)
    append(log, [(b"d", b"aborted")], producer_id=10, producer_epoch=0, base_sequence=2, is_transactional=True)
    last_abort = end(10, commit=False)
    fill(log, updates(30, 3), timestamp=clock.now)
    log.roll()
    assert aborted_entries(log) == [(10, 0, first_abort), (10, commit + 1, last_abort)]

    first_clean = clock.now
    assert clean(log) == 1
    values = {key: value for _, key, value in consume(log)}
    assert values.get(b"c") == b"committed" and not {b"a", b"b", b"d"} & set(values)
    # The markers stay (their transactions' data was there when this cleaning started), with their entries.
    assert set(markers(log)) == {first_abort, commit, last_abort}
    assert aborted_entries(log) == [(10, 0, first_abort), (10, commit + 1, last_abort)]
    # d's batch was producer 10's last: kept, emptied, so that its sequence survives.
    (kept,) = [h for h in batches(log) if h.producer_id == 10 and not h.is_control]
    assert (kept.base_offset, kept.records_count) == (commit + 1, 0)

    clock.advance(1000)
    fill(log, updates(12, 3, b"w"), timestamp=clock.now)
    log.roll()
    second_clean = clock.now
    assert clean(log) == 1
    # No data left to mark: the first abort marker gets a delete horizon, and no index entry any more. The last
    # one still marks producer 10's kept (empty) batch; the commit marker, c's batch.
    found = markers(log)
    assert found[first_abort].has_delete_horizon and found[first_abort].base_timestamp == second_clean + 100_000
    assert not found[commit].has_delete_horizon and not found[last_abort].has_delete_horizon
    assert aborted_entries(log) == [(10, commit + 1, last_abort)]
    assert first_clean < second_clean

    for advance, kept_marker in ((98_000, True), (2_001, False)):
        clock.advance(advance)
        fill(log, updates(12, 3, b"x"), timestamp=clock.now)
        log.roll()
        assert clean(log) == 1
        assert (first_abort in markers(log)) is kept_marker
    assert set(markers(log)) == {commit, last_abort}
    assert log.last_stable_offset == log.high_watermark
