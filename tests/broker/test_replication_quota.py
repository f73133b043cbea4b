"""The replication quota's parts (broker/replication/replication_quota.py); the cluster test
tests/controller/test_replication_throttle_cluster.py shows its effect against Kafka's."""

from __future__ import annotations

from odradek.broker.replication.replication_quota import UNBOUNDED, ReplicationQuota, rate_bound


def test_a_topic_throttles_the_replicas_it_names_for_this_broker() -> None:
    quota = ReplicationQuota(broker_id=1)
    assert quota.throttles(["*"], 7)
    assert quota.throttles(["0:0", " 2:1"], 2) and not quota.throttles(["0:0", "2:1"], 0)
    assert not quota.throttles([], 0)


def test_the_rate_is_measured_from_the_first_window_and_the_bound_is_per_broker_first() -> None:
    quota = ReplicationQuota(broker_id=0, samples=11, window_s=1)
    assert not quota.exceeded(0)  # unbounded
    quota.bound = 1000
    quota.record(1500, 10_000)
    assert quota.exceeded(10_500)  # 1500 bytes over one window (no padding to eleven): over 1000/s
    assert not quota.exceeded(11_600)  # 1500 over 1.6 s
    assert rate_bound({"leader.replication.throttled.rate": "5"}, {"leader.replication.throttled.rate": "9"}, "leader.replication.throttled.rate") == 5
    assert rate_bound({}, {"leader.replication.throttled.rate": "9"}, "leader.replication.throttled.rate") == 9
    assert rate_bound({}, {}, "leader.replication.throttled.rate") == UNBOUNDED
