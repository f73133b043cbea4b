"""KIP-951's leader hints: a partition a Produce (v10+) or Fetch (v16+) is refused because this broker does not
lead it (or, for Fetch, because the client's leader epoch is stale) carries the leader and leader epoch this
broker knows, and the response the leaders' endpoints on the request's listener, so that the client goes to the
new leader without asking for metadata first. Kafka 3.9's KafkaApis (``getCurrentLeader``) in ZooKeeper mode
too: Produce on NOT_LEADER_OR_FOLLOWER, Fetch on NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH.

A leader the metadata does not list as a live broker with that listener is hinted without an endpoint, as
Kafka's ``getAliveBrokerNode`` finds none; an unknown leader is -1 with epoch -1, which the encoder leaves out
(the tagged field's default).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.network.request_context import listener_name
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

PRODUCE_VERSION = 10
FETCH_VERSION = 16
PRODUCE_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER})
FETCH_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


def add(replica_manager: ReplicaManager, request: Request, response: Any, refused: list[tuple[str, int, Any]]) -> None:
    """Each ``(topic, partition, entry)`` of ``refused`` gets ``current_leader`` on its response entry, and
    ``response`` the endpoints of the leaders named (``node_endpoints``, one per broker)."""
    image = replica_manager.metadata()
    listener = listener_name(request)
    nodes: dict[int, dict[str, Any]] = {}
    for topic, index, entry in refused:
        leader, epoch = replica_manager.current_leader(topic, index)
        entry["current_leader"] = {"leader_id": leader, "leader_epoch": epoch}
        broker = image.brokers.get(leader) if image is not None else None
        if broker is not None and leader not in nodes and (endpoint := broker.endpoint(listener)) is not None:
            nodes[leader] = {"node_id": leader, "host": endpoint[0], "port": endpoint[1], "rack": broker.rack}
    if nodes:
        response["node_endpoints"] = list(nodes.values())
