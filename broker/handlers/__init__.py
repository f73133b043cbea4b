"""One module per API. A handler takes the server and the decoded request and returns the response body
(a dict), an awaitable of it (waits: long polls, acks=all), ``None`` (no response: acks=0) or
``CLOSE_CONNECTION``."""

from __future__ import annotations

from odradek.protocol.api import Request

CLOSE_CONNECTION = object()
"""Send nothing and close the connection (Kafka's CloseConnectionResponse, e.g. acks=0 errors)."""

ADMIN_CLIENT_ID = "__admin_client"


def internal_topics_allowed(request: Request) -> bool:
    """Kafka lets only its own admin tooling (client id ``__admin_client``) write internal topics."""
    return request.header.client_id == ADMIN_CLIENT_ID
