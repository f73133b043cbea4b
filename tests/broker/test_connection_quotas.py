"""Connection limits: ``max.connections.per.ip`` (+ overrides) closes a connection over the limit at once,
``max.connections`` stops accepting until a connection closes; the rules unit-tested, then over sockets."""

from __future__ import annotations

import socket
import time

import pytest

from kafka_jvm import free_port
from odradek import Broker
from odradek.broker.network.connection_quotas import ConnectionQuotas, parse_overrides
from odradek.protocol.api import ApiKey, decode_response, encode_request
from odradek.storage.config_types import ConfigError


def test_per_ip_limit_with_overrides() -> None:
    quotas = ConnectionQuotas(100, 2, {"10.0.0.9": 3})
    assert [quotas.open("10.0.0.1") for _ in range(3)] == [None, None, 2]
    assert [quotas.open("10.0.0.9") for _ in range(4)] == [None, None, None, 3]
    quotas.close("10.0.0.1")
    assert quotas.open("10.0.0.1") is None
    assert quotas.total == 5


def test_broker_limit_spares_the_inter_broker_listener() -> None:
    quotas = ConnectionQuotas(1, 10, inter_broker_listener="INTERNAL", listeners=frozenset({"INTERNAL", "EXTERNAL"}))
    assert quotas.open("10.0.0.1") is None
    assert not quotas.slot_available("EXTERNAL")
    assert quotas.slot_available("INTERNAL")
    quotas.close("10.0.0.1")
    assert quotas.slot_available("EXTERNAL")


def test_overrides_are_host_count_pairs() -> None:
    assert parse_overrides("127.0.0.1:5, ::1:7") == {"127.0.0.1": 5, "::1": 7}
    with pytest.raises(ConfigError):
        parse_overrides("127.0.0.1")


def api_versions(wire) -> int:
    return wire.call(ApiKey.ApiVersions, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code


def test_a_connection_over_the_per_ip_limit_is_closed(tmp_path, connect) -> None:
    with Broker(log_dir=tmp_path, config={"max.connections.per.ip": "2"}) as broker:
        first, second = connect(broker.bootstrap), connect(broker.bootstrap)
        assert api_versions(first) == api_versions(second) == 0
        assert connect(broker.bootstrap).closed_by_peer()
        first.close()
        time.sleep(0.2)
        assert api_versions(connect(broker.bootstrap)) == 0


def test_at_max_connections_a_new_connection_waits_for_a_slot(tmp_path, connect) -> None:
    with Broker(log_dir=tmp_path, config={"max.connections": "2"}) as broker:
        first, second = connect(broker.bootstrap), connect(broker.bootstrap)
        assert api_versions(first) == api_versions(second) == 0
        waiting = connect(broker.bootstrap)  # connected by the kernel, not accepted by the broker yet
        waiting.send(encode_request(ApiKey.ApiVersions, 3, 1, {"client_software_name": "t", "client_software_version": "1"}, client_id="t"))
        waiting.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            waiting.sock.recv(1)
        first.close()
        waiting.sock.settimeout(10)
        assert decode_response(ApiKey.ApiVersions, 3, waiting.read_frame())[1].error_code == 0


CREATION_WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
"""Rates measured over two one-second samples: a burst of about one second's worth, then the rate."""


def served_in(bootstrap: str, connect, count: int) -> float:
    """Seconds until ``count`` connections opened one after another have each been answered."""
    start = time.monotonic()
    for _ in range(count):
        assert api_versions(connect(bootstrap)) == 0
    return time.monotonic() - start


def test_a_listener_accepts_connections_at_its_max_connection_creation_rate(tmp_path, connect) -> None:
    fast, slow = free_port(), free_port()
    config = {
        **CREATION_WINDOWS,
        "listeners": f"PLAINTEXT://127.0.0.1:{fast},SLOW://127.0.0.1:{slow}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SLOW:PLAINTEXT",
        "listener.name.slow.max.connection.creation.rate": "5",
    }
    with Broker(log_dir=tmp_path, config=config):
        unlimited = served_in(f"127.0.0.1:{fast}", connect, 15)
        limited = served_in(f"127.0.0.1:{slow}", connect, 15)
        print(f"15 connections: {unlimited:.2f} s unlimited, {limited:.2f} s at 5 per second")
        assert unlimited < 1.0
        # about five at once, then five a second: the last ones wait two seconds or so
        assert 1.4 <= limited <= 4.0, limited


def test_the_broker_wide_max_connection_creation_rate_set_dynamically(tmp_path, connect) -> None:
    """As ``kafka-configs --alter --entity-type brokers --entity-default --add-config max.connection.creation.rate=5``."""
    with Broker(log_dir=tmp_path, config=CREATION_WINDOWS) as broker:
        body = {"resources": [{"resource_type": 4, "resource_name": "", "configs": [{"name": "max.connection.creation.rate", "value": "5"}]}], "validate_only": False}
        assert connect(broker.bootstrap).call(ApiKey.AlterConfigs, 2, body).responses[0].error_code == 0
        limited = served_in(broker.bootstrap, connect, 15)
        assert 1.4 <= limited <= 4.0, limited


def test_connections_over_an_ips_connection_creation_rate_are_closed_after_the_throttle_time(tmp_path, connect) -> None:
    with Broker(log_dir=tmp_path, config=CREATION_WINDOWS) as broker:
        entry = {"entity": [{"entity_type": "ip", "entity_name": "127.0.0.1"}], "ops": [{"key": "connection_creation_rate", "value": 2.0, "remove": False}]}
        assert connect(broker.bootstrap).call(ApiKey.AlterClientQuotas, 1, {"entries": [entry], "validate_only": False}).entries[0].error_code == 0
        # counted from now: two connections are within two a second, the third is over
        assert api_versions(connect(broker.bootstrap)) == api_versions(connect(broker.bootstrap)) == 0
        over = connect(broker.bootstrap)
        over.send(encode_request(ApiKey.ApiVersions, 3, 1, {"client_software_name": "t", "client_software_version": "1"}, client_id="t"))
        start = time.monotonic()
        assert over.closed_by_peer(timeout=3.0)
        assert time.monotonic() - start >= 0.2  # closed once its throttle time (about half a second) passed
        # another address is not limited
        with socket.create_connection(tuple_of(broker.bootstrap), source_address=("127.0.0.2", 0), timeout=5) as other:
            other.sendall(encode_request(ApiKey.ApiVersions, 3, 1, {"client_software_name": "t", "client_software_version": "1"}, client_id="t"))
            assert len(other.recv(4)) == 4


def tuple_of(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)
