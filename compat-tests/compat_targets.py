"""The two systems every scenario runs against: odradek, and a real Apache Kafka 3.9 broker.

Real Kafka is ``ODRADEK_COMPAT_KAFKA=host:port`` (a broker already running) or else Apache Kafka 3.9.1
from its Maven jars in ZooKeeper mode, the mode odradek reproduces, started once per test process by
``tests/jvm/kafka_jvm.py``'s :func:`shared_kafka`. Both run with :data:`kafka_jvm.BROKER_SETTINGS` on
top of Kafka's defaults, so DescribeConfigs answers alike. A missing jar set fails the Kafka half: a skip
would hide a broken set-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Target:
    name: str  # "odradek" or "kafka"
    bootstrap: str
    restart: Callable[[], None] | None = field(default=None, compare=False)
    """Stops the broker cleanly and starts it again on the same address and log directory; only the
    brokers kept for restart scenarios have it."""
