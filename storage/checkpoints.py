"""The small state files Kafka keeps beside the segments, in Kafka's exact text formats.

Per log directory: ``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint`` and
``log-start-offset-checkpoint`` (``0`` / count / ``topic partition offset`` lines), ``meta.properties``
(Java properties) and the ``.kafka_cleanshutdown`` marker. Per partition: ``leader-epoch-checkpoint``
(``0`` / count / ``epoch startOffset`` lines) and ``partition.metadata`` (``version: 0`` / ``topic_id: <id>``).

Every write goes to ``<name>.tmp``, is fsynced, renamed over the file and the directory fsynced (Kafka's
CheckpointFile + Utils.atomicMoveWithFallback), so a crash at any instant leaves either the old or the new
file, never a torn one.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from odradek.protocol.kafka_uuid import Uuid
from odradek.storage.topic_partition import TopicPartition

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
CHECKPOINT_VERSION = 0


class CorruptCheckpointError(Exception):
    """A checkpoint file that does not parse (Kafka raises KafkaStorageException and takes the dir offline)."""


def write_atomically(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write ``path`` so a crash leaves the old content or the new, never a mixture.

    ``sync=False`` skips the fsyncs (the rename is still atomic) for files flushed later with the data they
    describe, as Kafka does with the producer snapshot written at a segment roll.
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def fsync_file(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@functools.cache
def _syncfs() -> Any:
    """libc's ``syncfs``, or None. ctypes is imported and the C library's symbols looked up (in the process
    itself: ``find_library`` would run ``ldconfig``) at the first call, not by every process that imports
    this module."""
    import ctypes

    return getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)


def sync_filesystem(path: Path) -> None:
    """Make everything written to ``path``'s filesystem durable with one call (Linux ``syncfs``; elsewhere
    ``sync``): many small files written with ``sync=False`` cost one journal commit instead of two each."""
    syncfs = _syncfs()
    if syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        if syncfs(fd) != 0:
            import ctypes

            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error), str(path))
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _format(entries: Iterable[str]) -> bytes:
    lines = list(entries)
    return "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(lines)), *lines]).encode()


def _parse(path: Path, fields: int) -> list[list[str]]:
    """The entry lines of a version-0 checkpoint, each split in ``fields`` parts; [] if the file is absent."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        version = int(lines[0])
        count = int(lines[1])
    except (IndexError, ValueError):
        raise CorruptCheckpointError(f"Malformed line in checkpoint file ({path}): missing version or count") from None
    if version != CHECKPOINT_VERSION:
        raise CorruptCheckpointError(f"Unrecognized version of the checkpoint file ({path}): {version}")
    entries = [line.split(" ") for line in lines[2:]]
    if len(entries) != count or any(len(entry) != fields for entry in entries):
        raise CorruptCheckpointError(f"Expected {count} entries in checkpoint file ({path}), but found {len(entries)}")
    return entries


class OffsetCheckpointFile:
    """``topic partition offset`` per line: recovery points, high watermarks, log start offsets."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        write_atomically(self.path, _format(f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()))

    def read(self) -> dict[TopicPartition, int]:
        try:
            return {(topic, int(partition)): int(offset) for topic, partition, offset in _parse(self.path, 3)}
        except ValueError:
            raise CorruptCheckpointError(f"Malformed line in checkpoint file ({self.path})") from None


class LeaderEpochCheckpointFile:
    """``epoch startOffset`` per line, oldest epoch first."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, entries: Iterable[tuple[int, int]], *, sync: bool = True) -> None:
        write_atomically(self.path, _format(f"{epoch} {start_offset}" for epoch, start_offset in entries), sync=sync)

    def read(self) -> list[tuple[int, int]]:
        try:
            return [(int(epoch), int(start_offset)) for epoch, start_offset in _parse(self.path, 2)]
        except ValueError:
            raise CorruptCheckpointError(f"Malformed line in checkpoint file ({self.path})") from None


def topic_id_to_string(topic_id: Uuid) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def topic_id_from_string(text: str) -> Uuid:
    return Uuid(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def write_partition_metadata(dir: Path, topic_id: Uuid, *, sync: bool = True) -> None:
    write_atomically(dir / PARTITION_METADATA, f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}".encode(), sync=sync)


def read_partition_metadata(dir: Path) -> Uuid | None:
    try:
        text = (dir / PARTITION_METADATA).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise CorruptCheckpointError(f"Malformed partition metadata file {dir / PARTITION_METADATA}")
    return topic_id_from_string(fields["topic_id"].strip())


def write_properties(path: Path, properties: Mapping[str, str]) -> None:
    """Java's Properties.store with an empty comment, as Kafka writes meta.properties."""
    stamp = time.strftime("%a %b %d %H:%M:%S %Z %Y")
    body = "".join(f"{key}={value}\n" for key, value in properties.items())
    write_atomically(path, f"#\n#{stamp}\n{body}".encode())


def read_properties(path: Path) -> dict[str, str] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    properties = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, _, value = line.partition("=")
        properties[key.strip()] = value.strip()
    return properties


def write_clean_shutdown(log_dir: Path, broker_epoch: int = -1) -> None:
    """Kafka's CleanShutdownFileHandler payload: a JSON map of strings."""
    write_atomically(log_dir / CLEAN_SHUTDOWN, json.dumps({"version": "0", "broker_epoch": str(broker_epoch)}, separators=(",", ":")).encode())
