"""EndTxn: a transactional producer commits or aborts. The coordinator answers once PrepareCommit or
PrepareAbort is written; the markers and the completion follow without the client. Before v2
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH."""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.end_txn import EndTxnRequest, EndTxnResponseDict

FENCED_AS_INVALID_EPOCH_BELOW = 2


def handle(transaction_coordinator: TransactionCoordinator, authorization: Authorization, request: Request[EndTxnRequest]) -> EndTxnResponseDict | Awaitable[EndTxnResponseDict]:
    body = request.body
    if not authorization.authorize(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return {"error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    version = request.header.api_version

    def response(error: ErrorCode) -> EndTxnResponseDict:
        if error == ErrorCode.PRODUCER_FENCED and version < FENCED_AS_INVALID_EPOCH_BELOW:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        return {"error_code": error}

    ended = transaction_coordinator.end_transaction(body.transactional_id, body.producer_id, body.producer_epoch, body.committed)
    return CoordinatorRuntime.respond(ended, response)
