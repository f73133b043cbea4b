"""The Apache Kafka 4.4 harness (tests/jvm/kafka44_jvm.py) does what the tests of Kafka 4.4's APIs rely on: a
KRaft node that serves with Kafka 4.4's features finalized, its tools, the Java client 4.4 producing and
consuming through it, and a three-node KRaft cluster that replicates and stops with its context."""

from __future__ import annotations

import json
import re
import uuid
import zipfile
from pathlib import Path
from typing import Any

import kafka44_jvm
import kafka_jvm

COUNT = 200


def tool(name: str, *args: str) -> str:
    done = kafka44_jvm.run_tool(name, *args)
    assert done.returncode == 0, f"{name} {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    return done.stdout


def probe(java44: kafka44_jvm.JavaPrograms, *args: str) -> dict[str, Any]:
    done = java44.run("Client44Probe", *args, lasting=True)
    assert done.returncode == 0, f"Client44Probe {' '.join(args)} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return {line["step"]: line for line in map(json.loads, done.stdout.splitlines())}


def round_trip(java44: kafka44_jvm.JavaPrograms, bootstrap: str, topic: str, group: str, protocol: str) -> None:
    seen = probe(java44, "roundtrip", bootstrap, topic, str(COUNT), group, protocol)
    acked = {tuple(r) for r in seen["acked"]["records"]}
    consumed = seen["consumed"]["records"]
    assert len(acked) == COUNT
    assert sorted(r[3] for r in consumed) == sorted(f"value-{i}" for i in range(COUNT))  # each once
    assert {(partition, offset) for partition, offset, _, _ in consumed} == acked


def test_every_tool_main_class_is_in_the_jars() -> None:
    classes = set()
    for jar in kafka_jvm.jar_dir("kafka44").glob("*.jar"):
        with zipfile.ZipFile(jar) as z:
            classes.update(name for name in z.namelist() if name.endswith(".class"))
    assert [main for main in kafka44_jvm.TOOLS.values() if main.replace(".", "/") + ".class" not in classes] == []


def test_a_kraft_node_serves_with_kafka_44_features_finalized(real_kafka44) -> None:
    out = tool("kafka-features", "--bootstrap-server", real_kafka44.bootstrap, "describe")
    finalized = dict(re.findall(r"Feature: (\S+).*FinalizedVersionLevel: (\S+)", out))
    assert finalized["transaction.version"] == "2" and finalized["group.version"] == "1" and finalized["share.version"] == "2"
    assert finalized["metadata.version"] == "4.4-IV2"


def test_java_client_44_round_trips_and_the_tools_see_its_group(real_kafka44, java44) -> None:
    topic, group = f"k44-{uuid.uuid4().hex[:8]}", f"k44-group-{uuid.uuid4().hex[:8]}"
    tool("kafka-topics", "--bootstrap-server", real_kafka44.bootstrap, "--create", "--topic", topic, "--partitions", "3")
    round_trip(java44, real_kafka44.bootstrap, topic, group, "consumer")

    described = tool("kafka-consumer-groups", "--bootstrap-server", real_kafka44.bootstrap, "--describe", "--group", group)
    rows = [line.split() for line in described.splitlines() if line.startswith(group)]
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...: every partition committed up to its end.
    assert sorted((r[1], int(r[2]), r[5]) for r in rows) == [(topic, p, "0") for p in range(3)]
    assert all(r[3] == r[4] for r in rows) and sum(int(r[3]) for r in rows) == COUNT

    if real_kafka44.node is not None:  # this process's node: its files are here to read
        segments = real_kafka44.node.log_dir.glob(f"__consumer_offsets-{kafka44_jvm.coordinator_partition(group)}/*.log")
        dumped = tool("kafka-dump-log", "--offsets-decoder", "--files", ",".join(map(str, segments)))
        # KIP-848's records (ConsumerGroupMetadata is type 3) and the committed offsets, as Kafka's decoder prints them.
        assert f'key: {{"type":"3","data":{{"groupId":"{group}"}}}}' in dumped
        assert dumped.count(f'{{"type":"1","data":{{"group":"{group}","topic":"{topic}"') == 3


def test_a_three_node_kraft_cluster_replicates_and_stops(tmp_path: Path, java44) -> None:
    with kafka44_jvm.KRaftCluster(tmp_path) as cluster:
        status = tool("kafka-metadata-quorum", "--bootstrap-server", cluster.bootstrap, "describe", "--status")
        assert re.search(r"CurrentVoters:\s+\[.*\]", status) and status.count('"id": ') >= 3
        topic = f"k44-rf3-{uuid.uuid4().hex[:8]}"
        tool("kafka-topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "3")
        round_trip(java44, cluster.bootstrap, topic, f"k44-classic-{uuid.uuid4().hex[:8]}", "classic")
        described = tool("kafka-topics", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic", topic)
        isrs = re.findall(r"Isr: (\S+)", described)
        assert len(isrs) == 3 and all(sorted(isr.split(",")) == ["1", "2", "3"] for isr in isrs)
    assert all(node.process is not None and node.process.proc.poll() is not None for node in cluster.nodes)
