"""DescribeTransactions (``kafka-transactions.sh describe``): each transactional id's state, producer id
and epoch, timeout, start time and partitions, from the coordinator that owns it (others answer
NOT_COORDINATOR; an unknown id is TRANSACTIONAL_ID_NOT_FOUND)."""

from __future__ import annotations

from odradek.broker.transaction_coordinator import TransactionCoordinator
from odradek.protocol.api import Request


def handle(transaction_coordinator: TransactionCoordinator, request: Request) -> dict:
    return {"transaction_states": [transaction_coordinator.describe(t) for t in request.body.transactional_ids]}
