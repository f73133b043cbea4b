"""Envelope (KIP-590): a broker forwarding a client's request to the KRaft controller wraps it. A Kafka 3.9
ZooKeeper-mode broker advertises it but, forwarding not enabled (no migration to KRaft), closes a connection
that sends one (``KafkaApis.handleEnvelope``); so does odradek."""

from __future__ import annotations

import logging
from typing import Any

from odradek.broker.handlers import CLOSE_CONNECTION
from odradek.protocol.api import Request

log = logging.getLogger("odradek.apis")


def handle(request: Request[Any]) -> Any:
    context = request.context
    log.info("Closing connection %s because it sent an `Envelope` request even though forwarding has not been enabled", context.connection_id if context else "")
    return CLOSE_CONNECTION
