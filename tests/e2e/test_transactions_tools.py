"""Kafka's ``kafka-transactions.sh`` (the 3.9.1 jars) against odradek and the real Kafka, side by side.

The same scenario runs on both brokers: one transactional producer left with a transaction open, another
that committed; then the tool lists and describes them, shows the partition's producers, aborts the
hanging transaction by its start offset (WriteTxnMarkers from the tool, with the coordinator epoch
DescribeProducers reports) and shows the producers again. Both must print the same once what must differ
is set aside: producer ids (allocated in blocks by each cluster), timestamps and durations.

The order of ``describe-producers`` rows is Kafka's: its ProducerStateManager keeps the producers in a
``java.util.HashMap`` keyed by id, which iterates by bucket (the id's spread hash modulo the table's 16
slots here), so the later of two ids comes first when it wraps to a lower bucket (15 and 16, say). The
ids differ between the clusters (each hands them out from its own counter, which the other tests that
share the broker move on), so each broker's order is checked against that rule for its own ids, and the
rows are compared in the order the producers were created. Kafka's
``kafka-dump-log --transaction-log-decoder`` then reads both brokers' ``__transaction_state`` segments and
must find the same transitions. Not the same value sizes: odradek finalizes ``transaction.version`` 2 as a
Kafka 4.4 node does and so writes TransactionLogValue version 1 (Kafka 4.4's, which Kafka 3.9 reads, tags
aside), where a ZooKeeper-mode Kafka 3.9 finalizes nothing and writes version 0; the sizes are compared
with Kafka 4.4's in tests/e2e/test_transactions_v2.py.

Needs a Java runtime and ``make jvm-deps``; a missing one fails the tests.
"""

from __future__ import annotations

import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import kafka_jvm
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import Broker
from odradek.broker.coordinator.runtime import partition_for
from odradek.storage.hash_map_order import HashMapOrder


@pytest.fixture(scope="module")
def broker(odradek_as_kafka: Broker) -> Broker:
    """odradek set up as the real Kafka (e2e's conftest); named ``broker`` so that a failing test shows its log."""
    return odradek_as_kafka


VARYING_COLUMNS = {
    "list": {2},  # ProducerId
    "describe": {2, 6, 7},  # ProducerId, CurrentTransactionStartTimeMs, TransactionDurationMs
    "describe-producers": {0, 4},  # ProducerId, LastTimestamp
}


def table(command: str, stdout: str, ids: tuple[str, ...]) -> list[list[str]]:
    """The tool's table as rows of fields, the varying columns blanked; ``list`` keeps only this test's ids
    (the brokers are shared) and is sorted (its order follows the coordinator's cache); ``describe-producers``
    is in producer-id order, which is the order the producers were created in on both brokers."""
    rows = [line.split() for line in stdout.splitlines() if line.strip()]
    if command == "describe-producers":
        rows = [rows[0]] + sorted(rows[1:], key=lambda row: int(row[0]))
    varying = VARYING_COLUMNS.get(command, set())
    rows = [rows[0]] + [["<v>" if i in varying else f for i, f in enumerate(row)] for row in rows[1:]]
    if command == "list":
        rows = [rows[0]] + sorted(row for row in rows[1:] if row[0] in ids)
    return rows


def printed_producer_ids(command: str, stdout: str) -> list[int]:
    """The ProducerId column of ``describe-producers``, in the order printed."""
    return [int(line.split()[0]) for line in stdout.splitlines()[1:] if line.strip()] if command == "describe-producers" else []


def java_hash_map_order(producer_ids: list[int]) -> list[int]:
    """How a fresh ``HashMap<Long, _>`` iterates these ids, put in ascending order (the model checked against
    Java's own HashMap in tests/storage/test_hash_map_order.py)."""
    order = HashMapOrder()
    ids: dict[int, None] = {}
    for producer_id in sorted(producer_ids):
        ids[producer_id] = None
        order.put(producer_id, ids)
    return [producer_id for producer_id, _ in order.iteration_order(ids.items())]


def scenario(bootstrap: str, names: dict[str, str]) -> tuple[list[tuple[str, int, list[list[str]], str]], list[list[int]]]:
    topic, open_id, done_id = names["topic"], names["open"], names["done"]
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    hanging = Producer({"bootstrap.servers": bootstrap, "transactional.id": open_id, "log_level": 3})
    hanging.init_transactions(30)
    hanging.begin_transaction()
    hanging.produce(topic, value=b"hanging", partition=0)
    hanging.flush(30)
    done = Producer({"bootstrap.servers": bootstrap, "transactional.id": done_id, "log_level": 3})
    done.init_transactions(30)
    done.begin_transaction()
    done.produce(topic, value=b"done", partition=0)
    done.commit_transaction(30)
    runs = [
        ("list",),
        ("describe", "--transactional-id", open_id),
        ("describe", "--transactional-id", done_id),
        ("describe", "--transactional-id", names["missing"]),
        ("describe-producers", "--topic", topic, "--partition", "0"),
        ("abort", "--topic", topic, "--partition", "0", "--start-offset", "0"),
        ("describe-producers", "--topic", topic, "--partition", "0"),
    ]
    printed, producer_ids = [], []
    for args in runs:
        result = kafka_jvm.run_tool("kafka-transactions", "--bootstrap-server", bootstrap, *args)
        stderr = re.sub(r"^\[[^\]]+\] ", "", result.stderr, flags=re.M)
        printed.append((" ".join(args), result.returncode, table(args[0], result.stdout, (open_id, done_id)) if result.stdout else [], stderr))
        producer_ids.append(printed_producer_ids(args[0], result.stdout))
    hanging.abort_transaction(30)
    return printed, producer_ids


TRANSACTION_STATE_PARTITIONS = 50


def transaction_log(log_dir: Path, transactional_ids: tuple[str, ...]) -> list[str]:
    """The records of ``transactional_ids`` in their ``__transaction_state`` partitions, as Kafka's dump tool
    decodes them, with what differs between clusters (offsets, times, producer ids) set aside."""
    partitions = sorted({partition_for(t, TRANSACTION_STATE_PARTITIONS) for t in transactional_ids})
    segments = ",".join(str(log_dir / f"__transaction_state-{p}" / "00000000000000000000.log") for p in partitions)
    done = kafka_jvm.run_tool("kafka-dump-log", "--transaction-log-decoder", "--files", segments)
    assert done.returncode == 0, done.stderr
    lines = []
    for transactional_id in transactional_ids:
        for line in done.stdout.splitlines():
            if f"transactionalId={transactional_id} " in line:
                line = re.sub(r"(offset|CreateTime|producerId):\s?-?\d+", r"\1:<v>", line)
                line = re.sub(r"valueSize: \d+", "valueSize: <v>", line)  # version 1 here, 0 on Kafka 3.9: see above
                lines.append(re.sub(r"txnLastUpdateTimestamp=\d+", "txnLastUpdateTimestamp=<v>", line))
    return lines


def test_kafka_transactions_and_dump_log_print_what_they_print_on_kafka(broker: Broker, real_kafka) -> None:
    if real_kafka.broker is None:
        pytest.fail("the real Kafka's log directory is needed (ODRADEK_COMPAT_KAFKA points at a Kafka this run did not start)", pytrace=False)
    suffix = uuid.uuid4().hex[:8]
    names = {"topic": f"txn-tool-{suffix}", "open": f"open-{suffix}", "done": f"done-{suffix}", "missing": f"missing-{suffix}"}
    with ThreadPoolExecutor(2) as pool:
        ours, theirs = pool.submit(scenario, broker.bootstrap, names), pool.submit(scenario, real_kafka.bootstrap, names)
        ours, theirs = ours.result(), theirs.result()
    (ours, our_ids), (theirs, their_ids) = ours, theirs
    for mine, kafka in zip(ours, theirs, strict=True):
        assert mine == kafka, f"`kafka-transactions {mine[0]}` printed differently on odradek (left) and Kafka (right)"
    for broker_name, printed_ids in (("odradek", our_ids), ("Kafka", their_ids)):
        for (command, *_), ids_printed in zip(ours, printed_ids, strict=True):
            assert ids_printed == java_hash_map_order(ids_printed), f"{broker_name}: `kafka-transactions {command}` listed producers {ids_printed}, not in HashMap order"
    assert [len(ids) for ids in our_ids] == [0, 0, 0, 0, 2, 0, 2]

    ids = (names["open"], names["done"])
    with ThreadPoolExecutor(2) as pool:
        ours_log, theirs_log = pool.map(lambda log_dir: transaction_log(log_dir, ids), [broker.log_dir, real_kafka.broker.log_dir])
    assert any("state=CompleteCommit" in line for line in ours_log)
    assert ours_log == theirs_log
