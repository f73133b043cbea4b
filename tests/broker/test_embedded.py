"""The embeddable broker and the pytest plugin: what Python users test their Kafka code with."""

import socket
import time

from confluent_kafka.admin import AdminClient

from odradek import Broker


def test_kafka_broker_fixture_from_the_installed_plugin(kafka_broker: str) -> None:
    host, port = kafka_broker.split(":")
    with socket.create_connection((host, int(port)), timeout=5):
        pass
    metadata = AdminClient({"bootstrap.servers": kafka_broker}).list_topics(timeout=10)
    assert [b.port for b in metadata.brokers.values()] == [int(port)]


def test_in_process_broker_starts_fast_and_stops_cleanly(tmp_path) -> None:
    started = time.perf_counter()
    with Broker(log_dir=tmp_path) as broker:
        elapsed = time.perf_counter() - started
        with socket.create_connection(broker.bootstrap.split(":"), timeout=5):
            pass
    # Not a benchmark: a generous bound that still catches a broker that scans or sleeps at start-up.
    assert elapsed < 5
    assert (tmp_path / ".kafka_cleanshutdown").exists() or any(tmp_path.glob("**/.kafka_cleanshutdown"))
    assert (tmp_path / "meta.properties").exists()


def test_subprocess_broker_restarts_on_the_same_address(tmp_path) -> None:
    with Broker(log_dir=tmp_path, subprocess=True) as broker:
        first = broker.bootstrap
        broker.restart()
        assert broker.bootstrap == first
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        assert metadata.brokers
