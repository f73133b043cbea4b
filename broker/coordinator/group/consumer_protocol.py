"""The consumer's embedded protocol (``ConsumerProtocolSubscription``/``ConsumerProtocolAssignment``), read
and written by the coordinator when a group moves between the classic and the consumer protocol
(KIP-848's online migration): a classic member's JoinGroup metadata says what it subscribes to and owns,
and its SyncGroup answer carries the assignment the broker computed. As Kafka's ``ConsumerProtocol``, a
structure is written at the version the member's own subscription has (at most the highest known), and
read at its version (a newer one as the highest known, whose fields are a prefix of it).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.protocol.messages.data import CONSUMER_PROTOCOL_ASSIGNMENT, CONSUMER_PROTOCOL_SUBSCRIPTION
from odradek.protocol.schema import DecodeError, Message, decode, encode

_VERSION = struct.Struct(">h")
HIGHEST_VERSION = 3


@dataclass(frozen=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...]
    rack_id: str | None


def _version(data: bytes, message: Message) -> int:
    if len(data) < 2:
        raise DecodeError(f"{message.name}: no version prefix")
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise DecodeError(f"{message.name}: negative version {version}")
    return min(version, HIGHEST_VERSION)


def read_subscription(metadata: bytes) -> Subscription:
    """Raises DecodeError for metadata that is not a consumer's subscription."""
    version = _version(metadata, CONSUMER_PROTOCOL_SUBSCRIPTION)
    value, _ = decode(CONSUMER_PROTOCOL_SUBSCRIPTION, version, metadata, 2, exact=False)
    owned = tuple((tp.topic, tuple(tp.partitions)) for tp in value.owned_partitions or ())
    return Subscription(version, tuple(value.topics), owned, value.rack_id or None)


def read_assignment(data: bytes) -> dict[str, list[int]]:
    """An assignment's partitions by topic name; an empty assignment (b"": none yet) has none."""
    if not data:
        return {}
    version = _version(data, CONSUMER_PROTOCOL_ASSIGNMENT)
    value, _ = decode(CONSUMER_PROTOCOL_ASSIGNMENT, version, data, 2, exact=False)
    out: dict[str, list[int]] = {}
    for tp in value.assigned_partitions:
        out.setdefault(tp.topic, []).extend(tp.partitions)
    return out


def write_assignment(partitions: dict[str, list[int]], subscription_metadata: bytes) -> bytes:
    """An assignment at the version of the member's subscription (``ConsumerProtocol.serializeAssignment``)."""
    try:
        version = _version(subscription_metadata, CONSUMER_PROTOCOL_SUBSCRIPTION)
    except DecodeError:
        version = 0
    topics = [{"topic": topic, "partitions": sorted(ps)} for topic, ps in sorted(partitions.items())]
    return _VERSION.pack(version) + encode(CONSUMER_PROTOCOL_ASSIGNMENT, version, {"assigned_partitions": topics, "user_data": None})
