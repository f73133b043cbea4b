"""The log directories: meta.properties, checkpoints, clean shutdown, lazy loading, deletion."""

from __future__ import annotations

import re
import time
import uuid

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.checkpoints import (
    CLEAN_SHUTDOWN,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_properties,
)
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import InconsistentBrokerIdError, InconsistentClusterIdError, LogManager
from tests.validated import validated


@pytest.fixture
def dirs(tmp_path):
    return [tmp_path / "d1", tmp_path / "d2"]


def _manager(dirs, clock, defaults=None, broker_id=3, cluster_id="abcdefghijklmnopqrstuv"):
    manager = LogManager(dirs, defaults or {}, time_ms=clock)
    manager.startup(cluster_id, broker_id)
    return manager


def test_startup_writes_and_then_checks_meta_properties(dirs, clock):
    _manager(dirs, clock).shutdown()
    text = (dirs[0] / "meta.properties").read_text()
    assert text.startswith("#\n#")
    assert read_properties(dirs[0] / "meta.properties") == {"cluster.id": "abcdefghijklmnopqrstuv", "version": "0", "broker.id": "3"}
    with pytest.raises(InconsistentBrokerIdError):
        _manager(dirs, clock, broker_id=4)
    with pytest.raises(InconsistentClusterIdError):
        _manager(dirs, clock, cluster_id="another-cluster-id-xyz")


def test_new_logs_spread_over_directories_and_carry_their_topic_id(dirs, clock):
    manager = _manager(dirs, clock)
    topic_id = uuid.uuid4()
    logs = [manager.get_or_create_log("orders", p, None, topic_id) for p in range(4)]
    assert sorted(log.dir.parent.name for log in logs) == ["d1", "d1", "d2", "d2"]
    assert all(log.topic_id == topic_id for log in logs)
    assert manager.get_or_create_log("orders", 0) is logs[0]
    assert manager.partitions() == [("orders", p) for p in range(4)]


def test_checkpoints_are_written_in_kafkas_text_format(dirs, clock, make_batch):
    manager = _manager(dirs, clock, {"log.segment.bytes": "1000"})
    log = manager.get_or_create_log("a-topic", 0)
    for _ in range(10):
        log.append_as_leader(validated(make_batch(2, value_size=200)), leader_epoch=0)
    log.high_watermark = 16
    log.flush()
    log.delete_records_before(log.segments[1].base_offset + 1)
    manager.checkpoint()
    home = log.dir.parent
    assert (home / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n1\na-topic 0 20\n"
    assert (home / REPLICATION_OFFSET_CHECKPOINT).read_text() == "0\n1\na-topic 0 16\n"
    assert (home / LOG_START_OFFSET_CHECKPOINT).read_text() == f"0\n1\na-topic 0 {log.log_start_offset}\n"
    other = dirs[1] if home == dirs[0] else dirs[0]
    assert (other / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n0\n"


def test_a_clean_restart_restores_offsets_without_recovery(dirs, clock, make_batch, open_segment_files):
    manager = _manager(dirs, clock)
    log = manager.get_or_create_log("t", 0)
    for _ in range(5):
        log.append_as_leader(validated(make_batch(3)), leader_epoch=2)
    log.high_watermark = 12
    manager.shutdown()
    assert (log.dir.parent / CLEAN_SHUTDOWN).read_text() == '{"version":"0","broker_epoch":"-1"}'

    manager = _manager(dirs, clock)
    assert not (log.dir.parent / CLEAN_SHUTDOWN).exists()  # a crash from now on is unclean
    assert open_segment_files(log.dir.parent) == set()  # nothing opened until asked for
    reopened = manager.get_log("t", 0)
    assert (reopened.log_end_offset, reopened.high_watermark, reopened.recovery_point) == (15, 12, 15)
    assert reopened.latest_epoch == 2


def test_an_unclean_restart_recovers_from_the_checkpointed_recovery_point(dirs, clock, make_batch):
    manager = _manager(dirs, clock)
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(validated(make_batch(3)), leader_epoch=0)
    log.flush()
    manager.checkpoint()
    log.append_as_leader(validated(make_batch(3)), leader_epoch=0)
    path = log.active_segment.path(".log")
    size = log.active_segment.size
    del manager, log  # crash: no shutdown
    with open(path, "r+b") as f:
        f.truncate(size - 1)
    manager = _manager(dirs, clock)
    recovered = manager.get_log("t", 0)
    assert recovered.log_end_offset == 3 and recovered.recovery_point == 3


def test_delete_log_renames_the_directory_and_removes_it_after_the_delay(dirs, clock, make_batch):
    """Kafka's LogManager: ``<topic>-<partition>.<uuid>-delete`` at once, gone after file.delete.delay.ms,
    and a renamed directory found at startup waits the delay again from then."""
    manager = _manager(dirs, clock, defaults={"log.segment.delete.delay.ms": "1000"})
    log = manager.get_or_create_log("gone", 1)
    log.append_as_leader(validated(make_batch(1)), leader_epoch=0)
    info = log.read(0, 100)
    manager.delete_log("gone", 1)
    renamed = [p for d in dirs for p in d.iterdir() if p.name.startswith("gone-1")]
    assert len(renamed) == 1 and re.fullmatch(r"gone-1\.[0-9a-f]{32}-delete", renamed[0].name)
    assert manager.get_log("gone", 1) is None and manager.partitions() == []
    assert info.size > 0 and len(info.read()) == info.size  # an in-flight read still has its bytes
    manager.delete_logs(clock.now + 999)
    assert renamed[0].exists()
    manager.delete_logs(clock.now + 1000)
    assert not renamed[0].exists()
    leftover = dirs[0] / "gone-2.0123456789abcdef0123456789abcdef-delete"
    leftover.mkdir()
    manager.shutdown()
    clock.advance(5000)
    restarted = _manager(dirs, clock, defaults={"log.segment.delete.delay.ms": "1000"})
    assert restarted.partitions() == []
    restarted.delete_logs(clock.now + 999)
    assert leftover.exists()
    restarted.delete_logs(clock.now + 1000)
    assert not leftover.exists()
    restarted.shutdown()


def test_a_long_topic_name_is_cut_so_the_delete_name_fits_255_characters(dirs, clock, make_batch):
    manager = _manager(dirs, clock)
    topic = "t" * 249
    manager.get_or_create_log(topic, 7).append_as_leader(validated(make_batch(1)), leader_epoch=0)
    manager.delete_log(topic, 7)
    (renamed,) = [p.name for d in dirs for p in d.iterdir() if p.name.endswith("-delete")]
    assert len(renamed) == 255 and re.fullmatch(r"t+-7\.[0-9a-f]{32}-delete", renamed)
    manager.shutdown()


def test_retention_and_flush_run_from_the_brokers_timers(dirs, clock, make_batch):
    manager = _manager(dirs, clock, {"log.retention.ms": "1000", "log.segment.bytes": "500", "log.flush.interval.ms": "5000"})
    log = manager.get_or_create_log("r", 0)
    for _ in range(6):
        log.append_as_leader(validated(make_batch(1, value_size=300, timestamp=clock.now)), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    assert manager.flush_due(clock.now) == 1  # the rolled segments
    assert log.recovery_point == log.active_segment.base_offset
    assert manager.flush_due(clock.now + 5000) == 1 and log.recovery_point == log.log_end_offset
    assert manager.run_retention(clock.now + 500) == 0
    assert manager.run_retention(clock.now + 2000) == 6
    assert log.log_start_offset == log.log_end_offset == 6


def test_topic_config_changes_reach_open_logs(dirs, clock):
    manager = _manager(dirs, clock)
    log = manager.get_or_create_log("c", 0, LogConfig.from_props({"retention.ms": "5"}))
    manager.set_topic_config("c", LogConfig.from_props({"retention.ms": "7"}))
    assert log.config.retention_ms == 7


def test_startup_after_clean_shutdown_does_not_grow_with_data(dirs, clock, make_batch, open_segment_files):
    """Reopening 20 partitions of 5 segments each reads no segment data beyond each last segment."""
    manager = _manager(dirs, clock, {"log.segment.bytes": "8000"})
    payload = make_batch(10, value_size=150)
    for p in range(20):
        log = manager.get_or_create_log("many", p)
        for _ in range(20):
            log.append_as_leader(validated(payload), leader_epoch=0)
    manager.shutdown()
    started = time.perf_counter()
    manager = _manager(dirs, clock)
    logs = [manager.get_log("many", p) for p in range(20)]
    elapsed = time.perf_counter() - started
    assert all(log.log_end_offset == 200 for log in logs)
    assert all(len(log.segments) == 5 for log in logs)
    opened = set().union(*(open_segment_files(d) for d in dirs))
    assert opened == set(), "the last segment read for the log end offset is released: idle logs hold no file"
    assert elapsed < 2.0


def test_idle_logs_hold_no_file_or_map_after_a_restart_until_used(dirs, clock, make_batch, open_segment_files):
    """vm.max_map_count bounds memory maps per process: loading a log maps nothing until it is written or read."""
    manager = _manager(dirs, clock)
    for p in range(50):
        manager.get_or_create_log("idle", p).append_as_leader(validated(make_batch(3)), leader_epoch=0)
    manager.shutdown()

    def maps() -> int:
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)

    before = maps()
    manager = _manager(dirs, clock)
    logs = manager.all_logs()
    assert [log.log_end_offset for log in logs] == [3] * 50
    assert maps() - before < 5 and not set().union(*(open_segment_files(d) for d in dirs))
    logs[0].append_as_leader(validated(make_batch(1)), leader_epoch=0)
    assert 2 <= maps() - before < 7, "the log written to maps its two indexes"
    assert set().union(*(open_segment_files(d) for d in dirs)) == {str(logs[0].active_segment.path(".log"))}
    manager.shutdown()


def test_a_log_keeps_its_topic_id(dirs, clock):
    manager = _manager(dirs, clock)
    log = manager.get_or_create_log("ids", 0)
    assert log.topic_id is None
    first = uuid.uuid4()
    manager.get_or_create_log("ids", 0, None, first)
    assert (log.dir / "partition.metadata").read_text().startswith("version: 0\ntopic_id: ")
    with pytest.raises(KafkaError) as raised:
        manager.get_or_create_log("ids", 0, None, uuid.uuid4())
    assert raised.value.code == ErrorCode.INCONSISTENT_TOPIC_ID
    manager.shutdown()
    assert _manager(dirs, clock).get_log("ids", 0).topic_id == first


def test_unclean_start_rebuilds_indexes_of_unflushed_segments_without_calling_them_corrupt(tmp_path, caplog):
    """After kill -9 an active segment's index is still preallocated (zero-filled). Recovery rebuilds it
    from the log; it must not first check it (2.6 million empty slots) and report it corrupt."""
    from odradek.storage.log_config import LogConfig
    from odradek.storage.log_manager import LogManager

    manager = LogManager([tmp_path], {})
    manager.startup("cluster", 0)
    for p in range(5):
        manager.get_or_create_log("__consumer_offsets", p, LogConfig.from_props({"cleanup.policy": "compact"}, {}))
    manager.checkpoint()  # no shutdown: as after kill -9
    with caplog.at_level("WARNING"):
        reopened = LogManager([tmp_path], {})
        reopened.startup("cluster", 0)
    assert not [r for r in caplog.records if "rebuilding the indexes" in r.getMessage()]
    assert all(reopened.get_log("__consumer_offsets", p).log_end_offset == 0 for p in range(5))


def test_one_partitions_bad_config_stops_no_duty_for_the_others(dirs, clock, make_batch, caplog):
    """A null retention.ms and cleanup.policy (what CreateTopics let through before it refused nulls, and
    what an older controller file can still hold) break only their own partition's duties."""
    manager = _manager(dirs, clock, {"log.retention.ms": "1000", "log.segment.bytes": "500"})
    manager.get_or_create_log("bad", 0, LogConfig.from_props({"retention.ms": None, "cleanup.policy": None}))
    good = manager.get_or_create_log("good", 0)
    for _ in range(3):
        good.append_as_leader(validated(make_batch(1, value_size=300, timestamp=clock.now)), leader_epoch=0)
    good.high_watermark = good.log_end_offset
    assert manager.flush_due(clock.now) == 1
    assert manager.run_retention(clock.now + 2000) == 3
    assert good.log_start_offset == 3
    assert manager.clean_logs(clock.now) == 0
    assert "Retention of bad-0 failed" in caplog.text and "measuring bad-0 for cleaning" in caplog.text


def test_a_future_log_is_kept_over_a_restart_and_then_replaces_the_current_one(dirs, clock, make_batch):
    """AlterReplicaLogDirs' storage side: a copy in ``<tp>.<uuid>-future`` in the other directory survives a
    stop (found at the next start, recovered from its start), then replaces the partition's log: renamed to
    ``<topic>-<partition>`` there, the old directory renamed ``-delete``, the epochs the copy lacks kept."""
    manager = _manager(dirs, clock)
    current = manager.get_or_create_log("moving", 0)
    current.assign_epoch_start_offset(3, 0)
    current.append_as_leader(validated(make_batch(5)), leader_epoch=3)
    future = manager.create_future_log("moving", 0, dirs[1] if current.dir.parent == dirs[0] else dirs[0])
    assert re.fullmatch(r"moving-0\.[0-9a-f]{32}-future", future.dir.name)
    copied = current.read(0, 1 << 20).read()
    future.append_as_follower(copied)
    manager.shutdown()
    restarted = _manager(dirs, clock)
    future = restarted.future_log("moving", 0)
    current = restarted.get_log("moving", 0)
    assert future is not None and current is not None and future.log_end_offset == current.log_end_offset == 5
    assert restarted.partitions() == [("moving", 0)]  # the copy is no partition of its own
    current.assign_epoch_start_offset(4, 5)  # a new epoch begun at the end, in no batch yet
    moved = restarted.replace_current_with_future("moving", 0)
    assert moved.dir == future.dir.parent / "moving-0" and moved.log_end_offset == 5
    assert moved.epoch_cache.entries == [(3, 0), (4, 5)]
    assert restarted.future_log("moving", 0) is None and restarted.get_log("moving", 0) is moved
    assert [p.name for p in current.dir.parent.iterdir() if p.name.startswith("moving-0")] == [current.dir.name]
    assert current.dir.name.endswith("-delete")
    assert moved.read(0, 1 << 20).read() == copied
    restarted.shutdown()


def test_a_log_being_copied_to_another_directory_is_not_cleaned(dirs, clock):
    """Kafka's abortAndPauseCleaning for a move: the cleaner leaves the log alone while a future log exists."""
    from odradek.protocol.records import Record, build_batch

    manager = _manager(dirs, clock)
    compacted = LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": "1000", "min.cleanable.dirty.ratio": "0.01"}, {})
    current = manager.get_or_create_log("compacted", 0, compacted)
    for n in range(30):
        current.append_as_leader(validated(build_batch([Record(key=b"k", value=b"v" * 100, timestamp=clock.now)])), leader_epoch=0)
    current.high_watermark = current.log_end_offset
    manager.create_future_log("compacted", 0, dirs[1] if current.dir.parent == dirs[0] else dirs[0])
    assert manager.clean_logs(clock.now) == 0
    manager.remove_future_log("compacted", 0)
    assert manager.clean_logs(clock.now) == 1
    manager.shutdown()
