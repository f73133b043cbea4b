"""The cluster metadata a controller with no state of its own recovers from the broker's log directories.

A ZooKeeper-mode Kafka keeps its cluster id, topics, assignments and leader epochs in ZooKeeper, not in
its log directories. odradek's embedded controller keeps them in its own state file. Started on log
directories written by a Kafka broker (or whose state file is gone), odradek has neither, so it recovers
what the directories do hold, as if it were reading that cluster's ZooKeeper:

* the cluster id from ``meta.properties``;
* a topic for every ``<topic>-<partition>`` directory, with as many partitions as the highest partition
  found plus one (this node is the only replica of each);
* the topic id from ``partition.metadata``;
* each partition's leader epoch from ``leader-epoch-checkpoint``: the latest epoch the broker led with,
  which a restarted single-node ZooKeeper controller keeps (it elects no one, its leader is alive again);
* the highest producer id handed out, from each partition's latest producer snapshot (written at every
  roll and at a clean shutdown), so that no new producer gets an id whose sequences a log already holds
  (ZooKeeper's ``/latest_producer_id_block`` is what prevents that in Kafka).

Topic configs live only in ZooKeeper (``/config/topics``), so recovered topics have none beyond those the
caller knows for internal topics (the offsets topic's compaction): others fall back to the broker
defaults until set again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from odradek.controller.metadata_image import PartitionState, TopicInfo
from odradek.protocol.kafka_uuid import Uuid, random_uuid
from odradek.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    META_PROPERTIES,
    CorruptCheckpointError,
    LeaderEpochCheckpointFile,
    read_partition_metadata,
    read_properties,
)
from odradek.storage.log import parse_topic_partition
from odradek.storage.log_manager import DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX
from odradek.storage.producer_state import SNAPSHOT_SUFFIX, CorruptSnapshotError, read_snapshot


class RecoveredMetadata:
    def __init__(self) -> None:
        self.cluster_id: str | None = None
        self.topics: dict[str, TopicInfo] = {}
        self.max_producer_id = -1


def recover_metadata(log_dirs: list[Path], node_id: int, internal_topic_configs: Mapping[str, dict[str, str]]) -> RecoveredMetadata:
    recovered = RecoveredMetadata()
    epochs: dict[str, dict[int, int]] = {}
    topic_ids: dict[str, Uuid] = {}
    for log_dir in log_dirs:
        properties = read_properties(log_dir / META_PROPERTIES) or {}
        recovered.cluster_id = recovered.cluster_id or properties.get("cluster.id")
        if not log_dir.is_dir():
            continue
        for entry in os.scandir(log_dir):
            if not entry.is_dir() or entry.name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
                continue
            try:
                topic, partition = parse_topic_partition(entry.name)
            except ValueError:
                continue
            directory = Path(entry.path)
            epochs.setdefault(topic, {})[partition] = _latest_epoch(directory)
            recovered.max_producer_id = max(recovered.max_producer_id, _max_producer_id(directory))
            topic_id = _topic_id(directory)
            if topic_id is not None:
                topic_ids.setdefault(topic, topic_id)
    for topic, partitions in sorted(epochs.items()):
        recovered.topics[topic] = TopicInfo(
            topic,
            topic_ids.get(topic) or random_uuid(),
            {p: PartitionState(node_id, partitions.get(p, 0), [node_id], [node_id]) for p in range(max(partitions) + 1)},
            dict(internal_topic_configs.get(topic, {})),
        )
    return recovered


# A damaged file yields nothing here: it is the partition's log that reports it (or rebuilds it) when it opens.


def _latest_epoch(partition_dir: Path) -> int:
    try:
        entries = LeaderEpochCheckpointFile(partition_dir / LEADER_EPOCH_CHECKPOINT).read()
    except CorruptCheckpointError:
        return 0
    return entries[-1][0] if entries else 0


def _topic_id(partition_dir: Path) -> Uuid | None:
    try:
        return read_partition_metadata(partition_dir)
    except CorruptCheckpointError:
        return None


def _max_producer_id(partition_dir: Path) -> int:
    """The highest producer id in the partition's latest snapshot; -1 if none."""
    snapshots = sorted(partition_dir.glob(f"*{SNAPSHOT_SUFFIX}"))
    if not snapshots:
        return -1
    try:
        return max((entry.producer_id for entry in read_snapshot(snapshots[-1])), default=-1)
    except CorruptSnapshotError:
        return -1
