"""What the group handlers share: how a request names its client's host, and topic-partition lists."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.protocol.api import Request

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer


def client_host(request: Request) -> str:
    """The client's address as Kafka shows it in DescribeGroups (Java's ``InetAddress.toString``)."""
    return f"/{request.client_address}" if request.client_address else ""


def partition_exists(server: "KafkaServer", topic: str, partition: int) -> bool:
    info = server.metadata.topics.get(topic)
    return info is not None and partition in info.partitions
