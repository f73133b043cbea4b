"""The end of a CreateTopics/CreatePartitions/DeleteTopics request under ``controller_mutation_rate``
(Kafka's ``sendResponseMaybeThrottleWithControllerQuota``): the throttle time goes in the answer and the
connection is muted for it (KIP-219); a version whose clients do not throttle themselves gets its answer
only once the throttle time has passed."""

from __future__ import annotations

import time
import anyio

from odradek.broker.quotas import ClientQuotas, ControllerMutationQuota
from odradek.protocol.api import Request


async def answer(quotas: ClientQuotas, request: Request, quota: ControllerMutationQuota, response: dict, client_throttles_since: int) -> dict:
    now_s = time.monotonic()
    throttle_ms = quota.throttle_ms(now_s)
    response["throttle_time_ms"] = throttle_ms
    quotas.throttle(request, throttle_ms, now_s)
    if throttle_ms > 0 and request.header.api_version < client_throttles_since:
        await anyio.sleep(throttle_ms / 1000)
    return response
