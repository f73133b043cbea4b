"""Transactions v2 (KIP-890 part 2) over three brokers: three ZooKeeper-mode odradek brokers and a three-node
Apache Kafka 4.4 KRaft cluster (tests/jvm/kafka44_jvm.py), the Java client 4.4 in the same scenario on both.

A topic of three single-replica partitions is spread over the brokers, so the transaction coordinator leads
at most one of them: the leaders of the others add the producer's partition to its transaction by asking the
coordinator on another broker (AddPartitionsToTxn v4+, not verify-only), and the coordinator's markers, with
the epoch it bumped, reach them over the inter-broker listener.
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import kafka44_jvm
import kafka_jvm
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests import polling
from tests.controller.zk_brokers import odradek_brokers


@pytest.fixture(scope="module")
def clusters(zookeeper: kafka_jvm.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The bootstrap lists of the odradek cluster and of the Kafka 4.4 cluster."""
    root = tmp_path_factory.mktemp("txn-v2-cluster")
    settings = {"group.initial.rebalance.delay.ms": "0"}
    with odradek_brokers(zookeeper.connect + "/txn-v2", lambda b: root / f"odradek-{b}", settings) as brokers, kafka44_jvm.KRaftCluster(root / "kafka44") as kraft:
        yield ",".join(b.bootstrap for b in brokers.values()), kraft.bootstrap


def spread(java44: kafka44_jvm.JavaPrograms, bootstrap: str, topic: str) -> list[dict[str, Any]]:
    done = java44.run("Client44Probe", "spread", bootstrap, topic, lasting=True)
    assert done.returncode == 0, f"Client44Probe spread on {bootstrap} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return [json.loads(line) for line in done.stdout.splitlines()]


def led(admin: AdminClient, topic: str) -> list[int] | None:
    """The leaders of ``topic``'s three partitions in the metadata, or None while one is missing."""
    leaders = [p.leader for p in admin.list_topics(topic, timeout=30).topics[topic].partitions.values()]
    return leaders if len(leaders) == 3 and -1 not in leaders else None


def test_a_transaction_over_three_leaders_bumps_the_epoch_and_marks_every_partition_as_on_kafka_44(clusters, java44) -> None:
    topic = f"spread44-{uuid.uuid4().hex[:8]}"
    for bootstrap in clusters:
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(60)
        # Asked of whichever broker the client reaches: one its controller has not updated yet knows no such
        # topic, so the leaders are waited for.
        leaders = polling.wait_for(lambda: led(admin, topic), what=f"{topic}'s three leaders in {bootstrap}'s metadata")
        assert len(set(leaders)) == 3, leaders
    with ThreadPoolExecutor(2) as pool:
        on_odradek, on_kafka = pool.map(lambda bootstrap: spread(java44, bootstrap, topic), clusters)

    assert [(line["step"], line["described"][1]) for line in on_kafka if "described" in line] == [("commit", 1), ("abort", 2), ("commit", 3)]
    steps = {line["step"]: line for line in on_odradek}
    # Every partition took the last COMMIT marker with the epoch the coordinator bumped it to.
    assert sorted(steps["producers"]["epochs"]) == [[0, 3, -1], [1, 3, -1], [2, 3, -1]]
    assert steps["read"]["values"] == sorted(f"r{r}-p{p}" for r in (0, 2) for p in range(3))
    assert [{k: v for k, v in line.items() if k != "described"} for line in on_odradek] == [{k: v for k, v in line.items() if k != "described"} for line in on_kafka]
    assert [line.get("described", [None, None])[1] for line in on_odradek] == [line.get("described", [None, None])[1] for line in on_kafka]
