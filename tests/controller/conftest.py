"""A real ZooKeeper and a real Apache Kafka 3.9.1 broker registered in it, shared by the ZooKeeper-mode
tests of this directory: Kafka writes the layout odradek must read and write byte for byte.

Kafka runs under the chroot ``/kafka`` (as a production ``zookeeper.connect`` often has one) with a rack, so
that the optional parts of its registration are there to compare. Both processes are stopped (by PID) when
the session ends, whatever happened.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import kafka_jvm
import pytest
from kazoo.client import KazooClient
from tests.controller.zk_brokers import zk_session

CHROOT = "/kafka"
KAFKA_RACK = "rack-a"


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_jvm.ZooKeeper]:
    root: Path = tmp_path_factory.mktemp("zookeeper")
    try:
        zk = kafka_jvm.ZooKeeper(root).start()
    except kafka_jvm.JvmUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield zk
    finally:
        zk.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def zk_kafka(zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_jvm.KafkaBroker]:
    """Kafka 3.9.1, broker id 0, on ``zookeeper`` under :data:`CHROOT`: the first broker, so the controller."""
    broker = kafka_jvm.KafkaBroker(tmp_path_factory.mktemp("zk-kafka"), zookeeper.connect + CHROOT, settings={"broker.rack": KAFKA_RACK})
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kazoo(zookeeper: kafka_jvm.ZooKeeper) -> Iterator[KazooClient]:
    """A ZooKeeper session under :data:`CHROOT`, closed after the test."""
    with zk_session(zookeeper.connect + CHROOT) as client:
        yield client
