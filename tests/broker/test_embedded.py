"""The embeddable broker and the pytest plugin: what Python users test their Kafka code with."""

import socket
import subprocess
import sys
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
    assert (tmp_path / ".kafka_cleanshutdown").exists()  # at the log directory's root, as Kafka writes it
    assert (tmp_path / "meta.properties").exists()


NOT_AT_START = (
    "odradek.protocol.legacy_records",  # message formats v0 and v1: at the first request that uses one
    "odradek.broker.coordinator.runtime",  # the coordinators: at their first use (FindCoordinator, ...)
    "odradek.broker.coordinator.group.group_coordinator",
    "odradek.broker.coordinator.transaction",  # the transaction coordinator's package, with its first use
    "odradek.broker.coordinator.transaction.transaction_coordinator",
    "odradek.broker.replication.fetch_session",  # at the first fetch
    "odradek.broker.replication.replica_fetcher",  # when this broker first follows a leader
    "odradek.broker.network.kafka_client",
    "odradek.broker.network.worker_channel",  # only in a broker over several processes (worker.processes)
    "odradek.broker.network.forwarded_produce",
    "odradek.broker.supervisor",
    "odradek.broker.zk_broker",  # ZooKeeper mode, with zookeeper.connect
    "odradek.controller.zk_controller",
    "kazoo",
    "odradek.broker.security.tls",  # TLS and SASL, by the listeners that use them
    "odradek.broker.security.sasl_authenticator",
    "odradek.broker.security.scram",
    "odradek.broker.security.client",  # the inter-broker security: at its first use, or at start when not PLAINTEXT
    "odradek.broker.authorizer.acl_authorizer",  # with authorizer.class.name
    "odradek.broker.authorizer.acl_bindings",  # the ACLs themselves: with the authorizer or at the first ACL request
    "odradek.storage.log_cleaner",  # at the cleaner's first pass
    "odradek.storage.transaction_index",  # at a segment's first aborted transaction (or a read_committed fetch)
    "odradek.broker.request_quota",  # with a client quota set
    "odradek.broker.replication.replica_selector",  # with replica.selector.class
    "odradek.broker.replication.log_dir_failure",  # ZooKeeper mode's log directory failures
    "odradek.broker.replication.replica_alter_log_dirs",  # at the first move between log directories
    "odradek.controller.log_dir_discovery",  # the metadata a Kafka-written log directory holds: not read in an empty one
    "cramjam",  # the codecs at the first compressed batch, crc32c at the first checksum
    "zstandard",
    "zlib",
    "odradek.protocol.compression",
    "odradek.protocol.records",  # the record codec: at the first batch decoded or rebuilt (compressed, transactional...)
    "crc32c",
    "odradek.broker.metrics",  # with prometheus.port
    "prometheus_client",
    "construct",
    "uuid",  # topic ids are our own Uuid (protocol/kafka_uuid.py): the standard library's imports platform
    "platform",
    "anyio.from_thread",  # the stop asks the loop itself to set its event
)
"""Modules a single node on an empty log directory does not import before it serves (each at its first use,
docs/performance.md, "Start-up"): ``Broker()``'s start stays at what it needs."""

START_IMPORTS = """
import sys
from odradek import Broker
broker = Broker(log_dir=sys.argv[1]).start()
print(" ".join(sorted(sys.modules)))
broker.stop()
"""


def test_a_single_node_imports_only_what_it_serves_with(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-c", START_IMPORTS, str(tmp_path)], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(done.stdout.split())
    assert "odradek.broker.runner" in loaded
    assert sorted(loaded & set(NOT_AT_START)) == []
    assert sorted(m for m in loaded if m.startswith("odradek.broker.handlers.")) == ["odradek.broker.handlers.api_versions"]  # the others at their API's first request


def test_subprocess_broker_restarts_on_the_same_address(tmp_path) -> None:
    with Broker(log_dir=tmp_path, subprocess=True) as broker:
        first = broker.bootstrap
        broker.restart()
        assert broker.bootstrap == first
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        assert metadata.brokers


def test_a_restart_keeps_leader_epochs_as_kafkas_zookeeper_controller_does(tmp_path, connect) -> None:
    """The restarted controller finds each partition's leader (this broker) alive: no election, no new epoch."""
    from odradek.protocol.api import ApiKey

    def epochs(bootstrap: str) -> dict[int, int]:
        topics = connect(bootstrap).call(ApiKey.Metadata, 12, {"topics": [{"name": "epochs"}], "allow_auto_topic_creation": True}).topics
        return {p.partition_index: p.leader_epoch for p in topics[0].partitions}

    with Broker(log_dir=tmp_path, config={"num.partitions": "2"}) as broker:
        epochs(broker.bootstrap)  # auto-creates
        before = epochs(broker.bootstrap)
    with Broker(log_dir=tmp_path) as broker:
        assert epochs(broker.bootstrap) == before == {0: 0, 1: 0}
