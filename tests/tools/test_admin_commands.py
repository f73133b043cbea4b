"""``odradek topics | configs | offsets`` print what kafka-topics.sh, kafka-configs.sh and kafka-get-offsets.sh
print: one scenario is run with Kafka's own tools (the 3.9.1 jars) and with odradek's commands, each on a topic
of its own, against odradek and against the real Kafka; stdout, exit codes and the tools' own error lines must
match once the topic names and ids are normalised. Kafka's Java stack traces on stderr are not compared.

The scenario alters the cluster-wide broker defaults on the shared real Kafka (to values that keep more data
than Kafka's defaults) and deletes them again.
"""

from __future__ import annotations

import re
import time
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import kafka_jvm
import pytest

from odradek import Broker

ODRADEK = [str(Path(sys.executable).with_name("odradek"))]
TOOLS = {"topics": "kafka-topics", "configs": "kafka-configs", "offsets": "kafka-get-offsets", "groups": "kafka-consumer-groups"}

SCENARIO: list[tuple[str, ...]] = [
    ("topics", "--create", "--topic", "{topic}", "--partitions", "2", "--replication-factor", "1", "--config", "retention.ms=3600000"),
    ("topics", "--create", "--topic", "{topic}", "--partitions", "2"),
    ("topics", "--alter", "--topic", "{topic}", "--partitions", "3"),
    ("topics", "--describe", "--topic", "{topic}"),
    ("topics", "--list", "--topic", "{topic}.*"),
    ("topics", "--describe", "--topic", "{topic}-missing"),
    ("configs", "--alter", "--entity-type", "topics", "--entity-name", "{topic}", "--add-config", "retention.ms=86400000,cleanup.policy=[compact,delete]"),
    ("configs", "--describe", "--entity-type", "topics", "--entity-name", "{topic}"),
    ("configs", "--alter", "--entity-type", "topics", "--entity-name", "{topic}", "--delete-config", "no.such.config"),
    ("configs", "--alter", "--entity-type", "topics", "--entity-name", "{topic}", "--add-config", "retention.ms=soon"),
    ("configs", "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=691200000"),
    ("configs", "--describe", "--entity-type", "brokers", "--entity-default"),
    ("configs", "--alter", "--entity-type", "brokers", "--entity-name", "0", "--add-config", "log.retention.hours=1"),
    ("configs", "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "log.retention.ms"),
    ("offsets", "--topic", "{topic}", "--partitions", "0,2", "--time", "-2"),
    ("offsets", "--topic", "{topic}-missing"),
    ("topics", "--delete", "--topic", "{topic}"),
]


@dataclass(frozen=True)
class Printed:
    command: str
    exit_code: int
    stdout: str
    error_line: str
    """stderr's first line: kafka-configs' and kafka-get-offsets' own words, before any Java stack trace."""


@pytest.fixture(scope="module")
def odradek(tmp_path_factory):
    config = {"broker.id": "0", **kafka_jvm.BROKER_SETTINGS}
    with Broker(tmp_path_factory.mktemp("admin-commands"), config=config, subprocess=True) as b:
        yield b


def run_scenario(use_kafka_tools: bool, bootstrap: str, topic: str, scenario: list[tuple[str, ...]] = SCENARIO) -> list[Printed]:
    printed = []
    for command, *args in scenario:
        filled = ["--bootstrap-server", bootstrap, *(a.replace("{topic}", topic) for a in args)]
        if use_kafka_tools:
            done = kafka_jvm.run_tool(TOOLS[command], *filled)
        else:
            done = subprocess.run([*ODRADEK, command, *filled], capture_output=True, text=True, timeout=60)

        def normalise(text: str) -> str:
            return re.sub(r"TopicId: \S+", "TopicId: <id>", text.replace(topic, "<topic>").replace(bootstrap, "<bootstrap>"))

        # kafka-topics logs its failures (with a stack trace) through log4j; its own words go to stdout.
        error_line = "" if command == "topics" else done.stderr.split("\n", 1)[0]
        printed.append(Printed(normalise(" ".join([command, *args])), done.returncode, normalise(done.stdout), normalise(error_line)))
    return printed


TWIN_SUFFIXES = ("Aa", "BB")
"""Java's String.hashCode is the same for both, so the twin topics (and groups) Kafka's tools and odradek's
commands work on iterate alike in Java hash maps: the tools print rows in that order."""


def both_ways(bootstrap: str) -> tuple[list[Printed], list[Printed]]:
    """Kafka's tools, then odradek's commands, on the same broker (one after the other: the broker defaults
    they change are the cluster's)."""
    name = f"admin-{uuid.uuid4().hex[:8]}"
    return run_scenario(True, bootstrap, f"{name}-Aa"), run_scenario(False, bootstrap, f"{name}-BB")


def test_admin_commands_print_what_kafka_tools_print(odradek, real_kafka):
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(both_ways, [odradek.bootstrap, real_kafka.bootstrap]))
    differences = [(mine, theirs) for kafka_tools, ours in results for theirs, mine in zip(kafka_tools, ours, strict=True) if mine != theirs]
    assert differences == [], "odradek's commands (left) printed differently from Kafka's tools (right)"
    kafka_tools_on_odradek = results[0][0]
    assert kafka_tools_on_odradek[3].stdout.startswith("Topic: <topic>\tTopicId: <id>\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=3600000\n")
    assert kafka_tools_on_odradek[11].stdout == "Default configs for brokers in the cluster are:\n  log.retention.ms=691200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=691200000}\n"


GROUPS: list[tuple[str, ...]] = [
    ("groups", "--describe", "--group", "{topic}"),
    ("groups", "--describe", "--group", "{topic}-missing"),
    ("groups", "--reset-offsets", "--group", "{topic}", "--topic", "{topic}", "--to-earliest"),
    ("groups", "--reset-offsets", "--group", "{topic}", "--topic", "{topic}:0,2", "--shift-by", "-2", "--execute"),
    ("groups", "--reset-offsets", "--group", "{topic}", "--all-topics", "--to-offset", "100"),
    ("groups", "--reset-offsets", "--group", "{topic}", "--all-topics", "--to-datetime", "2020-01-01T00:00:00.000"),
    ("groups", "--describe", "--group", "{topic}"),
    ("groups", "--delete", "--group", "{topic}"),
    ("groups", "--describe", "--group", "{topic}"),
]
"""A group with offsets committed on three of a topic's four partitions (no members): described with lag,
its offsets reset (dry runs and one --execute), then deleted."""


def prepare_group(bootstrap: str, topic: str) -> None:
    """The topic, records on each partition, and the group's committed offsets (the group is named as the topic)."""
    import anyio

    from odradek.broker.network.kafka_client import KafkaClient
    from odradek.protocol.api import ApiKey
    from odradek.protocol.records import build_batch

    async def prepare() -> None:
        async with KafkaClient(bootstrap) as client:
            created = await client.request(ApiKey.CreateTopics, {"topics": [{"name": topic, "num_partitions": 4, "replication_factor": 1}], "timeout_ms": 10000})
            assert created.topics[0].error_code == 0, created
            partitions = [{"index": p, "records": build_batch([(None, b"v")] * (5 + p))} for p in range(4)]
            produced = await client.request(ApiKey.Produce, {"acks": -1, "timeout_ms": 10000, "topic_data": [{"name": topic, "partition_data": partitions}]})
            assert all(p.error_code == 0 for t in produced.responses for p in t.partition_responses), produced
            offsets = [{"partition_index": p, "committed_offset": 3, "committed_leader_epoch": -1, "committed_metadata": ""} for p in range(3)]
            body = {"group_id": topic, "generation_id_or_member_epoch": -1, "member_id": "", "topics": [{"name": topic, "partitions": offsets}]}
            committed = await client.coordinator_request(topic, ApiKey.OffsetCommit, body)
            assert all(p.error_code == 0 for t in committed.topics for p in t.partitions), committed

    anyio.run(prepare)


def groups_both_ways(bootstrap: str) -> tuple[list[Printed], list[Printed]]:
    name = f"admin-groups-{uuid.uuid4().hex[:8]}"
    results = []
    for use_kafka_tools, suffix in zip((True, False), TWIN_SUFFIXES):
        topic = f"{name}-{suffix}"
        prepare_group(bootstrap, topic)
        results.append(run_scenario(use_kafka_tools, bootstrap, topic, GROUPS))
    return results[0], results[1]


def test_groups_command_prints_what_kafka_consumer_groups_prints(odradek, real_kafka):
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(groups_both_ways, [odradek.bootstrap, real_kafka.bootstrap]))
    differences = [(mine, theirs) for kafka_tools, ours in results for theirs, mine in zip(kafka_tools, ours, strict=True) if mine != theirs]
    assert differences == [], "odradek's groups command (left) printed differently from kafka-consumer-groups (right)"
    described = results[1][0][0].stdout  # Kafka's tool on the real Kafka
    assert re.search(r"\n<topic> +<topic> +0 +3 +5 +2 +- +- +-(\n|$)", described), described  # partition 0: committed 3 of 5


MEMBER_VIEWS: list[tuple[str, ...]] = [
    ("groups", "--describe", "--group", "{topic}"),
    ("groups", "--describe", "--group", "{topic}", "--members"),
    ("groups", "--describe", "--group", "{topic}", "--members", "--verbose"),
    ("groups", "--describe", "--group", "{topic}", "--state"),
    ("groups", "--list"),
    ("groups", "--describe", "--all-groups", "--state"),
]


def in_any_order(printed: Printed) -> Printed:
    """A view of every group on the broker (``--list``, ``--all-groups``) with its lines or blocks sorted. Both
    tools print the broker's ListGroups order, but the two run one after the other, and in between other tests'
    groups on the same broker may expire or be made again, which moves them in the broker's maps; this view's
    own group is checked to be listed below."""
    if "--list" in printed.command:
        return replace(printed, stdout="".join(sorted(printed.stdout.splitlines(keepends=True))))
    if "--all-groups" in printed.command:
        return replace(printed, stdout="\n\n".join(sorted(printed.stdout.strip("\n").split("\n\n"))))
    return printed


def test_groups_describe_of_a_group_with_a_member_prints_what_kafka_prints(odradek, real_kafka):
    """A live member (confluent-kafka's consumer) owns all four partitions: the same group
    state is described by both tools at once (offsets, members, state), so not even the member id needs
    normalising, only the broker's address."""
    from confluent_kafka import Consumer

    def describe_both(bootstrap: str) -> tuple[list[Printed], list[Printed]]:
        topic = f"admin-member-{uuid.uuid4().hex[:8]}"
        prepare_group(bootstrap, topic)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 30
            while not consumer.assignment() and time.monotonic() < deadline:
                consumer.poll(0.2)
            assert consumer.assignment(), "the consumer was given no partitions"
            return run_scenario(True, bootstrap, topic, MEMBER_VIEWS), run_scenario(False, bootstrap, topic, MEMBER_VIEWS)
        finally:
            consumer.close()

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(describe_both, [odradek.bootstrap, real_kafka.bootstrap]))
    for kafka_tool, ours in results:
        assert [in_any_order(p) for p in ours] == [in_any_order(p) for p in kafka_tool]
        assert "/127.0.0.1" in ours[0].stdout and "rdkafka" in ours[0].stdout, ours[0].stdout
        assert "(0,1,2,3)" in ours[2].stdout and "Stable" in ours[3].stdout, (ours[2].stdout, ours[3].stdout)
        assert "<topic>" in ours[4].stdout.splitlines(), ours[4].stdout
