"""SaslHandshake outside a SASL exchange (Kafka's ``KafkaApis.handleSaslHandshakeRequest``).

On a SASL listener the connection's authenticator answers SaslHandshake (broker/security/
sasl_authenticator.py), and on an authenticated connection a SaslHandshake begins re-authentication; one
that reaches a handler came on a listener without SASL: ILLEGAL_SASL_STATE, as Kafka answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponseDict


def handle(request: Request[SaslHandshakeRequest]) -> SaslHandshakeResponseDict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
