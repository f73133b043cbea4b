"""What the group handlers share: how a request names its client's host, and topic-partition lists."""

from __future__ import annotations

from odradek.controller.metadata_image import MetadataImage
from odradek.protocol.api import Request


def client_host(request: Request) -> str:
    """The client's address as Kafka shows it in DescribeGroups (Java's ``InetAddress.toString``)."""
    context = request.context  # set by the connection on every request it decodes
    return f"/{context.client_address}" if context is not None and context.client_address else ""


def partition_exists(metadata: MetadataImage, topic: str, partition: int) -> bool:
    info = metadata.topics.get(topic)
    return info is not None and partition in info.partitions
