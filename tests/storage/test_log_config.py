"""The topic config table: Kafka 3.9's keys, defaults, broker fallbacks and validation."""

from __future__ import annotations

import pytest

from odradek.storage.config_types import ConfigError, ConfigType
from odradek.storage.log_config import TOPIC_CONFIG, TOPIC_CONFIG_BY_NAME, LogConfig

KAFKA_39_TOPIC_KEYS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type", "compression.zstd.level",
    "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.format.version", "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes",
    "segment.index.bytes", "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
    "message.downconversion.enable",
}


def test_the_table_has_every_kafka_39_topic_key():
    assert set(TOPIC_CONFIG_BY_NAME) == KAFKA_39_TOPIC_KEYS
    assert all(key.doc for key in TOPIC_CONFIG_BY_NAME.values())


def test_the_log_config_attributes_follow_the_table():
    """Checked here rather than at every import (docs/performance.md, "Start-up")."""
    annotated = [name for name in LogConfig.__annotations__ if name not in ("overrides", "broker_defaults", *LogConfig._DERIVED)]
    assert annotated == [key.attribute for key in TOPIC_CONFIG]


def test_defaults_are_kafkas():
    config = LogConfig.from_props({}, {})
    assert (config.segment_bytes, config.segment_ms, config.retention_ms, config.retention_bytes) == (1073741824, 604800000, 604800000, -1)
    assert (config.index_interval_bytes, config.segment_index_bytes, config.max_message_bytes) == (4096, 10485760, 1048588)
    assert (config.flush_messages, config.flush_ms) == (2**63 - 1, 2**63 - 1)
    assert config.cleanup_policy == ["delete"] and config.message_timestamp_type == "CreateTime"
    assert TOPIC_CONFIG_BY_NAME["retention.ms"].type is ConfigType.LONG
    assert TOPIC_CONFIG_BY_NAME["cleanup.policy"].type is ConfigType.LIST


def test_topic_overrides_beat_broker_synonyms_which_beat_defaults():
    broker = {"log.retention.hours": "2", "log.segment.bytes": "5000", "log.roll.ms": "777", "log.roll.hours": "1"}
    config = LogConfig.from_props({"segment.bytes": "6000"}, broker)
    assert (config.segment_bytes, config.retention_ms, config.segment_ms) == (6000, 7_200_000, 777)


def test_retention_falls_back_from_ms_to_minutes_to_hours():
    assert LogConfig.from_props({}, {"log.retention.minutes": "3", "log.retention.hours": "1"}).retention_ms == 180_000
    assert LogConfig.from_props({}, {"log.retention.ms": "-5"}).retention_ms == -1
    assert LogConfig.from_props({}, {"log.flush.scheduler.interval.ms": "3000"}).flush_ms == 3000


@pytest.mark.parametrize(
    "overrides",
    [
        {"segment.bytes": "13"},
        {"segment.bytes": "abc"},
        {"cleanup.policy": "delete,forever"},
        {"message.timestamp.type": "Whenever"},
        {"min.cleanable.dirty.ratio": "1.5"},
        {"compression.gzip.level": "0"},
        {"compression.type": "brotli"},
        {"retention.ms": "-2"},
        {"follower.replication.throttled.replicas": "1:2,x"},
        {"preallocate": "maybe"},
        {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
        {"no.such.config": "1"},
    ],
)
def test_invalid_values_are_rejected(overrides):
    with pytest.raises(ConfigError):
        LogConfig.from_props(overrides, {})


def test_valid_special_values_are_accepted():
    config = LogConfig.from_props(
        {"compression.gzip.level": "-1", "follower.replication.throttled.replicas": "*", "leader.replication.throttled.replicas": "0:1, 1:2", "cleanup.policy": "compact,delete"},
        {},
    )
    assert config.leader_replication_throttled_replicas == ["0:1", "1:2"] and config.compact and config.delete


def test_deprecated_timestamp_difference_applies_until_the_new_keys_are_set():
    config = LogConfig.from_props({"message.timestamp.difference.max.ms": "1000"}, {})
    assert (config.effective_timestamp_before_max_ms, config.effective_timestamp_after_max_ms) == (1000, 1000)
    config = LogConfig.from_props({"message.timestamp.difference.max.ms": "1000", "message.timestamp.after.max.ms": "50"}, {})
    assert (config.effective_timestamp_before_max_ms, config.effective_timestamp_after_max_ms) == (1000, 50)
