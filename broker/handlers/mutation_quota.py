"""The end of a CreateTopics/CreatePartitions/DeleteTopics request under ``controller_mutation_rate``
(Kafka's ``sendResponseMaybeThrottleWithControllerQuota``): the throttle time goes in the answer, sent at
once, and the connection is muted for it (KIP-219; Kafka 3.9 delays no answer, whatever the version)."""

from __future__ import annotations

import time

from odradek.broker.quotas import ClientQuotas, ControllerMutationQuota
from odradek.protocol.api import Request


def answer(quotas: ClientQuotas, request: Request, quota: ControllerMutationQuota, response: dict) -> dict:
    now_s = time.monotonic()
    throttle_ms = quota.throttle_ms(now_s)
    response["throttle_time_ms"] = throttle_ms
    quotas.throttle(request, throttle_ms, now_s)
    return response
