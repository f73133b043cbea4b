"""The end of a CreateTopics/CreatePartitions/DeleteTopics request under ``controller_mutation_rate``
(Kafka's ``sendResponseMaybeThrottleWithControllerQuota``): the throttle time goes in the answer, sent at
once, and the connection is muted for it (KIP-219; Kafka 3.9 delays no answer, whatever the version)."""

from __future__ import annotations

import time
from typing import TypedDict, TypeVar

from odradek.broker.quotas import ClientQuotas, ControllerMutationQuota
from odradek.protocol.api import Request


class Throttled(TypedDict, total=False):
    """What the three answers have in common: a throttle time."""

    throttle_time_ms: int


Answer = TypeVar("Answer", bound=Throttled)


def answer(quotas: ClientQuotas, request: Request, quota: ControllerMutationQuota, response: Answer) -> Answer:
    now_s = time.monotonic()
    throttle_ms = quota.throttle_ms(now_s)
    response["throttle_time_ms"] = throttle_ms
    quotas.throttle(request, throttle_ms, now_s)
    return response
