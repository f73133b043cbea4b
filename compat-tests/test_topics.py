"""Topics: the errors of CreateTopics, DeleteTopics and CreatePartitions, topic names Kafka refuses,
unknown topics and partitions with and without auto-creation, and DescribeConfigs of a new topic."""

from __future__ import annotations

import pytest

from compat_client import Client, Record, TopicSpec
from compat_targets import Target
from compat_observe import unique


def admin_errors(target: Target, client: Client) -> dict:
    topic = unique("admin")
    first = client.create_topics([TopicSpec(topic, partitions=3)])
    client.wait_for_topic(topic, 3)
    absent = unique("absent")
    create = client.create_topics(
        [
            TopicSpec(topic),
            TopicSpec(unique("zero-partitions"), partitions=0),
            TopicSpec(unique("rf-3"), replication_factor=3),
            TopicSpec(unique("rf-0"), replication_factor=0),
            TopicSpec(unique("bad-config"), configs={"cleanup.policy": "sometimes"}),
            TopicSpec(unique("unknown-config"), configs={"no.such.config": "1"}),
        ]
    )
    grow = {
        "fewer": client.create_partitions({topic: 2}),
        "same": client.create_partitions({topic: 3}),
        "unknown_topic": client.create_partitions({absent: 2}),
        "more": client.create_partitions({topic: 5}),
    }
    partitions_after = len(client.wait_for_topic(topic, 5).get("partitions", {}))
    return {
        "first_create": first[topic],
        # in request order, names replaced by what they test
        "create": [create[name] for name in create],
        "create_partitions": {case: result.popitem()[1] for case, result in grow.items()},
        "partitions_after": partitions_after,
        "delete_unknown": client.delete_topics([absent])[absent],
        "delete": client.delete_topics([topic])[topic],
    }


def test_admin_errors(compat):
    compat.check(
        admin_errors,
        {
            "first_create": "NONE",
            "create": ["TOPIC_ALREADY_EXISTS", "INVALID_PARTITIONS", "INVALID_REPLICATION_FACTOR", "INVALID_REPLICATION_FACTOR", "INVALID_CONFIG", "INVALID_CONFIG"],
            "create_partitions": {"fewer": "INVALID_PARTITIONS", "same": "INVALID_PARTITIONS", "unknown_topic": "UNKNOWN_TOPIC_OR_PARTITION", "more": "NONE"},
            "partitions_after": 5,
            "delete_unknown": "UNKNOWN_TOPIC_OR_PARTITION",
            "delete": "NONE",
        },
    )


INVALID_NAMES = ["bad name", "a" * 250, ".", "..", "slash/ed", "ünicode"]


def invalid_topic_names(target: Target, client: Client) -> dict:
    existing = unique("collide") + ".x"
    client.create_topics([TopicSpec(existing)])
    client.wait_for_topic(existing, 1)
    colliding = existing.replace(".", "_")  # '.' and '_' collide in Kafka's metric names
    created = client.create_topics([TopicSpec(name) for name in INVALID_NAMES] + [TopicSpec(colliding)])
    described = client.describe_topics(["bad name", "slash/ed"])
    return {
        "create": [created[name] for name in INVALID_NAMES],
        "create_colliding": created[colliding],
        "metadata": [described[name]["error"] for name in ("bad name", "slash/ed")],
    }


def test_invalid_topic_names(compat):
    compat.check(
        invalid_topic_names,
        {
            "create": ["INVALID_TOPIC_EXCEPTION"] * len(INVALID_NAMES),
            "create_colliding": "INVALID_TOPIC_EXCEPTION",
            "metadata": ["INVALID_TOPIC_EXCEPTION", "INVALID_TOPIC_EXCEPTION"],
        },
    )


def unknown_topics_and_auto_creation(target: Target, client: Client) -> dict:
    """Metadata that may not create topics reports them unknown and leaves them so; a producer, whose
    Metadata may create them, gets one of ``num.partitions`` (1) partitions on first use."""
    not_created = unique("not-created")
    first_look = client.describe_topics([not_created])[not_created]["error"]
    second_look = client.describe_topics([not_created])[not_created]["error"]
    auto = unique("auto-created")
    delivered = client.produce(auto, [Record(b"first")])
    return {
        "without_auto_creation": [first_look, second_look],
        "produce_with_auto_creation": delivered,
        "auto_created_partitions": len(client.wait_for_topic(auto, 1).get("partitions", {})),
    }


def test_unknown_topics_and_auto_creation(compat):
    compat.check(
        unknown_topics_and_auto_creation,
        {
            "without_auto_creation": ["UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_OR_PARTITION"],
            "produce_with_auto_creation": [{"partition": 0, "offset": 0, "error": "NONE"}],
            "auto_created_partitions": 1,
        },
    )


def unknown_partition(target: Target, client: Client) -> dict:
    """Clients check partitions against Metadata before sending; a request that names a partition the
    topic lacks anyway (to its leader) is answered per partition."""
    topic = unique("partitions")
    client.create_topics([TopicSpec(topic, partitions=2)])
    leader = client.wait_for_topic(topic, 2)["partitions"][0]["leader"]
    client.produce(topic, [Record(b"a"), Record(b"b")])
    return {
        "existing_partition": client.delete_records_unrouted(topic, 0, 1, leader),
        "missing_partition": client.delete_records_unrouted(topic, 7, 1, leader),
        "missing_topic": client.delete_records_unrouted(unique("absent"), 0, 1, leader),
    }


def test_unknown_partition(compat):
    compat.check(
        unknown_partition,
        {
            "existing_partition": {"low_watermark": 1},
            "missing_partition": {"error": "UNKNOWN_TOPIC_OR_PARTITION"},
            "missing_topic": {"error": "UNKNOWN_TOPIC_OR_PARTITION"},
        },
    )


# Kafka 3.9's topic configs and their defaults, as DescribeConfigs shows them for a topic created with none
# (source DEFAULT_CONFIG, none read-only or sensitive).
KAFKA_39_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.type": "producer",
    "compression.zstd.level": "3",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": "9223372036854775807",
    "max.message.bytes": "1048588",
    "message.downconversion.enable": "true",
    "message.format.version": "3.0-IV1",
    "message.timestamp.after.max.ms": "9223372036854775807",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.difference.max.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}


def describe_configs(target: Target, client: Client) -> dict:
    plain, tuned = unique("configs"), unique("configs-set")
    client.create_topics([TopicSpec(plain), TopicSpec(tuned, configs={"retention.ms": "3600000", "cleanup.policy": "compact"})])
    client.wait_for_topic(plain, 1)
    client.wait_for_topic(tuned, 1)
    tuned_configs = client.topic_configs(tuned)
    return {
        "new_topic": client.topic_configs(plain),
        "set_at_creation": {key: tuned_configs[key] for key in ("retention.ms", "cleanup.policy", "segment.bytes")},
    }


def _entry(value: str, source: str = "DEFAULT_CONFIG") -> dict:
    return {"value": value, "source": source, "read_only": False, "sensitive": False}


def test_describe_configs(compat):
    compat.check(
        describe_configs,
        {
            "new_topic": {key: _entry(value) for key, value in KAFKA_39_TOPIC_DEFAULTS.items()},
            "set_at_creation": {
                "retention.ms": _entry("3600000", "DYNAMIC_TOPIC_CONFIG"),
                "cleanup.policy": _entry("compact", "DYNAMIC_TOPIC_CONFIG"),
                "segment.bytes": _entry("1073741824"),
            },
        },
    )


def message_format_version_scenario(incremental: bool):
    def message_format_version(target: Target, client: Client) -> dict:
        """The deprecated topic config message.format.version (ignored since 3.0) is still validated as a
        MetadataVersion and kept as given; librdkafka's own tests set it to 0.10.0.0."""
        topic = unique("message-format")
        client.create_topics([TopicSpec(topic)])
        client.wait_for_topic(topic, 1)

        def alter(value: str) -> str:
            return client.alter_topic_configs(topic, {"message.format.version": value}, incremental=incremental)

        return {
            "four_part_version": alter("0.10.0.0"),
            "described": client.topic_configs(topic)["message.format.version"],
            "patch_version": alter("2.8.1"),
            "unstable_version": alter("4.0-IV1"),
            "release_without_production_version": alter("4.0"),
            "not_a_version": alter("bogus"),
        }

    return message_format_version


@pytest.mark.parametrize("incremental", [False, True], ids=["AlterConfigs", "IncrementalAlterConfigs"])
def test_message_format_version(compat, incremental: bool):
    # MetadataVersionValidator: "0.10.0.0" and "2.8.1" match on their first three (0.x) or two parts; any
    # MetadataVersion is accepted, but a release alone names its latest production version and 4.0 has none.
    compat.check(
        message_format_version_scenario(incremental),
        {
            "four_part_version": "NONE",
            "described": _entry("0.10.0.0", "DYNAMIC_TOPIC_CONFIG"),
            "patch_version": "NONE",
            "unstable_version": "NONE",
            "release_without_production_version": "INVALID_CONFIG",
            "not_a_version": "INVALID_CONFIG",
        },
    )


PARTITIONED_KEYS = [b"key-%d" % n for n in range(8)]


def keyed_after_create_partitions(target: Target, client: Client) -> dict:
    """Keys spread by the client's own partitioner over the partition count Metadata reports: all in
    partition 0 of a one-partition topic, then over three once CreatePartitions added two."""
    topic = unique("grow-keys")
    client.create_topics([TopicSpec(topic)])
    client.wait_for_topic(topic, 1)
    keyed = [Record(b"v", key=key, partition=None) for key in PARTITIONED_KEYS]
    before = client.produce(topic, keyed)
    grown = client.create_partitions({topic: 3})[topic]
    client.wait_for_topic(topic, 3)
    after = client.produce(topic, keyed)
    return {
        "before": [[r["partition"], r["error"]] for r in before],
        "create_partitions": grown,
        "after": [[r["partition"], r["error"]] for r in after],
    }


# The partition each client's default partitioner picks for PARTITIONED_KEYS among three partitions:
# librdkafka's consistent_random is CRC-32 of the key modulo the count; kafka-python and aiokafka follow
# the Java client: murmur2 of the key, made positive, modulo the count.
KEYED_PARTITIONS = {
    "confluent-kafka": [0, 2, 0, 2, 1, 0, 2, 2],
    "kafka-python": [1, 0, 2, 2, 0, 2, 2, 1],
    "aiokafka": [1, 0, 2, 2, 0, 2, 2, 1],
}


def test_keyed_after_create_partitions(compat):
    compat.check(
        keyed_after_create_partitions,
        {
            "before": [[0, "NONE"]] * len(PARTITIONED_KEYS),
            "create_partitions": "NONE",
            "after": [[p, "NONE"] for p in KEYED_PARTITIONS[compat.client_name]],
        },
    )
