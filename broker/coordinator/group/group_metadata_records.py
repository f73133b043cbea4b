"""The records the group coordinator keeps in ``__consumer_offsets``, byte for byte as Kafka writes them.

Every key and value is a 2-byte schema version followed by the struct at that version (Kafka's
coordinator-record framing), so Kafka's own ``kafka-dump-log --offsets-decoder`` and
``GroupMetadataManager`` read what odradek writes, and odradek loads what Kafka wrote. The key version
says what the record is: 0 and 1 are committed offsets, 2 is a group's metadata. A null value is a
tombstone that deletes the key once the log is compacted.

Versions written are Kafka 3.9's (``GroupMetadataManager.offsetCommitValue``/``groupMetadataValue``): the
highest non-flexible ones, except that an offset committed with an explicit retention time (OffsetCommit
v2-v4) is written as value v1, the only version with ``expireTimestamp``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, fields

from odradek.protocol.messages.coordinator_records import GROUP_METADATA_KEY, GROUP_METADATA_VALUE, OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE
from odradek.protocol.messages.data import CONSUMER_PROTOCOL_SUBSCRIPTION
from odradek.protocol.schema import Container, DecodeError, Message, decode, encode

_VERSION = struct.Struct(">h")

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_WITH_EXPIRY_VERSION = 1
GROUP_METADATA_VALUE_VERSION = 3

NO_LEADER_EPOCH = -1



@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset as the coordinator caches and persists it (Kafka's ``OffsetAndMetadata``)."""

    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass
class MemberMetadata:
    """Who a group member is and its timeouts, as its JoinGroup gave them: the fields a member has
    wherever it appears (the request, the live member, its record, DescribeGroups), declared once."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int

    def member_metadata(self) -> dict:
        """These fields alone, to build another form of the same member."""
        return {f.name: getattr(self, f.name) for f in fields(MemberMetadata)}


@dataclass
class MemberRecord(MemberMetadata):
    """One member in a persisted group: enough to resume a Stable group after a restart."""

    subscription: bytes
    assignment: bytes


@dataclass
class GroupRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int | None
    members: list[MemberRecord] = field(default_factory=list)


def _framed(message: Message, version: int, value: dict) -> bytes:
    return _VERSION.pack(version) + encode(message, version, value)


def _unframe(data: bytes | memoryview, message: Message) -> tuple[int, Container]:
    if len(data) < 2:
        raise DecodeError(f"{message.name}: no version prefix")
    (version,) = _VERSION.unpack_from(data, 0)
    if version not in message.valid:
        raise DecodeError(f"{message.name}: unknown version {version}")
    value, _ = decode(message, version, data, 2, exact=False)
    return version, value


# -- writing -------------------------------------------------------------------------------------------------


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _framed(OFFSET_COMMIT_KEY, OFFSET_COMMIT_KEY_VERSION, {"group": group, "topic": topic, "partition": partition})


def offset_commit_value(offset: OffsetAndMetadata) -> bytes:
    if offset.expire_timestamp is not None:
        version = OFFSET_COMMIT_VALUE_WITH_EXPIRY_VERSION
    else:
        version = OFFSET_COMMIT_VALUE_VERSION
    return _framed(
        OFFSET_COMMIT_VALUE,
        version,
        {
            "offset": offset.offset,
            "leader_epoch": offset.leader_epoch,
            "metadata": offset.metadata,
            "commit_timestamp": offset.commit_timestamp,
            "expire_timestamp": -1 if offset.expire_timestamp is None else offset.expire_timestamp,
        },
    )


def group_metadata_key(group: str) -> bytes:
    return _framed(GROUP_METADATA_KEY, GROUP_METADATA_KEY_VERSION, {"group": group})


def group_metadata_value(group: GroupRecord) -> bytes:
    return _framed(
        GROUP_METADATA_VALUE,
        GROUP_METADATA_VALUE_VERSION,
        {
            "protocol_type": group.protocol_type,
            "generation": group.generation,
            "protocol": group.protocol,
            "leader": group.leader,
            "current_state_timestamp": -1 if group.current_state_timestamp is None else group.current_state_timestamp,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "rebalance_timeout": m.rebalance_timeout_ms,
                    "session_timeout": m.session_timeout_ms,
                    "subscription": m.subscription,
                    "assignment": m.assignment,
                }
                for m in group.members
            ],
        },
    )


# -- reading -------------------------------------------------------------------------------------------------


def read_key(data: bytes | memoryview) -> OffsetKey | GroupMetadataKey | None:
    """The key of a ``__consumer_offsets`` record; None for record types the classic coordinator does not
    own (Kafka 3.7+ writes KIP-848 consumer-group records under key versions 3 and up)."""
    if len(data) < 2:
        raise DecodeError("coordinator record key: no version prefix")
    (version,) = _VERSION.unpack_from(data, 0)
    if version in OFFSET_COMMIT_KEY.valid:
        key, _ = decode(OFFSET_COMMIT_KEY, version, data, 2, exact=False)
        return OffsetKey(key.group, key.topic, key.partition)
    if version in GROUP_METADATA_KEY.valid:
        key, _ = decode(GROUP_METADATA_KEY, version, data, 2, exact=False)
        return GroupMetadataKey(key.group)
    return None


def read_offset_value(data: bytes | memoryview) -> OffsetAndMetadata:
    version, value = _unframe(data, OFFSET_COMMIT_VALUE)
    return OffsetAndMetadata(
        offset=value.offset,
        leader_epoch=value.leader_epoch,
        metadata=value.metadata,
        commit_timestamp=value.commit_timestamp,
        expire_timestamp=value.expire_timestamp if version == 1 else None,
    )


def read_group_value(data: bytes | memoryview) -> GroupRecord:
    version, value = _unframe(data, GROUP_METADATA_VALUE)
    return GroupRecord(
        protocol_type=value.protocol_type,
        generation=value.generation,
        protocol=value.protocol,
        leader=value.leader,
        current_state_timestamp=value.current_state_timestamp if version >= 2 and value.current_state_timestamp != -1 else None,
        members=[
            MemberRecord(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                # v0 had no rebalance timeout: the session timeout served as both.
                rebalance_timeout_ms=m.session_timeout if version == 0 else m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                subscription=bytes(m.subscription),
                assignment=bytes(m.assignment),
            )
            for m in value.members
        ],
    )


def subscribed_topics(metadata: bytes) -> set[str]:
    """The topics in a consumer's subscription (raises DecodeError for metadata that is not one)."""
    if len(metadata) < 2:
        raise DecodeError("consumer subscription: no version prefix")
    value, _ = decode(CONSUMER_PROTOCOL_SUBSCRIPTION, 0, metadata, 2, exact=False)
    return set(value.topics)
