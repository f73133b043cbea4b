"""odradek's replica placement against Kafka's own ``AdminUtils.assignReplicasToBrokers`` (run from the
kafka-server-common jar with a fixed start index, where Kafka's result is deterministic): rack-unaware and
rack-aware, over broker lists, partition counts, replication factors, start indexes and first partition ids."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import kafka_jvm
import pytest

from odradek.controller.replica_assignment import BrokerMetadata, assign_replicas_to_brokers, rack_alternated_brokers
from odradek.protocol.errors import ErrorCode, KafkaError

KAFKA_ASSIGN = """
import java.util.*;
import org.apache.kafka.admin.AdminUtils;
import org.apache.kafka.admin.BrokerMetadata;

public class Assign {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        StringBuilder out = new StringBuilder("[");
        while (in.hasNextLine()) {
            String line = in.nextLine().trim();
            if (line.isEmpty()) continue;
            // brokers (id:rack or id:-),partitions,rf,startIndex,startPartition
            String[] f = line.split(" ");
            List<BrokerMetadata> brokers = new ArrayList<>();
            for (String b : f[0].split(",")) {
                String[] p = b.split(":");
                brokers.add(new BrokerMetadata(Integer.parseInt(p[0]), p[1].equals("-") ? Optional.empty() : Optional.of(p[1])));
            }
            Map<Integer, List<Integer>> a = AdminUtils.assignReplicasToBrokers(brokers, Integer.parseInt(f[1]), Integer.parseInt(f[2]), Integer.parseInt(f[3]), Integer.parseInt(f[4]));
            if (out.length() > 1) out.append(",");
            out.append("{");
            boolean first = true;
            for (Map.Entry<Integer, List<Integer>> e : new TreeMap<>(a).entrySet()) {
                if (!first) out.append(",");
                first = false;
                out.append("\\"").append(e.getKey()).append("\\":").append(e.getValue().toString());
            }
            out.append("}");
        }
        System.out.println(out.append("]"));
    }
}
"""

RACKS = {0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1", 6: "r1", 7: "r2"}
CASES = [
    (brokers, partitions, rf, start, first_partition)
    for brokers in (
        [BrokerMetadata(b) for b in range(5)],
        [BrokerMetadata(b) for b in (1, 4, 7, 9)],
        [BrokerMetadata(b, RACKS[b]) for b in range(6)],
        [BrokerMetadata(b, RACKS[b]) for b in range(8)],
        [BrokerMetadata(b, "only") for b in range(3)],
    )
    for partitions, rf, start, first_partition in itertools.product((1, 7, 13), (1, 2, 3), (0, 1, 3), (-1, 0, 5))
    if rf <= len(brokers)
]


def describe(brokers: list[BrokerMetadata]) -> str:
    return ",".join(f"{b.broker_id}:{b.rack or '-'}" for b in brokers)


@pytest.fixture(scope="module")
def kafka_assignments(tmp_path_factory: pytest.TempPathFactory) -> list[dict[int, list[int]]]:
    """Kafka's answer for every case, from one JVM."""
    source: Path = tmp_path_factory.mktemp("assign") / "Assign.java"
    source.write_text(KAFKA_ASSIGN)
    lines = "\n".join(f"{describe(brokers)} {p} {rf} {start} {first}" for brokers, p, rf, start, first in CASES)
    try:
        cp = kafka_jvm.classpath()
    except kafka_jvm.JvmUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    done = subprocess.run(["java", *kafka_jvm.TOOL_JVM_FLAGS, "-cp", cp, str(source)], input=lines, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [{int(k): v for k, v in a.items()} for a in json.loads(done.stdout)]


def test_assignment_is_kafkas_for_the_same_start(kafka_assignments: list[dict[int, list[int]]]) -> None:
    ours = [assign_replicas_to_brokers(b, p, rf, start_index=s, start_partition_id=f) for b, p, rf, s, f in CASES]
    assert len(ours) == len(kafka_assignments) > 100
    mismatches = [(case, mine, theirs) for case, mine, theirs in zip(CASES, ours, kafka_assignments) if mine != theirs]
    assert mismatches == []


def test_kafkas_documented_rack_alternation() -> None:
    assert rack_alternated_brokers({0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}) == [0, 3, 1, 5, 4, 2]


def test_random_starts_still_spread_replicas_over_racks() -> None:
    brokers = [BrokerMetadata(b, RACKS[b]) for b in range(6)]
    for _ in range(20):
        for replicas in assign_replicas_to_brokers(brokers, 12, 3).values():
            assert len({RACKS[b] for b in replicas}) == 3 and len(set(replicas)) == 3


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "code", "message"),
    [
        ([BrokerMetadata(0)], 0, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
        ([BrokerMetadata(0)], 1, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."),
        ([BrokerMetadata(0)], 1, 2, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor: 2 larger than available brokers: 1."),
        ([BrokerMetadata(0, "r"), BrokerMetadata(1)], 1, 1, ErrorCode.UNKNOWN_SERVER_ERROR, "Not all brokers have rack information for replica rack aware assignment."),
    ],
)
def test_refusals_carry_kafkas_errors(brokers: list[BrokerMetadata], partitions: int, rf: int, code: ErrorCode, message: str) -> None:
    with pytest.raises(KafkaError) as refused:
        assign_replicas_to_brokers(brokers, partitions, rf)
    assert (refused.value.code, refused.value.message) == (code, message)
