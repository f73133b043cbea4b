"""The broker's log directories: which partitions live where, and the files Kafka keeps per directory.

Each log directory holds one folder per partition plus ``meta.properties``, the three offset checkpoint
files, the log cleaner's ``cleaner-offset-checkpoint`` and, after a clean shutdown, ``.kafka_cleanshutdown``.
At startup logs of directories that shut down uncleanly are recovered at once; the others are opened on
first use (opening one reads only its last segment), so startup time does not grow with the amount of data.

Storage owns no threads or timers: the broker calls ``flush_due``, ``run_retention``, ``checkpoint``,
``clean_logs`` and ``delete_logs`` from its own schedule.

A deleted partition's directory is renamed ``<topic>-<partition>.<id>-delete`` at once and removed
``log.segment.delete.delay.ms`` (topic ``file.delete.delay.ms``) later, as Kafka's ``kafka-delete-logs``
task does; such directories found at startup (a shutdown came first) are queued again from that moment.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, TypeVar

from odradek.protocol.kafka_uuid import Uuid
from odradek.storage.checkpoints import (
    CLEAN_SHUTDOWN,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    read_properties,
    sync_filesystem,
    write_clean_shutdown,
    write_properties,
)
from odradek.storage.log import Log, log_future_dir_name, parse_topic_partition
from odradek.storage.log_config import LogConfig
from odradek.storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.storage.log_cleaner import LogCleaner

log = logging.getLogger("odradek.storage")

T = TypeVar("T")
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"


class InconsistentBrokerIdError(Exception):
    """meta.properties belongs to another broker id: Kafka refuses to start."""


class InconsistentClusterIdError(Exception):
    """meta.properties belongs to another cluster: Kafka refuses to start."""


class _UnloadedLog:
    """A partition found on disk after a clean shutdown, opened on first use."""

    def __init__(self, dir: Path, log_dir: Path) -> None:
        self.dir = dir
        self.log_dir = log_dir


def _now_ms() -> int:
    return int(time.time() * 1000)


def _each_log(duty: str, logs: Iterable[Log], action: Callable[[Log], T]) -> list[T]:
    """``action``'s results on every log, skipping (and logging) those where it fails: one partition's bad
    state or I/O error must not stop a duty for every other partition; it is tried again at the duty's next
    turn."""
    results = []
    for log_ in logs:
        try:
            results.append(action(log_))
        except Exception:
            log.exception("%s of %s-%d failed; the other partitions go on", duty.capitalize(), log_.topic, log_.partition)
    return results


class LogManager:
    def __init__(self, log_dirs: list[Path], broker_defaults: Mapping[str, str], *, time_ms: Callable[[], int] = _now_ms) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.broker_defaults = dict(broker_defaults)
        self.default_config = LogConfig.from_props({}, self.broker_defaults)
        self._time_ms = time_ms
        self._producer_id_expiration_ms = int(self.broker_defaults.get("producer.id.expiration.ms", DEFAULT_PRODUCER_ID_EXPIRATION_MS))
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dirs_of: dict[TopicPartition, Path] = {}
        self._partitions_in: Counter[Path] = Counter()
        """How many partitions each log directory holds (a new log goes to the least loaded)."""
        self._unloaded: dict[TopicPartition, _UnloadedLog] = {}
        self._futures: dict[TopicPartition, Log] = {}
        """Replicas being moved to another log directory (AlterReplicaLogDirs): the copy, ``<tp>.<id>-future``."""
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        """Where a partition's log goes when it is made (AlterReplicaLogDirs before the replica exists)."""
        self._topic_configs: dict[str, LogConfig] = {}
        self._recovery_points: dict[TopicPartition, int] = {}
        self._log_start_offsets: dict[TopicPartition, int] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}
        self._lock = threading.RLock()
        self._logs_to_be_deleted: list[tuple[Path, int]] = []  # (renamed directory, when it was queued)
        self.offline_dirs: set[Path] = set()
        """Log directories taken offline after an I/O error (Kafka's ``LogManager.handleLogDirFailure``)."""
        self._cleaner_settings = dict(self.broker_defaults)
        """The ``log.cleaner.*`` settings the cleaner is made with: those of the start."""

    @cached_property
    def cleaner(self) -> LogCleaner:
        """The log cleaner, made (its module imported) at its first use: the first cleaning pass, or a deleted
        partition's removal from its checkpoint. A start-up does not wait for it."""
        from odradek.storage.log_cleaner import CleanerConfig, LogCleaner

        return LogCleaner(CleanerConfig.from_props(self._cleaner_settings), self.log_dirs, time_ms=self._time_ms)

    # -- startup -------------------------------------------------------------------------------------------------

    def startup(self, cluster_id: str | None = None, broker_id: int = -1) -> None:
        """Check or write meta.properties, read the checkpoints, recover what a crash left, list the rest."""
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            self._check_meta_properties(log_dir, cluster_id, broker_id)
            clean = (log_dir / CLEAN_SHUTDOWN).exists()
            recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
            self._recovery_points.update(recovery_points)
            self._log_start_offsets.update(OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read())
            self._high_watermarks.update(OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).read())
            for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
                if not entry.is_dir():
                    continue
                if entry.name.endswith(DELETE_DIR_SUFFIX):
                    self._logs_to_be_deleted.append((Path(entry.path), self._time_ms()))  # deleted before a shutdown
                    continue
                if entry.name.endswith(STRAY_DIR_SUFFIX):
                    continue
                if entry.name.endswith(FUTURE_DIR_SUFFIX):
                    # a move that a stop interrupted: the copy is kept and the move goes on once the partition is
                    # hosted again (Kafka's future logs); recovered from its start, as its offsets are not checkpointed
                    tp = parse_topic_partition(entry.name)
                    log.info("Loading the future replica of %s-%d in %s", tp[0], tp[1], log_dir)
                    self._futures[tp] = self._open(tp, Path(entry.path), had_clean_shutdown=False, recovery_point=0)
                    continue
                try:
                    tp = parse_topic_partition(entry.name)
                except ValueError:
                    log.warning("Ignoring directory %s: not a topic-partition", entry.path)
                    continue
                if tp in self._log_dirs_of:
                    raise RuntimeError(f"Duplicate log directories for {tp[0]}-{tp[1]} are found in both {self._log_dirs_of[tp]} and {log_dir}")
                self._log_dirs_of[tp] = log_dir
                self._partitions_in[log_dir] += 1
                if clean:
                    self._unloaded[tp] = _UnloadedLog(Path(entry.path), log_dir)
                else:
                    log.info("Recovering %s after an unclean shutdown", entry.path)
                    self._logs[tp] = self._open(tp, Path(entry.path), had_clean_shutdown=False)
            if clean:
                (log_dir / CLEAN_SHUTDOWN).unlink()

    def _check_meta_properties(self, log_dir: Path, cluster_id: str | None, broker_id: int) -> None:
        path = log_dir / META_PROPERTIES
        properties = read_properties(path)
        if properties is None:
            fresh = {"cluster.id": cluster_id} if cluster_id else {}
            write_properties(path, {**fresh, "version": "0", "broker.id": str(broker_id)})
            return
        # Kafka 3.9's MetaPropertiesEnsemble.verify: the cluster id first, then the node id, same messages.
        stored_cluster = properties.get("cluster.id")
        if stored_cluster and cluster_id and stored_cluster != cluster_id:
            raise InconsistentClusterIdError(f"Invalid cluster.id in: {path}. Expected {cluster_id}, but read {stored_cluster}")
        stored_broker = properties.get("broker.id", properties.get("node.id"))
        if stored_broker is not None and broker_id >= 0 and int(stored_broker) != broker_id:
            raise InconsistentBrokerIdError(
                f"Stored node id {stored_broker} doesn't match previous node id {broker_id} in {path}. "
                "If you moved your data, make sure your configured node id matches. If you intend to create a new "
                "node, you should remove all data in your data directories."
            )
        if cluster_id and not stored_cluster:
            write_properties(path, {"cluster.id": cluster_id, **properties})

    def _open(self, tp: TopicPartition, dir: Path, *, had_clean_shutdown: bool, config: LogConfig | None = None, topic_id: Uuid | None = None, recovery_point: int | None = None) -> Log:
        future = recovery_point is not None
        return Log.open(
            dir,
            config or self._topic_configs.get(tp[0], self.default_config),
            log_start_offset=None if future else self._log_start_offsets.get(tp),
            recovery_point=recovery_point if recovery_point is not None else self._recovery_points.get(tp, 0),
            high_watermark=None if future else self._high_watermarks.get(tp),
            had_clean_shutdown=had_clean_shutdown,
            topic_id=topic_id,
            time_ms=self._time_ms,
            producer_id_expiration_ms=self._producer_id_expiration_ms,
        )

    # -- lookup and lifecycle ----------------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        tp = (topic, partition)
        with self._lock:
            log_ = self._logs.get(tp)
            if log_ is None and tp in self._unloaded:
                pending = self._unloaded.pop(tp)
                log_ = self._logs[tp] = self._open(tp, pending.dir, had_clean_shutdown=True)
            return log_

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None, topic_id: Uuid | None = None) -> Log:
        """The partition's log, created in the least loaded log directory if it does not exist yet."""
        tp = (topic, partition)
        with self._lock:
            if config is not None:
                self._topic_configs[topic] = config
            if tp in self._unloaded:
                pending = self._unloaded.pop(tp)
                self._logs[tp] = self._open(tp, pending.dir, had_clean_shutdown=True, config=config, topic_id=topic_id)
            log_ = self._logs.get(tp)
            if log_ is not None:
                if config is not None:
                    log_.config = config
                if topic_id is not None:
                    log_.assign_topic_id(topic_id)
                return log_
            preferred = self._preferred_dirs.pop(tp, None)
            log_dir = preferred if preferred in self.live_log_dirs else min(self.live_log_dirs, key=lambda d: self._partitions_in[d])
            log_ = Log.open(
                log_dir / f"{topic}-{partition}",
                config or self._topic_configs.get(topic, self.default_config),
                topic_id=topic_id,
                time_ms=self._time_ms,
                producer_id_expiration_ms=self._producer_id_expiration_ms,
            )
            self._logs[tp] = log_
            self._log_dirs_of[tp] = log_dir
            self._partitions_in[log_dir] += 1
            return log_

    def create_logs(self, topic: str, leader_epochs: Mapping[int, int | None], config: LogConfig, topic_id: Uuid) -> list[int]:
        """Make the logs of new partitions (index -> the leader epoch this broker starts, None if it follows)
        with their topic id, durable when this returns; returns the partitions it made (not those that had
        a log already). All or nothing: if one cannot be made, those it made are deleted again.

        Kafka fsyncs each partition's ``partition.metadata`` and ``leader-epoch-checkpoint`` (two fsyncs
        each, with their directory); here they are written as a batch and made durable by one filesystem
        sync, so thousands of new partitions take seconds instead of minutes.
        """
        made = []
        try:
            for index, epoch in leader_epochs.items():
                with self._lock:
                    if (topic, index) in self._log_dirs_of:
                        continue  # made by a request racing this one, which owns it
                    log_ = self.get_or_create_log(topic, index, config)
                made.append(index)
                log_.assign_topic_id(topic_id, sync=False)
                if epoch is not None:
                    log_.assign_epoch_start_offset(epoch, log_.log_end_offset, sync=False)
            with self._lock:
                used = {self._log_dirs_of[(topic, index)] for index in made}
            for log_dir in used:
                sync_filesystem(log_dir)
        except BaseException:
            for index in made:
                self.delete_log(topic, index)
            raise
        return made

    def set_broker_defaults(self, broker_defaults: Mapping[str, str]) -> None:
        """Dynamic broker configs changed the defaults: logs of topics the controller has not configured yet
        (opened at start-up before their topic's config arrives) use them."""
        with self._lock:
            self.broker_defaults = dict(broker_defaults)
            self.default_config = LogConfig.from_props({}, self.broker_defaults)

    def set_topic_config(self, topic: str, config: LogConfig) -> None:
        """New topic configs (AlterConfigs): applied to open logs and to logs opened later."""
        with self._lock:
            self._topic_configs[topic] = config
            for (name, _), log_ in self._logs.items():
                if name == topic:
                    log_.config = config

    # -- moving a replica between log directories (AlterReplicaLogDirs) --------------------------------------

    def log_dir(self, path: str) -> Path | None:
        """The configured log directory ``path`` names (Kafka compares absolute paths), else None."""
        return next((d for d in self.log_dirs if str(d.absolute()) == path), None)

    def future_log(self, topic: str, partition: int) -> Log | None:
        return self._futures.get((topic, partition))

    def future_logs(self) -> list[Log]:
        with self._lock:
            return list(self._futures.values())

    def maybe_update_preferred_log_dir(self, topic: str, partition: int, log_dir: Path) -> None:
        """Kafka's ``maybeUpdatePreferredLogDir``: remember where the partition's log is to be made, unless its
        log or its future log is there already."""
        tp = (topic, partition)
        with self._lock:
            future = self._futures.get(tp)
            if self._log_dirs_of.get(tp) != log_dir and (future is None or future.dir.parent != log_dir):
                self._preferred_dirs[tp] = log_dir

    def create_future_log(self, topic: str, partition: int, log_dir: Path) -> Log:
        """An empty log in ``log_dir`` that the partition's records are copied into, with its topic id."""
        tp = (topic, partition)
        with self._lock:
            current = self.get_log(topic, partition)
            assert current is not None and tp not in self._futures
            future = Log.open(
                log_dir / log_future_dir_name(topic, partition), current.config, topic_id=current.topic_id,
                time_ms=self._time_ms, producer_id_expiration_ms=self._producer_id_expiration_ms,
            )
            self._futures[tp] = future
            self._preferred_dirs.pop(tp, None)
            return future

    def remove_future_log(self, topic: str, partition: int) -> None:
        """Give up a move: the future log is deleted as a deleted partition's log is."""
        with self._lock:
            future = self._futures.pop((topic, partition), None)
        if future is not None:
            doomed = future.delete()
            with self._lock:
                self._logs_to_be_deleted.append((doomed, self._time_ms()))

    def replace_current_with_future(self, topic: str, partition: int) -> Log:
        """Kafka's ``replaceCurrentWithFutureLog``, once the copy has caught up (the caller holds both logs
        still): the future log becomes ``<topic>-<partition>`` in its directory, opened again there, and the
        old log is deleted as a deleted partition's is (readers that picked up its files keep them until then).
        Returns the partition's log."""
        tp = (topic, partition)
        with self._lock:
            future, current = self._futures.pop(tp), self._logs[tp]
            log_dir, name = future.dir.parent, f"{topic}-{partition}"
            future.flush()
            future.close()
            os.rename(future.dir, log_dir / name)
            sync_filesystem(log_dir)
            moved = Log.open(
                log_dir / name, current.config, log_start_offset=current.log_start_offset, recovery_point=current.log_end_offset,
                high_watermark=current.high_watermark, had_clean_shutdown=True, topic_id=current.topic_id,
                time_ms=self._time_ms, producer_id_expiration_ms=self._producer_id_expiration_ms,
            )
            for epoch, start in current.epoch_cache.entries:  # an epoch begun with no record yet is in no batch
                if epoch > (moved.latest_epoch if moved.latest_epoch is not None else -1):
                    moved.assign_epoch_start_offset(epoch, start)
            self._logs[tp] = moved
            self._partitions_in[self._log_dirs_of[tp]] -= 1
            self._log_dirs_of[tp] = log_dir
            self._partitions_in[log_dir] += 1
            self._recovery_points[tp] = moved.recovery_point
        doomed = current.delete()
        with self._lock:
            self._logs_to_be_deleted.append((doomed, self._time_ms()))
        log.info("The current replica of %s-%d is replaced with its future replica in %s", topic, partition, log_dir)
        return moved

    def delete_log(self, topic: str, partition: int) -> None:
        """Close the partition's log and rename its directory for deletion (``Log.delete``); ``delete_logs``
        removes the directory once ``file.delete.delay.ms`` has passed."""
        tp = (topic, partition)
        self.remove_future_log(topic, partition)
        with self._lock:
            log_ = self.get_log(topic, partition)
            self._logs.pop(tp, None)
            log_dir = self._log_dirs_of.pop(tp, None)
            if log_dir is not None:
                self._partitions_in[log_dir] -= 1
            for offsets in (self._recovery_points, self._log_start_offsets, self._high_watermarks):
                offsets.pop(tp, None)
            live = set(self._log_dirs_of)
        if log_ is not None:
            doomed = log_.delete()
            with self._lock:
                self._logs_to_be_deleted.append((doomed, self._time_ms()))
        if log_dir is not None and tp in self.cleaner.checkpoints():
            try:
                self.cleaner.update_checkpoint(log_dir, live, remove=tp)
            except OSError as exc:
                # Harmless if lost: the next checkpoint rewrite drops entries of partitions that are gone.
                log.warning("Could not remove %s-%d from the cleaner checkpoint of %s: %s", topic, partition, log_dir, exc)

    def delete_logs(self, now_ms: int) -> None:
        """Remove the renamed directories of deleted partitions whose ``file.delete.delay.ms`` has passed
        (Kafka's ``LogManager.deleteLogs``; the broker's default, as there)."""
        delay_ms = self.default_config.file_delete_delay_ms
        with self._lock:
            due = [d for d, queued_ms in self._logs_to_be_deleted if queued_ms + delay_ms <= now_ms]
            self._logs_to_be_deleted = [entry for entry in self._logs_to_be_deleted if entry[0] not in due]
        for doomed in due:
            import shutil  # here: with bz2 and lzma, which it imports, a few ms of every start

            shutil.rmtree(doomed, ignore_errors=True)
            log.info("Deleted log for partition %s in %s.", doomed.name.rsplit(".", 1)[0], doomed)

    @property
    def live_log_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def handle_log_dir_failure(self, failed: Path) -> list[TopicPartition]:
        """Forget the logs of a failed directory (closed as far as the disk lets), write nothing there any more;
        answers their partitions."""
        with self._lock:
            log_dir = next(d for d in self.log_dirs if d.resolve() == failed.resolve())
            self.offline_dirs.add(log_dir)
            gone = sorted(tp for tp, owner in self._log_dirs_of.items() if owner == log_dir)
            for tp, future in list(self._futures.items()):
                if future.dir.parent == log_dir:
                    del self._futures[tp]
            for tp in gone:
                del self._log_dirs_of[tp]
                self._unloaded.pop(tp, None)
                if (log_ := self._logs.pop(tp, None)) is not None:
                    try:
                        log_.close()
                    except OSError as exc:
                        log.warning("Closing %s-%d in the failed dir %s: %s", *tp, log_dir, exc)
            self._partitions_in.pop(log_dir, None)
        log.error("Logs for partitions %s are offline and logs for future partitions are offline due to failure on log directory %s", ",".join(f"{t}-{p}" for t, p in gone), log_dir)
        return gone

    def all_logs(self) -> list[Log]:
        with self._lock:
            for topic, partition in list(self._unloaded):
                self.get_log(topic, partition)
            return list(self._logs.values())

    def partitions(self) -> list[TopicPartition]:
        """Every partition with a log on this broker, loaded or not."""
        with self._lock:
            return sorted(self._log_dirs_of)

    # -- periodic work -------------------------------------------------------------------------------------------

    def run_retention(self, now_ms: int | None = None) -> int:
        """Delete segments past retention in every log (Kafka's log.retention.check.interval.ms task) and
        expire idle producer ids. Returns the number of segments deleted.

        Runs on a worker thread while appends go on: each log's own lock orders its deletions with its
        appends, and a log not opened since the start (after a clean shutdown) is opened here holding the
        manager's lock for that one log only, so a request for another partition never waits for the
        whole pass (tens of thousands of logs)."""
        now = self._time_ms() if now_ms is None else now_ms

        def retain(log_: Log) -> int:
            deleted = log_.delete_old_segments(now)
            log_.remove_expired_producers(now)
            return deleted

        logs = (log_ for tp in self.partitions() if (log_ := self.get_log(*tp)) is not None)  # None: deleted meanwhile
        return sum(_each_log("retention", logs, retain))

    def flush_due(self, now_ms: int | None = None) -> int:
        """fsync rolled segments and logs whose ``flush.ms`` elapsed. Returns how many logs were flushed."""
        now = self._time_ms() if now_ms is None else now_ms
        with self._lock:
            logs = list(self._logs.values())
        return sum(_each_log("flush", logs, lambda log_: log_.flush_due(now)))

    def clean_logs(self, now_ms: int | None = None) -> int:
        """Compact the logs that are due (Kafka's cleaner threads, between two log.cleaner.backoff.ms) and delete
        the segments cleaning replaced once file.delete.delay.ms passed. Returns how many logs were cleaned.
        Runs on a worker thread while appends go on: the cleaner takes each log's lock only to pin segments
        and to swap cleaned ones in."""
        now = self._time_ms() if now_ms is None else now_ms
        with self._lock:
            # a log being copied to another directory is not cleaned until the copy replaces it (Kafka's
            # abortAndPauseCleaning): the copy would hold records cleaning removes meanwhile
            logs = [(tp, log_, self._log_dirs_of[tp]) for tp, log_ in self._logs.items() if tp not in self._futures]
            live = set(self._log_dirs_of)
        _each_log("retired segment deletion", [log_ for _, log_, _ in logs], lambda log_: log_.delete_retired_segments(now))
        if not self.cleaner.config.enable:
            return 0
        return self.cleaner.clean_logs(logs, now, live)

    def checkpoint(self) -> None:
        """Write the three offset checkpoint files of every log directory (atomically), and the leader epoch
        checkpoints the logs' loading truncated without writing."""
        with self._lock:
            _each_log("leader epoch checkpoint", self._logs.values(), lambda log_: log_.epoch_cache.flush())
            for log_ in self._logs.values():
                tp = (log_.topic, log_.partition)
                self._recovery_points[tp] = log_.recovery_point
                self._high_watermarks[tp] = log_.high_watermark
                if log_.log_start_offset > log_.segments[0].base_offset:
                    self._log_start_offsets[tp] = log_.log_start_offset
                else:
                    self._log_start_offsets.pop(tp, None)
            for log_dir in self.live_log_dirs:
                mine = [tp for tp, owner in self._log_dirs_of.items() if owner == log_dir]
                for name, offsets in (
                    (RECOVERY_POINT_CHECKPOINT, self._recovery_points),
                    (REPLICATION_OFFSET_CHECKPOINT, self._high_watermarks),
                    (LOG_START_OFFSET_CHECKPOINT, self._log_start_offsets),
                ):
                    OffsetCheckpointFile(log_dir / name).write({tp: offsets[tp] for tp in mine if tp in offsets})

    def shutdown(self, mark_clean: bool = True) -> None:
        """Flush and close every log, write the checkpoints, then mark each directory cleanly shut down
        (unless ``mark_clean`` is False: the next start then recovers the logs from their recovery points)."""
        with self._lock:
            for log_ in (*self._logs.values(), *self._futures.values()):
                log_.flush()
            self.checkpoint()
            for log_ in (*self._logs.values(), *self._futures.values()):
                log_.close()
            for log_dir in self.live_log_dirs if mark_clean else ():
                write_clean_shutdown(log_dir)
            self._logs.clear()
            self._futures.clear()
            self._unloaded.clear()
