"""Connection limits: ``max.connections.per.ip`` (+ overrides) closes a connection over the limit at once,
``max.connections`` stops accepting until a connection closes; the rules unit-tested, then over sockets."""

from __future__ import annotations

import time

import pytest

from odradek import Broker
from odradek.broker.connection_quotas import ConnectionQuotas, parse_overrides
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
