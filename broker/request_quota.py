"""``request_percentage`` on the request path (Kafka's ``ClientRequestQuotaManager``): the time the broker
spends handling a client's request is charged to the client, and a client over its share of one thread is
told the throttle time in the answer (the larger of it and any the handler set, as Kafka's
``sendResponseMaybeThrottle``) and its connection muted for it (KIP-219).

What is charged is the handler's own run on the event loop, up to the answer or the awaitable it returns;
the time an awaitable answer takes afterwards (waiting in purgatory, or an async handler's body) is not.
Requests between brokers are exempt, as Kafka exempts those authorized by ClusterAction.
"""

from __future__ import annotations

import time
from typing import Any

from odradek.broker.quotas import ClientQuotas
from odradek.protocol.api import APIS, ApiKey, Request

THROTTLED_APIS = frozenset(key for key, api in APIS.items() if api.throttled)
"""The APIs whose answers carry a throttle time; the others (inter-broker and SASL) are not charged."""
EXEMPT_APIS = frozenset({ApiKey.AlterPartition, ApiKey.AllocateProducerIds})


def charged(request: Request) -> bool:
    """Whether the request's handling time counts against its client's ``request_percentage``."""
    key = request.header.api_key
    if key not in THROTTLED_APIS or key in EXEMPT_APIS:
        return False
    if key == ApiKey.Fetch:  # a follower's fetch is replication
        body = request.body
        return (body.replica_state.replica_id if request.header.api_version >= 15 else body.replica_id) < 0
    return True


def charge(quotas: ClientQuotas, request: Request, handling_ns: int, result: Any) -> Any:
    """Record the handling time; the answer with the request quota's throttle time if it is larger."""
    throttle_ms = quotas.record_request_time(request, handling_ns, time.monotonic())
    return result if throttle_ms == 0 else _with_throttle(result, throttle_ms)


def _with_throttle(result: Any, throttle_ms: int) -> Any:
    if isinstance(result, dict):
        if result.get("throttle_time_ms", 0) < throttle_ms:
            result["throttle_time_ms"] = throttle_ms
        return result
    if hasattr(result, "__await__"):

        async def answer() -> Any:
            return _with_throttle(await result, throttle_ms)

        return answer()
    return result
