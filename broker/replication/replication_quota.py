"""Replication throttling (KIP-73), as Kafka's ``ReplicationQuotaManager``: while a replica catches up (a new
replica of a reassignment, a broker back from a failure) its traffic may be capped, so that it does not take
the network from the clients.

Two quotas per broker, each a byte rate from the dynamic broker configs (this broker's, else the cluster
default; unbounded without either): ``leader.replication.throttled.rate`` caps what this broker, as leader,
sends to followers out of the ISR, ``follower.replication.throttled.rate`` what it, as a follower not in sync,
fetches. Either applies only to the partitions a topic config names for this broker:
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``, a list of
``partition:broker`` (or ``*``, every replica). While the rate measured over the last
``replication.quota.window.num`` windows of ``replication.quota.window.size.seconds`` is above the bound, a
leader answers a throttled partition without records and a follower leaves it out of its fetch; the bytes of
throttled partitions are counted whether or not the quota was exceeded.
"""

from __future__ import annotations

from odradek.broker.quotas import Rate

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
UNBOUNDED = float(2**63 - 1)
"""``QuotaConfigs.QUOTA_BYTES_PER_SECOND_DEFAULT``: Long.MAX_VALUE, no throttling."""


class SimpleRate(Rate):
    """Kafka's ``SimpleRate``: the bytes of the retained windows over the time since the oldest began, at
    least one window (no padding to the full sample count as client quotas' ``Rate``): a throttle bites
    within the first window."""

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        if not self._starts:
            return self.window_ms
        return max(now_ms - min(self._starts), self.window_ms)


class ReplicationQuota:
    def __init__(self, broker_id: int, samples: int = 11, window_s: int = 1) -> None:
        self.broker_id = broker_id
        self.bound = UNBOUNDED
        """Bytes per second (``*.replication.throttled.rate``)."""
        self._rate = SimpleRate(samples, window_s * 1000)

    def throttles(self, replicas: list[str], partition: int) -> bool:
        """Whether a topic's ``*.replication.throttled.replicas`` names this broker's replica of ``partition``
        (Kafka's ``ConfigHandler.parseThrottledPartitions``)."""
        if not replicas:
            return False
        if replicas == ["*"]:
            return True
        replica = f"{partition}:{self.broker_id}"
        return any(item.replace(" ", "") == replica for item in replicas)

    def exceeded(self, now_ms: int) -> bool:
        return self.bound < UNBOUNDED and self._rate.measure(now_ms) > self.bound

    def record(self, size: int, now_ms: int) -> None:
        self._rate.record(size, now_ms)


def rate_bound(per_broker: dict[str, str], cluster_default: dict[str, str], key: str) -> float:
    """A quota's bound as Kafka's ``BrokerConfigHandler`` takes it: this broker's value, else the cluster
    default, else unbounded."""
    value = per_broker.get(key, cluster_default.get(key))
    return UNBOUNDED if value is None else float(int(value))
