"""A follower's partition for a replica fetcher run outside a broker: the fetcher reaches a log only
through its ``Partition``, as in the broker."""

from __future__ import annotations

import uuid
from typing import Callable

from odradek.broker.replication.partition import Partition
from odradek.controller.metadata_image import PartitionState
from odradek.storage.log import Log


def follower_partition(local: Log, broker_id: int, leader: int, leader_epoch: int, on_offsets_moved: Callable[[Partition], None] = lambda p: None) -> Partition:
    """Partition ``local.topic``-``local.partition`` of ``local``, followed by ``broker_id`` from ``leader``;
    ``on_offsets_moved`` is told after each append, truncation or high watermark move."""
    state = PartitionState(leader, leader_epoch, [leader, broker_id], [leader, broker_id])
    return Partition(local.topic, local.partition, uuid.UUID(int=0), local, state, broker_id, on_offsets_moved)
