"""Transactions v2 (KIP-890 part 2) with Kafka's Java client 4.4, against odradek and against Apache Kafka 4.4
in KRaft mode (tests/jvm/kafka44_jvm.py), which must observe the same.

A 4.x client uses transactions v2 when the broker finalizes ``transaction.version`` 2 in ApiVersions: its
EndTxn (v5) bumps the producer epoch, its Produce (v12) and TxnOffsetCommit (v5) add their partition to the
transaction without AddPartitionsToTxn/AddOffsetsToTxn. That it did is seen from outside: the epoch
DescribeTransactions and DescribeProducers report grows by one with every commit or abort (under
transactions v1 it stays put), and odradek's request metrics count EndTxn v5 and Produce v12 requests and
no AddPartitionsToTxn from the client. The scenarios are tests/e2e/java44/Client44Probe.java's.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator
from urllib.request import urlopen

import kafka44_jvm
import kafka_jvm
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from odradek import Broker
from odradek.broker.coordinator.runtime import partition_for
from odradek.protocol.api import ApiKey


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return kafka_jvm.free_port()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, metrics_port: int) -> Iterator[Broker]:
    """odradek set up as the shared Kafka 4.4 (kafka_jvm.BROKER_SETTINGS, kafka44_jvm.TRANSACTION_SETTINGS), with
    its Prometheus endpoint, whose request counts by API and version show which protocol the client used."""
    config = {"broker.id": "0", **kafka_jvm.BROKER_SETTINGS, **kafka44_jvm.TRANSACTION_SETTINGS, "prometheus.port": str(metrics_port)}
    with Broker(log_dir=tmp_path_factory.mktemp("txn-v2"), subprocess=True, config=config) as b:
        yield b


def probe(java44: kafka44_jvm.JavaPrograms, *args: str) -> list[dict[str, Any]]:
    done = java44.run("Client44Probe", *args, lasting=True)
    assert done.returncode == 0, f"Client44Probe {' '.join(args)} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return [json.loads(line) for line in done.stdout.splitlines()]


def create_topics(bootstraps: list[str], *topics: str) -> None:
    for address in bootstraps:
        admin = AdminClient({"bootstrap.servers": address, "log_level": 3})
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
            future.result(30)


def on_both(java44: kafka44_jvm.JavaPrograms, bootstraps: list[str], sub_command: str, *args: str) -> list[list[dict[str, Any]]]:
    """The scenario run against both brokers at once (two JVMs)."""
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda address: probe(java44, sub_command, address, *args), bootstraps))


def epochs(lines: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(line["step"], line["described"][1]) for line in lines if "described" in line]


def requests(metrics_port: int, api: ApiKey) -> Counter[int]:
    """odradek's count of ``api`` requests by version (its Prometheus endpoint)."""
    with urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    counts: Counter[int] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "kafka_network_requestmetrics_requests_total" and sample.labels.get("request") == api.name:
                counts[int(sample.labels["version"])] += int(sample.value)
    return counts


def transaction_log(log_dir: Path, transactional_id: str) -> list[str]:
    """The records of ``transactional_id`` in its ``__transaction_state`` partition as Kafka 4.4's
    ``kafka-dump-log --transaction-log-decoder`` prints them, what differs between clusters (offsets, times,
    producer ids) set aside."""
    partition = partition_for(transactional_id, 50)
    segment = log_dir / f"__transaction_state-{partition}" / "00000000000000000000.log"
    done = kafka44_jvm.run_tool("kafka-dump-log", "--transaction-log-decoder", "--files", str(segment))
    assert done.returncode == 0, done.stderr
    ids: dict[str, str] = {}  # producer ids by order of appearance: each cluster allocates its own

    def producer_id(m: re.Match[str]) -> str:
        return f'{m.group(1)}":' + (m.group(2) if m.group(2) == "-1" else ids.setdefault(m.group(2), f"<id{len(ids)}>"))

    lines = [line for line in done.stdout.splitlines() if transactional_id in line]
    lines = [re.sub(r'([pP]roducerId)":(-?\d+)', producer_id, line) for line in lines]
    return [re.sub(r'(offset|CreateTime|TimestampMs)(":|: )-?\d+', r"\1\2<v>", line) for line in lines]


def test_api_versions_finalizes_transaction_version_2_as_kafka_44(broker, real_kafka44, connect) -> None:
    answers = []
    for address in (broker.bootstrap, real_kafka44.bootstrap):
        r = connect(address).call(ApiKey.ApiVersions, 3, {"client_software_name": "wire", "client_software_version": "1"})
        answers.append(({f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features}, r.finalized_features_epoch >= 0))
    (odradek_finalized, odradek_epoch_valid), (kafka_finalized, kafka_epoch_valid) = answers
    assert odradek_finalized["transaction.version"] == kafka_finalized["transaction.version"] == (2, 2)
    assert odradek_epoch_valid and kafka_epoch_valid


def test_kafka_features_describes_transaction_version_as_on_kafka_44(broker, real_kafka44) -> None:
    described = []
    for address in (broker.bootstrap, real_kafka44.bootstrap):
        done = kafka44_jvm.run_tool("kafka-features", "--bootstrap-server", address, "describe")
        assert done.returncode == 0, done.stderr
        [line] = [line for line in done.stdout.splitlines() if line.startswith("Feature: transaction.version")]
        described.append(line.split("Epoch:")[0].split())
    assert described[0] == described[1] == "Feature: transaction.version SupportedMinVersion: 0 SupportedMaxVersion: 2 FinalizedVersionLevel: 2".split()


def test_transactional_producer_bumps_its_epoch_per_transaction_as_on_kafka_44(broker, metrics_port, java44, real_kafka44) -> None:
    topic = f"txn44-{uuid.uuid4().hex[:8]}"
    bootstraps = [broker.bootstrap, real_kafka44.bootstrap]
    create_topics(bootstraps, topic)
    before = {api: requests(metrics_port, api) for api in (ApiKey.EndTxn, ApiKey.Produce, ApiKey.AddPartitionsToTxn)}
    on_odradek, on_kafka = on_both(java44, bootstraps, "transactions", topic)

    # Every commit and abort bumps the epoch (v2); an abort of a transaction that sent nothing sends no EndTxn.
    # The successor's InitProducerId fences the zombie's open transaction (+1) and starts its own (+1).
    assert epochs(on_kafka) == [("init", 0), ("commit", 1), ("abort", 2), ("commit", 3), ("empty-abort", 3), ("successor", 5), ("commit", 6)]
    assert epochs(on_odradek) == epochs(on_kafka)
    steps = {line["step"]: line for line in on_odradek}
    assert steps["zombie"] == {"step": "zombie", "fenced": True}
    assert steps["producers"]["epochs"] == [[6, -1]]  # the partition saw the last COMMIT marker, with epoch 6
    committed, uncommitted = [line for line in on_odradek if line["step"] == "read"]
    assert committed["values"] == ["c1", "c2", "c3", "c4", "c5"]
    assert uncommitted["values"] == ["c1", "c2", "c3", "a1", "a2", "c4", "zombie", "c5"]
    assert committed["end"] == uncommitted["end"] == 13  # 8 records and 5 markers (the zombie's abort among them)
    assert [line for line in on_odradek if "described" not in line] == [line for line in on_kafka if "described" not in line]

    # The protocol it took: EndTxn v5 for the 4 commits and aborts and the zombie's fenced commit, Produce v12,
    # no AddPartitionsToTxn of its own.
    after = {api: requests(metrics_port, api) for api in before}
    assert after[ApiKey.EndTxn] - before[ApiKey.EndTxn] == Counter({5: 5})
    assert set(after[ApiKey.Produce] - before[ApiKey.Produce]) == {12}
    assert after[ApiKey.AddPartitionsToTxn] == before[ApiKey.AddPartitionsToTxn]

    # Kafka 4.4's kafka-dump-log reads the __transaction_state records of both brokers alike: TransactionLogValue
    # version 1 with the client's transaction version, each transition the same, sizes included.
    if real_kafka44.node is None:
        pytest.fail("the real Kafka 4.4's log directory is needed (ODRADEK_COMPAT_KAFKA44 points at a Kafka this run did not start)", pytrace=False)
    transactional_id = f"txn44-{topic}"
    ours, theirs = (transaction_log(log_dir, transactional_id) for log_dir in (broker.log_dir, real_kafka44.node.log_dir))
    assert ours == theirs and len(ours) == 17
    assert all('"version":"1"' in line for line in ours) and sum('"clientTransactionVersion":2' in line for line in ours) == 16  # all but the first Empty


def test_a_timed_out_v2_transaction_is_aborted_and_fenced_as_on_kafka_44(broker, java44, real_kafka44) -> None:
    """The coordinator's own abort of a v2 transaction (transaction.timeout.ms 2 s; both brokers look for timed
    out transactions every second): a fence bumps the epoch once, the old producer's commit fails, and a new
    producer goes on with the next epoch."""
    topic = f"timeout44-{uuid.uuid4().hex[:8]}"
    bootstraps = [broker.bootstrap, real_kafka44.bootstrap]
    create_topics(bootstraps, topic)
    on_odradek, on_kafka = on_both(java44, bootstraps, "timeout", topic)
    assert epochs(on_kafka) == [("open", 0), ("timed-out", 1), ("successor", 2)]
    assert on_odradek == on_kafka
    steps = {line["step"]: line for line in on_odradek}
    assert steps["timed-out"]["described"] == ["CompleteAbort", 1]
    assert steps["read"] == {"step": "read", "values": ["after"], "end": 4}  # late, its ABORT marker, after, COMMIT


def test_exactly_once_copy_commits_offsets_in_v2_transactions_as_on_kafka_44(broker, metrics_port, java44, real_kafka44) -> None:
    name = uuid.uuid4().hex[:8]
    source, sink, group = f"eos44-in-{name}", f"eos44-out-{name}", f"eos44-{name}"
    count = 40
    bootstraps = [broker.bootstrap, real_kafka44.bootstrap]
    create_topics(bootstraps, source, sink)
    for address in bootstraps:
        producer = Producer({"bootstrap.servers": address, "log_level": 3})
        for i in range(count):
            producer.produce(source, value=f"v{i}".encode())
        assert producer.flush(30) == 0
    before = {api: requests(metrics_port, api) for api in (ApiKey.TxnOffsetCommit, ApiKey.AddOffsetsToTxn)}
    for lines in on_both(java44, bootstraps, "eos", source, sink, group):
        copied = next(line for line in lines if line["step"] == "copied")
        assert (copied["records"], copied["aborted"], copied["committed"]) == (count, 1, count)
        out = next(line for line in lines if line["step"] == "out")
        assert out["values"] == [f"V{i}" for i in range(count)]  # each once, in order: the aborted copy is not read
    after = {api: requests(metrics_port, api) for api in before}
    assert set(after[ApiKey.TxnOffsetCommit] - before[ApiKey.TxnOffsetCommit]) == {5}
    assert after[ApiKey.AddOffsetsToTxn] == before[ApiKey.AddOffsetsToTxn]
