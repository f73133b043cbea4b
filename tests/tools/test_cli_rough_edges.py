"""The command-line tools as a user runs them: ``odradek --version``, ``odradek perf`` printing what
Kafka's perf tools print (progress every reporting interval, Kafka's rounding) and failing fast with one
line, ``odradek dump-log ... | head`` ending quietly."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from typing import Iterator

import kafka_jvm
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import Broker

ODRADEK = [sys.executable, "-m", "odradek"]

# kafka-producer-perf-test's lines (ProducerPerformance.Stats.printWindow / printTotal).
WINDOW = re.compile(r"\d+ records sent, \d+\.\d records/sec \(\d+\.\d\d MB/sec\), \d+\.\d ms avg latency, \d+\.\d ms max latency\.")
TOTAL = re.compile(
    r"(\d+) records sent, \d+\.\d{6} records/sec \(\d+\.\d\d MB/sec\), \d+\.\d\d ms avg latency, \d+\.\d\d ms max latency, "
    r"\d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\."
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(log_dir=tmp_path_factory.mktemp("cli-tools")) as b:
        yield b


def odradek(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*ODRADEK, *argv], capture_output=True, text=True, timeout=timeout)


def test_version() -> None:
    result = odradek("--version")
    assert result.returncode == 0
    assert re.fullmatch(r"odradek \d+\.\d+\.\d+\S* \(Apache Kafka 3\.9 protocol and log format\)\n", result.stdout)


def test_perf_produce_reports_progress_and_a_total_as_kafkas_tool(broker: Broker) -> None:
    result = odradek("perf", "produce", "--bootstrap-server", broker.bootstrap, "--topic", "perf-progress", "--num-records", "3000", "--throughput", "2000", "--reporting-interval", "400")
    assert result.returncode == 0, result.stderr
    *progress, total = result.stdout.splitlines()
    assert len(progress) >= 2 and all(WINDOW.fullmatch(line) for line in progress), result.stdout
    assert sum(int(line.split()[0]) for line in progress) <= 3000
    match = TOTAL.fullmatch(total)
    assert match and match.group(1) == "3000", total


def test_perf_consume_prints_kafkas_totals(broker: Broker) -> None:
    assert odradek("perf", "produce", "--bootstrap-server", broker.bootstrap, "--topic", "perf-consume", "--num-records", "500", "--json").returncode == 0
    result = odradek("perf", "consume", "--bootstrap-server", broker.bootstrap, "--topic", "perf-consume", "--num-records", "500")
    assert result.returncode == 0, result.stderr
    header, line = result.stdout.splitlines()
    assert header == "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    fields = line.split(", ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", fields[0])
    assert fields[2] == f"{500 * 100 / 1024 / 1024:.4f}" and fields[4] == "500"


def test_kafkas_own_perf_tools_print_lines_of_the_same_form(broker: Broker) -> None:
    """The patterns above are checked against kafka-producer-perf-test's and kafka-consumer-perf-test's own output."""
    produced = kafka_jvm.run_tool("kafka-producer-perf-test", "--topic", "perf-kafka-tools", "--num-records", "1000", "--record-size", "100", "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}")
    assert produced.returncode == 0, produced.stderr
    match = TOTAL.fullmatch(produced.stdout.splitlines()[-1])
    assert match and match.group(1) == "1000", produced.stdout
    consumed = kafka_jvm.run_tool("kafka-consumer-perf-test", "--bootstrap-server", broker.bootstrap, "--topic", "perf-kafka-tools", "--messages", "1000", "--timeout", "30000")
    assert consumed.returncode == 0, consumed.stderr
    header, line = consumed.stdout.splitlines()[-2:]
    ours = odradek("perf", "consume", "--bootstrap-server", broker.bootstrap, "--topic", "perf-kafka-tools", "--num-records", "1000")
    assert ours.returncode == 0, ours.stderr
    our_header, our_line = ours.stdout.splitlines()
    assert our_header == header
    shape = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}, \d+\.\d{4}, \d+\.\d{4}, 1000, \d+\.\d{4}, \d+, \d+, \d+\.\d{4}, \d+\.\d{4}")
    assert shape.fullmatch(line) and shape.fullmatch(our_line), (line, our_line)
    assert line.split(", ")[2] == our_line.split(", ")[2]  # the same MB consumed


def test_perf_consume_on_an_empty_topic_fails_fast_with_one_line(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("perf-empty", 1, 1)])["perf-empty"].result(30)
    started = time.monotonic()
    result = odradek("perf", "consume", "--bootstrap-server", broker.bootstrap, "--topic", "perf-empty", "--num-records", "10", "--timeout", "1000")
    assert time.monotonic() - started < 15
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("WARNING: Exiting before consuming the expected number of messages: timeout (1000 ms) exceeded.")
    assert len(result.stderr.splitlines()) == 1


def test_perf_consume_of_an_unknown_topic_is_one_line(broker: Broker) -> None:
    result = odradek("perf", "consume", "--bootstrap-server", broker.bootstrap, "--topic", "perf-no-such-topic", "--num-records", "10")
    assert result.returncode == 1
    assert result.stderr == "Topic perf-no-such-topic: Broker: Unknown topic or partition\n"


def test_dump_log_into_head_ends_quietly(broker: Broker) -> None:
    assert odradek("perf", "produce", "--bootstrap-server", broker.bootstrap, "--topic", "perf-dump", "--num-records", "20000", "--linger-ms", "0", "--json").returncode == 0
    segment = broker.log_dir / "perf-dump-0" / "00000000000000000000.log"
    dump = subprocess.Popen([*ODRADEK, "dump-log", "--files", str(segment), "--print-data-log"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = subprocess.run(["head", "-n", "2"], stdin=dump.stdout, capture_output=True, text=True, timeout=60)
    assert dump.stdout is not None
    dump.stdout.close()
    _, stderr = dump.communicate(timeout=60)
    assert head.stdout.splitlines() == [f"Dumping {segment}", "Log starting offset: 0"]
    assert stderr == b""
    assert dump.returncode == 141  # as a Unix tool that SIGPIPE ended
