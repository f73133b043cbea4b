"""``request_percentage``: a client that keeps the broker busier than its share of one thread is told a
throttle time in its answers and its connection is muted for it (KIP-219); another client is not."""

from __future__ import annotations

import time

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode

METADATA = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


def test_a_client_over_its_request_percentage_sees_throttle_time(tmp_path, connect) -> None:
    with Broker(log_dir=tmp_path, config={"quota.window.num": "2", "quota.window.size.seconds": "1"}) as broker:
        admin = connect(broker.bootstrap)
        entry = {"entity": [{"entity_type": "client-id", "entity_name": "busy"}], "ops": [{"key": "request_percentage", "value": 0.5, "remove": False}]}
        assert admin.call(ApiKey.AlterClientQuotas, 1, {"entries": [entry], "validate_only": False}).entries[0].error_code == ErrorCode.NONE
        busy, other = connect(broker.bootstrap, "busy"), connect(broker.bootstrap, "other")
        # 0.5 percent of a thread is 5 ms of handling a second: a few hundred Metadata requests are well over
        deadline, throttle_ms = time.monotonic() + 10, 0
        while throttle_ms == 0 and time.monotonic() < deadline:
            throttle_ms = busy.call(ApiKey.Metadata, 12, METADATA).throttle_time_ms
            assert other.call(ApiKey.Metadata, 12, METADATA).throttle_time_ms == 0
        assert 0 < throttle_ms <= 1000  # at most one quota window
        start = time.monotonic()
        busy.call(ApiKey.ApiVersions, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert time.monotonic() - start >= throttle_ms / 1000 - 0.05  # muted until the throttle time passed
