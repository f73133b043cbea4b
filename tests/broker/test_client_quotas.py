"""Client quotas: configured with Kafka's ``kafka-configs.sh`` exactly as on a real Kafka 3.9 (same
output for alter, describe and errors), the eight levels of precedence, and Kafka's rate and throttle-time
arithmetic."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from odradek import Broker
from odradek.broker.quotas import PRODUCE, ClientQuotaConfigs, ClientQuotaManager, Rate, sanitize
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch

sys.path.insert(0, str(Path(__file__).parents[1] / "jvm"))
import kafka_jvm  # noqa: E402

SCRIPT = [
    ["--alter", "--entity-type", "clients", "--entity-name", "quota-c1", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048"],
    ["--alter", "--entity-type", "users", "--entity-name", "quota-alice", "--add-config", "request_percentage=12.5"],
    ["--alter", "--entity-type", "users", "--entity-name", "quota-alice", "--entity-type", "clients", "--entity-name", "quota c 1*", "--add-config", "producer_byte_rate=100"],
    ["--alter", "--entity-type", "ips", "--entity-name", "10.9.9.9", "--add-config", "connection_creation_rate=10"],
    ["--describe", "--entity-type", "clients", "--entity-name", "quota-c1"],
    ["--describe", "--entity-type", "users", "--entity-name", "quota-alice"],
    ["--describe", "--entity-type", "users", "--entity-name", "quota-alice", "--entity-type", "clients", "--entity-name", "quota c 1*"],
    ["--describe", "--entity-type", "ips", "--entity-name", "10.9.9.9"],
    ["--alter", "--entity-type", "clients", "--entity-name", "quota-c1", "--delete-config", "producer_byte_rate"],
    ["--describe", "--entity-type", "clients", "--entity-name", "quota-c1"],
    ["--alter", "--entity-type", "clients", "--entity-name", "quota-c1", "--add-config", "producer_byte_rate=1.5"],
    ["--alter", "--entity-type", "clients", "--entity-name", "quota-c1", "--delete-config", "consumer_byte_rate"],
    ["--alter", "--entity-type", "users", "--entity-name", "quota-alice", "--delete-config", "request_percentage"],
    ["--alter", "--entity-type", "users", "--entity-name", "quota-alice", "--entity-type", "clients", "--entity-name", "quota c 1*", "--delete-config", "producer_byte_rate"],
    ["--alter", "--entity-type", "ips", "--entity-name", "10.9.9.9", "--delete-config", "connection_creation_rate"],
    ["--describe", "--entity-type", "clients", "--entity-name", "quota-c1"],
]


def test_kafka_configs_tool_manages_quotas_as_on_kafka(real_kafka, odradek_as_kafka) -> None:
    def run(bootstrap: str, args: list[str]) -> tuple[int, str]:
        result = kafka_jvm.run_tool("kafka-configs", "--bootstrap-server", bootstrap, *args)
        first_error_line = result.stderr.split("\n\tat ")[0].replace(bootstrap, "<bootstrap>")
        return result.returncode, result.stdout + first_error_line

    for args in SCRIPT:
        assert run(odradek_as_kafka.bootstrap, args) == run(real_kafka.bootstrap, args), args


class Configs:
    def __init__(self, configs: dict[str, dict[str, str]]) -> None:
        self.configs = configs

    def entity_configs(self) -> dict[str, dict[str, str]]:
        return self.configs

    def set_entity_config(self, path: str, props: dict[str, str]) -> None:
        self.configs[path] = props


LEVELS = [
    "users/alice/clients/app",
    "users/alice/clients/<default>",
    "users/alice",
    "users/<default>/clients/app",
    "users/<default>/clients/<default>",
    "users/<default>",
    "clients/app",
    "clients/<default>",
]


@pytest.mark.parametrize("level", range(len(LEVELS)), ids=LEVELS)
def test_the_first_level_with_a_quota_applies(level: int) -> None:
    """Every level from ``level`` down is set, each with its own value: the client gets ``level``'s."""
    configs = Configs({path: {PRODUCE: str(1000 + i)} for i, path in enumerate(LEVELS) if i >= level})
    _, bound = ClientQuotaConfigs(configs).quota(PRODUCE, "alice", "app")
    assert bound == 1000 + level


def test_no_quota_no_throttle() -> None:
    manager = ClientQuotaManager(PRODUCE, ClientQuotaConfigs(Configs({})))
    assert manager.record_and_get_throttle_ms("alice", "app", 10**9, 0) == 0


def test_rate_counts_at_least_the_full_windows_but_one() -> None:
    """Kafka's Rate: 11 samples of 1 s; a young sensor divides by 10 s, so 1000 bytes at once are 100 B/s."""
    rate = Rate(11, 1000)
    rate.record(1000, 0)
    assert rate.measure(0) == 100.0
    assert rate.measure(5000) == 100.0
    rate.record(1000, 30_000)  # the first sample expired (11 s), only the new one counts
    assert rate.measure(30_000) == 100.0


def test_throttle_time_is_kafkas_formula() -> None:
    """(rate - bound) / bound * window: 2000 bytes at once against 100 B/s over a 10 s window is 10 s."""
    manager = ClientQuotaManager(PRODUCE, ClientQuotaConfigs(Configs({"clients/app": {PRODUCE: "100"}})))
    assert manager.record_and_get_throttle_ms("alice", "app", 2000, 0) == round((200 - 100) / 100 * 10_000)


def test_entity_names_are_sanitized_as_kafka_does() -> None:
    assert sanitize("c 1*") == "c%201%2A"
    assert sanitize("User:ü/x~") == "User%3A%C3%BC%2Fx%7E"
    assert sanitize(None) == "<default>"


def test_a_quota_throttles_once_set_and_after_a_restart(tmp_path: Path, connect) -> None:
    """The quotas take the metadata's map of quota entities once, at start, and ask it whether any quota is set
    before measuring anything: a quota set at run time must land in that map, and a restarted broker's quotas
    must consult the map it loaded from its state."""

    def produce_throttle_ms(bootstrap: str, client_id: str) -> int:
        batch = build_batch([Record(timestamp=1_700_000_000_000, value=b"x" * 1000)])
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [{"name": "q", "partition_data": [{"index": 0, "records": batch}]}]}
        answer = connect(bootstrap, client_id).call(ApiKey.Produce, 9, body)
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        return int(answer.throttle_time_ms)

    with Broker(log_dir=tmp_path) as broker:  # no quota at its start
        admin = connect(broker.bootstrap)
        topic = {"name": "q", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        assert admin.call(ApiKey.CreateTopics, 7, {"topics": [topic], "timeout_ms": 30000, "validate_only": False}).topics[0].error_code == ErrorCode.NONE
        entry = {"entity": [{"entity_type": "client-id", "entity_name": "slow"}], "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}]}
        assert admin.call(ApiKey.AlterClientQuotas, 1, {"entries": [entry], "validate_only": False}).entries[0].error_code == ErrorCode.NONE
        assert produce_throttle_ms(broker.bootstrap, "slow") > 0
        assert produce_throttle_ms(broker.bootstrap, "unlimited") == 0
    with Broker(log_dir=tmp_path) as broker:
        assert produce_throttle_ms(broker.bootstrap, "slow") > 0
        assert produce_throttle_ms(broker.bootstrap, "unlimited") == 0
