"""Kafka's replica placement (``AdminUtils.assignReplicasToBrokers``): which brokers hold each partition.

The goals, as Kafka states them: spread replicas evenly, spread each broker's followers over the other
brokers, and, when every broker has a rack, put each partition's replicas on different racks. The first
replica goes round robin from a start index; the others follow at a shift that grows by one each time the
partition ids wrap around the broker list. Kafka draws the start index and the first shift at random; given
the same ``start_index`` this gives Kafka's result exactly (the tests compare with Kafka's own code).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from odradek.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True)
class BrokerMetadata:
    broker_id: int
    rack: str | None = None


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerMetadata],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Partition id -> replicas, for ``partitions`` new partitions numbered from ``start_partition_id``
    (0 when negative). Brokers are taken in the order given (Kafka passes them sorted by id)."""
    if partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
        )
    draw = rng or random.Random()
    racks = {b.broker_id: b.rack for b in brokers}
    if all(rack is None for rack in racks.values()):
        return _round_robin([b.broker_id for b in brokers], partitions, replication_factor, start_index, start_partition_id, draw)
    if any(rack is None for rack in racks.values()):
        # Kafka's AdminOperationException, no API error of its own
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "Not all brokers have rack information for replica rack aware assignment.")
    return _rack_aware({b: r for b, r in racks.items() if r is not None}, partitions, replication_factor, start_index, start_partition_id, draw)


def _replica_index(first_replica_index: int, shift: int, replica_index: int, brokers: int) -> int:
    return (first_replica_index + 1 + (shift + replica_index) % (brokers - 1)) % brokers


def _starts(brokers: int, start_index: int, draw: random.Random) -> tuple[int, int]:
    """(first start index, first follower shift): both ``start_index`` if given, else two random draws."""
    if start_index >= 0:
        return start_index, start_index
    return draw.randrange(brokers), draw.randrange(brokers)


def _round_robin(broker_ids: list[int], partitions: int, rf: int, start_index: int, start_partition_id: int, draw: random.Random) -> dict[int, list[int]]:
    n = len(broker_ids)
    start, shift = _starts(n, start_index, draw)
    assignment: dict[int, list[int]] = {}
    for partition in range(max(0, start_partition_id), max(0, start_partition_id) + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        assignment[partition] = [broker_ids[first]] + [broker_ids[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
    return assignment


def rack_alternated_brokers(racks: dict[int, str]) -> list[int]:
    """Brokers taken one rack at a time (racks in name order, brokers by id in each): 0, 3, 6, 1, 4, 7, ..."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    turn = 0
    while len(result) < len(racks):
        if queues[turn]:
            result.append(queues[turn].pop(0))
        turn = (turn + 1) % len(queues)
    return result


def _rack_aware(racks: dict[int, str], partitions: int, rf: int, start_index: int, start_partition_id: int, draw: random.Random) -> dict[int, list[int]]:
    arranged = rack_alternated_brokers(racks)
    n = len(arranged)
    rack_count = len(set(racks.values()))
    start, shift = _starts(n, start_index, draw)
    assignment: dict[int, list[int]] = {}
    for partition in range(max(0, start_partition_id), max(0, start_partition_id) + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[_replica_index(first, shift * rack_count, k, n)]
                k += 1
                # Skip a broker on a rack that has a replica while some rack has none, and a broker that has
                # one while some broker has none.
                if (racks[broker] not in racks_used or len(racks_used) == rack_count) and (broker not in replicas or len(replicas) == n):
                    replicas.append(broker)
                    racks_used.add(racks[broker])
                    break
        assignment[partition] = replicas
    return assignment
