"""The broker outlives what goes wrong around it: running out of file descriptors, abrupt clients."""

from __future__ import annotations

import resource
import socket
import time

from confluent_kafka.admin import AdminClient

from odradek import Broker
from odradek.protocol.api import ApiKey


def metadata_ok(bootstrap: str) -> bool:
    try:
        return bool(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).brokers)
    except Exception:
        return False


def test_running_out_of_file_descriptors_does_not_stop_the_broker(tmp_path) -> None:
    # A listen queue that holds every connect: with Kafka's 50 the connects beyond it wait out their timeout.
    with Broker(log_dir=tmp_path, subprocess=True, config={"socket.listen.backlog.size": "200"}) as broker:
        soft, hard = resource.prlimit(broker.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(broker.pid, resource.RLIMIT_NOFILE, (64, hard))
        host, port = broker.bootstrap.split(":")
        clients = []
        for _ in range(150):  # far more than the broker may hold open: some accepts fail with EMFILE
            s = socket.socket()
            s.settimeout(5)
            try:
                s.connect((host, int(port)))
            except OSError:
                s.close()
                continue
            clients.append(s)
        deadline = time.time() + 10
        while not any("Failed to accept a connection" in line for line in broker.output) and time.time() < deadline:
            time.sleep(0.05)
        assert any("Too many open files" in line for line in broker.output), "the broker never ran out of descriptors"
        for s in clients:
            s.close()
        resource.prlimit(broker.pid, resource.RLIMIT_NOFILE, (soft, hard))
        deadline = time.time() + 20
        while time.time() < deadline and not metadata_ok(broker.bootstrap):
            time.sleep(0.2)
        assert metadata_ok(broker.bootstrap)


def test_clients_that_vanish_mid_request_leave_others_served(tmp_path, connect) -> None:
    with Broker(log_dir=tmp_path) as broker:
        host, port = broker.bootstrap.split(":")
        for cut in (2, 7, 30):
            s = socket.create_connection((host, int(port)))
            s.sendall(b"\x00\x00\x01\x00" + b"\x00\x03\x00\x0c\x00\x00\x00\x01"[:cut])  # a frame that never completes
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close
            s.close()
        wire = connect(broker.bootstrap)
        assert wire.call(ApiKey.Metadata, 12, {"topics": None}).brokers


def test_idle_connections_are_closed_after_connections_max_idle_ms(tmp_path, connect) -> None:
    with Broker(log_dir=tmp_path, config={"connections.max.idle.ms": "600"}) as broker:
        idle = connect(broker.bootstrap)
        busy = connect(broker.bootstrap)
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert busy.call(ApiKey.ApiVersions, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0
            time.sleep(0.2)
        assert idle.closed_by_peer(timeout=2.0)
        assert busy.call(ApiKey.Metadata, 12, {"topics": None}).brokers  # activity kept it open
