"""The client libraries every scenario runs with, by the name tests and member processes use."""

from __future__ import annotations

from compat_aiokafka import AiokafkaClient
from compat_client import Client
from compat_confluent import ConfluentClient
from compat_kafka_python import KafkaPythonClient

CLIENTS: dict[str, type[Client]] = {c.name: c for c in (ConfluentClient, KafkaPythonClient, AiokafkaClient)}
