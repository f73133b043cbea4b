"""The classic group coordinator, as Kafka 3.9 runs it (sans-IO).

It runs on the :mod:`coordinator runtime <odradek.broker.coordinator.runtime>` over ``__consumer_offsets``:
:class:`GroupCoordinator` is the service the handlers call (it checks the group id and whether this broker
serves the group's partition, then runs the request on that partition's shard); a
:class:`GroupCoordinatorShard` per partition holds the protocol (membership, rebalances, heartbeats,
offset commits), and its :class:`~odradek.broker.coordinator.group.group_metadata_manager.GroupMetadataManager` the groups,
their records, loading and offset expiry. Nothing here does I/O or reads a clock of its own: time is the
runtime's clock, delays are the shard's keyed :class:`~odradek.broker.coordinator.timers.Timers`, writes are
:class:`~odradek.broker.coordinator.runtime.CoordinatorResult` records, and parked JoinGroup/SyncGroup
requests are Deferreds (:class:`~odradek.broker.coordinator.deferred.Deferred`).

The request paths follow Kafka's step for step, including the moments each error is answered:
MEMBER_ID_REQUIRED on a dynamic member's first JoinGroup (v4+), REBALANCE_IN_PROGRESS to heartbeats and
SyncGroups while a rebalance prepares, ILLEGAL_GENERATION to stale generations, UNKNOWN_MEMBER_ID to
members the group no longer has, FENCED_INSTANCE_ID to a static member's superseded incarnation.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

from odradek.broker.coordinator.runtime import (
    CoordinatorResult,
    CoordinatorRuntime,
    CoordinatorShard,
    CoordinatorTopic,
    LoadedBatch,
    PartitionWriter,
    Producer,
    Record,
    ShardContext,
)
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.group.group import (
    UNKNOWN_MEMBER_ID,
    Group,
    GroupOverview,
    GroupState,
    GroupSummary,
    JoinResult,
    Member,
    Protocols,
    SyncResult,
    TopicPartition,
    distinct_protocols,
)
from odradek.broker.coordinator.group.consumer_group import CONSUMER_GROUP_TYPE, CONSUMER_PROTOCOL_TYPE
from odradek.broker.coordinator.group.consumer_group import ConsumerGroupMember
from odradek.broker.coordinator.group.consumer_group_manager import (
    ClassicGroupView,
    ClassicMemberView,
    ConsumerGroupConfig,
    ConsumerGroupManager,
    DescribedGroup,
    HeartbeatRequest,
    HeartbeatResult,
)
from odradek.broker.coordinator.group.group_config import GroupConfig
from odradek.broker.coordinator.group.group_metadata_records import group_metadata_key, group_metadata_value
from odradek.broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC, OFFSET_EXPIRATION_TIMER, GroupMetadataManager
from odradek.broker.coordinator.group.group_metadata_records import MemberMetadata, OffsetAndMetadata
from odradek.broker.coordinator.timers import Timer
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.config import BrokerConfig

log = logging.getLogger("odradek.group_coordinator")

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
"""A new member's JoinGroup cannot heartbeat; if its client gave up, this bounds how long it lingers."""
INVALID_OFFSET = -1
CLASSIC_GROUP_TYPE = "classic"

EMPTY_GROUP = GroupSummary("", "", "", [])
DEAD_GROUP = GroupSummary(GroupState.DEAD.value, "", "", [])

GROUP_ID_MAY_BE_EMPTY = frozenset({ApiKey.OffsetCommit, ApiKey.OffsetFetch, ApiKey.DescribeGroups, ApiKey.DeleteGroups})
"""Offset APIs accept the empty group id for old clients; Describe/Delete so that such a group can be
inspected and removed. Every API that manages membership needs a real id."""

@dataclass
class JoinRequest(MemberMetadata):
    group_id: str
    protocol_type: str
    protocols: Protocols
    require_known_member_id: bool = True
    support_skipping_assignment: bool = False
    reason: str | None = None

    def __post_init__(self) -> None:
        self.protocols = distinct_protocols(self.protocols)


@dataclass(frozen=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class OffsetFetchResult:
    offset: int = INVALID_OFFSET
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


class GroupCoordinatorShard(CoordinatorShard):
    """The groups of one ``__consumer_offsets`` partition: the classic protocol here, the consumer protocol
    (KIP-848) in its :class:`ConsumerGroupManager` (``consumer``). A group id is one or the other; a
    consumer group's offsets are kept like a classic group's, in an Empty classic group that only holds
    them."""

    def __init__(self, context: ShardContext, config: GroupConfig, consumer_config: ConsumerGroupConfig | None = None, metadata: Callable[[], Any] = lambda: None) -> None:
        self.config = config
        self.clock = context.clock
        self.timers = context.timers
        self.partition = context.partition
        self.metadata = GroupMetadataManager(context, config, self)
        self.groups = self.metadata.groups
        self.consumer = ConsumerGroupManager(context, consumer_config or ConsumerGroupConfig(), metadata, self)
        self.consumer_groups = self.consumer.groups

    # -- the runtime's hooks --------------------------------------------------------------------------------

    def replay(self, offset: int, producer: Producer | None, key: bytes, value: bytes | None) -> None:
        if not self.consumer.replay(key, value):
            self.metadata.replay(offset, producer, key, value)

    def replay_end_transaction_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        self.metadata.replay_end_transaction_marker(producer_id, committed)

    def on_loaded(self) -> None:
        for group in self.metadata.finish_loading():
            self.on_group_loaded(group)
        self.consumer.on_loaded()
        self.metadata.schedule_offset_expiration()

    # -- the consumer protocol's view of the classic groups ---------------------------------------------------

    def consumer_group_topics(self, group_id: str) -> set[str]:
        group = self.consumer_groups.get(group_id)
        return set() if group is None else {t for t, n in group.subscribed_topic_names.items() if n > 0}

    def classic_group(self, group_id: str) -> ClassicGroupView | None:
        """The classic group holding ``group_id``; None for none or an Empty group that only holds offsets."""
        group = self.groups.get(group_id)
        if group is None or group_id in self.consumer_groups or group.is_(GroupState.DEAD) or (group.is_(GroupState.EMPTY) and group.generation_id == 0):
            return None
        members = tuple(ClassicMemberView(MemberMetadata(**m.member_metadata()), tuple(m.supported_protocols), m.assignment) for m in group.members.values())
        return ClassicGroupView(group_id, group.generation_id, group.protocol_type, group.protocol_name, members)

    def retire_classic_group(self, group_id: str) -> list[Record]:
        """A consumer group takes the id (Kafka's ``convertToConsumerGroup``, or the deletion of an empty
        classic group): members parked in JoinGroup or SyncGroup are answered REBALANCE_IN_PROGRESS, so that
        they rejoin the consumer group; the members and timers go, and the group stays as the holder of the
        offsets. The records: its GroupMetadata tombstone."""
        group = self.groups[group_id]
        self.timers.cancel(("join", group_id))
        self.timers.cancel(("sync", group_id))
        for member in list(group.members.values()):
            group.maybe_complete_join(member, JoinResult(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
            group.maybe_complete_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        for member_id in list(group.members) + list(group.pending_members):
            self._cancel_heartbeat(group, member_id)
            group.remove(member_id)
        group.state = GroupState.EMPTY
        group.generation_id = 0
        group.protocol_type = None
        group.protocol_name = None
        group.leader_id = None
        return [(group_metadata_key(group_id), None)]

    def downgrade(self, group_id: str, generation_id: int, members: list[tuple[ConsumerGroupMember, bytes]], rebalance: bool) -> list[Record]:
        """Kafka's ``ClassicGroup.fromConsumerGroup``: the consumer group's classic members (each with the
        assignment the consumer group targeted it at) form a Stable classic group at the group epoch, which
        then rebalances if ``rebalance``; the records: its GroupMetadata."""
        group = self.groups.get(group_id) or self.metadata.add_group(Group(group_id, GroupState.EMPTY, self.clock))
        group.state = GroupState.STABLE
        group.current_state_timestamp = self.clock()
        group.generation_id = generation_id
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        group.leader_id = None
        for m, assignment in members:
            assert m.classic is not None
            identity = MemberMetadata(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms, m.classic.session_timeout_ms)
            group.add(Member(**identity.member_metadata(), protocol_type=CONSUMER_PROTOCOL_TYPE, supported_protocols=list(m.classic.supported_protocols), assignment=assignment))
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        record = group.record({m.member_id: m.assignment for m in group.members.values()})
        for member in group.members.values():
            self._complete_and_schedule_next_heartbeat(group, member)
        if rebalance:
            self._prepare_rebalance(group, f"Downgrade group {group_id} from consumer to classic.")
        return [(group_metadata_key(group_id), group_metadata_value(record))]

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------------------------------

    def consumer_group_heartbeat(self, req: HeartbeatRequest) -> CoordinatorResult[HeartbeatResult]:
        return self.consumer.heartbeat(req)

    def _classic_members_of_consumer_group(self, group_id: str) -> bool:
        """Whether classic requests for ``group_id`` go to a consumer group (Kafka: one with members)."""
        consumer_group = self.consumer_groups.get(group_id)
        return consumer_group is not None and not consumer_group.is_empty

    def on_partitions_deleted(self, partitions: list[TopicPartition]) -> None:
        self.metadata.handle_deleted_partitions(partitions)

    # -- JoinGroup --------------------------------------------------------------------------------------------

    def join_group(self, req: JoinRequest) -> Deferred[JoinResult]:
        out: Deferred[JoinResult] = Deferred()
        if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
            out.complete(JoinResult(req.member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
            return out
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            if not consumer_group.is_empty:
                # A classic member in a consumer group (KIP-848's online migration).
                return self.metadata.context.write(self.consumer.classic_join(req))
            log.info("[GroupId %s] Converted the empty consumer group to a classic group.", req.group_id)
            self.metadata.context.write(CoordinatorResult(self.consumer.delete(consumer_group), lambda r: r.error))
        is_unknown = req.member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(req.group_id)
        if group is None:
            if not is_unknown:
                out.complete(JoinResult(req.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return out
            group = self.metadata.add_group(Group(req.group_id, GroupState.EMPTY, self.clock))
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            out.complete(JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._new_member_join(group, req, out)
        else:
            self._current_member_join(group, req, out)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
        return out

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        """group.max.size: while preparing, count the members that rejoined, so that a lowered limit sheds
        the last to rejoin; otherwise count the members."""
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or group.num_awaiting_join < self.config.max_size
        return group.has(member_id) or group.size < self.config.max_size

    def _new_member_join(self, group: Group, req: JoinRequest, out: Deferred[JoinResult]) -> None:
        if group.is_(GroupState.DEAD):
            out.complete(JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, {name for name, _ in req.protocols}):
            out.complete(JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = group.generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            old_member_id = group.static_member_id(req.group_instance_id)
            if old_member_id is not None:
                log.info("Static member %s of group %s rejoins with an unknown member id in state %s: replacing %s by %s", req.group_instance_id, group.group_id, group.state.value, old_member_id, new_member_id)
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, req, out)
            else:
                self._add_member_and_rebalance(group, req, new_member_id, req.group_instance_id, out)
        elif req.require_known_member_id:
            # KIP-394: a member id is handed out before the member counts, so that clients which never
            # come back (timeouts, restarts) do not pile up as members.
            group.add_pending_member(new_member_id)
            self._schedule_heartbeat(group, new_member_id, req.session_timeout_ms, pending=True)
            out.complete(JoinResult(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, req, new_member_id, None, out)

    def _validate_current_member(self, group: Group, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        if group_instance_id is not None:
            current = group.static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("Member %s of static instance %s in group %s is fenced by %s", member_id, group_instance_id, group.group_id, current)
                return ErrorCode.FENCED_INSTANCE_ID
            return None
        return None if group.has(member_id) else ErrorCode.UNKNOWN_MEMBER_ID

    def _current_member_join(self, group: Group, req: JoinRequest, out: Deferred[JoinResult]) -> None:
        member_id = req.member_id
        if group.is_(GroupState.DEAD):
            out.complete(JoinResult(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, {name for name, _ in req.protocols}):
            out.complete(JoinResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, req, member_id, None, out)
            return
        error = self._validate_current_member(group, member_id, req.group_instance_id)
        if error is not None:
            out.complete(JoinResult(member_id, error))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req, out)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # The member lost our JoinGroup answer: the same answer again.
                out.complete(self._join_result(group, member_id, include_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, req, out)
        elif state is GroupState.STABLE:
            # A leader's rejoin is how it asks for a new assignment (e.g. topic metadata changed).
            if group.is_leader(member_id) or not member.matches(req.protocols):
                self._update_member_and_rebalance(group, member, req, out)
            else:
                out.complete(self._join_result(group, member_id, include_members=False))
        else:
            log.warning("Member %s rejoins group %s in unexpected state %s", member_id, group.group_id, state.value)
            out.complete(JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _join_result(self, group: Group, member_id: str, *, include_members: bool, leader_id: str | None = None, skip_assignment: bool = False) -> JoinResult:
        return JoinResult(
            member_id,
            ErrorCode.NONE,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            (group.leader_id if leader_id is None else leader_id) or "",
            skip_assignment,
            group.current_member_metadata() if include_members else [],
        )

    def _add_member_and_rebalance(self, group: Group, req: JoinRequest, member_id: str, group_instance_id: str | None, out: Deferred[JoinResult]) -> None:
        identity = req.member_metadata() | {"member_id": member_id, "group_instance_id": group_instance_id}
        member = Member(**identity, protocol_type=req.protocol_type, supported_protocols=list(req.protocols))
        member.is_new = True
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, out)
        self._complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"Adding new member {member_id} with group instance id {group_instance_id}; client reason: {req.reason or 'not provided'}")

    def _update_member_and_rebalance(self, group: Group, member: Member, req: JoinRequest, out: Deferred[JoinResult]) -> None:
        group.update_member(member, list(req.protocols), req.rebalance_timeout_ms, req.session_timeout_ms, out)
        self._maybe_prepare_rebalance(group, f"Member {member.member_id} joining group during {group.state.value}; client reason: {req.reason or 'not provided'}")

    def _update_static_member_and_rebalance(self, group: Group, old_member_id: str, new_member_id: str, req: JoinRequest, out: Deferred[JoinResult]) -> None:
        assert req.group_instance_id is not None
        instance_id = req.group_instance_id
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.timers.cancel(("heartbeat", group.group_id, old_member_id))
        self._complete_and_schedule_next_heartbeat(group, member)
        old = (member.supported_protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, list(req.protocols), req.rebalance_timeout_ms, req.session_timeout_ms, out)
        state = group.state
        if state is GroupState.STABLE:
            # Without a change of the group's protocol the member simply takes its old place: no rebalance,
            # only the new member id is persisted.
            if group.protocol_name == group.select_protocol():
                assignment = {m.member_id: m.assignment for m in group.members.values()}

                def stored(error: ErrorCode) -> None:
                    if error != ErrorCode.NONE:
                        log.warning("Failed to persist metadata for group %s: %s", group.group_id, error.name)
                        group.update_member(member, *old, None)
                        restored = group.replace_static_member(instance_id, new_member_id, old_member_id)
                        self._complete_and_schedule_next_heartbeat(group, restored)
                        out.complete(JoinResult(UNKNOWN_MEMBER_ID, error, group.generation_id, group.protocol_type, group.protocol_name, current_leader or ""))
                    elif req.support_skipping_assignment:
                        # JoinGroup v9: the static leader learns it leads, but must not run the assignor.
                        is_leader = group.is_leader(new_member_id)
                        group.maybe_complete_join(member, self._join_result(group, new_member_id, include_members=is_leader, skip_assignment=is_leader))
                    else:
                        # Older clients: name the old leader so that a returning leader does not assign.
                        group.maybe_complete_join(member, self._join_result(group, new_member_id, include_members=False, leader_id=current_leader or ""))

                self.metadata.store_group(group, assignment).add_callback(stored)
            else:
                self._maybe_prepare_rebalance(group, f"Group's selected protocol will change because static member {new_member_id} with instance id {instance_id} joined with change of protocol")
        elif state is GroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning to the old member id: start over.
            self._prepare_rebalance(group, f"Updating metadata for static member {new_member_id} with instance id {instance_id}")
        elif state in (GroupState.EMPTY, GroupState.DEAD):
            raise RuntimeError(f"Group {group.group_id} was not supposed to be {state.value} when static member {instance_id} rejoins")

    # -- rebalances -------------------------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        was_empty = group.is_(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info("Preparing to rebalance group %s in state %s with old generation %d (%s-%d) (reason: %s)", group.group_id, group.state.value, group.generation_id, GROUP_METADATA_TOPIC, self.partition, reason)
        if was_empty:
            delay = self.config.initial_rebalance_delay_ms
            self._schedule_initial_join(group, delay, max(group.rebalance_timeout_ms - delay, 0))
        else:
            self._schedule_join(group, group.rebalance_timeout_ms)

    def _schedule_join(self, group: Group, timeout_ms: int) -> None:
        """Kafka's DelayedJoin: completes once every member has rejoined, or at the rebalance timeout."""
        self.timers.schedule(("join", group.group_id), timeout_ms, lambda: self._on_complete_join(group), tag="join")
        self._try_complete_join(group)

    def _schedule_initial_join(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        """Kafka's InitialDelayedJoin: a new group waits group.initial.rebalance.delay.ms, and again while
        new members keep arriving, up to the rebalance timeout, so that a starting fleet forms one
        generation instead of many."""

        def expire() -> None:
            if group.new_member_added and remaining_ms != 0:
                group.new_member_added = False
                self._schedule_initial_join(group, min(self.config.initial_rebalance_delay_ms, remaining_ms), max(remaining_ms - delay_ms, 0))
            else:
                self._on_complete_join(group)

        self.timers.schedule(("join", group.group_id), delay_ms, expire, tag="initial")

    def _try_complete_join(self, group: Group) -> None:
        timer = self.timers.get(("join", group.group_id))
        if timer is not None and timer.tag == "join" and group.has_all_members_joined:
            self.timers.cancel(("join", group.group_id))
            self._on_complete_join(group)

    def _on_complete_join(self, group: Group) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                log.info("Group %s removed dynamic member %s which did not rejoin", group.group_id, member.member_id)
                group.remove(member.member_id)
                self._cancel_heartbeat(group, member.member_id)
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members remain and none rejoined: wait for them, or for their sessions to end.
            log.error("Group %s could not complete rebalance because no members rejoined", group.group_id)
            self._schedule_join(group, group.rebalance_timeout_ms)
            return
        group.init_next_generation()
        if group.is_(GroupState.EMPTY):
            log.info("Group %s with generation %d is now empty (%s-%d)", group.group_id, group.generation_id, GROUP_METADATA_TOPIC, self.partition)

            def stored(error: ErrorCode) -> None:
                # Harmless if lost: the previous generation reloads without live members and times out.
                if error != ErrorCode.NONE:
                    log.warning("Failed to write empty metadata for group %s: %s", group.group_id, error.name)

            self.metadata.store_group(group, {}).add_callback(stored)
            return
        log.info("Stabilized group %s generation %d (%s-%d) with %d members", group.group_id, group.generation_id, GROUP_METADATA_TOPIC, self.partition, group.size)
        for member in list(group.members.values()):
            group.maybe_complete_join(member, self._join_result(group, member.member_id, include_members=group.is_leader(member.member_id)))
            self._complete_and_schedule_next_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    # -- SyncGroup --------------------------------------------------------------------------------------------

    def sync_group(self, group_id: str, generation_id: int, member_id: str, protocol_type: str | None, protocol_name: str | None, group_instance_id: str | None, assignments: dict[str, bytes]) -> Deferred[SyncResult]:
        out: Deferred[SyncResult] = Deferred()
        if self._classic_members_of_consumer_group(group_id):
            out.complete(self.consumer.classic_sync(group_id, generation_id, member_id, protocol_type, protocol_name, group_instance_id))
            return out
        group = self.groups.get(group_id)
        error = ErrorCode.UNKNOWN_MEMBER_ID if group is None else None
        if group is not None:
            error = self._validate_sync(group, generation_id, member_id, protocol_type, protocol_name, group_instance_id)
        if error is not None:
            out.complete(SyncResult(error))
            return out
        assert group is not None
        state = group.state
        if state is GroupState.EMPTY:
            out.complete(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif state is GroupState.PREPARING_REBALANCE:
            out.complete(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif state is GroupState.COMPLETING_REBALANCE:
            group.get(member_id).awaiting_sync = out
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info("Assignment received from leader %s for group %s for generation %d. The group has %d members, %d of which are static.", member_id, group_id, group.generation_id, group.size, len(group.static_members))
                assignment = dict(assignments)
                for missing in group.members.keys() - assignments.keys():
                    assignment[missing] = b""

                def stored(error: ErrorCode) -> None:
                    # Another member may have joined meanwhile: only the same generation completes.
                    if group.is_(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id:
                        if error != ErrorCode.NONE:
                            self._reset_and_propagate_assignment_error(group, error)
                            self._maybe_prepare_rebalance(group, f"Error {error.name} when storing group assignment during SyncGroup (member: {member_id})")
                        else:
                            self._set_and_propagate_assignment(group, assignment)
                            group.transition_to(GroupState.STABLE)

                self.metadata.store_group(group, assignment).add_callback(stored)
        elif state is GroupState.STABLE:
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            out.complete(SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self._complete_and_schedule_next_heartbeat(group, member)
        return out

    def _validate_sync(self, group: Group, generation_id: int, member_id: str, protocol_type: str | None, protocol_name: str | None, group_instance_id: str | None) -> ErrorCode | None:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if protocol_type is not None and protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if protocol_name is not None and protocol_name != group.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _set_and_propagate_assignment(self, group: Group, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment[member.member_id]
        self._propagate_assignment(group, ErrorCode.NONE)

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in list(group.members.values()):
            result = SyncResult(error, group.protocol_type if ok else None, group.protocol_name if ok else None, member.assignment)
            if group.maybe_complete_sync(member, result):
                # The session restarts once the member has its assignment: expirations were ignored while
                # it waited for the leader.
                self._complete_and_schedule_next_heartbeat(group, member)

    def _schedule_pending_sync(self, group: Group) -> None:
        """Kafka's DelayedSync: members that got their JoinGroup answer but send no SyncGroup within the
        rebalance timeout are removed and the group rebalances without them."""
        generation = group.generation_id
        self.timers.schedule(("sync", group.group_id), group.rebalance_timeout_ms, lambda: self._on_expire_pending_sync(group, generation), tag=generation)

    def _remove_pending_sync_member(self, group: Group, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        self._maybe_complete_sync_expiration(group)

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync_members.clear()
        self._maybe_complete_sync_expiration(group)

    def _maybe_complete_sync_expiration(self, group: Group) -> None:
        timer = self.timers.get(("sync", group.group_id))
        if timer is None:
            return
        if timer.tag != group.generation_id or group.state in (GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE) or not group.pending_sync_members:
            self.timers.cancel(("sync", group.group_id))

    def _on_expire_pending_sync(self, group: Group, generation: int) -> None:
        if generation != group.generation_id or group.state in (GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE):
            return
        if group.pending_sync_members:
            missing = sorted(group.pending_sync_members)
            for member_id in missing:
                group.remove(member_id)
                self._cancel_heartbeat(group, member_id)
            self._prepare_rebalance(group, f"Removing {missing} on pending sync request expiration")

    # -- Heartbeat and sessions -------------------------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        if self._classic_members_of_consumer_group(group_id):
            return self.consumer.classic_heartbeat(group_id, member_id, group_instance_id, generation_id)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._complete_and_schedule_next_heartbeat(group, group.get(member_id))
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(GroupState.PREPARING_REBALANCE) else ErrorCode.NONE

    def _heartbeat_key(self, group: Group, member_id: str) -> tuple:
        return ("heartbeat", group.group_id, member_id)

    def _complete_and_schedule_next_heartbeat(self, group: Group, member: Member) -> None:
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def _complete_and_schedule_next_expiration(self, group: Group, member: Member, timeout_ms: int) -> None:
        member.heartbeat_satisfied = False
        self._schedule_heartbeat(group, member.member_id, timeout_ms, pending=False)

    def _schedule_heartbeat(self, group: Group, member_id: str, timeout_ms: int, *, pending: bool) -> None:
        self.timers.schedule(self._heartbeat_key(group, member_id), timeout_ms, lambda: self._on_expire_heartbeat(group, member_id, pending))

    def _cancel_heartbeat(self, group: Group, member_id: str) -> None:
        self.timers.cancel(self._heartbeat_key(group, member_id))

    def _on_expire_heartbeat(self, group: Group, member_id: str, pending: bool) -> None:
        if not self.metadata.is_current(group):
            return
        if pending:
            if member_id in group.pending_members:
                log.info("Pending member %s in group %s has been removed after session timeout expiration.", member_id, group.group_id)
                self._remove_pending_member_and_update_group(group, member_id)
            return
        member = group.members.get(member_id)
        if member is not None and not member.has_satisfied_heartbeat:
            log.info("Member %s in group %s has failed, removing it from the group", member_id, group.group_id)
            self._remove_member_and_update_group(group, member, f"removing member {member_id} on heartbeat expiration")

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        # A new member may still be parked in JoinGroup: answer it so that its client retries.
        group.maybe_complete_join(member, JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: Group, member_id: str) -> None:
        group.remove(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- LeaveGroup -------------------------------------------------------------------------------------------

    def leave_group(self, group_id: str, leaving: list[LeavingMember]) -> tuple[ErrorCode, list[tuple[LeavingMember, ErrorCode]]]:
        if self._classic_members_of_consumer_group(group_id):
            answers, write = self.consumer.classic_leave(group_id, [(m.member_id, m.group_instance_id, m.reason) for m in leaving])
            self.metadata.context.write(write)
            return ErrorCode.NONE, [(LeavingMember(member_id, m.group_instance_id, m.reason), error) for m, (member_id, error) in zip(leaving, answers)]
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [(m, ErrorCode.UNKNOWN_MEMBER_ID) for m in leaving]
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for m in leaving:
            if m.member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal of a static member by its instance id (kafka-consumer-groups).
                current = group.static_member_id(m.group_instance_id) if m.group_instance_id is not None else None
                if current is None:
                    results.append((m, ErrorCode.UNKNOWN_MEMBER_ID))
                    continue
                self._remove_current_member(group, current, m.reason)
                results.append((m, ErrorCode.NONE))
            elif m.member_id in group.pending_members:
                self._remove_pending_member_and_update_group(group, m.member_id)
                self._cancel_heartbeat(group, m.member_id)
                log.info("Pending member %s has left group %s through explicit `LeaveGroup` request", m.member_id, group_id)
                results.append((m, ErrorCode.NONE))
            else:
                member_error = self._validate_current_member(group, m.member_id, m.group_instance_id)
                if member_error is None:
                    self._remove_current_member(group, m.member_id, m.reason)
                results.append((m, member_error or ErrorCode.NONE))
        return ErrorCode.NONE, results

    def _remove_current_member(self, group: Group, member_id: str, reason: str | None) -> None:
        member = group.get(member_id)
        self._remove_member_and_update_group(group, member, f"Removing member {member_id} on LeaveGroup; client reason: {reason or 'not provided'}")
        self._cancel_heartbeat(group, member_id)
        log.info("Member %s has left group %s through explicit `LeaveGroup`; client reason: %s", member_id, group.group_id, reason or "not provided")

    # -- offsets ----------------------------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata], producer: Producer | None = None, api_version: int = 9) -> CoordinatorResult[dict[TopicPartition, ErrorCode]]:
        """OffsetCommit, or TxnOffsetCommit for ``producer`` (its offsets count once its transaction commits).
        For a consumer group the generation is the member epoch (Kafka's ``generationIdOrMemberEpoch``)."""

        def fail(error: ErrorCode) -> CoordinatorResult[dict[TopicPartition, ErrorCode]]:
            return CoordinatorResult.of({tp: error for tp in offsets})

        group = self.groups.get(group_id)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            refused = consumer_group.validate_offset_commit(member_id, generation_id, producer is not None, api_version, self.consumer.by_topic_id(offsets))
            if refused is not None:
                return fail(refused)
            if group is None:
                group = self.metadata.add_group(Group(group_id, GroupState.EMPTY, self.clock))
            return self.metadata.store_offsets(group, offsets, producer)
        if group is None:
            if generation_id >= 0 and producer is None:
                # A member of a generation this coordinator never saw (or a group that expired).
                return fail(ErrorCode.ILLEGAL_GENERATION)
            if producer is None:
                log.info("Creating simple consumer group %s via manual offset commit.", group_id)
            group = self.metadata.add_group(Group(group_id, GroupState.EMPTY, self.clock))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id, transactional=producer is not None)
        if error is not None:
            return fail(error)
        if producer is None:
            state = group.state
            if state is GroupState.COMPLETING_REBALANCE:
                # The member knows the new generation but has no assignment yet: let it finish the rebalance.
                return fail(ErrorCode.REBALANCE_IN_PROGRESS)
            if state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
                # Commits during a rebalance are still accepted: the heartbeat tells the member to rejoin.
                self._complete_and_schedule_next_heartbeat(group, group.get(member_id))
        return self.metadata.store_offsets(group, offsets, producer)

    def _validate_offset_commit(self, group: Group, generation_id: int, member_id: str, group_instance_id: str | None, *, transactional: bool) -> ErrorCode | None:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return None  # an admin client or a consumer that assigns partitions itself
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self._validate_current_member(group, member_id, group_instance_id)
            if error is not None:
                return error
            return ErrorCode.ILLEGAL_GENERATION if generation_id != group.generation_id else None
        if not transactional and not group.is_(GroupState.EMPTY):
            # Only members commit for a group that has members; old TxnOffsetCommits carry no member.
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """OffsetFetch v9+ from a consumer group's member: at its current epoch (classic groups check nothing)."""
        consumer_group = self.consumer_groups.get(group_id)
        return None if consumer_group is None else consumer_group.validate_offset_fetch(member_id, member_epoch)

    def fetch_offsets(self, group_id: str, require_stable: bool, partitions: list[TopicPartition] | None) -> dict[TopicPartition, OffsetFetchResult]:
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return {tp: OffsetFetchResult() for tp in partitions or []}
        wanted = list(group.offsets) if partitions is None else partitions
        out = {}
        for tp in wanted:
            if require_stable and group.has_pending_offset_commits(tp):
                out[tp] = OffsetFetchResult(error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
                continue
            committed = group.offset(tp)
            out[tp] = OffsetFetchResult() if committed is None else OffsetFetchResult(committed.offset, committed.leader_epoch, committed.metadata)
        return out

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            errors.update((tp, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) for tp in partitions if group.is_subscribed_to_topic(tp[0]))
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            removed = self.metadata.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible))
            errors.update((tp, ErrorCode.NONE) for tp in eligible)
            log.info("The following offsets of the group %s were deleted: %s. A total of %d offsets were removed.", group_id, eligible, removed)
        return ErrorCode.NONE, errors

    # -- groups as a whole ----------------------------------------------------------------------------------

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        errors: dict[str, ErrorCode] = {}
        eligible = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            consumer_group = self.consumer_groups.get(group_id)
            if consumer_group is not None:
                if not consumer_group.is_empty:
                    errors[group_id] = ErrorCode.NON_EMPTY_GROUP
                    continue
                self.metadata.context.write(CoordinatorResult(self.consumer.delete(consumer_group), lambda r: r.error))
                if group is None:
                    errors[group_id] = ErrorCode.NONE
                    continue
            if group is None or group.is_(GroupState.DEAD):
                errors[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.is_(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD)
                eligible.append(group)
            else:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
        if eligible:
            removed = self.metadata.cleanup_group_metadata(eligible, lambda g: g.remove_offsets(list(g.offsets)))
            errors.update((g.group_id, ErrorCode.NONE) for g in eligible)
            log.info("The following groups were deleted: %s. A total of %d offsets were removed.", ", ".join(g.group_id for g in eligible), removed)
        return errors

    def describe_group(self, group_id: str) -> GroupSummary:
        """A consumer group is not a classic group: DescribeGroups shows it Dead, as Kafka does (before v6,
        which answers GROUP_ID_NOT_FOUND)."""
        group = self.groups.get(group_id)
        return DEAD_GROUP if group is None or group_id in self.consumer_groups else group.summary()

    def overviews(self) -> list[GroupOverview]:
        """ListGroups' view: classic groups, and consumer groups in place of the groups holding their offsets."""
        out = [g.overview() for g in self.groups.values() if g.group_id not in self.consumer_groups]
        out += [GroupOverview(g.group_id, CONSUMER_PROTOCOL_TYPE, g.state.value, CONSUMER_GROUP_TYPE) for g in self.consumer_groups.values()]
        return out

    # -- the groups cache ------------------------------------------------------------------------------------

    def on_group_loaded(self, group: Group) -> None:
        if group.size > self.config.max_size:
            self._prepare_rebalance(group, f"Freshly-loaded group is over capacity ({self.config.max_size}). Rebalancing in order to give a chance for consumers to commit offsets")
        for member in list(group.members.values()):
            self._complete_and_schedule_next_heartbeat(group, member)

    def on_group_removed(self, group: Group) -> None:
        self.timers.cancel(("join", group.group_id))
        self.timers.cancel(("sync", group.group_id))
        for member_id in list(group.members) + list(group.pending_members):
            self._cancel_heartbeat(group, member_id)

    def on_unloaded(self) -> None:
        """Another broker now leads the partition: its groups' members are told to find it."""
        for group in list(self.groups.values()):
            previous = group.state
            group.transition_to(GroupState.DEAD)
            if previous is GroupState.PREPARING_REBALANCE:
                for member in list(group.members.values()):
                    group.maybe_complete_join(member, JoinResult(member.member_id, ErrorCode.NOT_COORDINATOR))
            elif previous in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                for member in list(group.members.values()):
                    group.maybe_complete_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
            self.metadata.forget_group(group)

    # -- timers ---------------------------------------------------------------------------------------------

    def on_timer_failed(self, timer: Timer, exc: Exception) -> None:
        """A timer failed half-way through a group's state change: start that group over, so that the
        failure is contained to one rebalance instead of wedging the group for good."""
        log.error("Group coordinator timer %s failed", timer.key, exc_info=exc)
        if timer.key != OFFSET_EXPIRATION_TIMER and isinstance(timer.key, tuple):  # a group's timer: (kind, group id, ...)
            group = self.groups.get(timer.key[1])
            if group is not None:
                self._reset_group(group)
    def _reset_group(self, group: Group) -> None:
        """Answer every parked JoinGroup and SyncGroup with UNKNOWN_MEMBER_ID (which has clients join again
        from scratch), drop the members, and move the group to Empty in a new generation, keeping its
        offsets."""
        if not self.metadata.is_current(group):
            return
        log.warning("Group %s in state %s generation %d is reset: its members must join again", group.group_id, group.state.value, group.generation_id)
        self.timers.cancel(("join", group.group_id))
        self.timers.cancel(("sync", group.group_id))
        for member in list(group.members.values()):
            group.maybe_complete_join(member, JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
            group.maybe_complete_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        for member_id in list(group.members) + list(group.pending_members):
            self._cancel_heartbeat(group, member_id)
            group.remove(member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            group.transition_to(GroupState.PREPARING_REBALANCE)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._on_complete_join(group)


class GroupCoordinator:
    """The group APIs as handlers call them: the group id is checked, then the request runs on the shard
    of the group's ``__consumer_offsets`` partition -- or is answered NOT_COORDINATOR or
    COORDINATOR_LOAD_IN_PROGRESS (each API as Kafka maps them)."""

    def __init__(self, runtime: CoordinatorRuntime[GroupCoordinatorShard]) -> None:
        self.runtime = runtime
        self.clock = runtime.clock
        runtime.coordinator = self

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    @property
    def groups(self) -> dict[str, Group]:
        """Every group this broker coordinates (a snapshot)."""
        return {group_id: group for shard in self.runtime.shards() for group_id, group in shard.groups.items()}

    def _route(self, group_id: str | None, api: ApiKey) -> tuple[ErrorCode | None, int]:
        """The group's partition, and why its shard cannot serve ``api`` (None when it can)."""
        if group_id is None or (not group_id and api not in GROUP_ID_MAY_BE_EMPTY):
            return ErrorCode.INVALID_GROUP_ID, -1
        partition = self.partition_for(group_id)
        return self.runtime.status(partition), partition

    # -- membership -----------------------------------------------------------------------------------------

    def join_group(self, req: JoinRequest) -> Deferred[JoinResult]:
        error, partition = self._route(req.group_id, ApiKey.JoinGroup)
        if error is not None:
            return Deferred.completed(JoinResult(req.member_id, error))
        return self.runtime.shard(partition).join_group(req)

    def sync_group(self, group_id: str, generation_id: int, member_id: str, protocol_type: str | None, protocol_name: str | None, group_instance_id: str | None, assignments: dict[str, bytes]) -> Deferred[SyncResult]:
        error, partition = self._route(group_id, ApiKey.SyncGroup)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance in flight was lost with the old coordinator: have the member rejoin.
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None:
            return Deferred.completed(SyncResult(error))
        return self.runtime.shard(partition).sync_group(group_id, generation_id, member_id, protocol_type, protocol_name, group_instance_id, assignments)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        error, partition = self._route(group_id, ApiKey.Heartbeat)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # the group is still loading: answer blindly
        if error is not None:
            return error
        return self.runtime.shard(partition).heartbeat(group_id, member_id, group_instance_id, generation_id)

    def leave_group(self, group_id: str, leaving: list[LeavingMember]) -> tuple[ErrorCode, list[tuple[LeavingMember, ErrorCode]]]:
        error, partition = self._route(group_id, ApiKey.LeaveGroup)
        if error is not None:
            return error, []
        return self.runtime.shard(partition).leave_group(group_id, leaving)

    # -- offsets --------------------------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata], api_version: int = 9) -> Deferred[dict[TopicPartition, ErrorCode]]:
        error, partition = self._route(group_id, ApiKey.OffsetCommit)
        if error is not None:
            return Deferred.completed({tp: error for tp in offsets})
        return self.runtime.write(partition, lambda shard: shard.commit_offsets(group_id, member_id, group_instance_id, generation_id, offsets, api_version=api_version))

    def commit_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str, group_instance_id: str | None, generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]) -> Deferred[dict[TopicPartition, ErrorCode]]:
        """TxnOffsetCommit (Kafka's ``handleTxnCommitOffsets``): written as the producer's transactional
        batch; the offsets stay pending (OffsetFetch with require_stable: UNSTABLE_OFFSET_COMMIT) until
        :meth:`complete_transaction` brings the producer's marker. The caller checks the producer and its
        transaction first (the transaction coordinator's verification)."""
        error, partition = self._route(group_id, ApiKey.TxnOffsetCommit)
        if error is not None:
            return Deferred.completed({tp: error for tp in offsets})
        producer = Producer(producer_id, producer_epoch)
        return self.runtime.write(partition, lambda shard: shard.commit_offsets(group_id, member_id, group_instance_id, generation_id, offsets, producer))

    def complete_transaction(self, producer_id: int, producer_epoch: int, offsets_partitions: Iterable[int], committed: bool) -> None:
        """The producer's COMMIT or ABORT marker is written to these ``__consumer_offsets`` partitions
        (Kafka's ``scheduleHandleTxnCompletion``): its pending offsets there are applied or dropped."""
        for partition in offsets_partitions:
            self.runtime.complete_transaction(partition, producer_id, producer_epoch, committed)

    def fetch_offsets(self, group_id: str, require_stable: bool, partitions: list[TopicPartition] | None, member_id: str | None = None, member_epoch: int = -1) -> tuple[ErrorCode, dict[TopicPartition, OffsetFetchResult]]:
        """Committed offsets regardless of the group's state: a group may use Kafka for offsets only.
        ``partitions`` None means every partition the group has an offset for. A consumer group's member
        (OffsetFetch v9+) fetches at its current member epoch."""
        error, partition = self._route(group_id, ApiKey.OffsetFetch)
        if error is not None:
            return error, {}
        shard = self.runtime.shard(partition)
        error = shard.validate_offset_fetch(group_id, member_id, member_epoch)
        if error is not None:
            return error, {}
        return ErrorCode.NONE, shard.fetch_offsets(group_id, require_stable, partitions)

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error, partition = self._route(group_id, ApiKey.OffsetDelete)
        if error is not None:
            return error, {}
        return self.runtime.shard(partition).delete_offsets(group_id, partitions)

    # -- groups as a whole ----------------------------------------------------------------------------------

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        errors: dict[str, ErrorCode] = {}
        by_partition: dict[int, list[str]] = {}
        for group_id in dict.fromkeys(group_ids):
            error, partition = self._route(group_id, ApiKey.DeleteGroups)
            if error is not None:
                errors[group_id] = error
            else:
                by_partition.setdefault(partition, []).append(group_id)
        for partition, ids in by_partition.items():
            errors.update(self.runtime.shard(partition).delete_groups(ids))
        return {group_id: errors[group_id] for group_id in dict.fromkeys(group_ids)}

    def list_groups(self, states: list[str], types: list[str]) -> tuple[ErrorCode, list[GroupOverview]]:
        """States and types filter case-insensitively (types: ``classic``, ``consumer``)."""
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.runtime.is_loading else ErrorCode.NONE
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        return error, [
            g
            for shard in self.runtime.shards()
            for g in shard.overviews()
            if (not wanted_states or g.state.lower() in wanted_states) and (not wanted_types or g.group_type in wanted_types)
        ]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        error, partition = self._route(group_id, ApiKey.DescribeGroups)
        if error is not None:
            return error, EMPTY_GROUP
        return ErrorCode.NONE, self.runtime.shard(partition).describe_group(group_id)

    # -- the consumer group protocol (KIP-848) --------------------------------------------------------------

    def consumer_group_heartbeat(self, req: HeartbeatRequest) -> Deferred[HeartbeatResult]:
        error, partition = self._route(req.group_id, ApiKey.ConsumerGroupHeartbeat)
        if error is not None:
            return Deferred.completed(HeartbeatResult(error))
        return self.runtime.write(partition, lambda shard: shard.consumer_group_heartbeat(req))

    def consumer_group_describe(self, group_ids: list[str]) -> list[DescribedGroup]:
        out = []
        for group_id in group_ids:
            error, partition = self._route(group_id, ApiKey.ConsumerGroupDescribe)
            if error is not None:
                out.append(DescribedGroup(group_id, error))
            else:
                out.extend(self.runtime.shard(partition).consumer.describe([group_id]))
        return out


def group_coordinator_runtime(config: "BrokerConfig", topic: CoordinatorTopic, partitions: PartitionWriter, load: Callable[[int], Iterable[LoadedBatch]], *, broker_id: int, metadata: Callable[[], Any], create_topic: Callable[[CoordinatorTopic], None]) -> CoordinatorRuntime[GroupCoordinatorShard]:
    """The group coordinator on its runtime, its service at ``.coordinator``; ``topic``: ``__consumer_offsets``
    (:func:`~odradek.broker.coordinator.coordinators.offsets_topic`)."""
    group_config = GroupConfig.from_broker_config(config)
    consumer_config = ConsumerGroupConfig.from_broker_config(config)
    runtime = CoordinatorRuntime(
        topic,
        lambda context: GroupCoordinatorShard(context, group_config, consumer_config, metadata),
        partitions,
        broker_id=broker_id,
        load=load,
        metadata=metadata,
        create_topic=create_topic,
    )
    GroupCoordinator(runtime)
    return runtime
