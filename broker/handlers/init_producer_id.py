"""InitProducerId: producer ids for idempotent producers (on by default in Java 3.x and librdkafka).

Without a transactional id Kafka always hands out a fresh producer id with epoch 0, even when the client
passes its old id and epoch (KIP-360 bumps apply to transactional producers). Transactions are not
implemented yet, so a transactional id is refused with a non-retriable error instead of a hang.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer


def handle(server: "KafkaServer", request: Request) -> dict:
    if request.body.transactional_id is not None:
        return {"error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "producer_id": -1, "producer_epoch": -1}
    return {"error_code": ErrorCode.NONE, "producer_id": server.next_producer_id(), "producer_epoch": 0}
