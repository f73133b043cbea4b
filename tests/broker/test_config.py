import logging
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.broker.config import BrokerConfig, read_properties
from odradek.storage.config_types import ConfigError


def test_server_properties_are_read_as_java_properties(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "# Kafka's sample config\n"
        "broker.id=3\n"
        "listeners = PLAINTEXT://127.0.0.1:9093\n"
        "log.dirs: /data/a,\\\n"
        "    /data/b\n"
        "! another comment\n"
        "num.partitions 4\n"
    )
    assert read_properties(props) == {
        "broker.id": "3",
        "listeners": "PLAINTEXT://127.0.0.1:9093",
        "log.dirs": "/data/a,/data/b",
        "num.partitions": "4",
    }
    config = BrokerConfig.load(props, {"num.partitions": "6"})
    assert config.broker_id == 3
    assert config["num.partitions"] == 6  # --override wins over the file
    assert config.log_dirs == [Path("/data/a"), Path("/data/b")]
    assert config.listeners[0].port == 9093


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig({})
    assert config["message.max.bytes"] == 1048588
    assert config["log.segment.bytes"] == 1073741824
    assert config["offsets.topic.num.partitions"] == 50
    assert config["auto.create.topics.enable"] is True
    assert config["socket.request.max.bytes"] == 104857600
    assert config.broker_id == 0
    assert config.listeners[0].host == "127.0.0.1" and config.listeners[0].port == 9092


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("num.partitions", "0", "Value must be at least 1"),
        ("auto.create.topics.enable", "yes", "Invalid value yes for configuration auto.create.topics.enable: Expected value to be either true or false"),
        ("log.segment.bytes", "lots", "Invalid value lots for configuration log.segment.bytes: Not a number of type INT"),
        ("compression.type", "brotli", "String must be one of"),
        ("listeners", "127.0.0.1:9092", "expected NAME://host:port"),
    ],
)
def test_bad_values_fail_with_the_key_named(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig({key: value})


@pytest.mark.parametrize("group", ["consumer", "share"])
@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"group.G.heartbeat.interval.ms": "1000"}, "group.G.heartbeat.interval.ms must be greater than or equal to group.G.min.heartbeat.interval.ms"),
        ({"group.G.heartbeat.interval.ms": "20000"}, "group.G.heartbeat.interval.ms must be less than or equal to group.G.max.heartbeat.interval.ms"),
        ({"group.G.max.heartbeat.interval.ms": "4000"}, "group.G.max.heartbeat.interval.ms must be greater than or equal to group.G.min.heartbeat.interval.ms"),
        ({"group.G.session.timeout.ms": "10000"}, "group.G.session.timeout.ms must be greater than or equal to group.G.min.session.timeout.ms"),
        ({"group.G.session.timeout.ms": "70000"}, "group.G.session.timeout.ms must be less than or equal to group.G.max.session.timeout.ms"),
        ({"group.G.max.session.timeout.ms": "40000"}, "group.G.max.session.timeout.ms must be greater than or equal to group.G.min.session.timeout.ms"),
        (
            {"group.G.min.session.timeout.ms": "1000", "group.G.session.timeout.ms": "4000", "group.G.min.heartbeat.interval.ms": "1000"},
            "group.G.heartbeat.interval.ms must be less than group.G.session.timeout.ms",
        ),
    ],
)
def test_group_timeouts_keep_kafkas_order(group: str, props: dict[str, str], message: str) -> None:
    """Kafka's GroupCoordinatorConfig checks, the same for consumer and share groups (G): the session timeout
    and heartbeat interval within their bounds, the interval shorter than the session (what tests lower, they
    lower together)."""
    with pytest.raises(ConfigError, match=message.replace(".G.", f".{group}.")):
        BrokerConfig({key.replace(".G.", f".{group}."): value for key, value in props.items()})
    lowered = BrokerConfig({f"group.{group}.min.session.timeout.ms": "6000", f"group.{group}.session.timeout.ms": "6000", f"group.{group}.min.heartbeat.interval.ms": "500", f"group.{group}.heartbeat.interval.ms": "500"})
    assert (lowered[f"group.{group}.session.timeout.ms"], lowered[f"group.{group}.heartbeat.interval.ms"], lowered[f"group.{group}.max.heartbeat.interval.ms"]) == (6000, 500, 15000)


def test_unknown_keys_are_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="odradek.config"):
        BrokerConfig({"not.a.kafka.key": "1", "ssl.keystore.location": "/x"})
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "not.a.kafka.key" in warned
    assert "ssl.keystore.location" not in warned


def test_serve_refuses_to_start_with_a_bad_value(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "odradek", "serve", "--override", f"log.dirs={tmp_path}", "--override", "num.partitions=-3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "num.partitions" in result.stderr and "at least 1" in result.stderr


def test_a_broker_whose_zookeeper_cannot_be_reached_does_not_start(tmp_path: Path) -> None:
    """With ``zookeeper.connect`` the broker joins a cluster: no ZooKeeper session within
    zookeeper.connection.timeout.ms stops it with Kafka's message, as Kafka's ZooKeeperClientTimeoutException."""
    import socket

    # Bound and not listening for the whole run: every connect is refused, and no other test's ZooKeeper or
    # broker can take the port meanwhile (one that did would answer, or hold the broker's connect open).
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "odradek", "serve", "--override", f"log.dirs={tmp_path}", "--override", f"zookeeper.connect=127.0.0.1:{port}",
             "--override", "zookeeper.connection.timeout.ms=1000"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert "Timed out waiting for connection while in state: CONNECTING" in result.stdout + result.stderr


def test_a_listener_prefixed_key_is_read_with_its_declared_type() -> None:
    """``listener.name.<l>.<key>`` overrides the broker-wide value for that listener alone, parsed as its key
    declares; asking for another type is a lookup of the wrong key, refused rather than returned."""
    config = BrokerConfig({"listener.name.external.sasl.enabled.mechanisms": "PLAIN, SCRAM-SHA-256", "listener.name.external.max.connection.creation.rate": "7"})
    assert config.list_for_listener("EXTERNAL", "sasl.enabled.mechanisms") == ["PLAIN", "SCRAM-SHA-256"]
    assert config.list_for_listener("INTERNAL", "sasl.enabled.mechanisms") == ["GSSAPI"]
    assert config.int_for_listener("EXTERNAL", "max.connection.creation.rate") == 7
    assert config.str_for_listener("EXTERNAL", "ssl.principal.mapping.rules") == "DEFAULT"
    assert config.list_for_listener("EXTERNAL", "sasl.oauthbearer.expected.audience") == []
    with pytest.raises(TypeError, match="max.connection.creation.rate is not a list key"):
        config.list_for_listener("EXTERNAL", "max.connection.creation.rate")
