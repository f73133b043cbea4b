"""pytest plugin (entry point ``pytest11``): a ``kafka_broker`` fixture backed by a real odradek broker.

Python users otherwise need Docker to test Kafka code; this starts a broker in-process on a free loopback
port with a temporary log directory, in well under a second.
"""

from __future__ import annotations

from typing import Iterator

import pytest


@pytest.fixture
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address (``host:port``) of a fresh single-node broker for one test."""
    from odradek import Broker

    with Broker(log_dir=tmp_path_factory.mktemp("kafka-logs")) as broker:
        yield broker.bootstrap
