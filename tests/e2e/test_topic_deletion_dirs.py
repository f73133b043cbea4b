"""A deleted topic's partition folders, as an operator sees them in the log directory: renamed
``<topic>-<partition>.<uuid>-delete`` at once and removed after ``log.segment.delete.delay.ms``, the same
names real Kafka 3.9 leaves."""

from __future__ import annotations

import re
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from odradek import Broker
from tests.polling import wait_for


def _create_and_delete(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    admin.delete_topics([topic])[topic].result(30)


def _folders(log_dir: Path, topic: str) -> list[str]:
    return sorted(p.name for p in log_dir.iterdir() if p.name.startswith(f"{topic}-"))


def _renamed_as_kafka_does(names: list[str], topic: str) -> bool:
    return len(names) == 2 and all(re.fullmatch(rf"{topic}-[01]\.[0-9a-f]{{32}}-delete", n) for n in names) and {n[len(topic) + 1] for n in names} == {"0", "1"}


def test_a_deleted_topics_folders_are_renamed_then_removed_after_the_delay(tmp_path, real_kafka) -> None:
    assert real_kafka.broker is not None, "needs the real Kafka started by this test run, to look at its log directory"
    _create_and_delete(real_kafka.bootstrap, "deleted-dirs")
    wait_for(lambda: _renamed_as_kafka_does(_folders(real_kafka.broker.log_dir, "deleted-dirs"), "deleted-dirs"), what="Kafka renaming the topic's folders")

    with Broker(log_dir=tmp_path, config={"log.segment.delete.delay.ms": "1500"}) as broker:
        _create_and_delete(broker.bootstrap, "deleted-dirs")
        deleted_at = time.monotonic()
        names = _folders(tmp_path, "deleted-dirs")
        assert _renamed_as_kafka_does(names, "deleted-dirs"), names
        wait_for(lambda: not _folders(tmp_path, "deleted-dirs"), 15, "the renamed folders removed")
        assert time.monotonic() - deleted_at >= 1.4
