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

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odradek.protocol.message_types.api_versions import ApiVersionsResponseDict, FinalizedFeatureKeyDict


@dataclass(frozen=True)
class Feature:
    """A feature by Kafka's name: the levels this broker supports, and the level in force in the cluster."""

    name: str
    min_version: int
    max_version: int
    level: int
    """The finalized level clients go by (0: off, and not listed as finalized, as Kafka does)."""


FEATURES: tuple[Feature, ...] = (
    Feature("transaction.version", 0, 2, 2),
    Feature("group.version", 0, 1, 1),
)
"""What ApiVersions reports. A feature's handlers land with its line here.

``group.version`` 1, the consumer group protocol (KIP-848, docs/protocol.md): ConsumerGroupHeartbeat and
ConsumerGroupDescribe served, as a Kafka 4.4 cluster finalizes it.

``transaction.version`` 2, transactions v2 (KIP-890 part 2, docs/transactions.md): a 4.x client's EndTxn v5
bumps the producer epoch and answers the new one, its Produce v12 and TxnOffsetCommit v5 add their partition
to the transaction (no AddPartitionsToTxn or AddOffsetsToTxn from the client)."""

FINALIZED_FEATURES_EPOCH = 0
"""The epoch of the finalized levels when any is finalized. Kafka's grows with each change (the metadata
log's offset in KRaft mode, the feature znode's version in ZooKeeper mode); here the levels are fixed for the
broker's life, so one epoch serves. Without finalized features the answer carries -1, "unknown"."""


def api_versions_features(features: tuple[Feature, ...], version: int) -> ApiVersionsResponseDict:
    """The feature fields of an ApiVersions answer at ``version`` (tagged, v3+; an earlier version drops them)."""
    finalized: list[FinalizedFeatureKeyDict] = [{"name": f.name, "max_version_level": f.level, "min_version_level": f.level} for f in features if f.level != 0]
    return {
        "supported_features": [
            {"name": f.name, "min_version": f.min_version, "max_version": f.max_version} for f in features if version >= 4 or f.min_version != 0
        ],
        "finalized_features": finalized,
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH if finalized else -1,
    }
