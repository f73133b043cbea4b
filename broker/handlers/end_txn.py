"""EndTxn: a transactional producer commits or aborts. The coordinator answers once PrepareCommit or
PrepareAbort is written; the markers and the completion follow without the client. Before v2
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH. v5 is a transactions v2 client's (KIP-890 part 2): the
coordinator bumps the producer epoch and the answer carries the producer id and epoch to go on with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.broker.coordinator.transaction.transaction_coordinator import EndTxnResult, TransactionCoordinator
from odradek.broker.coordinator.transaction.transaction_metadata import TV_2
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.end_txn import EndTxnRequest, EndTxnResponseDict

FENCED_AS_INVALID_EPOCH_BELOW = 2
BUMPS_EPOCH_SINCE = 5


def handle(transaction_coordinator: TransactionCoordinator, authorization: Authorization, request: Request[EndTxnRequest]) -> EndTxnResponseDict | Awaitable[EndTxnResponseDict]:
    body = request.body
    if not authorization.authorize(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return {"error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    version = request.header.api_version

    def response(result: EndTxnResult) -> EndTxnResponseDict:
        error = result.error
        if error == ErrorCode.PRODUCER_FENCED and version < FENCED_AS_INVALID_EPOCH_BELOW:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        if version < BUMPS_EPOCH_SINCE:
            return {"error_code": error}
        return {"error_code": error, "producer_id": result.producer_id, "producer_epoch": result.producer_epoch}

    client_transaction_version = TV_2 if version >= BUMPS_EPOCH_SINCE else 0
    ended = transaction_coordinator.end_transaction(body.transactional_id, body.producer_id, body.producer_epoch, body.committed, client_transaction_version)
    return CoordinatorRuntime.respond(ended, response)
