"""The tool runner (tests/jvm/tool_runner.py, ToolRunner.java): a Kafka tool run in the long-lived JVM answers
exactly what the tool's own JVM answers, and a call that hangs past its timeout still times out (a test
program's run in a lasting runner, kafka_jvm.JavaPrograms, as well).

What the tools print against a broker is compared with Kafka's by the tests that use them (test_kafka_tools
and others), through the runner; these cover what those do not reach: usage errors, a stack trace with a
cause (whose "... n more" counts the frames it shares with its enclosing trace), and a hung call.
"""

from __future__ import annotations

import subprocess as sp
from types import ModuleType

import kafka44_jvm
import kafka_jvm
import pytest
import tool_runner

CALLS = [
    (kafka_jvm, "kafka-topics", "--version"),
    (kafka_jvm, "kafka-topics", "--bogus"),
    (kafka_jvm, "kafka-configs", "--describe"),
    (kafka_jvm, "kafka-consumer-groups", "--bootstrap-server", "127.0.0.1:1", "--list", "--command-config", "/nonexistent/admin.properties"),
    (kafka_jvm, "kafka-dump-log", "--files", "/nonexistent/00000000000000000000.log"),
    (kafka44_jvm, "kafka-share-groups", "--bootstrap-server", "127.0.0.1:1", "--list", "--command-config", "/nonexistent/admin.properties"),
    (kafka44_jvm, "kafka-features", "--bootstrap-server", "127.0.0.1:1"),
]


@pytest.mark.parametrize("module, tool, args", [(m, t, a) for m, t, *a in CALLS], ids=[f"{m.__name__}-{t}-{i}" for i, (m, t, *_) in enumerate(CALLS)])
def test_a_tool_in_the_runner_answers_what_its_own_jvm_answers(module: ModuleType, tool: str, args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tool_runner.ENV, "1")
    in_runner = module.run_tool(tool, *args)
    monkeypatch.setenv(tool_runner.ENV, "0")
    own_jvm = module.run_tool(tool, *args)
    assert (in_runner.returncode, in_runner.stdout, in_runner.stderr) == (own_jvm.returncode, own_jvm.stdout, own_jvm.stderr)
    assert in_runner.args == own_jvm.args


def test_a_call_that_hangs_times_out_and_the_next_call_gets_a_fresh_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tool_runner.ENV, "1")
    with pytest.raises(sp.TimeoutExpired):
        # A console consumer with no broker to reach and no --timeout-ms waits for ever.
        kafka_jvm.run_tool("kafka-console-consumer", "--bootstrap-server", f"127.0.0.1:{kafka_jvm.free_port()}", "--topic", "t", timeout_s=5)
    done = kafka_jvm.run_tool("kafka-topics", "--version")
    assert (done.returncode, done.stdout.strip()) == (0, "3.9.1")


def test_a_program_run_that_hangs_times_out_and_the_next_run_gets_a_fresh_runner(java44: kafka44_jvm.JavaPrograms, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lasting program run (ShareProbe, as test_share_groups runs it) that outlives its timeout takes its
    runner with it: the next run answers as a JVM of its own does."""
    monkeypatch.setenv(tool_runner.ENV, "1")
    nowhere = f"127.0.0.1:{kafka_jvm.free_port()}"
    with pytest.raises(sp.TimeoutExpired):
        # Share consumers with no broker to reach poll until the run's own deadline, ten minutes away.
        java44.run("ShareProbe", "drain", nowhere, "t", "g", "1", "1", "accept", "600000", timeout_s=5, lasting=True)
    produce = ("ShareProbe", "produce", nowhere, "t", "g", "0", "1", "accept", "1000")
    in_runner = java44.run(*produce, lasting=True)
    own_jvm = java44.run(*produce)
    # (Their standard error: the producer's warnings that it found no broker, at times of their own.)
    assert (in_runner.returncode, in_runner.stdout) == (own_jvm.returncode, own_jvm.stdout) == (0, '{"produced": 0}\n')
