"""ListTransactions (``kafka-transactions.sh list``): the transactions this broker coordinates, filtered by
state names (unknown names are echoed in ``unknown_state_filters``), producer ids and, from v1, how long
they have been running (``duration_filter`` ms; -1: any)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from odradek.protocol.api import Request

if TYPE_CHECKING:
    from odradek.protocol.message_types.list_transactions import ListTransactionsRequest, ListTransactionsResponseDict


def handle(transaction_coordinator: TransactionCoordinator, authorization: Authorization, request: Request[ListTransactionsRequest]) -> ListTransactionsResponseDict:
    """Only the transactional ids the client may DESCRIBE are listed (Kafka)."""
    body = request.body
    duration = body.duration_filter if request.header.api_version >= 1 else -1
    listed = transaction_coordinator.list_transactions(set(body.producer_id_filters), set(body.state_filters), duration)
    listed["transaction_states"] = [
        s for s in listed["transaction_states"] if authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, s["transactional_id"], log_denied=False)
    ]
    return listed
