"""FindCoordinator: which broker coordinates a group (or, for other key types, their coordinator).

v0-v3 ask for one key, v4+ for a batch (KIP-699). A key's coordinator is the leader of its partition of the
coordinator's internal topic; the first lookup creates that topic and is answered COORDINATOR_NOT_AVAILABLE,
like Kafka's, so the client retries. Before v4 Kafka puts its error's message in ``error_message`` even on
success (``"NONE"``), and so do we; from v4 it sets no key's message (the field's default, ``""``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.network.request_context import listener_name
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.coordinator.coordinators import Coordinators
    from odradek.protocol.message_types.find_coordinator import CoordinatorDict, FindCoordinatorRequest, FindCoordinatorResponseDict

COORDINATOR_KEY_TYPES = {0: "group", 1: "transaction"}
"""FindCoordinator key types and the coordinator (in ``KafkaServer.coordinators``) that answers each.
Key type 2 (share groups, KIP-932) is not enabled in Kafka 3.9 brokers."""

NO_NODE = (-1, "", -1)


def _locate(coordinators: Coordinators, key_type: int, key: str, listener: str | None) -> tuple[ErrorCode, str | None, tuple[int, str, int]]:
    kind = COORDINATOR_KEY_TYPES.get(key_type)
    if kind is None:
        return ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type} in FindCoordinator request", NO_NODE
    coordinator = coordinators.get(kind)
    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE.message, NO_NODE
    error, broker = coordinator.locate(key)
    message = "NONE" if error == ErrorCode.NONE else error.message
    if broker is None:
        return error, message, NO_NODE
    endpoint = broker.endpoint(listener)  # the coordinator as reached through the client's listener
    if endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE.message, NO_NODE
    return error, message, (broker.node_id, *endpoint)


_DESCRIBED_AS = {0: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED), 1: (ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
"""Finding a group's (transactional id's) coordinator needs DESCRIBE on the group (transactional id)."""


def _locate_authorized(coordinators: Coordinators, authorization: Authorization, request: Request, key_type: int, key: str) -> tuple[ErrorCode, str | None, tuple[int, str, int]]:
    resource = _DESCRIBED_AS.get(key_type)
    if resource is not None and not authorization.authorize(request, AclOperation.DESCRIBE, resource[0], key):
        return resource[1], resource[1].message, NO_NODE
    return _locate(coordinators, key_type, key, listener_name(request))


def handle(coordinators: Coordinators, authorization: Authorization, request: Request[FindCoordinatorRequest]) -> Any:
    """The answer; awaitable when the coordinator asked for is not built yet and its modules are not imported:
    they are imported on a worker thread first (``Coordinators.prepare``), not on the event loop."""
    kind = COORDINATOR_KEY_TYPES.get(request.body.key_type)
    return coordinators.when_prepared([kind] if kind is not None else [], lambda: _answer(coordinators, authorization, request))


def _answer(coordinators: Coordinators, authorization: Authorization, request: Request[FindCoordinatorRequest]) -> FindCoordinatorResponseDict:
    body = request.body
    if request.header.api_version < 4:
        error, message, (node_id, host, port) = _locate_authorized(coordinators, authorization, request, body.key_type, body.key)
        return {"error_code": error, "error_message": message, "node_id": node_id, "host": host, "port": port}
    answers: list[CoordinatorDict] = []
    for key in body.coordinator_keys:
        error, _, (node_id, host, port) = _locate_authorized(coordinators, authorization, request, body.key_type, key)
        answers.append({"key": key, "node_id": node_id, "host": host, "port": port, "error_code": error})
    return {"coordinators": answers}
