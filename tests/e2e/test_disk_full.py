"""A full disk: admin requests are answered KAFKA_STORAGE_ERROR instead of a closed connection, the topic
metadata stays what the disk holds, nothing is half-made, and everything works again once there is space.

The broker's log directory is a small tmpfs this test mounts (it runs as root) and unmounts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest
from tests.small_disks import fill, tmpfs

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import build_batch

E = ErrorCode


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", "8m") as mount:
        yield mount


def create(wire, name: str, partitions: int = 1) -> int:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 5000}
    return wire.call(ApiKey.CreateTopics, 4, body).topics[0].error_code


def delete_topic(wire, name: str) -> int:
    return wire.call(ApiKey.DeleteTopics, 4, {"topic_names": [name], "timeout_ms": 5000}).responses[0].error_code


def delete_records(wire, name: str, offset: int) -> tuple[int, int]:
    body = {"topics": [{"name": name, "partitions": [{"partition_index": 0, "offset": offset}]}], "timeout_ms": 5000}
    answer = wire.call(ApiKey.DeleteRecords, 1, body).topics[0].partitions[0]
    return answer.error_code, answer.low_watermark


def add_partitions(wire, name: str, count: int) -> int:
    body = {"topics": [{"name": name, "count": count, "assignments": None}], "timeout_ms": 5000, "validate_only": False}
    return wire.call(ApiKey.CreatePartitions, 1, body).results[0].error_code


def set_retention(wire, name: str, value: str) -> int:
    ops = [{"name": "retention.ms", "config_operation": 0, "value": value}]
    body = {"resources": [{"resource_type": 2, "resource_name": name, "configs": ops}], "validate_only": False}
    return wire.call(ApiKey.IncrementalAlterConfigs, 1, body).responses[0].error_code


def retention(wire, name: str) -> str | None:
    """The topic's retention.ms override, None if it has none."""
    body = {"resources": [{"resource_type": 2, "resource_name": name, "configuration_keys": ["retention.ms"]}], "include_synonyms": False}
    entry = wire.call(ApiKey.DescribeConfigs, 1, body).results[0].configs[0]
    return entry.value if entry.config_source == 1 else None


def topics(wire) -> dict[str, int]:
    return {t.name: len(t.partitions) for t in wire.call(ApiKey.Metadata, 1, {"topics": None}).topics}


def earliest(wire, name: str) -> int:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": name, "partitions": [{"partition_index": 0, "timestamp": -2}]}]}
    return wire.call(ApiKey.ListOffsets, 2, body).topics[0].partitions[0].offset


def test_admin_requests_on_a_full_disk_answer_and_recover(small_disk: Path, connect) -> None:
    with Broker(config={"log.dirs": str(small_disk)}, subprocess=True) as broker:
        wire = connect(broker.bootstrap)
        assert create(wire, "kept") == create(wire, "doomed") == E.NONE
        produce = {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": "kept", "partition_data": [{"index": 0, "records": build_batch([(None, b"v" * 100)] * 10)}]}]}
        assert wire.call(ApiKey.Produce, 7, produce).responses[0].partition_responses[0].error_code == E.NONE

        filler = fill(small_disk)
        assert delete_topic(wire, "doomed") == E.KAFKA_STORAGE_ERROR
        assert delete_records(wire, "kept", 5) == (E.KAFKA_STORAGE_ERROR, -1)
        assert earliest(wire, "kept") == 0, "a refused DeleteRecords deleted nothing"
        assert create(wire, "new", 3) == E.KAFKA_STORAGE_ERROR
        assert add_partitions(wire, "kept", 3) == E.KAFKA_STORAGE_ERROR
        assert set_retention(wire, "kept", "1000") == E.KAFKA_STORAGE_ERROR
        assert retention(wire, "kept") is None, "a config change that could not be persisted did not happen"
        assert topics(wire) == {"kept": 1, "doomed": 1}, "the metadata is what the disk holds"
        half_made = [d for d in os.listdir(small_disk) if d.startswith(("new-", "kept-1", "kept-2")) and not d.endswith("-delete")]
        assert not half_made, "no half-made topic or partition"

        filler.unlink()
        assert delete_topic(wire, "doomed") == E.NONE
        assert delete_records(wire, "kept", 5) == (E.NONE, 5)
        assert create(wire, "new", 3) == E.NONE
        assert add_partitions(wire, "kept", 3) == E.NONE
        broker.restart()
        wire = connect(broker.bootstrap)
        assert topics(wire) == {"kept": 3, "new": 3}
        assert earliest(wire, "kept") == 5
