"""``odradek topics | configs | offsets`` print what kafka-topics.sh, kafka-configs.sh and kafka-get-offsets.sh
print: one scenario is run with Kafka's own tools (the 3.9.1 jars) and with odradek's commands, each on a topic
of its own, against odradek and against the real Kafka; stdout, exit codes and the tools' own error lines must
match once the topic names and ids are normalised. Kafka's Java stack traces on stderr are not compared.

The scenario alters the cluster-wide broker defaults on the shared real Kafka (to values that keep more data
than Kafka's defaults) and deletes them again.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import kafka_jvm
import pytest

from odradek import Broker

ODRADEK = [str(Path(sys.executable).with_name("odradek"))]
TOOLS = {"topics": "kafka-topics", "configs": "kafka-configs", "offsets": "kafka-get-offsets"}

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


def run_scenario(use_kafka_tools: bool, bootstrap: str, topic: str) -> list[Printed]:
    printed = []
    for command, *args in SCENARIO:
        filled = ["--bootstrap-server", bootstrap, *(a.replace("{topic}", topic) for a in args)]
        if use_kafka_tools:
            done = kafka_jvm.run_tool(TOOLS[command], *filled)
        else:
            done = subprocess.run([*ODRADEK, command, *filled], capture_output=True, text=True, timeout=60)
        normalise = lambda text: re.sub(r"TopicId: \S+", "TopicId: <id>", text.replace(topic, "<topic>").replace(bootstrap, "<bootstrap>"))
        # kafka-topics logs its failures (with a stack trace) through log4j; its own words go to stdout.
        error_line = "" if command == "topics" else done.stderr.split("\n", 1)[0]
        printed.append(Printed(normalise(" ".join([command, *args])), done.returncode, normalise(done.stdout), normalise(error_line)))
    return printed


def both_ways(bootstrap: str) -> tuple[list[Printed], list[Printed]]:
    """Kafka's tools, then odradek's commands, on the same broker (one after the other: the broker defaults
    they change are the cluster's)."""
    name = f"admin-{uuid.uuid4().hex[:8]}"
    return run_scenario(True, bootstrap, f"{name}-k"), run_scenario(False, bootstrap, f"{name}-o")


def test_admin_commands_print_what_kafka_tools_print(odradek, real_kafka):
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(both_ways, [odradek.bootstrap, real_kafka.bootstrap]))
    differences = [(mine, theirs) for kafka_tools, ours in results for theirs, mine in zip(kafka_tools, ours, strict=True) if mine != theirs]
    assert differences == [], "odradek's commands (left) printed differently from Kafka's tools (right)"
    kafka_tools_on_odradek = results[0][0]
    assert kafka_tools_on_odradek[3].stdout.startswith("Topic: <topic>\tTopicId: <id>\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=3600000\n")
    assert kafka_tools_on_odradek[11].stdout == "Default configs for brokers in the cluster are:\n  log.retention.ms=691200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=691200000}\n"
