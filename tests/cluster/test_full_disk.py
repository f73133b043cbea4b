"""A broker whose only log directory fills up under load halts, its leaderships move, and restarted with space
it recovers a valid log and catches up -- as Kafka 3.9 does.

Each broker's log directory is a small tmpfs this module mounts before the cluster starts and unmounts after
it. Under the checker's acks=all load, the disk of the leader of partition 0 is filled: its next write fails
(ENOSPC), Kafka's ``LogDirFailureChannel`` takes the directory offline, and with no log directory left the
broker halts (``Shutdown broker because all log dirs ... have failed``, exit status 1) without a controlled
shutdown. Its ZooKeeper session expires, the controller elects another leader from the ISR, and writes are
acknowledged again on every partition. The filler is removed, the broker restarted: it recovers its log
(torn writes cut off), rejoins every ISR, and after a clean stop its log directory holds, up to its
checkpointed high watermark, exactly the surviving log. The checker finds nothing acknowledged lost.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
from pathlib import Path
from typing import Iterator

import pytest
from checker import Report, ViolationKind, Workload
from harness import Cluster, running_cluster
from tests.small_disks import fill, tmpfs

from odradek.tools.log_dir_reader import read_segment, scan_log_dirs

PARTITIONS = 3
DISK_SIZE = "64m"
LOG_DIR_NAMES = {"kafka": "kafka-logs", "odradek": "logs"}
"""Where each kind's broker keeps its log directory under its root (kafka_jvm.KafkaBroker.log_dir, and the
harness's odradek broker properties)."""
HALT_TIMEOUT_S = 60.0


def log_dir(root: Path, kind: str, broker_id: int) -> Path:
    return root / f"broker-{broker_id}" / LOG_DIR_NAMES[kind]


def kafka_wrote_a_run_twice(report: Report) -> bool:
    """What real Kafka 3.9.1 was seen to do once in CI (odradek's run allows none of it): its brokers answered
    UNKNOWN_SERVER_ERROR to writes while its disk filled (182 of them), and one partition held a run of
    five numbers twice, the second copy right after the first (529-533 at offsets 529-533 and 534-538),
    with no write lost. The checker counts the second copy as duplicated and its first number as
    reordered. Only that is let through, and only for Kafka: nothing acknowledged lost, no phantom read,
    no fatal producer error, each partition's duplicates one contiguous run right after its first copy,
    and one reordering per run (its first number). Written down in docs/replication.md."""
    if report.producer_fatal is not None or not report.delivery_errors.get("UNKNOWN"):
        return False
    if any(v.kind not in (ViolationKind.DUPLICATE, ViolationKind.REORDERED, ViolationKind.NO_OFFSET) for v in report.violations):
        return False
    duplicates = [v for v in report.violations if v.kind is ViolationKind.DUPLICATE]
    runs = {(v.partition, v.offset - v.number) for v in duplicates}
    one_run_each = len(runs) == len({v.partition for v in duplicates})
    right_after = all(shift == sum(1 for v in duplicates if v.partition == partition) for partition, shift in runs)
    return bool(duplicates) and one_run_each and right_after and report.count(ViolationKind.REORDERED) == len(runs)


@pytest.fixture(scope="module")
def cluster(broker_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The three brokers of ``broker_kind``, each with its log directory on a tmpfs of :data:`DISK_SIZE`."""
    root = tmp_path_factory.mktemp(f"full-disk-{broker_kind}")
    try:
        with contextlib.ExitStack() as disks:
            for broker_id in (1, 2, 3):
                disks.enter_context(tmpfs(log_dir(root, broker_kind, broker_id), DISK_SIZE))
            yield disks.enter_context(running_cluster(root, broker_kind))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def records_on_disk(disk: Path, topic: str) -> dict[int, list[tuple[int, int]]]:
    """(offset, number) of each partition of ``topic`` in a stopped broker's log directory, up to its
    checkpointed high watermark; a CRC-invalid batch in a rolled segment raises."""
    out: dict[int, list[tuple[int, int]]] = {}
    for (name, partition), found in scan_log_dirs([disk]).items():
        if name != topic:
            continue
        records: list[tuple[int, int]] = []
        bases = found.segment_base_offsets
        for i, base in enumerate(bases):
            active = i == len(bases) - 1
            records.extend((r[0], int(r[4])) for r in read_segment(found.segment_path(base), found.log_start_offset, found.high_watermark, active=active) if r[4] is not None)
        out[partition] = records
    return out


def test_a_full_log_dir_halts_the_broker_and_its_leadership_moves(cluster: Cluster, broker_kind: str) -> None:
    topic = "filled"
    cluster.create_topic(topic, PARTITIONS)
    with Workload(cluster.bootstrap, topic, PARTITIONS) as workload:
        workload.wait_for_progress()
        before = cluster.leader_and_isr(topic, 0)
        victim = cluster.brokers[before.leader]
        disk = log_dir(cluster.root, broker_kind, before.leader)
        filler = fill(disk)
        halted_in = cluster.wait_until(lambda: not victim.running(), f"broker {before.leader} halting on its full log dir", HALT_TIMEOUT_S)
        log_tail = victim.log_tail()
        assert "Shutdown broker because all log dirs in" in log_tail, log_tail
        moved_in = cluster.wait_for_leader_change(topic, 0, before)
        workload.wait_for_progress()
        filler.unlink()
        cluster.restart(before.leader)
        recovered_in = cluster.wait_fully_replicated(topic) + workload.wait_for_progress()
        report = workload.finish()
    surviving = workload.read_surviving(60)
    cluster.signal(before.leader, signal.SIGTERM)
    cluster.wait_until(lambda: not victim.running(), f"broker {before.leader} stopping", 60)
    on_disk = records_on_disk(disk, topic)
    print(f"\nbroker {before.leader}'s disk filled: halted in {halted_in:.1f}s, partition 0 led by broker {moved_in.leader}; restarted, {recovered_in:.1f}s to a full ISR and writes\n{report}")
    assert report.ok or (broker_kind == "kafka" and kafka_wrote_a_run_twice(report)), str(report)
    assert on_disk == surviving
