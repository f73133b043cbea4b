"""Making the logs of new partitions (CreateTopics, CreatePartitions) before the controller publishes them.

Thousands of partitions mean thousands of directories and files: they are made on worker threads, a chunk
at a time, so the event loop keeps serving every other client, and publishing then only finds them. If
any cannot be made (a full disk, no descriptors), those this request made are deleted again and it is
answered KAFKA_STORAGE_ERROR: no topic or partition is left half-made.
"""

from __future__ import annotations

import anyio

from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.controller.metadata_image import TopicInfo
from odradek.protocol.errors import ErrorCode, KafkaError

CHUNK = 100
"""Partitions whose logs one worker-thread call makes."""


async def make_logs(replica_manager: ReplicaManager, planned: TopicInfo) -> list[int]:
    """Make the logs of ``planned.partitions`` (as the controller planned them) off the event loop: those with
    a replica on this broker (in a cluster, the others' brokers make theirs). Returns the partitions whose
    logs this call made, for :func:`unmake_logs` if the topic is then not published."""
    logs = replica_manager.log_manager
    config = replica_manager.log_config(planned)
    made: list[int] = []

    def make(indexes: list[int]) -> None:
        epochs = {i: planned.partitions[i].leader_epoch if planned.partitions[i].leader == replica_manager.broker_id else None for i in indexes}
        made.extend(logs.create_logs(planned.name, epochs, config, planned.topic_id))

    def unmake() -> None:
        unmake_logs(replica_manager, planned.name, made)

    indexes = sorted(i for i, state in planned.partitions.items() if replica_manager.broker_id in state.replicas)
    try:
        for start in range(0, len(indexes), CHUNK):
            await anyio.to_thread.run_sync(make, indexes[start : start + CHUNK])
    except OSError as exc:
        await anyio.to_thread.run_sync(unmake)
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Failed to create the logs of {planned.name}: {exc}") from None
    except BaseException:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(unmake)
        raise
    return made


def unmake_logs(replica_manager: ReplicaManager, topic: str, made: list[int]) -> None:
    """Delete the logs :func:`make_logs` made (each only renamed for deletion: quick)."""
    for index in made:
        replica_manager.log_manager.delete_log(topic, index)
