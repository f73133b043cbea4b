"""FindCoordinator: which broker coordinates a group (or, for other key types, their coordinator).

v0-v3 ask for one key, v4+ for a batch (KIP-699). A key's coordinator is the leader of its partition of the
coordinator's internal topic; the first lookup creates that topic and is answered COORDINATOR_NOT_AVAILABLE,
like Kafka's, so the client retries. Kafka puts its error's message in ``error_message`` even on success
(``"NONE"``), and so do we.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer

COORDINATOR_KEY_TYPES = {0: "group", 1: "transaction"}
"""FindCoordinator key types and the coordinator (in ``KafkaServer.coordinators``) that answers each.
Key type 2 (share groups, KIP-932) is not enabled in Kafka 3.9 brokers."""

NO_NODE = (-1, "", -1)


def _locate(server: "KafkaServer", key_type: int, key: str) -> tuple[ErrorCode, str | None, tuple[int, str, int]]:
    kind = COORDINATOR_KEY_TYPES.get(key_type)
    if kind is None:
        return ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type} in FindCoordinator request", NO_NODE
    coordinator = server.coordinators.get(kind)
    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE.message, NO_NODE
    error, broker = coordinator.locate(key)
    message = "NONE" if error == ErrorCode.NONE else error.message
    if broker is None:
        return error, message, NO_NODE
    return error, message, (broker.node_id, broker.host, broker.port)


def handle(server: "KafkaServer", request: Request) -> dict:
    body = request.body
    if request.header.api_version < 4:
        error, message, (node_id, host, port) = _locate(server, body.key_type, body.key)
        return {"error_code": error, "error_message": message, "node_id": node_id, "host": host, "port": port}
    coordinators = []
    for key in body.coordinator_keys:
        error, message, (node_id, host, port) = _locate(server, body.key_type, key)
        coordinators.append({"key": key, "node_id": node_id, "host": host, "port": port, "error_code": error, "error_message": message})
    return {"coordinators": coordinators}
