"""The records the share coordinator keeps in ``__share_group_state``, byte for byte as Kafka 4.4 writes
them: ShareSnapshot (record type 0, the whole state of a share partition) and ShareUpdate (type 1, the
state batches that changed since; replay lays them over the snapshot).

As for every coordinator record, the key is a 2-byte record type then the key struct (v0), the value a
2-byte version then the value struct (v0, flexible). A null value is a tombstone: the share partition's
state is deleted.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.broker.share.state_batches import StateBatch
from odradek.protocol.kafka_uuid import Uuid
from odradek.protocol.messages.coordinator_records import SHARE_SNAPSHOT_KEY, SHARE_SNAPSHOT_VALUE, SHARE_UPDATE_KEY, SHARE_UPDATE_VALUE
from odradek.protocol.schema import DecodeError, decode, encode

_VERSION = struct.Struct(">h")

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1
_KEYS = {SHARE_SNAPSHOT: SHARE_SNAPSHOT_KEY, SHARE_UPDATE: SHARE_UPDATE_KEY}
_VALUES = {SHARE_SNAPSHOT: SHARE_SNAPSHOT_VALUE, SHARE_UPDATE: SHARE_UPDATE_VALUE}


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """A share group's view of one topic partition (Kafka's ``SharePartitionKey``)."""

    group: str
    topic_id: Uuid
    partition: int


@dataclass(frozen=True)
class ShareState:
    """A share partition's persisted state (Kafka's ``ShareGroupOffset``)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    create_timestamp: int = -1
    write_timestamp: int = -1


def record_key(kind: int, key: SharePartitionKey) -> bytes:
    return _VERSION.pack(kind) + encode(_KEYS[kind], 0, {"group_id": key.group, "topic_id": key.topic_id, "partition": key.partition})


def delivery_complete_count(start_offset: int, batches: tuple[StateBatch, ...] | list[StateBatch]) -> int:
    """KIP-1226's DeliveryCompleteCount: the offsets from the start offset on whose delivery is complete."""
    return sum(b.last - max(b.first, start_offset) + 1 for b in batches if b.state.terminal and b.last >= start_offset)


def snapshot_value(state: ShareState) -> bytes:
    return _VERSION.pack(0) + encode(
        SHARE_SNAPSHOT_VALUE,
        0,
        {
            "snapshot_epoch": state.snapshot_epoch,
            "state_epoch": state.state_epoch,
            "leader_epoch": state.leader_epoch,
            "start_offset": state.start_offset,
            "delivery_complete_count": delivery_complete_count(state.start_offset, state.batches),
            "create_timestamp": state.create_timestamp,
            "write_timestamp": state.write_timestamp,
            "state_batches": [b.to_wire() for b in state.batches],
        },
    )


def update_value(snapshot_epoch: int, leader_epoch: int, start_offset: int, batches: list[StateBatch], complete: int) -> bytes:
    """``complete``: the DeliveryCompleteCount of the whole state once the update is laid over it."""
    return _VERSION.pack(0) + encode(
        SHARE_UPDATE_VALUE,
        0,
        {"snapshot_epoch": snapshot_epoch, "leader_epoch": leader_epoch, "start_offset": start_offset, "delivery_complete_count": complete, "state_batches": [b.to_wire() for b in batches]},
    )


def decode_record(key: bytes, value: bytes | None) -> tuple[int, SharePartitionKey, object | None]:
    """(record type, key, decoded value or None for a tombstone). DecodeError for what is not ours."""
    if len(key) < 2:
        raise DecodeError("share coordinator record: no record type")
    (kind,) = _VERSION.unpack_from(key, 0)
    if kind not in _KEYS:
        raise DecodeError(f"share coordinator record: unknown type {kind}")
    k, _ = decode(_KEYS[kind], 0, key, 2, exact=False)
    spk = SharePartitionKey(k.group_id, k.topic_id, k.partition)
    if value is None:
        return kind, spk, None
    if len(value) < 2 or _VERSION.unpack_from(value, 0)[0] != 0:
        raise DecodeError("share coordinator record: unknown value version")
    v, _ = decode(_VALUES[kind], 0, value, 2, exact=False)
    return kind, spk, v
