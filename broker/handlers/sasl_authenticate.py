"""SaslAuthenticate outside a SASL exchange (Kafka's ``KafkaApis.handleSaslAuthenticateRequest``): the
connection is authenticated already, or its listener has no SASL. ILLEGAL_SASL_STATE with Kafka's message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponseDict


def handle(request: Request[SaslAuthenticateRequest]) -> SaslAuthenticateResponseDict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": "SaslAuthenticate request received after successful authentication", "auth_bytes": b""}
