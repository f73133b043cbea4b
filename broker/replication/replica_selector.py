"""Fetching from the closest replica (KIP-392): the leader of a partition tells a consumer (Fetch v11+, which
names the consumer's rack) which replica to read from, chosen by ``replica.selector.class``; the consumer then
fetches from that replica, which serves it up to its own high watermark, until its metadata is refreshed.

Kafka loads the selector as a Java class; odradek has Kafka's one, :data:`RACK_AWARE`, and refuses any other
name at start-up (broker/config.py). Without the key no replica is preferred, as in Kafka, but every replica
still serves a v11+ consumer that fetches from it.
"""

from __future__ import annotations

from odradek.broker.config import RACK_AWARE_REPLICA_SELECTOR as RACK_AWARE


class ReplicaView:
    """What a selector knows of one replica (Kafka's ``ReplicaView``): its broker, the rack of its endpoint on
    the consumer's listener (None without one), its log end and how long since it last caught up."""

    __slots__ = ("broker_id", "rack", "log_end_offset", "time_since_caught_up_ms")

    def __init__(self, broker_id: int, rack: str | None, log_end_offset: int, time_since_caught_up_ms: int) -> None:
        self.broker_id = broker_id
        self.rack = rack
        self.log_end_offset = log_end_offset
        self.time_since_caught_up_ms = time_since_caught_up_ms


def rack_aware(client_rack: str, leader: ReplicaView, replicas: list[ReplicaView]) -> ReplicaView:
    """Kafka's ``RackAwareReplicaSelector``: the leader, unless the consumer names a rack the leader is not in
    and some of ``replicas`` (the leader among them) is; then the most caught up of that rack's: the highest
    log end, then the shortest time since it caught up."""
    if not client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_caught_up_ms))


SELECTORS = {RACK_AWARE: rack_aware}
"""The ``replica.selector.class`` values odradek has, each with its selector: the key's valid values
(broker/config.py) and what the broker runs (broker/kafka_server.py) both come from here."""
