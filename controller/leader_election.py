"""The ElectLeaders API's rules, without ZooKeeper or sockets: which of the named partitions an election is
for, and the answer for the others (Kafka 3.9's ``KafkaController.processReplicaLeaderElection`` and the
``StateChangeFailedException`` its partition state machine raises when no replica can lead).

The ZooKeeper-mode controller (:mod:`odradek.controller.zk_controller`) elects the partitions
:func:`triage` leaves; the single-node broker, its own controller, answers from its metadata alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from odradek.protocol.errors import ErrorCode
from odradek.protocol.values import CodeEnum
from odradek.storage.topic_partition import TopicPartition


class ElectionType(CodeEnum):
    """``org.apache.kafka.common.ElectionType``: the request's ``election_type`` (v0 knows only PREFERRED)."""

    PREFERRED = 0
    UNCLEAN = 1


STRATEGY = {
    ElectionType.PREFERRED: "PreferredReplicaPartitionLeaderElectionStrategy",
    ElectionType.UNCLEAN: "OfflinePartitionLeaderElectionStrategy(true)",
}
"""How Kafka's failure message names the election strategy (the Scala objects' ``toString``); an
admin-client unclean election allows unclean leaders."""

FAILED = {ElectionType.PREFERRED: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, ElectionType.UNCLEAN: ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}


@dataclass(frozen=True)
class ElectionError:
    """A partition's error in the answer (Kafka's ``ApiError``): its code and message (None for some)."""

    code: ErrorCode
    message: str | None = None


NOT_NEEDED = ElectionError(ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
UNKNOWN_PARTITION = ElectionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
BEING_DELETED = ElectionError(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")
NOT_CONTROLLER = ElectionError(ErrorCode.NOT_CONTROLLER)
ELECTED = ElectionError(ErrorCode.NONE)
TIMED_OUT = ElectionError(ErrorCode.REQUEST_TIMED_OUT)
"""An elected leader not yet in the broker's metadata when the request's timeout passed (``DelayedElectLeader``)."""

ElectionResult = ElectionError | int
"""A partition's outcome at the controller: an error, or the leader it elected."""


def failed(partition: TopicPartition, election_type: ElectionType) -> ElectionError:
    """No replica can lead the partition under the election's rules."""
    return ElectionError(FAILED[election_type], f"Failed to elect leader for partition {partition[0]}-{partition[1]} under strategy {STRATEGY[election_type]}")


def triage(
    partitions: Iterable[TopicPartition],
    election_type: ElectionType,
    assignments: Mapping[TopicPartition, tuple[int, ...]],
    leaders: Mapping[TopicPartition, int],
    live: set[int],
    being_deleted: set[str],
) -> tuple[list[TopicPartition], dict[TopicPartition, ElectionError]]:
    """The partitions to elect, and the answers for the rest: unknown, of a topic being deleted, or led as the
    election would have it already (PREFERRED: by the first assigned replica; UNCLEAN: by a live broker)."""
    electable: list[TopicPartition] = []
    answered: dict[TopicPartition, ElectionError] = {}
    for partition in sorted(set(partitions)):
        replicas = assignments.get(partition)
        leader = leaders.get(partition, -1)
        if replicas is None:
            answered[partition] = UNKNOWN_PARTITION
        elif partition[0] in being_deleted:
            answered[partition] = BEING_DELETED
        elif election_type == ElectionType.PREFERRED and replicas and leader == replicas[0]:
            answered[partition] = NOT_NEEDED
        elif election_type == ElectionType.UNCLEAN and leader >= 0 and leader in live:
            answered[partition] = NOT_NEEDED
        else:
            electable.append(partition)
    return electable, answered
