"""DescribeLogDirs: per log directory, the partitions it holds with their size and lag, and its disk space.

As Kafka's ``ReplicaManager.describeLogDirs``: every configured directory is listed (absolute path), an
unreadable one with KAFKA_STORAGE_ERROR; ``topics`` null means every partition; a partition's offset lag is
how far its log end offset is behind the high watermark (0 on a leader). odradek has no future logs
(intra-broker moves), so ``is_future_key`` is always false. Total and usable bytes (v4+) come from the
file system holding the directory.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer
    from odradek.storage.log import Log

LONG_MAX = 2**63 - 1


def _dir_result(log_dir: Path, logs: list["Log"], wanted: set[tuple[str, int]] | None) -> dict:
    try:
        usage = shutil.disk_usage(log_dir)
    except OSError:
        return {"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": str(log_dir), "topics": []}
    by_topic: dict[str, list[dict]] = {}
    for log in sorted(logs, key=lambda l: (l.topic, l.partition)):
        if wanted is not None and (log.topic, log.partition) not in wanted:
            continue
        by_topic.setdefault(log.topic, []).append(
            {
                "partition_index": log.partition,
                "partition_size": log.size_in_bytes,
                "offset_lag": max(log.high_watermark - log.log_end_offset, 0),
                "is_future_key": False,
            }
        )
    return {
        "error_code": ErrorCode.NONE,
        "log_dir": str(log_dir),
        "topics": [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()],
        "total_bytes": min(usage.total, LONG_MAX),
        "usable_bytes": min(usage.free, LONG_MAX),
    }


def handle(server: "KafkaServer", request: Request) -> dict:
    topics = request.body.topics
    wanted = None if topics is None else {(t.topic, p) for t in topics for p in t.partitions}
    logs_by_dir: dict[Path, list["Log"]] = {}
    for log in server.log_manager.all_logs():
        logs_by_dir.setdefault(log.dir.parent.absolute(), []).append(log)
    results = [_dir_result(d.absolute(), logs_by_dir.get(d.absolute(), []), wanted) for d in server.log_dirs]
    return {"error_code": ErrorCode.NONE, "results": results}
