"""InitProducerId: producer ids for idempotent producers, and a transactional producer's id and epoch.

Without a transactional id Kafka always hands out a fresh producer id with epoch 0, even when the client
passes its old id and epoch (KIP-360 bumps apply to transactional producers). With one, the transaction
coordinator answers: it fences the previous epoch, aborts an open transaction first (the client is told
CONCURRENT_TRANSACTIONS and asks again), and checks the timeout against ``transaction.max.timeout.ms``.
A producer id without an epoch (or the reverse) is INVALID_REQUEST. Clients before v4 do not know
PRODUCER_FENCED: they get INVALID_PRODUCER_EPOCH instead, as Kafka answers them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.coordinator.transaction.transaction_metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.broker.coordinator.coordinators import Coordinators
    from odradek.protocol.message_types.init_producer_id import InitProducerIdRequest, InitProducerIdResponseDict

FENCED_AS_INVALID_EPOCH_BELOW = 4


def handle(coordinators: Coordinators, next_producer_id: Callable[[], int], authorization: Authorization, request: Request[InitProducerIdRequest]) -> InitProducerIdResponseDict | Awaitable[InitProducerIdResponseDict]:
    """A transactional producer needs WRITE on its transactional id; an idempotent one IDEMPOTENT_WRITE on the
    cluster or WRITE on some topic (KIP-679), as Kafka. An idempotent producer's id needs no transaction
    coordinator; a transactional one's is awaitable when the coordinator is not built and its modules are not
    imported: they are imported on a worker thread first (``Coordinators.prepare``), not on the event loop."""
    body = request.body
    if body.transactional_id is not None:
        if not authorization.authorize(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
            return _response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not authorization.authorize(request, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False) and not authorization.authorize_by_resource_type(
        request, AclOperation.WRITE, ResourceType.TOPIC
    ):
        return _response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if (body.producer_id == NO_PRODUCER_ID) != (body.producer_epoch == NO_PRODUCER_EPOCH):  # -1 before v3
        return _response(request, ErrorCode.INVALID_REQUEST)
    if body.transactional_id is None:
        try:
            return _response(request, ErrorCode.NONE, next_producer_id(), 0)
        except KafkaError as exc:  # no producer id block yet: COORDINATOR_LOAD_IN_PROGRESS, retried by clients
            return _response(request, exc.code)
    return coordinators.when_prepared(["transaction"], lambda: _init(coordinators, request))


def _init(coordinators: Coordinators, request: Request[InitProducerIdRequest]) -> InitProducerIdResponseDict | Awaitable[InitProducerIdResponseDict]:
    from odradek.broker.coordinator.runtime import CoordinatorRuntime  # imported with the coordinator

    body = request.body
    expected = None if body.producer_id == NO_PRODUCER_ID else (body.producer_id, body.producer_epoch)
    result = coordinators["transaction"].coordinator.init_producer_id(body.transactional_id, body.transaction_timeout_ms, expected)
    return CoordinatorRuntime.respond(result, lambda r: _response(request, r.error, r.producer_id, r.producer_epoch))


def _response(request: Request[InitProducerIdRequest], error: ErrorCode, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH) -> InitProducerIdResponseDict:
    if error == ErrorCode.PRODUCER_FENCED and request.header.api_version < FENCED_AS_INVALID_EPOCH_BELOW:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return {"error_code": error, "producer_id": producer_id, "producer_epoch": producer_epoch}
