"""The records a consumer group (KIP-848) keeps in ``__consumer_offsets``, in Kafka 4.4's format.

Each record is a typed value here (a tombstone when its payload is None), encoded with Kafka's
coordinator-record framing: the key starts with its record type (Kafka's ``CoordinatorRecordType``: 3 the
group's epoch, 5 a member's subscription, 6 and 7 the target assignment, 8 a member's current assignment,
16 a resolved regular expression; 4, the subscription metadata of Kafka 3.7-4.0, is only ever deleted),
then the key struct; the value starts with its version (0), then the value struct. Kafka's
``kafka-dump-log.sh --offsets-decoder`` reads them and Kafka 4.4 loads them.

:func:`replay` applies a record to the groups of a partition: the coordinator replays what it writes the
moment it decides it, and replays the partition's log when it loads it, so the two cannot disagree.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from typing import Union

from odradek.broker.coordinator.group.consumer_group import (
    ClassicMemberMetadata,
    LEAVE_GROUP_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from odradek.protocol.kafka_uuid import Uuid
from odradek.protocol.messages import coordinator_records as cr
from odradek.protocol.schema import Container, DecodeError, Message, decode, encode

_SHORT = struct.Struct(">h")

CONSUMER_GROUP_METADATA = cr.RECORD_TYPES["ConsumerGroupMetadata"]
CONSUMER_GROUP_PARTITION_METADATA = cr.RECORD_TYPES["ConsumerGroupPartitionMetadata"]
CONSUMER_GROUP_MEMBER_METADATA = cr.RECORD_TYPES["ConsumerGroupMemberMetadata"]
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = cr.RECORD_TYPES["ConsumerGroupTargetAssignmentMetadata"]
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = cr.RECORD_TYPES["ConsumerGroupTargetAssignmentMember"]
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = cr.RECORD_TYPES["ConsumerGroupCurrentMemberAssignment"]
CONSUMER_GROUP_REGULAR_EXPRESSION = cr.RECORD_TYPES["ConsumerGroupRegularExpression"]

RECORD_TYPES = frozenset({
    CONSUMER_GROUP_METADATA, CONSUMER_GROUP_PARTITION_METADATA, CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, CONSUMER_GROUP_REGULAR_EXPRESSION,
})
"""The key versions (record types) that belong to consumer groups."""


@dataclass(frozen=True)
class GroupEpochRecord:
    """ConsumerGroupMetadata: the group epoch and the hash of its subscribed topics' metadata."""

    group_id: str
    epoch: int | None
    metadata_hash: int = 0


@dataclass(frozen=True)
class PartitionMetadataRecord:
    """ConsumerGroupPartitionMetadata (Kafka 3.7-4.0): read and deleted, never written with a value."""

    group_id: str
    deleted: bool = True


@dataclass(frozen=True)
class MemberSubscriptionRecord:
    """ConsumerGroupMemberMetadata: who a member is and what it subscribes to (None: it left)."""

    group_id: str
    member_id: str
    member: ConsumerGroupMember | None


@dataclass(frozen=True)
class TargetAssignmentMemberRecord:
    group_id: str
    member_id: str
    assignment: Assignment | None


@dataclass(frozen=True)
class TargetAssignmentEpochRecord:
    group_id: str
    epoch: int | None
    timestamp: int = 0


@dataclass(frozen=True)
class CurrentAssignmentRecord:
    """ConsumerGroupCurrentMemberAssignment: a member's epochs, state and owned/revoking partitions."""

    group_id: str
    member_id: str
    member: ConsumerGroupMember | None


@dataclass(frozen=True)
class RegularExpressionRecord:
    group_id: str
    regex: str
    topics: frozenset[str] | None
    version: int = 0
    timestamp: int = 0


ConsumerGroupRecord = Union[
    GroupEpochRecord,
    PartitionMetadataRecord,
    MemberSubscriptionRecord,
    TargetAssignmentMemberRecord,
    TargetAssignmentEpochRecord,
    CurrentAssignmentRecord,
    RegularExpressionRecord,
]


# -- encoding ------------------------------------------------------------------------------------------------


def _key(record_type: int, message: Message, fields: dict) -> bytes:
    return _SHORT.pack(record_type) + encode(message, 0, fields)


def _value(message: Message, fields: dict) -> bytes:
    return _SHORT.pack(0) + encode(message, 0, fields)


def _topic_partitions(assignment: Assignment) -> list[dict]:
    return [{"topic_id": topic_id, "partitions": sorted(partitions)} for topic_id, partitions in assignment.items()]


def _owned_partitions(member: ConsumerGroupMember, assignment: Assignment) -> list[dict]:
    """TopicPartitions with the AssignmentEpochs Kafka 4.3+ writes beside them (KIP-1251)."""
    return [tp | {"assignment_epochs": [member.assignment_epoch(tp["topic_id"], p) for p in tp["partitions"]]} for tp in _topic_partitions(assignment)]


def _classic_member_metadata(member: ConsumerGroupMember) -> dict:
    """ClassicMemberMetadata: tagged, and null (its default) for a consumer-protocol member, so then left out
    (Kafka's reader fails on an explicit null)."""
    if member.classic is None:
        return {}
    protocols = [{"name": name, "metadata": metadata} for name, metadata in member.classic.supported_protocols]
    return {"classic_member_metadata": {"session_timeout_ms": member.classic.session_timeout_ms, "supported_protocols": protocols}}


def encode_record(record: ConsumerGroupRecord) -> tuple[bytes, bytes | None]:
    """The record's key and value bytes (value None: a tombstone)."""
    group = {"group_id": record.group_id}
    if isinstance(record, GroupEpochRecord):
        key = _key(CONSUMER_GROUP_METADATA, cr.CONSUMER_GROUP_METADATA_KEY, group)
        if record.epoch is None:
            return key, None
        return key, _value(cr.CONSUMER_GROUP_METADATA_VALUE, {"epoch": record.epoch, "metadata_hash": record.metadata_hash})
    if isinstance(record, PartitionMetadataRecord):
        return _key(CONSUMER_GROUP_PARTITION_METADATA, cr.CONSUMER_GROUP_PARTITION_METADATA_KEY, group), None
    if isinstance(record, MemberSubscriptionRecord):
        key = _key(CONSUMER_GROUP_MEMBER_METADATA, cr.CONSUMER_GROUP_MEMBER_METADATA_KEY, group | {"member_id": record.member_id})
        m = record.member
        if m is None:
            return key, None
        return key, _value(
            cr.CONSUMER_GROUP_MEMBER_METADATA_VALUE,
            {
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": sorted(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "server_assignor": m.server_assignor,
            }
            | _classic_member_metadata(m),
        )
    if isinstance(record, TargetAssignmentMemberRecord):
        key = _key(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, group | {"member_id": record.member_id})
        if record.assignment is None:
            return key, None
        return key, _value(cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE, {"topic_partitions": _topic_partitions(record.assignment)})
    if isinstance(record, TargetAssignmentEpochRecord):
        key = _key(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, group)
        if record.epoch is None:
            return key, None
        return key, _value(cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE, {"assignment_epoch": record.epoch, "assignment_timestamp": record.timestamp})
    if isinstance(record, CurrentAssignmentRecord):
        key = _key(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, cr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, group | {"member_id": record.member_id})
        m = record.member
        if m is None:
            return key, None
        return key, _value(
            cr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
            {
                "member_epoch": m.member_epoch,
                "previous_member_epoch": m.previous_member_epoch,
                "state": int(m.state),
                "assigned_partitions": _owned_partitions(m, m.assigned_partitions),
                "partitions_pending_revocation": _owned_partitions(m, m.partitions_pending_revocation),
            },
        )
    key = _key(CONSUMER_GROUP_REGULAR_EXPRESSION, cr.CONSUMER_GROUP_REGULAR_EXPRESSION_KEY, group | {"regular_expression": record.regex})
    if record.topics is None:
        return key, None
    return key, _value(cr.CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE, {"topics": sorted(record.topics), "version": record.version, "timestamp": record.timestamp})


# -- decoding ------------------------------------------------------------------------------------------------

_KEYS: dict[int, Message] = {
    CONSUMER_GROUP_METADATA: cr.CONSUMER_GROUP_METADATA_KEY,
    CONSUMER_GROUP_PARTITION_METADATA: cr.CONSUMER_GROUP_PARTITION_METADATA_KEY,
    CONSUMER_GROUP_MEMBER_METADATA: cr.CONSUMER_GROUP_MEMBER_METADATA_KEY,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: cr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
    CONSUMER_GROUP_REGULAR_EXPRESSION: cr.CONSUMER_GROUP_REGULAR_EXPRESSION_KEY,
}
_VALUES: dict[int, Message] = {
    CONSUMER_GROUP_METADATA: cr.CONSUMER_GROUP_METADATA_VALUE,
    CONSUMER_GROUP_PARTITION_METADATA: cr.CONSUMER_GROUP_PARTITION_METADATA_VALUE,
    CONSUMER_GROUP_MEMBER_METADATA: cr.CONSUMER_GROUP_MEMBER_METADATA_VALUE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: cr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
    CONSUMER_GROUP_REGULAR_EXPRESSION: cr.CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE,
}


def _assignment(topic_partitions: list) -> Assignment:
    return {tp.topic_id: frozenset(tp.partitions) for tp in topic_partitions if tp.partitions}


def _assignment_epochs(topic_partitions: list, member_epoch: int) -> dict[tuple[Uuid, int], int]:
    """The AssignmentEpochs of a record; a record without them (before Kafka 4.3) gives each partition the
    member's epoch, as Kafka reads such a record."""
    default = max(member_epoch, 0)
    epochs: dict[tuple[Uuid, int], int] = {}
    for tp in topic_partitions:
        given = tp.assignment_epochs if tp.assignment_epochs is not None and len(tp.assignment_epochs) == len(tp.partitions) else [default] * len(tp.partitions)
        epochs.update(((tp.topic_id, p), e) for p, e in zip(tp.partitions, given))
    return epochs


def _classic(value: Container | None) -> ClassicMemberMetadata | None:
    if value is None:
        return None
    return ClassicMemberMetadata(value.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in value.supported_protocols))


def decode_record(key_bytes: bytes | memoryview, value_bytes: bytes | memoryview | None) -> ConsumerGroupRecord | None:
    """The consumer-group record of a key and value; None for a key of another kind."""
    if len(key_bytes) < 2:
        raise DecodeError("coordinator record key: no version prefix")
    (record_type,) = _SHORT.unpack_from(key_bytes, 0)
    message = _KEYS.get(record_type)
    if message is None:
        return None
    key, _ = decode(message, 0, key_bytes, 2, exact=False)
    value: Container | None = None
    if value_bytes is not None:
        if len(value_bytes) < 2:
            raise DecodeError(f"{message.name}: value without a version")
        (version,) = _SHORT.unpack_from(value_bytes, 0)
        value_message = _VALUES[record_type]
        if version not in value_message.valid:
            raise DecodeError(f"{value_message.name}: unknown version {version}")
        value, _ = decode(value_message, version, value_bytes, 2, exact=False)
    group_id = key.group_id
    if record_type == CONSUMER_GROUP_METADATA:
        return GroupEpochRecord(group_id, None if value is None else value.epoch, 0 if value is None else value.metadata_hash)
    if record_type == CONSUMER_GROUP_PARTITION_METADATA:
        return PartitionMetadataRecord(group_id, value is None)
    if record_type == CONSUMER_GROUP_MEMBER_METADATA:
        member = None
        if value is not None:
            member = ConsumerGroupMember(
                key.member_id,
                instance_id=value.instance_id,
                rack_id=value.rack_id,
                client_id=value.client_id,
                client_host=value.client_host,
                subscribed_topic_names=frozenset(value.subscribed_topic_names),
                subscribed_topic_regex=value.subscribed_topic_regex,
                rebalance_timeout_ms=value.rebalance_timeout_ms,
                server_assignor=value.server_assignor,
                classic=_classic(value.classic_member_metadata),
            )
        return MemberSubscriptionRecord(group_id, key.member_id, member)
    if record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        return TargetAssignmentMemberRecord(group_id, key.member_id, None if value is None else _assignment(value.topic_partitions))
    if record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        return TargetAssignmentEpochRecord(group_id, None if value is None else value.assignment_epoch, 0 if value is None else value.assignment_timestamp)
    if record_type == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        member = None
        if value is not None:
            member = ConsumerGroupMember(
                key.member_id,
                member_epoch=value.member_epoch,
                previous_member_epoch=value.previous_member_epoch,
                state=MemberState.of(value.state),
                assigned_partitions=_assignment(value.assigned_partitions),
                partitions_pending_revocation=_assignment(value.partitions_pending_revocation),
                assignment_epochs=_assignment_epochs(value.assigned_partitions + value.partitions_pending_revocation, value.member_epoch),
            )
        return CurrentAssignmentRecord(group_id, key.member_id, member)
    if value is None:
        return RegularExpressionRecord(group_id, key.regular_expression, None)
    return RegularExpressionRecord(group_id, key.regular_expression, frozenset(value.topics), value.version, value.timestamp)


# -- replay --------------------------------------------------------------------------------------------------

_SUBSCRIPTION_FIELDS = ("instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names", "subscribed_topic_regex", "rebalance_timeout_ms", "server_assignor", "classic")
_ASSIGNMENT_FIELDS = ("member_epoch", "previous_member_epoch", "state", "assigned_partitions", "partitions_pending_revocation", "assignment_epochs")


def replay(groups: dict[str, ConsumerGroup], record: ConsumerGroupRecord) -> None:
    """Apply ``record`` to the partition's consumer groups (Kafka's ``GroupMetadataManager.replay``)."""
    group_id = record.group_id
    group = groups.get(group_id)
    if isinstance(record, GroupEpochRecord):
        if record.epoch is None:
            groups.pop(group_id, None)
            return
        if group is None:
            group = groups[group_id] = ConsumerGroup(group_id)
        group.group_epoch = record.epoch
        group.metadata_hash = record.metadata_hash
        return
    if isinstance(record, PartitionMetadataRecord):
        return
    if group is None:
        if _is_tombstone(record):
            return
        group = groups[group_id] = ConsumerGroup(group_id)
    if isinstance(record, MemberSubscriptionRecord):
        if record.member is None:
            group.remove_member(record.member_id)
            return
        old = group.members.get(record.member_id) or ConsumerGroupMember(record.member_id)
        group.update_member(replace(old, **{f: getattr(record.member, f) for f in _SUBSCRIPTION_FIELDS}))
    elif isinstance(record, CurrentAssignmentRecord):
        old = group.members.get(record.member_id) or ConsumerGroupMember(record.member_id)
        if record.member is None:
            group.update_member(replace(old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH, previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH, assigned_partitions={}, partitions_pending_revocation={}, assignment_epochs={}))
        else:
            group.update_member(replace(old, **{f: getattr(record.member, f) for f in _ASSIGNMENT_FIELDS}))
    elif isinstance(record, TargetAssignmentMemberRecord):
        group.set_target_assignment(record.member_id, record.assignment)
    elif isinstance(record, TargetAssignmentEpochRecord):
        group.assignment_epoch = -1 if record.epoch is None else record.epoch
        group.assignment_timestamp = record.timestamp
    elif isinstance(record, RegularExpressionRecord):
        if record.topics is None:
            group.resolved_regexes.pop(record.regex, None)
        else:
            group.resolved_regexes[record.regex] = record.topics
        group.recount_subscribed_topics()


def _is_tombstone(record: ConsumerGroupRecord) -> bool:
    payload = {
        MemberSubscriptionRecord: "member",
        CurrentAssignmentRecord: "member",
        TargetAssignmentMemberRecord: "assignment",
        TargetAssignmentEpochRecord: "epoch",
        RegularExpressionRecord: "topics",
    }
    return getattr(record, payload[type(record)]) is None


def group_tombstones(group: ConsumerGroup) -> list[ConsumerGroupRecord]:
    """Every record of the group deleted, in Kafka's order (``createGroupTombstoneRecords``)."""
    gid = group.group_id
    records: list[ConsumerGroupRecord] = [CurrentAssignmentRecord(gid, m, None) for m in group.members]
    records += [TargetAssignmentMemberRecord(gid, m, None) for m in group.members]
    records.append(TargetAssignmentEpochRecord(gid, None))
    records += [MemberSubscriptionRecord(gid, m, None) for m in group.members]
    records += [RegularExpressionRecord(gid, regex, None) for regex in group.resolved_regexes]
    records.append(PartitionMetadataRecord(gid))
    records.append(GroupEpochRecord(gid, None))
    return records


def member_tombstones(group_id: str, member_id: str) -> list[ConsumerGroupRecord]:
    """A member removed, in Kafka's order: current assignment, target assignment, subscription."""
    return [CurrentAssignmentRecord(group_id, member_id, None), TargetAssignmentMemberRecord(group_id, member_id, None), MemberSubscriptionRecord(group_id, member_id, None)]
