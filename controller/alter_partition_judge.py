"""The controller's side of AlterPartition (KIP-497): a partition leader's ISR change, judged and written to
ZooKeeper as Kafka 3.9's ``KafkaController.processAlterPartition`` does in ZooKeeper mode.

:func:`judge` is the rule for one partition, sans-IO over the controller's context: the sender must be a
live broker with its current epoch (else STALE_BROKER_EPOCH for the whole request); a leader or partition
epoch newer than the controller's says this controller is stale (NOT_CONTROLLER), an older leader epoch is
fenced, a change already made is answered with the current state (idempotent retries), an older partition
epoch is INVALID_UPDATE_VERSION, and an ISR naming a broker that is not live, or is in controlled shutdown,
is refused (INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED before v2; KIP-841). Accepted changes are written at
the partition's znode version (the partition epoch), and every live broker gets UpdateMetadata for the
partitions asked about.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from odradek.controller import zk_data as zd
from odradek.controller.zk_controller_state import ControllerContext, Leadership
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid, ZERO_UUID
from odradek.storage.topic_partition import TopicPartition

RECOVERING = 1
"""LeaderRecoveryState of a partition led after an unclean election, until its leader has recovered."""


@dataclass(frozen=True)
class IsrProposal:
    """One partition of an AlterPartition request."""

    partition: TopicPartition
    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int
    partition_epoch: int


def proposals(ctx: ControllerContext, body: Any, version: int) -> tuple[list[IsrProposal], list[tuple[Uuid, int]]]:
    """The request's partitions, and those of topic ids the controller does not know (UNKNOWN_TOPIC_ID)."""
    names = {topic_id: name for name, topic_id in ctx.topic_ids.items()}
    found, unknown = [], []
    for topic in body.topics:
        name = topic.topic_name if version < 2 else names.get(topic.topic_id)
        for p in topic.partitions:
            if name is None:
                unknown.append((topic.topic_id, p.partition_index))
                continue
            isr = tuple(b.broker_id for b in p.new_isr_with_epochs) if version >= 3 else tuple(p.new_isr)
            found.append(IsrProposal((name, p.partition_index), p.leader_epoch, isr, p.leader_recovery_state if version >= 1 else 0, p.partition_epoch))
    return found, unknown


def judge(ctx: ControllerContext, broker_id: int, proposal: IsrProposal, version: int) -> ErrorCode | Leadership | zd.LeaderIsrAndControllerEpoch:
    """An error, the current state (already as proposed), or the new state to write."""
    current = ctx.leadership.get(proposal.partition)
    if current is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    state = current.state
    if proposal.partition_epoch > current.zk_version or proposal.leader_epoch > state.leader_epoch:
        return ErrorCode.NOT_CONTROLLER
    if proposal.leader_epoch < state.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if (broker_id, proposal.leader_epoch, proposal.isr, proposal.leader_recovery_state) == (state.leader, state.leader_epoch, tuple(state.isr), state.leader_recovery_state):
        return current
    if proposal.partition_epoch < current.zk_version:
        return ErrorCode.INVALID_UPDATE_VERSION
    if proposal.leader_recovery_state == RECOVERING and len(proposal.isr) > 1:
        return ErrorCode.INVALID_REQUEST
    if state.leader_recovery_state != RECOVERING and proposal.leader_recovery_state == RECOVERING:
        return ErrorCode.INVALID_REQUEST
    if not ctx.live_broker_ids().issuperset(proposal.isr):
        return ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
    return zd.LeaderIsrAndControllerEpoch(broker_id, proposal.leader_epoch, proposal.isr, ctx.epoch, proposal.leader_recovery_state)


def process(ctx: ControllerContext, body: Any, version: int, write: Callable[[TopicPartition, zd.LeaderIsrAndControllerEpoch], bool], update_metadata: Callable[[list[TopicPartition]], None]) -> dict:
    """The AlterPartition answer; accepted changes written with ``write`` (False: the znode moved on)."""
    if ctx.broker_epochs.get(body.broker_id) != body.broker_epoch:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.STALE_BROKER_EPOCH, "topics": []}
    found, unknown = proposals(ctx, body, version)
    answers: dict[str, list[dict]] = {}
    for proposal in found:
        outcome = judge(ctx, body.broker_id, proposal, version)
        if isinstance(outcome, zd.LeaderIsrAndControllerEpoch):
            outcome = ctx.leadership[proposal.partition] if write(proposal.partition, outcome) else ErrorCode.INVALID_UPDATE_VERSION
        answer: dict[str, Any] = {"partition_index": proposal.partition[1]}
        if isinstance(outcome, Leadership):
            state = outcome.state
            answer |= {"error_code": ErrorCode.NONE, "leader_id": state.leader, "leader_epoch": state.leader_epoch, "isr": list(state.isr), "leader_recovery_state": state.leader_recovery_state, "partition_epoch": outcome.zk_version}
        else:
            answer |= {"error_code": outcome}
        answers.setdefault(proposal.partition[0], []).append(answer)
    update_metadata([p.partition for p in found])
    topics = [{"topic_name": name, "topic_id": ctx.topic_ids.get(name, ZERO_UUID), "partitions": parts} for name, parts in answers.items()]
    for topic_id, index in unknown:
        topics.append({"topic_name": "", "topic_id": topic_id, "partitions": [{"partition_index": index, "error_code": ErrorCode.UNKNOWN_TOPIC_ID}]})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "topics": topics}
