"""Kafka's own command-line tools (the 3.9.1 jars, run as their bin/*.sh scripts run them) against odradek.

Each test runs one sequence of tool invocations against odradek and against the real Kafka (tests/jvm), side
by side, and requires the two to print the same once what must differ is normalised away: topic and member
ids, log timestamps, the broker's address, and the perf tools' clocks and throughput. Exit codes, error
messages and every other character must match.

Needs a Java runtime and ``make jvm-deps``; a missing one fails the tests.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import kafka_jvm
import pytest

from odradek import Broker
from odradek.protocol.api import ApiKey

STABLE_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def broker(odradek_as_kafka: Broker) -> Broker:
    """odradek set up as the real Kafka (e2e's conftest); named ``broker`` so that a failing test shows its log."""
    return odradek_as_kafka


@dataclass(frozen=True)
class Run:
    """One tool invocation: ``{bootstrap}``, ``{topic}``, ``{group}`` and ``{dir}`` (a scratch directory of
    the broker's own) in the arguments and input are filled in per broker. ``unordered`` says the tool's
    lines come in no defined order (records read from several partitions), so they are compared sorted.

    ``settled`` says when a read-only run's output shows the earlier runs' changes (Kafka in ZooKeeper mode
    applies a dynamic broker config when ZooKeeper's change notification reaches it, a moment after the
    alter's answer): the run is repeated until it does, for up to STABLE_TIMEOUT_S, and its last output
    compared."""

    tool: str
    args: tuple[str, ...]
    input: str | None = None
    unordered: bool = False
    settled: Callable[[str], bool] | None = None


def run(tool: str, *args: str, input: str | None = None, unordered: bool = False, settled: Callable[[str], bool] | None = None) -> Run:
    return Run(tool, args, input, unordered, settled)


def fresh(**names: str) -> dict[str, str]:
    """Names new to both brokers (the real Kafka may be a long-lived one: ODRADEK_COMPAT_KAFKA)."""
    return {key: f"{value}-{uuid.uuid4().hex[:8]}" for key, value in names.items()}


@dataclass(frozen=True)
class Normaliser:
    """What legitimately differs between two brokers' runs, and what it is replaced by."""

    pattern: re.Pattern[str]
    replacement: str | Callable[[re.Match[str]], str]


def _consumer_perf_line(m: re.Match[str]) -> str:
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms,
    # fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec: the amounts must match, the times and rates cannot.
    fields = m.group(0).split(", ")
    return ", ".join(f if i in (2, 4) else "<t>" for i, f in enumerate(fields))


NORMALISERS = [
    Normaliser(re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\] ", re.M), ""),
    Normaliser(re.compile(r"TopicId: \S+"), "TopicId: <id>"),
    Normaliser(re.compile(r"\b(console-consumer|consumer-[\w.-]+-\d+)-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}\b"), r"\1-<uuid>"),
    # The producer perf tool's 5-second progress lines: how many a run prints depends on the machine.
    Normaliser(re.compile(r"^\d+ records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency\.\n", re.M), ""),
    Normaliser(
        re.compile(r"[\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency(, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th)?"),
        "<rates>",
    ),
    Normaliser(re.compile(r"^\d{4}-\d\d-\d\d [\d:]+, \d{4}-\d\d-\d\d [\d:]+(, [\d.]+){8}$", re.M), _consumer_perf_line),
]


def normalise(text: str, bootstrap: str) -> str:
    text = text.replace(bootstrap, "<bootstrap>")
    for n in NORMALISERS:
        text = n.pattern.sub(n.replacement, text)
    return text


@dataclass(frozen=True)
class Printed:
    """What one invocation printed, normalised."""

    command: str
    exit_code: int
    stdout: str
    stderr: str


PLACEHOLDER = re.compile(r"\{(\w+)\}")


def run_all(runs: list[Run], bootstrap: str, names: dict[str, str], files: dict[str, str], scratch: Path) -> list[Printed]:
    values = {"bootstrap": bootstrap, "dir": str(scratch), **names}

    def fill(text: str) -> str:
        return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)

    scratch.mkdir(exist_ok=True)
    for name, text in files.items():
        (scratch / name).write_text(fill(text))
    printed = []
    for r in runs:
        args = [fill(a) for a in r.args]
        done = kafka_jvm.run_tool(r.tool, *args, input=None if r.input is None else fill(r.input))
        deadline = time.monotonic() + STABLE_TIMEOUT_S
        while r.settled is not None and not r.settled(done.stdout) and time.monotonic() < deadline:
            time.sleep(0.2)
            done = kafka_jvm.run_tool(r.tool, *args)
        stdout = normalise(done.stdout, bootstrap)
        if r.unordered:
            stdout = "\n".join(sorted(stdout.splitlines()))
        command = normalise(" ".join([r.tool, *args]), bootstrap).replace(str(scratch), "<dir>")
        printed.append(Printed(command, done.returncode, stdout, normalise(done.stderr, bootstrap).replace(str(scratch), "<dir>")))
    return printed


@pytest.fixture
def side_by_side(broker: Broker, real_kafka, tmp_path: Path) -> Callable[..., tuple[list[Printed], list[Printed]]]:
    """``side_by_side(runs, names, files={...})``: the runs against odradek and the real Kafka at once (each
    with its own scratch directory holding ``files``), and what each printed. Names are the same on both."""

    def both(runs: list[Run], names: dict[str, str], files: dict[str, str] | None = None) -> tuple[list[Printed], list[Printed]]:
        targets = {"odradek": broker.bootstrap, "kafka": real_kafka.bootstrap}
        with ThreadPoolExecutor(len(targets)) as pool:
            futures = {
                name: pool.submit(run_all, runs, address, names, files or {}, tmp_path / name) for name, address in targets.items()
            }
            return futures["odradek"].result(), futures["kafka"].result()

    return both


def assert_same(on_odradek: list[Printed], on_kafka: list[Printed]) -> None:
    """Invocation by invocation, so a failure names the first command whose output differs."""
    for ours, theirs in zip(on_odradek, on_kafka, strict=True):
        assert ours == theirs, f"`{ours.command}` printed differently on odradek (left) and Kafka (right)"


TOPIC_LIFE = [
    run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--create", "--topic", "{topic}", "--partitions", "2", "--replication-factor", "1", "--config", "retention.ms=3600000"),
    run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--create", "--topic", "{topic}", "--partitions", "2"),
    run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--create", "--topic", "{topic}-x", "--replication-factor", "3"),
    run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--alter", "--topic", "{topic}", "--partitions", "3"),
    run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--alter", "--topic", "{topic}", "--partitions", "2"),
    run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--describe", "--topic", "{topic}"),
    run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--list", "--topic", "{topic}.*"),
    # Keys pick the partition (murmur2, in the client), so both brokers get the same records in the same places.
    run("kafka-console-producer", "--bootstrap-server", "{bootstrap}", "--topic", "{topic}", "--property", "parse.key=true",
        input="".join(f"key-{i}\tvalue-{i}\n" for i in range(8))),
    run("kafka-console-consumer", "--bootstrap-server", "{bootstrap}", "--topic", "{topic}", "--from-beginning", "--max-messages", "8",
        "--group", "{group}", "--property", "print.key=true", "--property", "print.partition=true", "--property", "print.offset=true",
        unordered=True),
    run("kafka-consumer-groups", "--bootstrap-server", "{bootstrap}", "--describe", "--group", "{group}"),
    run("kafka-console-producer", "--bootstrap-server", "{bootstrap}", "--topic", "{topic}", "--property", "parse.key=true",
        input="".join(f"key-{i}\tvalue-{i}\n" for i in range(8, 12))),
    run("kafka-consumer-groups", "--bootstrap-server", "{bootstrap}", "--describe", "--group", "{group}"),  # lag
    run("kafka-consumer-groups", "--bootstrap-server", "{bootstrap}", "--reset-offsets", "--to-earliest", "--execute", "--group", "{group}", "--topic", "{topic}"),
    run("kafka-consumer-groups", "--bootstrap-server", "{bootstrap}", "--describe", "--group", "{group}", "--offsets", "--verbose"),
    run("kafka-consumer-groups", "--bootstrap-server", "{bootstrap}", "--delete", "--group", "{group}"),
    run("kafka-consumer-groups", "--bootstrap-server", "{bootstrap}", "--describe", "--group", "{group}"),
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--describe", "--entity-type", "topics", "--entity-name", "{topic}"),
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--alter", "--entity-type", "topics", "--entity-name", "{topic}",
        "--add-config", "retention.ms=86400000,max.message.bytes=2000000"),
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--alter", "--entity-type", "topics", "--entity-name", "{topic}", "--add-config", "no.such.config=1"),
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--describe", "--entity-type", "topics", "--entity-name", "{topic}"),
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--describe", "--entity-type", "brokers", "--entity-name", "0"),
    run("kafka-get-offsets", "--bootstrap-server", "{bootstrap}", "--topic", "{topic}"),
    run("kafka-delete-records", "--bootstrap-server", "{bootstrap}", "--offset-json-file", "{dir}/delete.json"),
    run("kafka-get-offsets", "--bootstrap-server", "{bootstrap}", "--topic", "{topic}", "--time", "-2"),
    run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--delete", "--topic", "{topic}"),
    run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--describe", "--topic", "{topic}"),
]
"""A topic's life through kafka-topics, the console producer and consumer, kafka-consumer-groups,
kafka-configs, kafka-get-offsets and kafka-delete-records."""

DELETE_RECORDS = json.dumps({"version": 1, "partitions": [
    {"topic": "{topic}", "partition": 0, "offset": 2},
    {"topic": "{topic}", "partition": 1, "offset": -1},  # -1: up to the partition's end
]})


def test_topic_life_prints_what_kafka_prints(side_by_side) -> None:
    assert_same(*side_by_side(TOPIC_LIFE, fresh(topic="tools", group="tools-group"), files={"delete.json": DELETE_RECORDS}))


PERF = [
    run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--create", "--topic", "{topic}", "--partitions", "1"),
    run("kafka-producer-perf-test", "--topic", "{topic}", "--num-records", "2000", "--record-size", "100", "--throughput", "-1",
        "--producer-props", "bootstrap.servers={bootstrap}", "acks=all"),
    run("kafka-consumer-perf-test", "--bootstrap-server", "{bootstrap}", "--topic", "{topic}", "--messages", "2000", "--timeout", "30000"),
    run("kafka-get-offsets", "--bootstrap-server", "{bootstrap}", "--topic", "{topic}"),
]
"""The perf tools over a topic holding exactly what the producer's run wrote (so the consumer's counts are exact)."""


def test_perf_tools_print_what_kafka_prints(side_by_side) -> None:
    on_odradek, on_kafka = side_by_side(PERF, fresh(topic="perf"))
    assert_same(on_odradek, on_kafka)
    assert on_odradek[1].stdout.startswith("2000 records sent, <rates>"), on_odradek[1].stdout
    assert on_odradek[2].stdout.splitlines()[1] == "<t>, <t>, 0.1907, <t>, 2000, <t>, <t>, <t>, <t>, <t>", on_odradek[2].stdout


ACTIVE_GROUP_SETUP = [
    run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--create", "--topic", "{topic}", "--partitions", "2"),
    run("kafka-console-producer", "--bootstrap-server", "{bootstrap}", "--topic", "{topic}", "--property", "parse.key=true",
        input="".join(f"key-{i}\tvalue-{i}\n" for i in range(6))),
]
ACTIVE_GROUP = [
    run("kafka-consumer-groups", "--bootstrap-server", "{bootstrap}", "--describe", "--group", "{group}"),
    run("kafka-consumer-groups", "--bootstrap-server", "{bootstrap}", "--describe", "--group", "{group}", "--members", "--verbose"),
    run("kafka-consumer-groups", "--bootstrap-server", "{bootstrap}", "--describe", "--group", "{group}", "--state"),
    run("kafka-consumer-groups", "--bootstrap-server", "{bootstrap}", "--delete", "--group", "{group}"),
]
"""kafka-consumer-groups while a console consumer is a member of the group."""
AFTER_LEAVING = [
    run("kafka-consumer-groups", "--bootstrap-server", "{bootstrap}", "--describe", "--group", "{group}", "--state"),
    run("kafka-consumer-groups", "--bootstrap-server", "{bootstrap}", "--describe", "--group", "{group}", "--members"),
]


def wait_until_consumed(bootstrap: str, group: str, topic: str, ends: dict[int, int]) -> None:
    """Until the group is Stable with one member that has committed the partitions' ends."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in ends])
    deadline = time.monotonic() + STABLE_TIMEOUT_S
    seen: object = None
    while time.monotonic() < deadline:
        try:  # a fresh Kafka answers COORDINATOR_NOT_AVAILABLE while it creates __consumer_offsets
            described = admin.describe_consumer_groups([group])[group].result(5)
            committed = admin.list_consumer_group_offsets([request])[group].result(5)
        except (KafkaException, concurrent.futures.TimeoutError) as exc:
            seen = exc
        else:
            seen = (described.state, len(described.members), {tp.partition: tp.offset for tp in committed.topic_partitions})
            if seen == (ConsumerGroupState.STABLE, 1, ends):
                return
        time.sleep(0.2)
    raise AssertionError(f"group {group} on {bootstrap} did not settle with offsets {ends} in {STABLE_TIMEOUT_S}s: {seen}")


def test_group_with_an_active_member_prints_what_kafka_prints(side_by_side, broker, real_kafka, tmp_path) -> None:
    names = fresh(topic="active", group="active-group")
    setup = side_by_side(ACTIVE_GROUP_SETUP, names)
    assert_same(*setup)
    ends = {0: 3, 1: 3}  # where the six keys land (murmur2), on both
    log4j = tmp_path / "log4j.properties"
    log4j.write_text(kafka_jvm.TOOLS_LOG4J)
    consumers = {}
    try:
        for name, address in {"odradek": broker.bootstrap, "kafka": real_kafka.bootstrap}.items():
            consumers[name] = kafka_jvm.start_java(
                kafka_jvm.TOOLS["kafka-console-consumer"],
                ["--bootstrap-server", address, "--topic", names["topic"], "--group", names["group"], "--from-beginning",
                 "--consumer-property", "auto.commit.interval.ms=100"],
                log=tmp_path / f"{name}-consumer.out", heap="256m", system_properties={"log4j.configuration": log4j.as_uri()},
            )
        for name, address in {"odradek": broker.bootstrap, "kafka": real_kafka.bootstrap}.items():
            wait_until_consumed(address, names["group"], names["topic"], ends)
        on_odradek, on_kafka = side_by_side(ACTIVE_GROUP, names)
    finally:
        for consumer in consumers.values():
            consumer.stop()
    assert_same(on_odradek, on_kafka)
    assert "console-consumer-<uuid> /127.0.0.1      console-consumer 2               (0,1)" in on_odradek[1].stdout
    assert_same(*side_by_side(AFTER_LEAVING, names))


BROKER_CONFIGS = [
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--alter", "--entity-type", "brokers", "--entity-name", "0", "--add-config", "log.retention.ms=777600000"),
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=691200000,log.segment.bytes=1000000000"),
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--describe", "--entity-type", "brokers", "--entity-name", "0",
        settled=lambda out: "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=691200000" in out),
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--describe", "--entity-type", "brokers", "--entity-default",
        settled=lambda out: "log.segment.bytes=1000000000" in out),
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--alter", "--entity-type", "brokers", "--entity-name", "0", "--add-config", "log.retention.hours=1"),
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--alter", "--entity-type", "brokers", "--entity-name", "0", "--add-config", "num.io.threads=100"),
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--alter", "--entity-type", "brokers", "--entity-name", "0", "--delete-config", "log.retention.ms"),
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "log.retention.ms,log.segment.bytes"),
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--describe", "--entity-type", "brokers", "--entity-name", "0",
        settled=lambda out: "log.retention.ms=" not in out),  # both refuse log.retention.hours and num.io.threads=100
    run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--describe", "--entity-type", "brokers", "--entity-default",
        settled=lambda out: "log.segment.bytes=" not in out),
]
"""kafka-configs on dynamic broker configs, per broker and cluster-wide. The values keep more data than Kafka's
defaults (the real Kafka is shared by the test run), and every change is undone."""


def test_dynamic_broker_configs_print_what_kafka_prints(side_by_side, broker, real_kafka, connect) -> None:
    try:
        on_odradek, on_kafka = side_by_side(BROKER_CONFIGS, {})
        assert_same(on_odradek, on_kafka)
        assert "log.retention.ms=777600000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=777600000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=691200000" in on_odradek[2].stdout
    finally:
        for bootstrap in (broker.bootstrap, real_kafka.bootstrap):
            resources = [{"resource_type": 4, "resource_name": name, "configs": []} for name in ("0", "")]
            answers = connect(bootstrap).call(ApiKey.AlterConfigs, 1, {"resources": resources, "validate_only": False}).responses
            assert [a.error_code for a in answers] == [0, 0]
