"""The features this broker supports and has finalized, as ApiVersions reports them (KIP-584).

Kafka 4.x clients choose protocols by finalized feature levels, not only by API versions: a transactional
producer uses transactions v2 (KIP-890: EndTxn v5, Produce v12) only when ``transaction.version`` is
finalized at 2 or more, a consumer with ``group.protocol=consumer`` checks ``group.version``, a share consumer
``share.version``. Admin ``describeFeatures`` (``kafka-features.sh describe``) reads the same answer.

One line of :data:`FEATURES` per feature. Kafka's encoding rules (``ApiVersionsResponse``): a supported
feature whose lowest level is 0 is left out of answers below ApiVersions v4 (older clients fail to read it,
KAFKA-17492), and a feature finalized at level 0 is not listed as finalized at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from odradek.protocol.values import FrozenFields

if TYPE_CHECKING:
    from odradek.protocol.message_types.api_versions import ApiVersionsResponseDict, FinalizedFeatureKeyDict


class Feature(FrozenFields):
    """A feature by Kafka's name: the levels this broker supports, and the level in force in the cluster."""

    __slots__ = _FIELDS = ("name", "min_version", "max_version", "level")
    name: str
    min_version: int
    max_version: int
    level: int
    """The finalized level clients go by (0: off, and not listed as finalized, as Kafka does)."""

    def __init__(self, name: str, min_version: int, max_version: int, level: int) -> None:
        self._set(name, min_version, max_version, level)


FEATURES: tuple[Feature, ...] = (
    Feature("transaction.version", 0, 2, 2),
    Feature("group.version", 0, 1, 1),
    Feature("share.version", 0, 2, 2),
)
"""What ApiVersions reports. A feature's handlers land with its line here.

``group.version`` 1, the consumer group protocol (KIP-848, docs/protocol.md): ConsumerGroupHeartbeat and
ConsumerGroupDescribe served, as a Kafka 4.4 cluster finalizes it.

``share.version`` 2, share groups (KIP-932, docs/protocol.md): ShareGroupHeartbeat, ShareFetch and
ShareAcknowledge v2 (RENEW acknowledgements) and the share group admin APIs served, as a fresh Kafka 4.4
cluster finalizes it.

``transaction.version`` 2, transactions v2 (KIP-890 part 2, docs/transactions.md): a 4.x client's EndTxn v5
bumps the producer epoch and answers the new one, its Produce v12 and TxnOffsetCommit v5 add their partition
to the transaction (no AddPartitionsToTxn or AddOffsetsToTxn from the client)."""


class FinalizedFeatures(FrozenFields):
    """The features as this broker answers for them: each with the level in force, and the epoch of those
    levels. Kafka's epoch grows with each change (the metadata log's offset in KRaft mode, the feature
    znode's version in ZooKeeper mode); without finalized features the answer carries -1, "unknown"."""

    __slots__ = _FIELDS = ("features", "epoch")
    features: tuple[Feature, ...]
    epoch: int
    """A single node's levels are fixed for its life, so one epoch serves; a ZooKeeper cluster's change
    with its brokers (:func:`finalized_in_cluster`)."""

    def __init__(self, features: tuple[Feature, ...] = FEATURES, epoch: int = 0) -> None:
        self._set(features, epoch)

    def level(self, name: str) -> int:
        """A feature's finalized level (0: not finalized)."""
        return next((f.level for f in self.features if f.name == name), 0)


def registered_features(features: tuple[Feature, ...] = FEATURES) -> dict[str, dict[str, int]]:
    """The ``features`` of this broker's ``/brokers/ids/<id>`` registration: the levels it supports, as
    Kafka's ``BrokerIdZNode`` writes them (``SupportedVersionRange``: ``min_version``, ``max_version``)."""
    return {f.name: {"min_version": f.min_version, "max_version": f.max_version} for f in features}


def finalized_in_cluster(registrations: Iterable[Mapping[str, Mapping[str, int]]], features: tuple[Feature, ...] = FEATURES) -> tuple[Feature, ...]:
    """Each feature at the highest level up to ours that every registered broker supports, 0 when there is
    none (a broker that registers no such feature, as Kafka 3.9's ZooKeeper-mode brokers register none).

    Kafka finalizes a level cluster-wide and only one all brokers support: a 4.x client told
    ``transaction.version`` 2 by one broker sends Produce v12 to every leader, which a Kafka 3.9 broker
    cannot serve."""
    registered = list(registrations)

    def supported(name: str, level: int) -> bool:
        return all(name in r and r[name].get("min_version", 0) <= level <= r[name].get("max_version", -1) for r in registered)

    return tuple(Feature(f.name, f.min_version, f.max_version, next((lv for lv in range(f.level, 0, -1) if supported(f.name, lv)), 0)) for f in features)


def api_versions_features(finalized_features: FinalizedFeatures, version: int) -> ApiVersionsResponseDict:
    """The feature fields of an ApiVersions answer at ``version`` (tagged, v3+; an earlier version drops them)."""
    features = finalized_features.features
    finalized: list[FinalizedFeatureKeyDict] = [{"name": f.name, "max_version_level": f.level, "min_version_level": f.level} for f in features if f.level != 0]
    return {
        "supported_features": [
            {"name": f.name, "min_version": f.min_version, "max_version": f.max_version} for f in features if version >= 4 or f.min_version != 0
        ],
        "finalized_features": finalized,
        "finalized_features_epoch": finalized_features.epoch if finalized else -1,
    }
