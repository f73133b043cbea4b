"""DescribeTransactions (``kafka-transactions.sh describe``): each transactional id's state, producer id
and epoch, timeout, start time and partitions, from the coordinator that owns it (others answer
NOT_COORDINATOR; an unknown id is TRANSACTIONAL_ID_NOT_FOUND)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.describe_transactions import DescribeTransactionsRequest, DescribeTransactionsResponseDict, TransactionStateDict


def handle(transaction_coordinator: TransactionCoordinator, authorization: Authorization, request: Request[DescribeTransactionsRequest]) -> DescribeTransactionsResponseDict:
    """An id the client may not DESCRIBE is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED; of the others'
    partitions only those of topics it may DESCRIBE are shown (Kafka)."""
    states: list[TransactionStateDict] = []
    for transactional_id in request.body.transactional_ids:
        if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            # the coordinator's answer for no id, with this id and the refusal
            state = transaction_coordinator.describe("") | {"transactional_id": transactional_id, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
        else:
            state = transaction_coordinator.describe(transactional_id)
            state["topics"] = [t for t in state["topics"] if authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, t["topic"])]
        states.append(state)
    return {"transaction_states": states}
