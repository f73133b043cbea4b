"""What a scenario observes, in Kafka's vocabulary, and how observations are compared.

Observations are plain JSON-able dicts. Clients report broker errors each in their own way (librdkafka's
``UNKNOWN_TOPIC_OR_PART``, kafka-python's ``UnknownTopicOrPartitionError``, aiokafka's raw codes); every
adapter turns them into Kafka's numeric code and :func:`error_name` into Kafka's name, so one expected
observation serves all clients. What legitimately differs between two clusters (cluster ids, node ids,
hostnames, ports, timings) is normalised here, before comparing.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid


class NotOffered(Exception):
    """The client library has no public way to do or see this; the scenario is skipped for it."""


def error_name(code: int) -> str:
    """Kafka's name for an error code (``NONE`` for 0)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def is_kafka_uuid(value: Any) -> bool:
    """A non-zero topic id or cluster id, in any spelling a client returns it (UUID, base64, hex)."""
    if value is None:
        return False
    if isinstance(value, (uuid.UUID, Uuid)):
        return value.int != 0
    text = str(value)
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        if len(raw) == 16:
            return any(raw)
    except (ValueError, TypeError):
        pass
    try:
        return uuid.UUID(text).int != 0
    except ValueError:
        return False


def within(value: float, low: float, high: float) -> str:
    """A timing as a verdict ("within", or the value and its bounds), so observations compare across runs."""
    return "within" if low <= value <= high else f"{value} outside [{low}, {high}]"


def canonical(observation: Any) -> Any:
    """The observation as JSON would carry it (tuples become lists, keys strings), failing on anything else."""
    return json.loads(json.dumps(observation, sort_keys=True))


def unique(label: str) -> str:
    """A topic or group name no other scenario run uses: one broker serves the whole session."""
    return f"compat-{label}-{uuid.uuid4().hex[:10]}"
