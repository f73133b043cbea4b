"""Partition reassignment's rules (KIP-455), as Kafka 3.9's ZooKeeper-mode controller applies them, sans-IO.

A reassignment is written into the partition's assignment itself: while it runs, the replica set RS is the
original ORS followed by the target TRS's new members, ``adding`` holds TRS - ORS and ``removing`` ORS - TRS
(Kafka's ``ReplicaAssignment.reassignTo``). That is what the topic znode (version 3) and LeaderAndIsr carry,
and what a new controller reads to resume. It completes once every target replica is in the ISR.
:mod:`odradek.controller.reassignment_manager` does the ZooKeeper writes and sends the requests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Collection, Mapping, Sequence

from odradek.controller import zk_data as zd
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.topic_partition import TopicPartition


@dataclass(frozen=True)
class ApiError:
    """Kafka's ``ApiError``: a code and the message the answer carries (null for NONE)."""

    code: ErrorCode
    message: str | None = None

    def __post_init__(self) -> None:
        """Never echo unbounded input (a request may name any number of replicas): the message is cut as a
        KafkaError's is."""
        object.__setattr__(self, "message", KafkaError(self.code, self.message).message)

    @classmethod
    def of(cls, code: ErrorCode) -> "ApiError":
        """``new ApiError(error)``: the code's own description as the message."""
        return cls(code, code.message or None)


NONE = ApiError(ErrorCode.NONE)
PARTITION_DOES_NOT_EXIST = ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
NO_ASSIGNMENT = zd.ReplicaAssignment(())
"""What the controller holds for a partition it does not know."""


def origin_replicas(assignment: zd.ReplicaAssignment) -> tuple[int, ...]:
    return tuple(r for r in assignment.replicas if r not in assignment.adding)


def target_replicas(assignment: zd.ReplicaAssignment) -> tuple[int, ...]:
    return tuple(r for r in assignment.replicas if r not in assignment.removing)


def is_being_reassigned(assignment: zd.ReplicaAssignment) -> bool:
    return bool(assignment.adding or assignment.removing)


def reassign_to(assignment: zd.ReplicaAssignment, target: Sequence[int]) -> zd.ReplicaAssignment:
    """``ReplicaAssignment.reassignTo``: RS = TRS then the original replicas not in it, in that order."""
    origin = origin_replicas(assignment)
    full = tuple(dict.fromkeys([*target, *origin]))
    return zd.ReplicaAssignment(full, tuple(r for r in full if r not in origin), tuple(r for r in full if r not in target))


def validate_replicas(current: zd.ReplicaAssignment, live: Collection[int], replicas: Sequence[int]) -> ApiError | None:
    """``validateReplicas``: a target that is empty, repeats a broker, names a negative id or adds a broker
    that is not live is INVALID_REPLICA_ASSIGNMENT, with Kafka's messages."""
    listed = _scala_seq(replicas)
    if not replicas:
        return ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment.")
    if len(set(replicas)) != len(replicas):
        return ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate replica ids in partition reassignment replica list: {listed}")
    if any(r < 0 for r in replicas):
        return ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {listed}")
    adding = reassign_to(current, replicas).adding
    if not set(adding) <= set(live):
        listed_live = "Set(" + ", ".join(map(str, sorted(live))) + ")"
        return ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Replica assignment has brokers that are not alive. Replica list: {_scala_seq(adding)}, live broker list: {listed_live}")
    return None


def _scala_seq(replicas: Sequence[int]) -> str:
    """How Kafka's messages print the request's replica list (a Scala ``ArrayBuffer``)."""
    return "ArrayBuffer(" + ", ".join(map(str, replicas)) + ")"


def build_reassignment(current: zd.ReplicaAssignment, target: Sequence[int] | None) -> zd.ReplicaAssignment | None:
    """``maybeBuildReassignment``: the assignment to move to; a cancellation (no target) goes back to the
    original replicas, and is None (NO_REASSIGNMENT_IN_PROGRESS) when nothing is moving."""
    if is_being_reassigned(current):
        return reassign_to(current, origin_replicas(current) if target is None else target)
    return None if target is None else reassign_to(current, target)


def is_complete(assignment: zd.ReplicaAssignment, isr: Sequence[int] | None) -> bool:
    """``isReassignmentComplete``: nothing moving, or every target replica in the ISR (None: no state)."""
    if not is_being_reassigned(assignment):
        return True
    return isr is not None and set(target_replicas(assignment)) <= set(isr)


def reassignment_leader_election(
    target: Sequence[int], current: zd.LeaderIsrAndControllerEpoch, live: set[int], controller_epoch: int
) -> zd.LeaderIsrAndControllerEpoch | None:
    """``ReassignPartitionLeaderElectionStrategy``: the first target replica that is live and in the ISR
    leads, the ISR unchanged, the leader epoch bumped; None when no target replica can."""
    leader = next((r for r in target if r in live and r in current.isr), None)
    if leader is None:
        return None
    return replace(current, leader=leader, leader_epoch=current.leader_epoch + 1, controller_epoch=controller_epoch)


def with_new_epoch(current: zd.LeaderIsrAndControllerEpoch, controller_epoch: int) -> zd.LeaderIsrAndControllerEpoch:
    """``LeaderAndIsr.newEpoch``: the same leader and ISR at the next leader epoch, so that the replicas take
    the new replica set."""
    return replace(current, leader_epoch=current.leader_epoch + 1, controller_epoch=controller_epoch)


def single_node_answers(assignments: Mapping[TopicPartition, zd.ReplicaAssignment], live: Collection[int], targets: Mapping[TopicPartition, Sequence[int] | None]) -> dict[TopicPartition, ApiError]:
    """A broker that is its own controller (no ZooKeeper), as a one-broker Kafka cluster answers: Kafka's
    refusals; the only valid target of an existing partition is the broker itself, where its replica already
    is (the reassignment completes at once), and nothing is ever in progress to cancel."""
    answers: dict[TopicPartition, ApiError] = {}
    for partition, target in targets.items():
        current = assignments.get(partition, NO_ASSIGNMENT)
        error = validate_replicas(current, live, target) if target is not None else None
        if error is None and build_reassignment(current, target) is None:
            error = ApiError.of(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
        answers[partition] = error or (NONE if current.replicas else PARTITION_DOES_NOT_EXIST)
    return answers
