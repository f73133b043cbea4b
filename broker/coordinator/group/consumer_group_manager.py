"""The consumer group protocol (KIP-848) on one ``__consumer_offsets`` partition (sans-IO).

Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` and its helpers, step for step. A heartbeat

1. creates or updates the member; a changed subscription (or a change in the subscribed topics' metadata)
   bumps the **group epoch**;
2. recomputes the **target assignment** with the group's server assignor when the group epoch passed the
   assignment epoch;
3. moves the member one step towards its target (:func:`~odradek.broker.coordinator.group.consumer_group.reconcile`):
   revoke first, assign what is free, wait for unreleased partitions;

and answers with the member's epoch, the heartbeat interval and -- on a full request or when it changed --
its assignment. Every change is a record; the records are replayed into the groups at once and appended
as one batch; the answer goes out once the batch is committed, and the groups are put back as they were
if it is not (Kafka reverts to its snapshot the same way).

Members are fenced when their session expires (``group.consumer.session.timeout.ms`` without a
heartbeat) or when they keep partitions to revoke beyond their rebalance timeout.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol

from odradek.broker.coordinator.group.assignors import ASSIGNORS, GroupSpec, MemberSpec, PartitionAssignorError
from odradek.broker.coordinator.group.consumer_group import (
    CONSUMER_PROTOCOL_TYPE,
    EMPTY_ASSIGNMENT,
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    GroupError,
    MemberState,
    reconcile,
    without_empty,
)
from odradek.broker.coordinator.group.consumer_group_records import (
    ConsumerGroupRecord,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberSubscriptionRecord,
    RegularExpressionRecord,
    TargetAssignmentEpochRecord,
    TargetAssignmentMemberRecord,
    decode_record,
    encode_record,
    group_tombstones,
    member_tombstones,
    replay,
)
from odradek.broker.coordinator.group.consumer_protocol import read_assignment, read_subscription, write_assignment
from odradek.broker.coordinator.group.group import JoinResult, SyncResult
from odradek.broker.coordinator.group.group_metadata_records import MemberMetadata
from odradek.broker.coordinator.runtime import AppendResult, CoordinatorResult, Record, ShardContext
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid, random_uuid
from odradek.protocol.schema import DecodeError

if TYPE_CHECKING:
    from odradek.broker.config import BrokerConfig
    from odradek.controller.metadata_image import MetadataImage
    from odradek.storage.topic_partition import TopicPartition

log = logging.getLogger("odradek.group_coordinator")

INT_MAX = 2**31 - 1
REGEX_REFRESH_INTERVAL_MS = 10_000
"""How stale a resolved regular expression may get before a heartbeat resolves it again (Kafka's
``REGEX_REFRESH_INTERVAL``-like bound; Kafka also refreshes when the metadata image changes)."""
CONSUMER_GENERATED_MEMBER_ID_VERSION = 1
"""From ConsumerGroupHeartbeat v1 the member generates its own id (KIP-1082)."""

ASSIGNOR_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}

APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    # Kafka's CoordinatorRuntime normalizes what a failed append means to the client.
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


@dataclass(frozen=True)
class ConsumerGroupConfig:
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    max_size: int = INT_MAX
    assignors: tuple[str, ...] = ("uniform", "range")
    migration_policy: str = "bidirectional"
    """``group.consumer.migration.policy``: whether a classic group converts to a consumer group (upgrade)
    and back (downgrade)."""
    classic_max_size: int = INT_MAX
    """``group.max.size``: a consumer group larger than this is not converted back to a classic group."""

    @property
    def upgrade_enabled(self) -> bool:
        return self.migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("downgrade", "bidirectional")

    @classmethod
    def from_broker_config(cls, config: "BrokerConfig") -> "ConsumerGroupConfig":
        names = tuple(ASSIGNOR_CLASS_NAMES.get(n.strip(), n.strip()) for n in str(config["group.consumer.assignors"]).split(",") if n.strip())
        unknown = [n for n in names if n not in ASSIGNORS]
        if unknown or not names:
            raise ValueError(f"group.consumer.assignors: unknown assignor(s) {unknown}; odradek has {sorted(ASSIGNORS)}")
        return cls(
            heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
            session_timeout_ms=config["group.consumer.session.timeout.ms"],
            max_size=config["group.consumer.max.size"],
            assignors=names,
            migration_policy=migration_policy(config["group.consumer.migration.policy"]),
            classic_max_size=config["group.max.size"],
        )


MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


def migration_policy(value: str) -> str:
    """Kafka's ``ConsumerGroupMigrationPolicy``, named case-insensitively."""
    policy = str(value).strip().lower()
    if policy not in MIGRATION_POLICIES:
        raise ValueError(f"Invalid value {value} for configuration group.consumer.migration.policy: String must be one of (case insensitive): {', '.join(p.upper() for p in MIGRATION_POLICIES)}")
    return policy


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Mapping[Uuid, frozenset[int]] | None = None
    """TopicPartitions: what the member owns (None: unchanged since its last heartbeat)."""
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(frozen=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None
    """None: unchanged (the member keeps what it has)."""


@dataclass(frozen=True)
class DescribedMember:
    member: ConsumerGroupMember
    assignment: list[tuple[Uuid, str, list[int]]]
    target_assignment: list[tuple[Uuid, str, list[int]]]


@dataclass(frozen=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True)
class ClassicMemberView:
    """A classic group's member as an upgrade reads it: who it is, its timeouts and protocols, and the
    assignment its group last gave it."""

    member: MemberMetadata
    supported_protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes


@dataclass(frozen=True)
class ClassicGroupView:
    group_id: str
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    members: tuple[ClassicMemberView, ...]


class ClassicJoin(Protocol):
    """A JoinGroup as the classic coordinator takes it (its ``JoinRequest``)."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool


class ClassicGroups(Protocol):
    """What the consumer groups need of the classic groups sharing the partition (KIP-848's online
    migration): the classic group holding an id (None: free, or a group that only holds offsets), the
    records that retire it (its members are answered and dropped; its offsets stay), and the conversion
    of a consumer group's classic members back into a classic group."""

    def classic_group(self, group_id: str) -> ClassicGroupView | None: ...

    def retire_classic_group(self, group_id: str) -> list[Record]: ...

    def downgrade(self, group_id: str, generation_id: int, members: list[tuple[ConsumerGroupMember, bytes]], rebalance: bool) -> list[Record]: ...


class ConsumerGroupManager:
    def __init__(self, context: ShardContext, config: ConsumerGroupConfig, metadata: Callable[[], "MetadataImage | None"], classic: ClassicGroups) -> None:
        self.context = context
        self.config = config
        self.clock = context.clock
        self.timers = context.timers
        self.metadata = metadata
        self.classic = classic
        self.groups: dict[str, ConsumerGroup] = {}

    # -- loading ----------------------------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> bool:
        """Replay a loaded record; False if it is not a consumer group's."""
        record = decode_record(key, value)
        if record is None:
            return False
        replay(self.groups, record)
        return True

    def on_loaded(self) -> None:
        """Kafka's ``onLoaded``: every member gets a session; members still revoking get a rebalance timeout."""
        for group in self.groups.values():
            for member in group.members.values():
                self._schedule_session_timeout(group.group_id, member.member_id, member)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(group.group_id, member)

    # -- writes -------------------------------------------------------------------------------------------------

    def _write(self, records: list[ConsumerGroupRecord], respond: Callable[[ErrorCode], Any], raw: Iterable[Record] = (), after: Iterable[Record] = ()) -> CoordinatorResult[Any]:
        """Replay ``records`` now and append them (``raw`` records before, ``after`` after them): ``respond``
        gets NONE once committed, or the client's error after the groups were put back as they were."""
        encoded = list(raw) + [encode_record(r) for r in records] + list(after)
        touched = {r.group_id for r in records}
        saved = {gid: copy.deepcopy(self.groups.get(gid)) for gid in touched}
        for record in records:
            replay(self.groups, record)

        def appended(result: AppendResult) -> Any:
            if result.error == ErrorCode.NONE:
                return respond(ErrorCode.NONE)
            for gid, group in saved.items():
                if group is None:
                    self.groups.pop(gid, None)
                else:
                    self.groups[gid] = group
            return respond(APPEND_ERRORS.get(result.error, result.error))

        return CoordinatorResult(encoded, appended)

    # -- ConsumerGroupHeartbeat ------------------------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest) -> CoordinatorResult[HeartbeatResult]:
        try:
            self._validate(req)
            after: list[Record] = []
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                records, after, result = self._leave(req)
                raw: list[Record] = []
            else:
                records, raw, result = self._heartbeat(req)
        except GroupError as e:
            return CoordinatorResult.of(HeartbeatResult(e.error, e.message))
        except PartitionAssignorError as e:
            msg = f"Failed to compute a new target assignment: {e}"
            log.error("[GroupId %s] %s", req.group_id, msg)
            return CoordinatorResult.of(HeartbeatResult(ErrorCode.UNKNOWN_SERVER_ERROR, msg))
        return self._write(records, lambda error: result if error == ErrorCode.NONE else HeartbeatResult(error), raw, after)

    def _validate(self, req: HeartbeatRequest) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""

        def invalid(message: str) -> GroupError:
            return GroupError(ErrorCode.INVALID_REQUEST, message)

        if req.group_id == "":
            raise invalid("GroupId can't be empty.")
        if req.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if req.rack_id == "":
            raise invalid("RackId can't be empty.")
        if req.api_version >= CONSUMER_GENERATED_MEMBER_ID_VERSION and req.member_id == "":
            raise invalid("MemberId can't be empty.")
        epoch = req.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if req.member_id == "":
                raise invalid("MemberId can't be empty.")
        elif epoch == JOIN_GROUP_MEMBER_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if not req.subscribed_topic_names and not req.subscribed_topic_regex:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.member_id == "":
                raise invalid("MemberId can't be empty.")
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if req.subscribed_topic_regex is not None:
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as e:
                raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular expression: {e}.") from None
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: {', '.join(self.config.assignors)}.")

    def _group(self, group_id: str, create: bool, records: list[ConsumerGroupRecord]) -> tuple[ConsumerGroup, bool]:
        """Kafka's ``getOrMaybeCreateConsumerGroup``: a joining member takes the id of an empty classic group,
        and converts one with members (the online upgrade, its records added to ``records``) when the
        migration policy allows; otherwise a classic group is not a consumer group. True: the classic
        group is to be retired (:meth:`_retire`) once the heartbeat is accepted."""
        group = self.groups.get(group_id)
        if group is not None:
            return group, False
        classic = self.classic.classic_group(group_id)
        if classic is None:
            if not create:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id), False
        if create and not classic.members:
            log.info("[GroupId %s] Converted the empty classic group to a consumer group.", group_id)
            return ConsumerGroup(group_id), True
        if create and self._validate_online_upgrade(classic):
            return self._upgrade(classic, records), True
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def _retire(self, group: ConsumerGroup) -> list[Record]:
        """The classic group whose id ``group`` took is retired (its records: the GroupMetadata tombstone);
        its members, now the consumer group's, get their sessions."""
        for member in group.members.values():
            if member.classic is not None:
                self._schedule_session_timeout(group.group_id, member.member_id, member)
        return self.classic.retire_classic_group(group.group_id)

    # -- online migration (KIP-848): classic <-> consumer -----------------------------------------------------

    def _validate_online_upgrade(self, classic: ClassicGroupView) -> bool:
        """Kafka's ``validateOnlineUpgrade``."""
        if not self.config.upgrade_enabled:
            log.info("Cannot upgrade classic group %s to consumer group because the online upgrade is disabled.", classic.group_id)
            return False
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            log.info("Cannot upgrade classic group %s to consumer group because the group does not use the consumer embedded protocol.", classic.group_id)
            return False
        if len(classic.members) > self.config.max_size:
            log.info("Cannot upgrade classic group %s to consumer group because the group size exceeds the consumer group maximum size.", classic.group_id)
            return False
        return True

    def _upgrade(self, classic: ClassicGroupView, records: list[ConsumerGroupRecord]) -> ConsumerGroup:
        """Kafka's ``convertToConsumerGroup``/``ConsumerGroup.fromClassicGroup``: every member becomes a Stable
        classic member at the group's generation, owning (and targeted at) what its last assignment gave it;
        the group epoch is the generation. The joining member then bumps the epoch and the classic members
        rejoin (their heartbeats answer REBALANCE_IN_PROGRESS) to get their share of the new assignment."""
        group_id, generation = classic.group_id, classic.generation_id
        image = self.metadata()
        topics = image.topics if image is not None else {}
        members = []
        try:
            for view in classic.members:
                who = view.member
                protocols = dict(view.supported_protocols)
                # A group rebalancing out of Empty has chosen no protocol yet: the member's first then.
                metadata = protocols.get(classic.protocol_name) if classic.protocol_name is not None else next(iter(protocols.values()), None)
                subscription = read_subscription(metadata or b"")
                assigned = without_empty({topics[t].topic_id: frozenset(ps) for t, ps in read_assignment(view.assignment).items() if t in topics})
                members.append(
                    ConsumerGroupMember(
                        who.member_id,
                        member_epoch=generation,
                        previous_member_epoch=generation,
                        instance_id=who.group_instance_id,
                        rack_id=subscription.rack_id,
                        rebalance_timeout_ms=who.rebalance_timeout_ms,
                        client_id=who.client_id,
                        client_host=who.client_host,
                        subscribed_topic_names=frozenset(subscription.topics),
                        assigned_partitions=assigned,
                        assignment_epochs={(topic_id, p): generation for topic_id, ps in assigned.items() for p in ps},
                        classic=ClassicMemberMetadata(who.session_timeout_ms, view.supported_protocols),
                    )
                )
        except DecodeError as e:
            log.warning("Cannot upgrade the classic group %s to consumer group because the embedded consumer protocol is malformed: %s.", group_id, e)
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {group_id} to consumer group because the embedded consumer protocol is malformed.") from None
        subscribed = {t for m in members for t in m.subscribed_topic_names}
        records += [MemberSubscriptionRecord(group_id, m.member_id, m) for m in members]
        records.append(GroupEpochRecord(group_id, generation, _metadata_hash(self._topic_metadata(subscribed, image))))
        records += [TargetAssignmentMemberRecord(group_id, m.member_id, m.assigned_partitions) for m in members]
        records.append(TargetAssignmentEpochRecord(group_id, generation, self.clock()))
        records += [CurrentAssignmentRecord(group_id, m.member_id, m) for m in members]
        groups: dict[str, ConsumerGroup] = {}
        for record in records:
            replay(groups, record)
        log.info("[GroupId %s] Converted the classic group to a consumer group with %d members.", group_id, len(members))
        return groups[group_id]

    def _validate_online_downgrade(self, group: ConsumerGroup, leaving_member_id: str, replaced: bool = False) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMember`` (the last consumer-protocol member leaves a group
        of classic members) and, ``replaced``, ``validateOnlineDowngradeWithReplacedMemberId`` (a classic
        static member takes the place of the last one)."""
        if not group.all_members_use_classic_protocol_except(leaving_member_id):
            return False
        if len(group.members) <= 1 and not replaced:
            return False
        if not self.config.downgrade_enabled:
            log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is disabled.", group.group_id)
            return False
        if len(group.members) - (0 if replaced else 1) > self.config.classic_max_size:
            log.info("Cannot downgrade consumer group %s to classic group because its group size is greater than classic group max size.", group.group_id)
            return False
        return True

    def _downgrade(self, group: ConsumerGroup, leaving_member_id: str, joining: ConsumerGroupMember | None = None) -> tuple[list[ConsumerGroupRecord], list[Record]]:
        """Kafka's ``convertToClassicGroup``: the consumer group's records are deleted and the classic group
        (generation: the group epoch; each member's assignment: its target one) is written after them. A
        group its leaving member converts then rebalances; a ``joining`` static member takes the leaving
        one's place and assignment, and the group stays Stable."""
        records = group_tombstones(group)
        if joining is not None:
            # The joining member's records go too, before the group's (Kafka's ...WithReplacedMember).
            records[-1:-1] = member_tombstones(group.group_id, joining.member_id)
        members = []
        for m in group.members.values():
            self._cancel_timers(group.group_id, m.member_id)
            if m.member_id == leaving_member_id:
                if joining is None:
                    continue
                m = joining
            if m.classic is not None:
                target = self._by_name(group.target_assignment.get(m.member_id if m is not joining else leaving_member_id, EMPTY_ASSIGNMENT))
                members.append((m, write_assignment(target, m.classic.metadata(m.classic.protocol_name))))
        log.info("[GroupId %s] Converting the consumer group to a classic group with %d members.", group.group_id, len(members))
        return records, self.classic.downgrade(group.group_id, group.group_epoch, members, rebalance=joining is None)

    def _by_name(self, assignment: Assignment) -> dict[str, list[int]]:
        image = self.metadata()
        names = {info.topic_id: name for name, info in image.topics.items()} if image is not None else {}
        return {names[topic_id]: sorted(ps) for topic_id, ps in assignment.items() if topic_id in names}

    # -- classic members of a consumer group: JoinGroup, SyncGroup, Heartbeat, LeaveGroup --------------------

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's ``validateConsumerGroupMember`` and ``throwIfMemberDoesNotUseClassicProtocol``."""
        if instance_id is None:
            member = group.member(member_id)
        else:
            found = group.static_member(instance_id)
            if found is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member with instance id {instance_id} is not a member of group {group.group_id}.")
            if found.member_id != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} was fenced by member {found.member_id}.")
            member = found
        if member.classic is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol.")
        return member

    def classic_join(self, req: ClassicJoin) -> CoordinatorResult[JoinResult]:
        """Kafka's ``classicGroupJoinToConsumerGroup``: a classic member joins (or rejoins) a consumer group
        with members. It takes part in the group as a consumer-protocol member would (its subscription and
        owned partitions come from its JoinGroup metadata), and is answered at once -- no leader, no member
        list: the broker assigns, and SyncGroup hands the member its partitions."""
        group = self.groups[req.group_id]
        replaced = group.static_member(req.group_instance_id) if req.group_instance_id is not None else None
        unknown = req.member_id == ""
        member_id = str(random_uuid()) if unknown else req.member_id
        records: list[ConsumerGroupRecord] = []
        try:
            if len(group.members) >= self.config.max_size and member_id not in group.members:
                raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of {self.config.max_size} members.")
            if not group.supports_classic_protocols(req.protocol_type, {name for name, _ in req.protocols}):
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported.")
            if unknown and req.require_known_member_id:
                log.info("[GroupId %s] Dynamic member with unknown member id joins the consumer group. Created a new member id %s and requesting the member to rejoin with this id.", group.group_id, member_id)
                return CoordinatorResult.of(JoinResult(member_id, ErrorCode.MEMBER_ID_REQUIRED))
            if req.group_instance_id is None:
                member = group.members.get(member_id)
                if member is None:
                    log.info("[GroupId %s] Member %s joins the consumer group using the classic protocol.", group.group_id, member_id)
                    member = ConsumerGroupMember(member_id)
            else:
                member = self._static_member(group, member_id, req.group_instance_id, -1, None, unknown, records, classic=True)
            try:
                subscription = read_subscription(req.protocols[0][1])
            except DecodeError as e:
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Malformed embedded consumer protocol: {e}.") from None
            updated = replace(
                member,
                instance_id=req.group_instance_id if req.group_instance_id is not None else member.instance_id,
                rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
                rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
                subscribed_topic_names=frozenset(subscription.topics),
                client_id=req.client_id,
                client_host=req.client_host,
                classic=ClassicMemberMetadata(req.session_timeout_ms, tuple(req.protocols)),
            )
            image = self.metadata()
            topics = image.topics if image is not None else {}
            owned = without_empty({topics[t].topic_id: frozenset(ps) for t, ps in subscription.owned_partitions if t in topics})
            reconciled, _ = self._update_member(group, member, updated, owned, records)
            after: list[Record] = []
            downgrade = replaced is not None and replaced.member_id != member_id and self._validate_online_downgrade(group, replaced.member_id, replaced=True)
            if downgrade:
                assert replaced is not None
                tombstones, after = self._downgrade(group, replaced.member_id, reconciled)
                records += tombstones
        except GroupError as e:
            return CoordinatorResult.of(JoinResult(req.member_id, e.error))
        except PartitionAssignorError as e:
            log.error("[GroupId %s] Failed to compute a new target assignment: %s", req.group_id, e)
            return CoordinatorResult.of(JoinResult(req.member_id, ErrorCode.UNKNOWN_SERVER_ERROR))
        assert reconciled.classic is not None
        result = JoinResult(member_id, ErrorCode.NONE, reconciled.member_epoch, CONSUMER_PROTOCOL_TYPE, reconciled.classic.protocol_name, "", False, [])

        def respond(error: ErrorCode) -> JoinResult:
            if error != ErrorCode.NONE:
                return JoinResult(req.member_id, error)
            self.timers.cancel(("consumer-join", group.group_id, member_id))
            if not downgrade:
                self._schedule_session_timeout(group.group_id, member_id, reconciled)
                # The member must send its SyncGroup within its rebalance timeout.
                self.timers.schedule(("consumer-sync", group.group_id, member_id), req.rebalance_timeout_ms, lambda: self._fence_by_timer(group.group_id, member_id, "the member failed to sync within timeout."))
            return result

        return self._write(records, respond, after=after)

    def classic_sync(self, group_id: str, generation_id: int, member_id: str, protocol_type: str | None, protocol_name: str | None, instance_id: str | None) -> SyncResult:
        """Kafka's ``classicGroupSyncToConsumerGroup``: the member's assigned partitions, in the consumer
        protocol's assignment at its subscription's version; REBALANCE_IN_PROGRESS when the group moved on
        and it must rejoin first."""
        group = self.groups[group_id]
        try:
            member = self._classic_member(group, member_id, instance_id)
            self._check_generation(member, generation_id)
            assert member.classic is not None
            if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"The protocol type {protocol_type} from member {member_id} request is not equal to the group protocol type {CONSUMER_PROTOCOL_TYPE}.")
            if protocol_name is not None and protocol_name != member.classic.protocol_name:
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"The protocol name {protocol_name} from member {member_id} request is not equal to the protocol name {member.classic.protocol_name} returned in the join response.")
            if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
                self._schedule_join_timeout_if_absent(group.group_id, member)
                raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS, f"A new rebalance is triggered in group {group_id} and member {member_id} should rejoin to catch up.")
        except GroupError as e:
            return SyncResult(e.error)
        self.timers.cancel(("consumer-sync", group_id, member.member_id))
        self._schedule_session_timeout(group_id, member.member_id, member)
        assignment = write_assignment(self._by_name(member.assigned_partitions), member.classic.metadata(member.classic.protocol_name))
        return SyncResult(ErrorCode.NONE, protocol_type, protocol_name, assignment)

    def classic_heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        """Kafka's ``classicGroupHeartbeatToConsumerGroup``: REBALANCE_IN_PROGRESS asks the member to rejoin
        when the group epoch moved past it, it has partitions to revoke, or its unreleased ones are free."""
        group = self.groups[group_id]
        try:
            member = self._classic_member(group, member_id, instance_id)
            self._check_generation(member, generation_id)
        except GroupError as e:
            return e.error
        self._schedule_session_timeout(group_id, member.member_id, member)
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased_partition(member))
        ):
            self._schedule_join_timeout_if_absent(group_id, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def classic_leave(self, group_id: str, leaving: list[tuple[str, str | None, str | None]]) -> tuple[list[tuple[str, ErrorCode]], CoordinatorResult[Any]]:
        """Kafka's ``classicGroupLeaveToConsumerGroup``: ``leaving`` is (member id, instance id, reason); the
        answer per member (its member id and error), and the records that remove the members and bump the
        group epoch."""
        group = self.groups[group_id]
        records: list[ConsumerGroupRecord] = []
        gone: set[str] = set()
        answers: list[tuple[str, ErrorCode]] = []
        for member_id, instance_id, reason in leaving:
            try:
                if instance_id is None:
                    member = self._classic_member(group, member_id, None)
                else:
                    found = group.static_member(instance_id)
                    if found is None:
                        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                    # LeaveGroup may remove a static member by its instance id alone (an administrator).
                    member = self._classic_member(group, found.member_id if member_id == "" else member_id, instance_id)
            except GroupError as e:
                answers.append((member_id, e.error))
                continue
            log.info("[Group %s] Member %s has left group through explicit `LeaveGroup` request; client reason: %s", group_id, member.member_id, reason or "not provided")
            records += member_tombstones(group_id, member.member_id)
            self._cancel_timers(group_id, member.member_id)
            gone.add(member.member_id)
            answers.append((member.member_id, ErrorCode.NONE))
        if records:
            topics: dict[str, int] = {}
            for m in group.members.values():
                if m.member_id not in gone:
                    for t in group.member_topics(m):
                        topics[t] = topics.get(t, 0) + 1
            records.append(GroupEpochRecord(group_id, group.group_epoch + 1, _metadata_hash(self._topic_metadata(topics, self.metadata()))))
        return answers, self._write(records, lambda error: error)

    @staticmethod
    def _check_generation(member: ConsumerGroupMember, generation_id: int) -> None:
        if member.member_epoch != generation_id:
            raise GroupError(ErrorCode.ILLEGAL_GENERATION, f"The request generation id {generation_id} is not equal to the member epoch {member.member_epoch} of member {member.member_id}.")

    def _schedule_join_timeout_if_absent(self, group_id: str, member: ConsumerGroupMember) -> None:
        """A classic member told to rejoin must do so within its rebalance timeout, or is fenced."""
        key = ("consumer-join", group_id, member.member_id)
        if self.timers.get(key) is None:
            member_id = member.member_id
            self.timers.schedule(key, member.rebalance_timeout_ms, lambda: self._fence_by_timer(group_id, member_id, "the classic member failed to join within the rebalance timeout."))

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("consumer-session", "consumer-rebalance", "consumer-join", "consumer-sync"):
            self.timers.cancel((kind, group_id, member_id))

    def _heartbeat(self, req: HeartbeatRequest) -> tuple[list[ConsumerGroupRecord], list[Record], HeartbeatResult]:
        records: list[ConsumerGroupRecord] = []
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group, retire = self._group(req.group_id, joining, records)
        member_id = req.member_id or str(random_uuid())
        if len(group.members) >= self.config.max_size and (not req.member_id or req.member_id not in group.members):
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of {self.config.max_size} members.")
        if req.instance_id is None:
            member = self._dynamic_member(group, member_id, req, joining)
        else:
            member = self._static_member(group, member_id, req.instance_id, req.member_epoch, req.owned, joining, records)
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=frozenset(req.subscribed_topic_names) if req.subscribed_topic_names is not None else member.subscribed_topic_names,
            subscribed_topic_regex=req.subscribed_topic_regex if req.subscribed_topic_regex is not None else member.subscribed_topic_regex,
            client_id=req.client_id,
            client_host=req.client_host,
            classic=None,
        )
        reconciled, _ = self._update_member(group, member, updated, req.owned, records)
        full = joining or (req.rebalance_timeout_ms != -1 and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None) and req.owned is not None)
        changed = reconciled.assigned_partitions != member.assigned_partitions
        result = HeartbeatResult(
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self._group_setting(group.group_id, "consumer.heartbeat.interval.ms", self.config.heartbeat_interval_ms),
            assignment=reconciled.assigned_partitions if full or changed else None,
        )
        return records, self._retire(group) if retire else [], result

    def _update_member(
        self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember, owned: Mapping[Uuid, frozenset[int]] | None, records: list[ConsumerGroupRecord]
    ) -> tuple[ConsumerGroupMember, int]:
        """The three steps of a heartbeat (or a classic member's JoinGroup), once ``member`` became ``updated``:
        the member record and maybe a new group epoch, the target assignment when the epoch moved past it,
        one step of reconciliation. The member as it ends up, and the epoch of its target."""
        now = self.clock()
        member_id = updated.member_id
        # 1. The member, its subscription and the group epoch.
        bump = False
        if updated != member:
            records.append(MemberSubscriptionRecord(group.group_id, member_id, updated))
            bump = not updated.same_subscription(member)
        if updated.server_assignor != member.server_assignor:
            # Kafka's hasPreferredServerAssignorChanged: the group's assignor changes with the members' votes.
            old_member = member if member.member_id in group.members else None
            bump |= group.preferred_server_assignor(group.server_assignors_with(old_member, updated)) != group.preferred_server_assignor()
        image = self.metadata()
        records += self._resolve_regexes(group, member, updated, image, now)
        resolved = self._resolved_after(group, records)
        topics = self._subscribed_topics(group, member, updated, resolved)
        metadata = self._topic_metadata(topics, image)
        metadata_hash = _metadata_hash(metadata)
        group_epoch = group.group_epoch
        if bump or metadata_hash != group.metadata_hash:
            group_epoch += 1
            records.append(GroupEpochRecord(group.group_id, group_epoch, metadata_hash))
            log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, group_epoch)

        # 2. The target assignment, when the group epoch moved past it.
        if group_epoch > group.assignment_epoch:
            target = self._update_target_assignment(group, group_epoch, member, updated, topics, metadata, resolved, records, now)
            target_epoch = group_epoch
        else:
            target_epoch = group.assignment_epoch
            target = group.member_target(updated.member_id, updated.instance_id)

        # 3. One step of reconciliation.
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            reconciled = reconcile(updated, target_epoch, target, group.current_partition_epoch, owned)
            if reconciled != updated:
                records.append(CurrentAssignmentRecord(group.group_id, member_id, reconciled))
                if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(group.group_id, reconciled)
                else:
                    self.timers.cancel(("consumer-rebalance", group.group_id, member_id))
        self._schedule_session_timeout(group.group_id, member_id, reconciled)
        return reconciled, target_epoch

    def _dynamic_member(self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest, joining: bool) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
            log.info("[GroupId %s] Member %s joins the consumer group using the consumer protocol.", group.group_id, member_id)
            return ConsumerGroupMember(member_id)
        _check_member_epoch(member, req.member_epoch, req.owned)
        return member

    def _static_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str,
        member_epoch: int,
        owned: Mapping[Uuid, frozenset[int]] | None,
        joining: bool,
        records: list[ConsumerGroupRecord],
        classic: bool = False,
    ) -> ConsumerGroupMember:
        """Kafka's ``getOrMaybeSubscribeStaticConsumerGroupMember``; ``classic``: a JoinGroup's member, which
        replaces its instance's previous member whichever protocol that one used."""
        protocol = "classic" if classic else "consumer"
        existing = group.static_member(instance_id)
        if joining:
            if existing is None:
                if member_id in group.members:
                    # A dynamic member's id rejoining as a static member: it stays the member it was.
                    return group.members[member_id]
                log.info("[GroupId %s] Static member %s with instance id %s joins the consumer group using the %s protocol.", group.group_id, member_id, instance_id, protocol)
                return ConsumerGroupMember(member_id)
            if not classic and existing.classic is None and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot join the group because the instance id is owned by {existing.member_id} member.",
                )
            new = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            records += member_tombstones(group.group_id, existing.member_id)
            records.append(MemberSubscriptionRecord(group.group_id, member_id, new))
            records.append(TargetAssignmentMemberRecord(group.group_id, member_id, group.target_assignment.get(existing.member_id, EMPTY_ASSIGNMENT)))
            records.append(CurrentAssignmentRecord(group.group_id, member_id, new))
            self._cancel_timers(group.group_id, existing.member_id)
            log.info("[GroupId %s] Static member with instance id %s re-joins the consumer group using the %s protocol. Created a new member %s to replace the existing member %s.", group.group_id, instance_id, protocol, member_id, existing.member_id)
            return new
        if existing is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} was fenced by member {existing.member_id}.")
        if not classic:
            _check_member_epoch(existing, member_epoch, owned)
        return existing

    # -- subscriptions and topics ---------------------------------------------------------------------------

    def _resolve_regexes(self, group: ConsumerGroup, old: ConsumerGroupMember, new: ConsumerGroupMember, image: "MetadataImage | None", now: int) -> list[ConsumerGroupRecord]:
        """Resolve the regular expressions the group uses after this heartbeat: a new one at once, the others
        when their resolution is older than the refresh interval; a record when the topics differ."""
        regexes = {m.subscribed_topic_regex for m in group.members.values() if m.member_id != old.member_id and m.subscribed_topic_regex}
        if new.subscribed_topic_regex:
            # An empty regex is none (librdkafka sends "" with a list of names), as Kafka's isEmpty checks.
            regexes.add(new.subscribed_topic_regex)
        records: list[ConsumerGroupRecord] = []
        for regex in sorted(regexes):
            known = group.resolved_regexes.get(regex)
            if known is not None and now - group.regex_resolved_at.get(regex, 0) < REGEX_REFRESH_INTERVAL_MS:
                continue
            pattern = re.compile(regex)
            topics = frozenset(name for name in (image.topics if image is not None else ()) if pattern.fullmatch(name))
            group.regex_resolved_at[regex] = now
            if topics != known:
                records.append(RegularExpressionRecord(group.group_id, regex, topics, 0, now))
        for regex in list(group.resolved_regexes):
            if regex not in regexes:
                records.append(RegularExpressionRecord(group.group_id, regex, None))
        return records

    @staticmethod
    def _resolved_after(group: ConsumerGroup, records: list[ConsumerGroupRecord]) -> dict[str, frozenset[str]]:
        resolved = dict(group.resolved_regexes)
        for r in records:
            if isinstance(r, RegularExpressionRecord):
                if r.topics is None:
                    resolved.pop(r.regex, None)
                else:
                    resolved[r.regex] = r.topics
        return resolved

    @staticmethod
    def _member_topics(member: ConsumerGroupMember, resolved: Mapping[str, frozenset[str]]) -> frozenset[str]:
        if member.subscribed_topic_regex:
            return member.subscribed_topic_names | resolved.get(member.subscribed_topic_regex, frozenset())
        return member.subscribed_topic_names

    def _subscribed_topics(self, group: ConsumerGroup, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None, resolved: Mapping[str, frozenset[str]]) -> dict[str, int]:
        """Topic name -> how many members subscribe, once ``old`` became ``new``."""
        counts: dict[str, int] = {}
        for m in group.members.values():
            if old is not None and m.member_id == old.member_id:
                continue
            if new is not None and m.instance_id is not None and m.instance_id == new.instance_id:
                continue  # the static member being replaced
            for t in self._member_topics(m, resolved):
                counts[t] = counts.get(t, 0) + 1
        if new is not None:
            for t in self._member_topics(new, resolved):
                counts[t] = counts.get(t, 0) + 1
        return counts

    @staticmethod
    def _topic_metadata(topics: Iterable[str], image: "MetadataImage | None") -> dict[str, tuple[Uuid, int]]:
        """The subscribed topics that exist: name -> (topic id, partition count)."""
        out = {}
        if image is not None:
            for name in topics:
                info = image.topics.get(name)
                if info is not None:
                    out[name] = (info.topic_id, len(info.partitions))
        return out

    # -- the target assignment ----------------------------------------------------------------------------

    def _update_target_assignment(
        self,
        group: ConsumerGroup,
        group_epoch: int,
        old: ConsumerGroupMember,
        new: ConsumerGroupMember,
        topics: Mapping[str, int],
        metadata: Mapping[str, tuple[Uuid, int]],
        resolved: Mapping[str, frozenset[str]],
        records: list[ConsumerGroupRecord],
        now: int,
    ) -> Assignment:
        """Kafka's ``TargetAssignmentBuilder``: the assignor over every member (this one updated, a replaced
        static member dropped), a record per member whose target changed, then the new assignment epoch."""
        counts = group.server_assignors_with(old if old.member_id in group.members else None, new)
        assignor_name = group.preferred_server_assignor(counts) or self.config.assignors[0]
        previous_static = group.static_members.get(new.instance_id) if new.instance_id is not None else None
        members: dict[str, ConsumerGroupMember] = dict(group.members)
        if previous_static is not None and previous_static != new.member_id:
            members.pop(previous_static, None)
        members[new.member_id] = new
        num_members = len(members)
        homogeneous = all(n == num_members for n in topics.values())

        def topic_ids(m: ConsumerGroupMember) -> frozenset[Uuid]:
            return frozenset(metadata[t][0] for t in self._member_topics(m, resolved) if t in metadata)

        specs = {}
        for member_id, m in members.items():
            current = group.target_assignment.get(member_id, EMPTY_ASSIGNMENT)
            if member_id == new.member_id and previous_static is not None and previous_static != member_id:
                current = group.target_assignment.get(previous_static, EMPTY_ASSIGNMENT)
            specs[member_id] = MemberSpec(member_id, m.instance_id, topic_ids(m), current)
        spec = GroupSpec(specs, homogeneous, group.is_partition_in_target)
        partitions = {topic_id: n for topic_id, n in metadata.values()}
        assignment = ASSIGNORS[assignor_name](spec, partitions)
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.", group.group_id, group_epoch, assignor_name)
        for member_id in specs:
            new_target = assignment.get(member_id, EMPTY_ASSIGNMENT)
            if member_id not in group.target_assignment or group.target_assignment[member_id] != new_target:
                records.append(TargetAssignmentMemberRecord(group.group_id, member_id, new_target))
        records.append(TargetAssignmentEpochRecord(group.group_id, group_epoch, now))
        return assignment.get(new.member_id, EMPTY_ASSIGNMENT)

    # -- leaving and fencing ------------------------------------------------------------------------------------

    def _leave(self, req: HeartbeatRequest) -> tuple[list[ConsumerGroupRecord], list[Record], HeartbeatResult]:
        group = self.groups.get(req.group_id)
        if group is None:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
        result = HeartbeatResult(member_id=req.member_id, member_epoch=req.member_epoch)
        if req.instance_id is None:
            member = group.member(req.member_id)
            log.info("[GroupId %s] Member %s left the consumer group.", group.group_id, member.member_id)
            return (*self._fence(group, member), result)
        member_or_none = group.static_member(req.instance_id)
        if member_or_none is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        member = member_or_none
        if member.member_id != req.member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member {member.member_id}.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            log.info("[GroupId %s] Static Member %s with instance id %s temporarily left the consumer group.", group.group_id, member.member_id, req.instance_id)
            leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={})
            return [CurrentAssignmentRecord(group.group_id, member.member_id, leaving)], [], HeartbeatResult(member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        log.info("[GroupId %s] Static Member %s with instance id %s left the consumer group.", group.group_id, member.member_id, req.instance_id)
        return (*self._fence(group, member), result)

    def _fence(self, group: ConsumerGroup, member: ConsumerGroupMember) -> tuple[list[ConsumerGroupRecord], list[Record]]:
        """Kafka's ``consumerGroupFenceMember``: the member's records go and the group epoch is bumped (with
        the subscribed topics' metadata without it), so the others rebalance -- or, when it was the last
        member of the consumer protocol among classic ones, the group becomes a classic group again
        (the records written after the consumer group's)."""
        if self._validate_online_downgrade(group, member.member_id):
            return self._downgrade(group, member.member_id)
        records: list[ConsumerGroupRecord] = list(member_tombstones(group.group_id, member.member_id))
        remaining = {m.subscribed_topic_regex for m in group.members.values() if m.member_id != member.member_id}
        if member.subscribed_topic_regex and member.subscribed_topic_regex not in remaining:
            records.append(RegularExpressionRecord(group.group_id, member.subscribed_topic_regex, None))
        resolved = self._resolved_after(group, records)
        topics = self._subscribed_topics(group, member, None, resolved)
        metadata_hash = _metadata_hash(self._topic_metadata(topics, self.metadata()))
        records.append(GroupEpochRecord(group.group_id, group.group_epoch + 1, metadata_hash))
        self._cancel_timers(group.group_id, member.member_id)
        return records, []

    def _fence_by_timer(self, group_id: str, member_id: str, reason: str, epoch: int | None = None) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        if epoch is not None and member.member_epoch != epoch:
            return
        log.info("[GroupId %s] Member %s fenced from the group because %s", group_id, member_id, reason)
        records, after = self._fence(group, member)
        self.context.write(self._write(records, lambda error: error, after=after))

    def _schedule_session_timeout(self, group_id: str, member_id: str, member: ConsumerGroupMember) -> None:
        """A classic member's session is the one its JoinGroup asked for; the others' the group's."""
        if member.classic is not None:
            timeout = member.classic.session_timeout_ms
        else:
            timeout = self._group_setting(group_id, "consumer.session.timeout.ms", self.config.session_timeout_ms)
        self.timers.schedule(("consumer-session", group_id, member_id), timeout, lambda: self._fence_by_timer(group_id, member_id, "the member session expired."))

    def _group_setting(self, group_id: str, name: str, broker_value: int) -> int:
        """Kafka's ``consumerGroupSessionTimeoutMs(groupId)``/``consumerGroupHeartbeatIntervalMs(groupId)``: the
        group's config (a GROUP config resource, bounded by ``group.consumer.min/max.*`` when it was set)
        if it has one, else the broker's ``group.consumer.*``."""
        image = self.metadata()
        value = image.group_configs.get(group_id, {}).get(name) if image is not None else None
        return broker_value if value is None else int(value)

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        epoch, member_id, timeout = member.member_epoch, member.member_id, member.rebalance_timeout_ms
        self.timers.schedule(
            ("consumer-rebalance", group_id, member_id),
            timeout,
            lambda: self._fence_by_timer(group_id, member_id, f"it failed to transition from epoch {epoch} within {timeout}ms.", epoch),
        )

    def by_topic_id(self, partitions: Iterable["TopicPartition"]) -> list[tuple[Uuid | None, int]]:
        """Partitions named as assignments name them: (topic id, None for a topic the metadata does not know;
        partition)."""
        image = self.metadata()
        topics = image.topics if image is not None else {}
        return [(info.topic_id if (info := topics.get(topic)) is not None else None, partition) for topic, partition in partitions]

    # -- groups as a whole -------------------------------------------------------------------------------------

    def describe(self, group_ids: list[str]) -> list[DescribedGroup]:
        """Kafka's ``consumerGroupDescribe``."""
        image = self.metadata()
        names = {info.topic_id: name for name, info in image.topics.items()} if image is not None else {}

        def partitions(assignment: Assignment) -> list[tuple[Uuid, str, list[int]]]:
            return [(topic_id, names[topic_id], sorted(ps)) for topic_id, ps in assignment.items() if topic_id in names]

        out = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                conflict = self.classic.classic_group(group_id) is not None
                message = f"Group {group_id} is not a consumer group." if conflict else f"Group {group_id} not found."
                out.append(DescribedGroup(group_id, ErrorCode.GROUP_ID_NOT_FOUND, message))
                continue
            members = tuple(DescribedMember(m, partitions(m.assigned_partitions), partitions(group.target_assignment.get(m.member_id, EMPTY_ASSIGNMENT))) for m in group.members.values())
            out.append(
                DescribedGroup(
                    group_id,
                    state=group.state.value,
                    group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch,
                    assignor_name=group.preferred_server_assignor() or self.config.assignors[0],
                    members=members,
                )
            )
        return out

    def delete(self, group: ConsumerGroup) -> list[Record]:
        """The records that delete an empty group (DeleteGroups, or its last offsets expired); applied now."""
        records = group_tombstones(group)
        for record in records:
            replay(self.groups, record)
        self.groups.pop(group.group_id, None)
        return [encode_record(r) for r in records]


def _check_member_epoch(member: ConsumerGroupMember, epoch: int, owned: Mapping[Uuid, frozenset[int]] | None) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid`` (4.4): epoch 0 is a member rejoining under its own
    id (KIP-1082: a fenced client keeps its member id); the previous epoch is accepted with a subset of the
    current assignment, in case the answer that bumped it was lost."""
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        return
    if epoch > member.member_epoch:
        raise GroupError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({epoch}) than the one known by the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    if epoch < member.member_epoch and (epoch != member.previous_member_epoch or not _is_subset(owned, member.assigned_partitions)):
        raise GroupError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )


def _is_subset(owned: Mapping[Uuid, frozenset[int]] | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(ps <= assigned.get(topic_id, frozenset()) if ps else topic_id in assigned for topic_id, ps in owned.items())


def _metadata_hash(metadata: Mapping[str, tuple[Uuid, int]]) -> int:
    """A 64-bit hash of the subscribed topics (name, id, partition count); 0 for none. It plays the part of
    KIP-1101's MetadataHash (a change bumps the group epoch) but is not Kafka's Murmur3 digest."""
    if not metadata:
        return 0
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(metadata):
        topic_id, partitions = metadata[name]
        digest.update(f"{name}\0{topic_id}\0{partitions}\0".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)
