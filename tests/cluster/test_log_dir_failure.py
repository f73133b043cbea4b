"""A broker with two log directories, one of which fills up under load, takes that directory offline and keeps
serving the other; the controller moves the leaderships of the offline replicas -- as Kafka 3.9 does, on
clusters of each kind and with each kind's broker failing under the other kind's controller.

Each broker's ``log.dirs`` is a directory on the ordinary disk and a small tmpfs this module mounts before the
cluster starts and unmounts after it. Under the checker's acks=all load, the tmpfs of broker 2, which leads
every partition (new logs alternate between its directories), is filled: its next write there fails (ENOSPC)
and the directory goes offline (Kafka's ``ReplicaManager.handleLogDirFailure``); the broker writes
``/log_dir_event_notification``, the controller asks it with LeaderAndIsr which replicas it still serves, the
offline ones answer KAFKA_STORAGE_ERROR and the controller elects other leaders and drops them from the ISRs;
the broker answers a write to such a partition KAFKA_STORAGE_ERROR, and ignores a StopReplica of it with
KAFKA_STORAGE_ERROR. The broker stays up, in the ISR of every partition of its other directory; Metadata lists
its replicas on the failed directory as offline (``kafka-topics --describe --under-replicated-partitions``
shows those partitions without it), DescribeLogDirs reports that directory KAFKA_STORAGE_ERROR. Restarted with
space, the broker serves both directories again and rejoins every ISR; the checker finds nothing acknowledged
lost.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path
from typing import Iterator

import kafka_jvm
import pytest
from checker import Workload
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic
from harness import Cluster, running_cluster

from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch
from tests.conftest import Wire
from tests.small_disks import fill, tmpfs

PARTITIONS = 6
DISK_SIZE = "128m"
MOVE_TIMEOUT_S = 45.0
VICTIM = 2
"""The broker whose tmpfs fills: it leads every partition of the topic, and is not the controller (broker 1)."""
LAYOUTS: dict[str, tuple[str, ...]] = {
    "kafka": ("kafka",) * 3,
    "odradek": ("odradek",) * 3,
    "kafka-broker-odradek-controller": ("odradek", "kafka", "kafka"),
    "odradek-broker-kafka-controller": ("kafka", "odradek", "odradek"),
}
"""Each kind alone, and each kind's broker failing under the other kind's controller (broker 1)."""


def disks(root: Path, broker_id: int) -> tuple[Path, Path]:
    """A broker's two log directories: one on the ordinary disk, one on its tmpfs."""
    return root / f"broker-{broker_id}" / "disk", root / f"broker-{broker_id}" / "tmpfs"


@pytest.fixture(scope="module", params=list(LAYOUTS))
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three brokers of the layout's kinds, each with ``log.dirs`` on the disk and on a tmpfs of :data:`DISK_SIZE`."""
    root = tmp_path_factory.mktemp(f"log-dir-failure-{request.param}")
    try:
        with contextlib.ExitStack() as mounted:
            for broker_id in (1, 2, 3):
                disk, on_tmpfs = disks(root, broker_id)
                disk.mkdir(parents=True)
                mounted.enter_context(tmpfs(on_tmpfs, DISK_SIZE))
            settings = {b: {"log.dirs": ",".join(str(d) for d in disks(root, b))} for b in (1, 2, 3)}
            yield mounted.enter_context(running_cluster(root, kinds=LAYOUTS[request.param], broker_settings=settings))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def offline_replicas(bootstrap: str, topic: str) -> dict[int, list[int]]:
    """Each partition's offline replicas in a Metadata v12 answer of the broker at ``bootstrap``."""
    wire = Wire(bootstrap)
    try:
        body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        (found,) = wire.call(ApiKey.Metadata, 12, body).topics
        return {p.partition_index: sorted(p.offline_replicas) for p in found.partitions}
    finally:
        wire.close()


def log_dir_errors(bootstrap: str) -> dict[str, ErrorCode]:
    """Each log directory's error in a DescribeLogDirs v4 answer of the broker at ``bootstrap``."""
    wire = Wire(bootstrap)
    try:
        return {r.log_dir: ErrorCode(r.error_code) for r in wire.call(ApiKey.DescribeLogDirs, 4, {"topics": None}).results}
    finally:
        wire.close()


def described_under_replicated(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """Leader and ISR of each partition ``kafka-topics --describe --under-replicated-partitions`` lists (Kafka
    3.9's tool has no column for offline replicas: the ISR without them is what it shows)."""
    out = kafka_jvm.run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--under-replicated-partitions", "--topic", topic)
    assert out.returncode == 0, out.stderr
    return {int(m[1]): (int(m[2]), sorted(map(int, m[3].split(",")))) for m in re.finditer(r"Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: [\d,]+\s+Isr: ([\d,]+)", out.stdout)}


def produce_error(bootstrap: str, topic: str, partition: int) -> ErrorCode:
    """What a Produce v9 of one record to ``topic``-``partition`` at the broker at ``bootstrap`` answers."""
    wire = Wire(bootstrap)
    try:
        data = [{"name": topic, "partition_data": [{"index": partition, "records": build_batch([Record(value=b"late")])}]}]
        answer = wire.call(ApiKey.Produce, 9, {"acks": -1, "timeout_ms": 5000, "topic_data": data})
        return ErrorCode(answer.responses[0].partition_responses[0].error_code)
    finally:
        wire.close()


def create_led_by_victim(cluster: Cluster, topic: str) -> None:
    """``topic`` with :data:`VICTIM` the preferred (so first) leader of each partition, fully replicated."""
    others = [b for b in cluster.brokers if b != VICTIM]
    assignment = [[VICTIM, *(others if p % 2 else others[::-1])] for p in range(PARTITIONS)]
    futures = cluster.admin().create_topics([NewTopic(topic, PARTITIONS, replica_assignment=assignment)], operation_timeout=30)
    try:
        futures[topic].result(60)
    except KafkaException as exc:
        # librdkafka retries a CreateTopics whose answer came late (a loaded machine), and the retry finds the
        # topic its first attempt made: that topic must then have the assignment asked for.
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    cluster.wait_fully_replicated(topic, partitions=PARTITIONS)
    states = cluster.partitions(topic)
    assert [list(states[p].replicas) for p in range(PARTITIONS)] == assignment, states


def stop_replica_errors(cluster: Cluster, broker_id: int, topic: str, partition: int) -> tuple[ErrorCode, list[ErrorCode]]:
    """The answer to the active controller's StopReplica v4 (no deletion, any epoch) of ``topic``-``partition``
    at ``broker_id``: the request's error and the partition's."""
    header = {"controller_id": cluster.controller(), "controller_epoch": cluster.znode("/controller_epoch"), "broker_epoch": -1}
    stop = {**header, "topic_states": [{"topic_name": topic, "partition_states": [{"partition_index": partition, "leader_epoch": -1, "delete_partition": False}]}]}
    wire = Wire(cluster.brokers[broker_id].bootstrap, f"broker-{header['controller_id']}-controller")
    try:
        answer = wire.call(ApiKey.StopReplica, 4, stop)
        return ErrorCode(answer.error_code), [ErrorCode(p.error_code) for p in answer.partition_errors]
    finally:
        wire.close()


def test_a_full_log_dir_goes_offline_and_its_leaderships_move(cluster: Cluster) -> None:
    topic = "half-filled"
    victim = VICTIM
    create_led_by_victim(cluster, topic)
    dirs = disks(cluster.root, victim)
    cluster.wait_until(lambda: all(any((d / f"{topic}-{p}").is_dir() for d in dirs) for p in range(PARTITIONS)), f"broker {victim}'s logs of {topic}", MOVE_TIMEOUT_S)
    on_tmpfs = {p for p in range(PARTITIONS) if (dirs[1] / f"{topic}-{p}").is_dir()}
    failed, kept = sorted(on_tmpfs), sorted(set(range(PARTITIONS)) - on_tmpfs)
    assert failed and kept, f"broker {victim}'s partitions of {topic} not spread over its two log dirs: {failed} on its tmpfs"
    assert all(cluster.leader_and_isr(topic, p).leader == victim for p in range(PARTITIONS))
    tmpfs = dirs[1]
    with Workload(cluster.bootstrap, topic, PARTITIONS) as workload:
        workload.wait_for_progress()
        filler = fill(tmpfs)

        def moved() -> bool:
            states = cluster.partitions(topic)
            return all(states[p].leader not in (victim, -1) and victim not in states[p].isr for p in failed)

        moved_in = cluster.wait_until(moved, f"broker {victim}'s replicas on its full tmpfs offline", MOVE_TIMEOUT_S)
        workload.wait_for_progress()
        assert cluster.brokers[victim].running(), cluster.brokers[victim].log_tail()
        cluster.wait_until(lambda: all(victim in cluster.partitions(topic)[p].isr for p in kept), f"broker {victim} in the ISRs of its other dir", MOVE_TIMEOUT_S)
        other = next(b for b in cluster.brokers if b != victim)
        expected = {p: [victim] if p in failed else [] for p in range(PARTITIONS)}
        for broker_id in (victim, other):
            bootstrap = cluster.brokers[broker_id].bootstrap
            cluster.wait_until(lambda: offline_replicas(bootstrap, topic) == expected, f"broker {broker_id}'s metadata listing the offline replicas", MOVE_TIMEOUT_S)
        states = cluster.partitions(topic)
        assert described_under_replicated(cluster.bootstrap, topic) == {p: (states[p].leader, sorted(set(states[p].replicas) - {victim})) for p in failed}
        assert produce_error(cluster.brokers[victim].bootstrap, topic, failed[0]) == ErrorCode.KAFKA_STORAGE_ERROR
        assert stop_replica_errors(cluster, victim, topic, failed[0]) == (ErrorCode.NONE, [ErrorCode.KAFKA_STORAGE_ERROR])  # ignored
        errors = log_dir_errors(cluster.brokers[victim].bootstrap)
        assert errors == {str(d): ErrorCode.KAFKA_STORAGE_ERROR if d == tmpfs else ErrorCode.NONE for d in disks(cluster.root, victim)}
        filler.unlink()
        cluster.stop(victim)
        cluster.restart(victim)
        recovered_in = cluster.wait_fully_replicated(topic)
        assert offline_replicas(cluster.brokers[victim].bootstrap, topic) == {p: [] for p in range(PARTITIONS)}
        workload.wait_for_progress()
        report = workload.finish()
    print(f"\nbroker {victim}'s tmpfs filled: partitions {failed} offline there and led elsewhere in {moved_in:.1f}s, {kept} still served;"
          f" restarted with space, {recovered_in:.1f}s to a full ISR\n{report}")
    assert report.ok, str(report)
