"""ShareFetch answers carry the log's batches as stored, sent from the segment file with sendfile as a Fetch
answer's records are (issue 24): what a share consumer receives is byte for byte what the log holds, cut at
batch boundaries around what it acquired, as Kafka 4.4's ``ShareFetchUtils.maybeSliceFetchRecords`` cuts
it; on a plaintext listener the broker process sends it with ``sendfile`` (seen with strace), over TLS it
reads and encrypts it (no ``sendfile``), and the bytes are the same."""

from __future__ import annotations

import signal
import ssl
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from kafka_jvm import free_port

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch
from tests.certificates import Pki, make_pki
from tests.conftest import Wire

GROUP = 32
"""ConfigResource.Type.GROUP."""
BIG = 40_000
"""Bytes of the large batch: above what the socket layer copies instead of sendfile (16 KiB)."""


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def ports() -> dict[str, int]:
    return {"PLAINTEXT": free_port(), "SSL": free_port()}


@pytest.fixture(scope="module")
def broker(pki: Pki, ports: dict[str, int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    config = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.keystore("broker")),
        "offsets.topic.num.partitions": "1",
        "share.coordinator.state.topic.num.partitions": "1",
    }
    with Broker(log_dir=tmp_path_factory.mktemp("share-sendfile"), subprocess=True, config=config) as b:
        yield b


def tls_wire(pki: Pki, port: int) -> Wire:
    wire = Wire(f"127.0.0.1:{port}")
    context = ssl.create_default_context(cafile=str(pki.ca))
    wire.sock = context.wrap_socket(wire.sock, server_hostname="localhost")
    return wire


class Sendfiles:
    """strace attached to the broker process's threads, counting the bytes its ``sendfile`` calls sent."""

    def __init__(self, pid: int, out: Path) -> None:
        self.out = out
        self.proc = subprocess.Popen(["strace", "-f", "-e", "trace=sendfile", "-o", str(out), "-p", str(pid)], stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()  # "strace: Process N attached" once it holds the threads
        assert "attached" in line, line
        time.sleep(0.5)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)  # strace detaches and leaves the broker running
        self.proc.wait(10)
        sent = 0
        for line in self.out.read_text().splitlines():
            if "sendfile(" in line and "= " in line:
                result = line.rsplit("= ", 1)[1].split()[0]
                sent += max(0, int(result))
        return sent


def share_fetch(wire: Wire, group: str, member: str, epoch: int, topic_id: uuid.UUID, max_records: int) -> Any:
    body = {
        "group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": 5000, "min_bytes": 1,
        "max_bytes": 10_000_000, "max_records": max_records, "batch_size": max_records,
        "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}], "forgotten_topics_data": [],
    }
    response = wire.call(ApiKey.ShareFetch, 1, body)
    assert response.error_code == ErrorCode.NONE, response
    (topic,) = response.responses
    (partition,) = topic.partitions
    assert partition.error_code == ErrorCode.NONE, partition
    return partition


@pytest.mark.parametrize("listener", ["PLAINTEXT", "SSL"])
def test_share_fetch_sends_the_stored_batches_with_sendfile_and_over_tls(broker: Broker, ports: dict[str, int], pki: Pki, listener: str, tmp_path: Path) -> None:
    """A small batch (offsets 0-2) then one of 40 kB (3-6): one member acquiring a single record gets the
    first batch alone, the second member the large one alone, each exactly as stored in the segment file;
    the large one leaves the broker by ``sendfile`` on the plaintext listener, by reads over TLS."""
    b = broker
    admin = Wire(f"127.0.0.1:{ports['PLAINTEXT']}")
    topic, group = f"share-sendfile-{listener.lower()}", f"g-sendfile-{listener.lower()}"
    try:
        created = admin.call(ApiKey.CreateTopics, 7, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 10000})
        assert created.topics[0].error_code == ErrorCode.NONE
        topic_id = created.topics[0].topic_id
        configs = [{"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]
        (altered,) = admin.call(ApiKey.IncrementalAlterConfigs, 1, {"resources": [{"resource_type": GROUP, "resource_name": group, "configs": configs}], "validate_only": False}).responses
        assert altered.error_code == ErrorCode.NONE
        for batch in (build_batch([Record(value=b"small-%d" % i) for i in range(3)]), build_batch([Record(value=bytes([65 + i]) * (BIG // 4)) for i in range(4)])):
            body = {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
            assert admin.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0].error_code == ErrorCode.NONE
    finally:
        admin.close()
    stored = (Path(b.log_dir) / f"{topic}-0" / "00000000000000000000.log").read_bytes()
    assert len(stored) > BIG

    port = ports[listener]
    first, second = (Wire(f"127.0.0.1:{port}") if listener == "PLAINTEXT" else tls_wire(pki, port) for _ in range(2))
    try:
        small = share_fetch(first, group, "member-a", 0, topic_id, max_records=1)
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in small.acquired_records] == [(0, 2, 1)]
        head = bytes(small.records)
        assert stored.startswith(head) and len(head) < 1000

        watching = Sendfiles(b.pid, tmp_path / "strace.out")
        try:
            large = share_fetch(second, group, "member-b", 0, topic_id, max_records=500)
        finally:
            sent = watching.stop()
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in large.acquired_records] == [(3, 6, 1)]
        assert bytes(large.records) == stored[len(head) :]
        assert sent == (len(stored) - len(head) if listener == "PLAINTEXT" else 0)
    finally:
        first.close()
        second.close()
