"""Partition reassignment in the ZooKeeper-mode controller: Kafka 3.9's ``KafkaController`` steps
(``onPartitionReassignment`` and what it calls), run on the controller's event thread.

A reassignment starts from the AlterPartitionReassignments API or the legacy ``/admin/reassign_partitions``
znode. Its first step writes the full replica set RS = ORS + TRS with ``adding_replicas`` and
``removing_replicas`` into the topic znode, bumps the leader epoch and sends LeaderAndIsr to every replica
(the new ones as new: they create the log and fetch from the leader). Each accepted ISR change
(AlterPartition) checks it again: once every target replica is in the ISR, leadership moves into TRS if the
leader is leaving, the removed replicas leave the ISR and delete their logs (StopReplica), the topic znode
keeps TRS alone and every broker gets UpdateMetadata. A new controller finds the unfinished ones in the
topic znodes and resumes them. The rules are in :mod:`odradek.controller.reassignment`.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Callable, Iterable, Protocol, Sequence

from odradek.controller import reassignment as ra
from odradek.controller import zk_data as zd
from odradek.controller.reassignment import ApiError
from odradek.controller.zk_client import ControllerMovedError, ZkClient
from odradek.controller.zk_controller_state import ControllerContext, Leadership, RequestBatch, without_replica
from odradek.protocol.errors import ErrorCode
from odradek.storage.topic_partition import TopicPartition

log = logging.getLogger(__name__)

Targets = dict[TopicPartition, "tuple[int, ...] | None"]
"""What an AlterPartitionReassignments request asks: each partition's target replicas, None to cancel."""
NOT_CONTROLLER = ApiError.of(ErrorCode.NOT_CONTROLLER)


class Controller(Protocol):
    """What the steps use of :class:`~odradek.controller.zk_controller.ZkController` (which imports this module)."""

    zk: ZkClient
    context: ControllerContext
    active: bool

    def _write(self, partition: TopicPartition, state: zd.LeaderIsrAndControllerEpoch) -> bool:
        """Write a partition's state at the version last read (False: it moved on, re-read)."""
        ...

    def _send(self, batch: RequestBatch) -> None:
        """Send the batch's requests to the live brokers."""
        ...


class ReassignmentManager:
    """The reassignment steps of one controller; every method runs on its event thread."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    # -- requests -------------------------------------------------------------------------------------------------

    def alter(self, targets: Targets, answer: "Future[dict[TopicPartition, ApiError] | ApiError]") -> None:
        """``processApiPartitionReassignment``: each partition's error (NONE once its reassignment started),
        or NOT_CONTROLLER for the whole request."""
        if not self.controller.active:
            answer.set_result(NOT_CONTROLLER)
            return
        try:
            ctx = self.controller.context
            results: dict[TopicPartition, ApiError] = {}
            to_reassign: dict[TopicPartition, zd.ReplicaAssignment] = {}
            for partition, target in targets.items():
                current = ctx.assignments.get(partition, ra.NO_ASSIGNMENT)
                error = ra.validate_replicas(current, ctx.live_brokers, target) if target is not None else None
                built = None if error is not None else ra.build_reassignment(current, target)
                if error is not None:
                    results[partition] = error
                elif built is None:
                    results[partition] = ApiError.of(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
                else:
                    to_reassign[partition] = built
            # the latest reassignment, by API or through ZooKeeper, takes precedence
            self._remove_from_zk_reassignment(lambda partition, _: partition in to_reassign)
            results |= self._trigger(to_reassign)
            answer.set_result(results)
        finally:
            if not answer.done():  # the controller moved half-way
                answer.set_result(NOT_CONTROLLER)

    def list_reassignments(self, partitions: Iterable[TopicPartition] | None, answer: "Future[dict[TopicPartition, zd.ReplicaAssignment] | ApiError]") -> None:
        """``processListPartitionReassignments``: the named partitions (or all) that are being reassigned."""
        if not self.controller.active:
            answer.set_result(NOT_CONTROLLER)
            return
        ctx = self.controller.context
        named = self.in_progress() if partitions is None else partitions
        found = {p: ctx.assignments.get(p, ra.NO_ASSIGNMENT) for p in named}
        answer.set_result({p: a for p, a in found.items() if ra.is_being_reassigned(a)})

    def in_progress(self) -> list[TopicPartition]:
        """Kafka's ``partitionsBeingReassigned``: the partitions whose assignment names replicas to add or remove."""
        return sorted(p for p, a in self.controller.context.assignments.items() if ra.is_being_reassigned(a))

    # -- triggers -------------------------------------------------------------------------------------------------

    def on_zk_reassignment(self) -> set[TopicPartition]:
        """``processZkPartitionReassignment``: act on ``/admin/reassign_partitions``; those that cannot
        start are taken out of it. Answers the partitions started."""
        requested = self.controller.zk.partition_reassignment()
        if requested is None:
            return set()
        ctx = self.controller.context
        results: dict[TopicPartition, ApiError] = {}
        to_reassign: dict[TopicPartition, zd.ReplicaAssignment] = {}
        for partition, target in requested.items():
            built = ra.build_reassignment(ctx.assignments.get(partition, ra.NO_ASSIGNMENT), target)
            if built is None:
                results[partition] = ApiError.of(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
            else:
                to_reassign[partition] = built
        results |= self._trigger(to_reassign)
        failed = {p for p, e in results.items() if e.code != ErrorCode.NONE}
        if failed:
            log.warning("Failed reassignment through zk with the following errors: %s", {p: results[p] for p in failed})
            self._remove_from_zk_reassignment(lambda partition, _: partition in failed)
        return set(results) - failed

    def resume(self) -> None:
        """``initializePartitionReassignments`` at failover: the legacy znode first, then every reassignment
        the topic znodes say is unfinished."""
        started = self.on_zk_reassignment()
        for partition in self.in_progress():
            if partition not in started:
                self._on_partition_reassignment(partition, self.controller.context.assignments[partition])

    def on_isr_change(self, partitions: Iterable[TopicPartition]) -> None:
        """``maybeCompleteReassignment`` after accepted ISR changes of partitions being reassigned."""
        ctx = self.controller.context
        for partition in partitions:
            assignment = ctx.assignments.get(partition, ra.NO_ASSIGNMENT)
            if ra.is_being_reassigned(assignment) and self._is_complete(partition, assignment):
                log.info("Target replicas %s have all caught up with the leader for reassigning partition %s", ra.target_replicas(assignment), partition)
                self._on_partition_reassignment(partition, assignment)

    # -- the steps ------------------------------------------------------------------------------------------------

    def _trigger(self, reassignments: dict[TopicPartition, zd.ReplicaAssignment]) -> dict[TopicPartition, ApiError]:
        """``maybeTriggerPartitionReassignment``: partitions of topics being deleted, or unknown, do not exist."""
        ctx = self.controller.context
        results: dict[TopicPartition, ApiError] = {}
        for partition, reassignment in reassignments.items():
            if partition[0] in ctx.topics_being_deleted or not ctx.assignments.get(partition, ra.NO_ASSIGNMENT).replicas:
                results[partition] = ra.PARTITION_DOES_NOT_EXIST
                continue
            try:
                self._on_partition_reassignment(partition, reassignment)
                results[partition] = ra.NONE
            except ControllerMovedError:
                raise
            except Exception:
                log.exception("Error completing reassignment of partition %s", partition)
                results[partition] = ApiError.of(ErrorCode.UNKNOWN_SERVER_ERROR)
        return results

    def _on_partition_reassignment(self, partition: TopicPartition, reassignment: zd.ReplicaAssignment) -> None:
        """``onPartitionReassignment``: start (A) or, once every target replica is in sync, finish (B)."""
        self._update_current_reassignment(partition, reassignment)
        if not self._is_complete(partition, reassignment):
            self._update_leader_epoch_and_send(partition, reassignment)  # A1, A2: the new replicas start
            return
        completed = zd.ReplicaAssignment(ra.target_replicas(reassignment))
        self.controller.context.assignments[partition] = completed  # B2
        self._move_leader_if_required(partition, completed)  # B3
        self._stop_removed_replicas(partition, reassignment.removing)  # B4, B5
        self._write_assignment(partition, completed)  # B6
        self._remove_from_zk_reassignment(lambda p, replicas: p == partition and tuple(replicas) == completed.replicas)  # B7
        batch = RequestBatch(self.controller.context)  # B8
        batch.add_update_metadata(self.controller.context.live_brokers, [partition])
        self.controller._send(batch)

    def _update_current_reassignment(self, partition: TopicPartition, reassignment: zd.ReplicaAssignment) -> None:
        """``updateCurrentReassignment``: the topic znode and the context take the new assignment; replicas an
        earlier reassignment was adding and this one does not want are stopped at once."""
        current = self.controller.context.assignments[partition]
        if current != reassignment:
            self._write_assignment(partition, reassignment)
            self.controller.context.assignments[partition] = reassignment
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            if unneeded:
                self._stop_removed_replicas(partition, unneeded)

    def _is_complete(self, partition: TopicPartition, assignment: zd.ReplicaAssignment) -> bool:
        """``isReassignmentComplete``, against the ISR ZooKeeper holds now."""
        if not ra.is_being_reassigned(assignment):
            return True
        fresh = self._fresh(partition)
        return ra.is_complete(assignment, None if fresh is None else fresh.state.isr)

    def _fresh(self, partition: TopicPartition) -> Leadership | None:
        """The partition's state as ZooKeeper holds it now, cached in the context."""
        found = self.controller.zk.partition_state(*partition)
        if found is None:
            return None
        lead = self.controller.context.leadership[partition] = Leadership(*found)
        return lead

    def _rewrite_state(self, partition: TopicPartition, change: Callable[[zd.LeaderIsrAndControllerEpoch], zd.LeaderIsrAndControllerEpoch | None]) -> bool:
        """Apply ``change`` to the state ZooKeeper holds, written at the version read; read again and retried
        when another write got in between. False when there is no state or nothing to change."""
        while (fresh := self._fresh(partition)) is not None:
            if fresh.state.controller_epoch > self.controller.context.epoch:
                log.error("Leader and isr path written by another controller (epoch %d) for %s", fresh.state.controller_epoch, partition)
                return False
            changed = change(fresh.state)
            if changed is None:
                return False
            if self.controller._write(partition, changed):
                return True
        return False

    def _update_leader_epoch_and_send(self, partition: TopicPartition, assignment: zd.ReplicaAssignment) -> None:
        """``updateLeaderEpochAndSendRequest``: the same leader and ISR at the next leader epoch, sent with the
        new replica set to the original replicas, and to the adding ones as new."""
        ctx = self.controller.context
        if not self._rewrite_state(partition, lambda state: ra.with_new_epoch(state, ctx.epoch)):
            log.error("Failed to send LeaderAndIsr request with new replica assignment %s for partition being reassigned %s", assignment, partition)
            return
        batch = RequestBatch(ctx)
        batch.add_leader_and_isr(ra.origin_replicas(assignment), partition)
        batch.add_leader_and_isr(assignment.adding, partition, is_new=True)
        self.controller._send(batch)

    def _move_leader_if_required(self, partition: TopicPartition, completed: zd.ReplicaAssignment) -> None:
        """``moveReassignedPartitionLeaderIfRequired``: a leader outside TRS (or offline) hands over to the first
        live in-sync target replica; one staying gets a new epoch so that the replicas learn the smaller set."""
        ctx = self.controller.context
        leader = ctx.leadership[partition].state.leader
        if leader in completed.replicas and ctx.is_online(leader, partition):
            self._update_leader_epoch_and_send(partition, completed)
            return
        live = set(ctx.live_brokers)
        if self._rewrite_state(partition, lambda state: ra.reassignment_leader_election(completed.replicas, state, live, ctx.epoch)):
            batch = RequestBatch(ctx)
            batch.add_leader_and_isr(ctx.live_replicas(partition), partition)
            self.controller._send(batch)
        else:
            log.error("No target replica of %s is live and in sync to lead it (%s)", partition, completed.replicas)

    def _stop_removed_replicas(self, partition: TopicPartition, removed: Sequence[int]) -> None:
        """``stopRemovedReplicasOfReassignedPartition``: each removed replica goes offline (it leaves the ISR,
        the others hear of it) and is deleted (StopReplica with delete)."""
        ctx = self.controller.context
        for replica in removed:
            if self._rewrite_state(partition, lambda state: without_replica(state, replica, ctx.epoch)):
                batch = RequestBatch(ctx)
                batch.add_leader_and_isr([r for r in ctx.live_replicas(partition) if r != replica], partition)
                self.controller._send(batch)
        batch = RequestBatch(ctx)
        batch.add_stop_replica(removed, partition, delete=True)
        self.controller._send(batch)

    def _write_assignment(self, partition: TopicPartition, assignment: zd.ReplicaAssignment) -> None:
        """``updateReplicaAssignmentForPartition``: the whole topic znode, with this partition's new assignment."""
        ctx = self.controller.context
        topic = partition[0]
        partitions = {p: a for (t, p), a in ctx.assignments.items() if t == topic} | {partition[1]: assignment}
        self.controller.zk.set_topic_assignment_fenced(topic, zd.TopicAssignment(ctx.topic_ids.get(topic), partitions), ctx.epoch_zk_version)

    def _remove_from_zk_reassignment(self, should_remove: Callable[[TopicPartition, list[int]], bool]) -> None:
        """``maybeRemoveFromZkReassignment``: the legacy znode keeps the partitions still to move; empty, it goes."""
        zk = self.controller.zk
        requested = zk.partition_reassignment()
        if requested is None:
            return
        remaining = {p: r for p, r in requested.items() if not should_remove(p, r)}
        if not remaining:
            log.info("No more partitions need to be reassigned. Deleting zk path %s", zd.REASSIGN_PARTITIONS)
            zk.delete_partition_reassignment(self.controller.context.epoch_zk_version)
        elif remaining != requested:
            zk.set_partition_reassignment(remaining, self.controller.context.epoch_zk_version)
