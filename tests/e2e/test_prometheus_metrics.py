"""The Prometheus endpoint (``prometheus.port``) scraped while real clients produce and consume: the figures
a Kafka dashboard reads move as the traffic says they must, under the JMX exporter's names for Kafka's MBeans."""

from __future__ import annotations

import time
import urllib.request
from typing import Iterator

import kafka_jvm
import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from odradek import Broker

Samples = dict[tuple[str, frozenset], float]


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, str]]:
    port = kafka_jvm.free_port()
    with Broker(log_dir=tmp_path_factory.mktemp("metered"), subprocess=True, config={"prometheus.port": port}) as broker:
        yield broker, f"http://127.0.0.1:{port}/metrics"


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum over every series of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def test_produce_and_consume_move_the_dashboard_figures(metered) -> None:
    broker, url = metered
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("metered_topic", num_partitions=2, replication_factor=1)])["metered_topic"].result(30)
    before = scrape(url)
    assert value(before, "kafka_server_brokertopicmetrics_messagesin_total", topic="metered_topic") == 0

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(100):
        producer.produce("metered_topic", value=b"v" * 50, key=str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    after = scrape(url)

    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic="metered_topic") == 100
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total") - value(before, "kafka_server_brokertopicmetrics_messagesin_total") == 100
    bytes_in = value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic="metered_topic")
    assert bytes_in == total(after, "kafka_log_log_size", topic="metered_topic") > 100 * 50  # batches stored as received
    assert total(after, "kafka_log_log_logendoffset", topic="metered_topic") == 100
    assert total(after, "kafka_log_log_logstartoffset", topic="metered_topic") == 0
    assert total(after, "kafka_log_log_numlogsegments", topic="metered_topic") == 2
    produce_requests = total(after, "kafka_network_requestmetrics_requests_total", request="Produce") - total(before, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert produce_requests >= 1
    assert value(after, "kafka_server_brokertopicmetrics_totalproducerequests_total", topic="metered_topic") >= 2  # per partition
    assert value(after, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == total(after, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert value(after, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") >= produce_requests
    assert value(after, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic="metered_topic") == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metered-group", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["metered_topic"])
        received = 0
        deadline = time.monotonic() + 30
        while received < 100 and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None, msg.error()
                received += 1
        assert received == 100
        consumer.commit(asynchronous=False)
        during = scrape(url)
        assert value(during, "kafka_server_brokertopicmetrics_bytesout_total", topic="metered_topic") >= bytes_in
        assert value(during, "kafka_server_brokertopicmetrics_totalfetchrequests_total", topic="metered_topic") >= 2
        assert total(during, "kafka_network_requestmetrics_requests_total", request="FetchConsumer") >= 1
        assert value(during, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 1
        assert value(during, "kafka_coordinator_group_groupmetadatamanager_numgroupsstable") == 1
        assert value(during, "kafka_coordinator_group_groupmetadatamanager_numoffsets") == 2
        assert value(during, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT", networkProcessor="0") >= 2
    finally:
        consumer.close()
    left = scrape(url)
    assert value(left, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 1

    partitions = value(left, "kafka_server_replicamanager_partitioncount")
    assert partitions == 2 + 50  # and __consumer_offsets
    assert value(left, "kafka_server_replicamanager_leadercount") == partitions == value(left, "kafka_controller_kafkacontroller_globalpartitioncount")
    assert value(left, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(left, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(left, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(left, "kafka_controller_kafkacontroller_globaltopiccount") == 2
    assert value(left, "process_resident_memory_bytes") > 10_000_000
    assert value(left, "process_open_fds") > 0
    assert value(left, "process_cpu_seconds_total") > value(before, "process_cpu_seconds_total")
    assert value(left, "odradek_event_loop_lag_seconds_count") > value(before, "odradek_event_loop_lag_seconds_count")
    # kafka-topics.sh warns about '.' and '_' in topic names; the broker does not (also not for __consumer_offsets).
    assert not [line for line in broker.output if "limitations in metric names" in line]


def test_a_failed_append_and_an_error_code_are_counted(metered) -> None:
    """A keyless record on a compacted topic is refused with INVALID_RECORD, which Kafka counts as a failed
    produce request (RecordValidationException), unlike NOT_LEADER or UNKNOWN_TOPIC."""
    broker, url = metered
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("metered-compacted", 1, 1, config={"cleanup.policy": "compact"})])["metered-compacted"].result(30)
    failures: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    producer.produce("metered-compacted", value=b"no key", on_delivery=lambda err, msg: failures.append(err))
    assert producer.flush(30) == 0
    assert [e.code() for e in failures] == [KafkaError.INVALID_RECORD]
    samples = scrape(url)
    assert value(samples, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic="metered-compacted") == 1
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic="metered-compacted") == 0
    assert value(samples, "kafka_network_requestmetrics_errors_total", request="Produce", error="INVALID_RECORD") == 1

    admin.delete_topics(["metered-compacted"])["metered-compacted"].result(30)
    gone = scrape(url)
    assert not [key for key in gone if ("topic", "metered-compacted") in key[1]]  # as Kafka removes a deleted topic's metrics
    assert value(gone, "kafka_server_brokertopicmetrics_failedproducerequests_total") >= 1  # the all-topics count keeps it


def test_the_endpoint_is_off_unless_configured(tmp_path) -> None:
    with Broker(log_dir=tmp_path) as broker:
        assert broker.server.metrics is None
