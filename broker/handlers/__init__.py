"""One module per API, named after it. A handler only translates: its ``handle`` takes the services its entry
in :data:`odradek.broker.kafka_apis.HANDLERS` names (the replica manager, ``metadata_support``, a
coordinator, authorization, ...; never the whole server, so what it may touch is declared) and the decoded
request, calls them, and returns the response body (a dict), an awaitable of it (waits: long polls,
acks=all), ``None`` (no response: acks=0) or ``CLOSE_CONNECTION``. It names its API's generated types
(``protocol/message_types``): ``request: Request[ProduceRequest]``, answering a ``ProduceResponseDict``, so
that mypy checks the fields it reads and the keys it answers with (tests/test_layering.py holds the first)."""

from __future__ import annotations

from odradek.protocol.api import Request

class CloseConnection:
    """The type of :data:`CLOSE_CONNECTION`, so that a handler's return type can name it."""

    __slots__ = ()


CLOSE_CONNECTION = CloseConnection()
"""Send nothing and close the connection (Kafka's CloseConnectionResponse, e.g. acks=0 errors)."""

ADMIN_CLIENT_ID = "__admin_client"


def internal_topics_allowed(request: Request) -> bool:
    """Kafka lets only its own admin tooling (client id ``__admin_client``) write internal topics."""
    return request.header.client_id == ADMIN_CLIENT_ID
