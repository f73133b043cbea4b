"""Share groups (KIP-932, queues for Kafka) with Kafka 4.4's own ``KafkaShareConsumer`` against odradek:
every record delivered and accepted once, two consumers sharing one partition, RELEASE and an expired
acquisition lock redelivering with a higher delivery count, the delivery-count limit archiving, and the
share-partition state surviving a broker restart -- each against odradek and against Apache Kafka 4.4
(one KRaft node, tests/jvm/kafka44_jvm.py) with the same settings, and both must behave alike.

The client is driven by tests/e2e/java44/ShareProbe.java, compiled against the Kafka 4.4 jars
(``make jvm-deps``); it prints each delivery as a JSON line and the tests judge them. A share group
starts at the latest offset (``share.auto.offset.reset``'s default), so the probe first produces warm-up
records until one is delivered, then the records the test counts.
"""

from __future__ import annotations

import collections
import contextlib
import json
import subprocess
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import kafka44_jvm
import kafka_jvm
import pytest

from tests.polling import wait_for
from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import iter_batch_positions
from odradek.protocol.records import Record, build_batch, iter_records

PROBE_TIMEOUT_S = 120
ACKNOWLEDGED, ARCHIVED = 2, 4
"""State batches' delivery states (ShareSnapshotValue's)."""
GROUP = 32
"""ConfigResource.Type.GROUP."""
SET, APPEND = 0, 2
DEFAULT_CONFIG, DYNAMIC_GROUP_CONFIG = 5, 8
"""DescribeConfigs' config sources."""
LOCK_MS = 2000
LIMIT = 2

Probe = Callable[..., list[dict[str, Any]]]


SETTINGS = {
    "offsets.topic.num.partitions": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.delivery.count.limit": str(LIMIT),
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
}
"""Both brokers: one partition for each coordinator topic, a 2 s acquisition lock, the least delivery-count limit,
and members heartbeating every second rather than every 5 s: Kafka 4.4 hands a joining member its partitions
in the answer to a later heartbeat, so each consumer that joins waits one interval for them."""


@dataclass
class ShareBroker:
    """odradek or Kafka 4.4, as the tests use them: an address, a restart, and where ``__share_group_state`` is."""

    name: str
    bootstrap: str
    restart: Callable[[], None]
    log_dir: Path
    output: collections.deque[str]
    """The broker's latest log lines (e2e's conftest shows them when a test fails; Kafka's go to its server.log)."""


@contextlib.contextmanager
def share_broker(kind: str, root: Path, settings: dict[str, str]) -> Iterator[ShareBroker]:
    """odradek (a subprocess) or one Kafka 4.4 KRaft node, with ``settings``."""
    if kind == "odradek":
        b = Broker(log_dir=root, subprocess=True, config=settings).start()

        def restart_odradek() -> None:
            b.restart()

        try:
            yield ShareBroker("odradek", b.bootstrap, restart_odradek, root, b.output)
        finally:
            b.stop()
        return
    node = kafka44_jvm.KRaftNode(root, 1, kafka44_jvm.new_cluster_id(), kafka_jvm.free_port(), kafka_jvm.free_port(), settings={**kafka44_jvm.SINGLE_NODE_SETTINGS, **settings})
    node.start()

    def restart_kafka() -> None:
        node.stop()
        node.start()

    try:
        yield ShareBroker("kafka-4.4", node.bootstrap, restart_kafka, node.log_dir, collections.deque(maxlen=1))
    finally:
        node.stop()


@pytest.fixture(scope="module", params=["odradek", "kafka-4.4"])
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShareBroker]:
    with share_broker(request.param, tmp_path_factory.mktemp(f"share-{request.param}"), SETTINGS) as b:
        yield b


@pytest.fixture(scope="module", params=["odradek", "kafka-4.4"])
def long_lock_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShareBroker]:
    """A broker whose acquisition locks last a minute (Kafka's most): what comes back sooner was released."""
    settings = {**SETTINGS, "group.share.record.lock.duration.ms": "60000"}
    with share_broker(request.param, tmp_path_factory.mktemp(f"share-long-{request.param}"), settings) as b:
        yield b


@pytest.fixture(scope="module")
def probe(java44: kafka44_jvm.JavaPrograms) -> Probe:
    """``probe(mode, bootstrap, topic, group, count, consumers, policy, timeout_ms)``: ShareProbe's JSON lines
    (ShareProbe is among the java44 programs, compiled once). Each run but hold's is a call to the test
    process's lasting runner JVM (a JVM start is most of a short run's CPU); hold halts the JVM it runs in,
    a consumer that vanishes with records it never acknowledged, so it gets a JVM of its own."""

    def run(mode: str, bootstrap: str, topic: str, group: str, count: int, consumers: int = 1, policy: str = "accept", timeout_ms: int = 60000) -> list[dict[str, Any]]:
        args = (mode, bootstrap, topic, group, str(count), str(consumers), policy, str(timeout_ms))
        done = java44.run("ShareProbe", *args, timeout_s=PROBE_TIMEOUT_S, lasting=mode != "hold")
        assert done.returncode == 0, f"ShareProbe {mode} exited {done.returncode}:\n{done.stderr[-4000:]}"
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    return run


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def deliveries(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if "value" in line]


def test_a_share_consumer_receives_and_accepts_every_record_once(broker: ShareBroker, probe: Probe) -> None:
    create_topic(broker.bootstrap, "share-once")
    lines = probe("consume", broker.bootstrap, "share-once", "g-once", 100)
    got = deliveries(lines)
    assert sorted(d["value"] for d in got) == sorted(f"r-{i}" for i in range(100))
    assert {d["dc"] for d in got} == {1} and {d["ack"] for d in got} == {"ACCEPT"}
    offsets = [d["offset"] for d in got]
    assert offsets == sorted(offsets)
    assert lines[-1]["accepted"] == 100


def test_two_consumers_share_one_partition(broker: ShareBroker, probe: Probe) -> None:
    create_topic(broker.bootstrap, "share-two")
    got = deliveries(probe("consume", broker.bootstrap, "share-two", "g-two", 1000, consumers=2))
    assert Counter(d["value"] for d in got) == Counter(f"r-{i}" for i in range(1000)), "every record delivered exactly once"
    per_consumer = Counter(d["c"] for d in got)
    assert set(per_consumer) == {0, 1}, f"both consumers received records of the one partition: {per_consumer}"


def test_released_records_are_delivered_again_with_a_higher_delivery_count(broker: ShareBroker, probe: Probe) -> None:
    create_topic(broker.bootstrap, "share-release")
    got = deliveries(probe("consume", broker.bootstrap, "share-release", "g-release", 30, policy="release-once"))
    by_value: dict[str, list[tuple[int, str]]] = {}
    for d in got:
        by_value.setdefault(d["value"], []).append((d["dc"], d["ack"]))
    assert sorted(by_value) == sorted(f"r-{i}" for i in range(30))
    assert all(v == [(1, "RELEASE"), (2, "ACCEPT")] for v in by_value.values()), by_value


def test_the_delivery_count_limit_archives_records(broker: ShareBroker, probe: Probe) -> None:
    """Released at every delivery, a record is delivered group.share.delivery.count.limit times, then never."""
    create_topic(broker.bootstrap, "share-limit")
    got = deliveries(probe("consume", broker.bootstrap, "share-limit", "g-limit", 20, policy="release-always"))
    counts = Counter(d["value"] for d in got)
    assert counts == Counter({f"r-{i}": LIMIT for i in range(20)})
    assert sorted({d["dc"] for d in got}) == list(range(1, LIMIT + 1))


def test_an_expired_lock_redelivers_to_another_consumer(broker: ShareBroker, probe: Probe) -> None:
    """A consumer that dies holding records: once the acquisition lock expires another consumer gets them."""
    create_topic(broker.bootstrap, "share-lock")
    held = deliveries(probe("hold", broker.bootstrap, "share-lock", "g-lock", 10))
    assert sorted(d["value"] for d in held) == sorted(f"r-{i}" for i in range(10))
    got = deliveries(probe("drain", broker.bootstrap, "share-lock", "g-lock", 10, timeout_ms=30000))
    assert sorted(d["value"] for d in got) == sorted(f"r-{i}" for i in range(10))
    assert {d["dc"] for d in got} == {2}


def test_share_partition_state_survives_a_restart(broker: ShareBroker, probe: Probe) -> None:
    """What was accepted before a restart is not delivered again; what came after is, once."""
    create_topic(broker.bootstrap, "share-restart")
    assert len(deliveries(probe("consume", broker.bootstrap, "share-restart", "g-restart", 20))) == 20
    probe("produce", broker.bootstrap, "share-restart", "g-restart", 15)
    broker.restart()
    got = deliveries(probe("drain", broker.bootstrap, "share-restart", "g-restart", 15, timeout_ms=30000))
    assert sorted(d["value"] for d in got) == sorted(f"p-{i}" for i in range(15))
    assert {d["dc"] for d in got} == {1}
    # Kafka 4.4's own kafka-dump-log reads the state each broker wrote: every offset up to the last record is
    # done -- before the start offset, or in an acknowledged state batch after it (Kafka persists a batch's
    # acknowledgement before it moves the start offset past it).
    segment = next((broker.log_dir / "__share_group_state-0").glob("*.log"))
    dumped = kafka44_jvm.run_tool("kafka-dump-log", "--share-group-state-decoder", "--print-data-log", "--files", str(segment))
    assert dumped.returncode == 0, dumped.stderr
    payloads = [json.loads(line.split(" payload: ", 1)[1]) for line in dumped.stdout.splitlines() if '"groupId":"g-restart"' in line]
    assert payloads
    last = payloads[-1]["data"]
    done_through = last["startOffset"] - 1
    for batch in sorted(last["stateBatches"], key=lambda b: b["firstOffset"]):
        if batch["firstOffset"] <= done_through + 1 and batch["deliveryState"] in (ACKNOWLEDGED, ARCHIVED):
            done_through = max(done_through, batch["lastOffset"])
    assert done_through == max(d["offset"] for d in got)


def test_kafka_share_groups_lists_and_describes_start_offsets_and_lag(broker: ShareBroker, probe: Probe) -> None:
    """``kafka-share-groups.sh --describe``: each partition's start offset and the records not yet delivered;
    ``--list`` lists the group, which ``kafka-consumer-groups.sh --list`` does not (ListGroups v5's types)."""
    create_topic(broker.bootstrap, "share-describe")
    accepted = deliveries(probe("consume", broker.bootstrap, "share-describe", "g-describe", 20))
    probe("produce", broker.bootstrap, "share-describe", "g-describe", 7)
    described = kafka44_jvm.run_tool("kafka-share-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", "g-describe")
    assert described.returncode == 0, described.stderr
    rows = [line.split() for line in described.stdout.splitlines() if line.startswith("g-describe")]
    assert [(group, topic, partition, lag) for group, topic, partition, _, lag in rows] == [("g-describe", "share-describe", "0", "7")]
    # The start offset as persisted trails acknowledged records by one write, on Kafka as here (the lag leaves them out).
    assert int(rows[0][3]) <= max(d["offset"] for d in accepted) + 1
    listed = kafka44_jvm.run_tool("kafka-share-groups", "--bootstrap-server", broker.bootstrap, "--list")
    assert listed.returncode == 0 and "g-describe" in listed.stdout.split(), listed.stderr
    consumer_groups = kafka44_jvm.run_tool("kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, "--list")
    assert consumer_groups.returncode == 0 and "g-describe" not in consumer_groups.stdout.split(), consumer_groups.stdout


def test_a_killed_consumers_records_come_back_when_its_connection_closes(long_lock_broker: ShareBroker, probe: Probe) -> None:
    """A consumer that dies holding records: its connection closes, its share session ends and another
    consumer gets the records long before their one-minute locks would expire."""
    broker = long_lock_broker
    create_topic(broker.bootstrap, "share-killed")
    held = deliveries(probe("hold", broker.bootstrap, "share-killed", "g-killed", 10))
    assert sorted(d["value"] for d in held) == sorted(f"r-{i}" for i in range(10))
    got = deliveries(probe("drain", broker.bootstrap, "share-killed", "g-killed", 10, timeout_ms=30000))
    assert sorted(d["value"] for d in got) == sorted(f"r-{i}" for i in range(10))
    assert {d["dc"] for d in got} == {2}


def test_kafka_share_groups_deletes_an_empty_group(broker: ShareBroker, probe: Probe) -> None:
    """``kafka-share-groups.sh --delete`` of a group whose consumers closed: it is no longer listed, and a
    consumer of that group then starts afresh (at the latest offset), not where the old group was."""
    create_topic(broker.bootstrap, "share-delete")
    assert len(deliveries(probe("consume", broker.bootstrap, "share-delete", "g-delete", 5))) == 5
    probe("produce", broker.bootstrap, "share-delete", "g-delete", 4)  # never consumed by the deleted group
    deleted = kafka44_jvm.run_tool("kafka-share-groups", "--bootstrap-server", broker.bootstrap, "--delete", "--group", "g-delete")
    assert deleted.returncode == 0 and "successful" in deleted.stdout, deleted.stdout + deleted.stderr
    listed = kafka44_jvm.run_tool("kafka-share-groups", "--bootstrap-server", broker.bootstrap, "--list")
    assert "g-delete" not in listed.stdout.split()
    got = deliveries(probe("consume", broker.bootstrap, "share-delete", "g-delete", 5))
    assert sorted(d["value"] for d in got) == sorted(f"r-{i}" for i in range(5)), "the p-* records stayed behind"


def configs_tool(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Kafka 4.4's ``kafka-configs.sh --entity-type groups``."""
    return kafka44_jvm.run_tool("kafka-configs", "--bootstrap-server", bootstrap, "--entity-type", "groups", *args)


def test_a_group_config_starts_a_new_share_group_at_the_earliest_offset_and_survives_a_restart(broker: ShareBroker, probe: Probe) -> None:
    """``kafka-configs.sh --alter --add-config share.auto.offset.reset=earliest`` before the group's first
    consumer: it is delivered the records produced before it came (the default, latest, would skip them).
    The config is described as Kafka 4.4 describes it, and kept across a restart."""
    create_topic(broker.bootstrap, "share-earliest")
    probe("produce", broker.bootstrap, "share-earliest", "g-earliest", 6)
    altered = configs_tool(broker.bootstrap, "--alter", "--entity-name", "g-earliest", "--add-config", "share.auto.offset.reset=earliest")
    assert altered.returncode == 0 and altered.stdout.strip() == "Completed updating config for group g-earliest.", altered.stdout + altered.stderr
    got = deliveries(probe("drain", broker.bootstrap, "share-earliest", "g-earliest", 6, timeout_ms=30000))
    assert sorted(d["value"] for d in got) == sorted(f"p-{i}" for i in range(6))
    assert {d["dc"] for d in got} == {1}
    expected = [
        "Dynamic configs for group g-earliest are:",
        "  share.auto.offset.reset=earliest sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.auto.offset.reset=earliest, DEFAULT_CONFIG:share.auto.offset.reset=latest}",
    ]
    assert configs_tool(broker.bootstrap, "--describe", "--entity-name", "g-earliest").stdout.splitlines() == expected
    every = configs_tool(broker.bootstrap, "--describe", "--entity-name", "g-earliest", "--all").stdout.splitlines()
    assert len(every) == 22, every  # the heading and Kafka 4.4's 21 group keys that are not internal
    # A broker key set in server.properties is the group key's value until the group sets its own.
    assert "  share.record.lock.duration.ms=2000 sensitive=false synonyms={STATIC_BROKER_CONFIG:group.share.record.lock.duration.ms=2000, DEFAULT_CONFIG:group.share.record.lock.duration.ms=30000}" in every
    assert "  share.isolation.level=read_uncommitted sensitive=false synonyms={DEFAULT_CONFIG:share.isolation.level=read_uncommitted}" in every
    broker.restart()
    assert configs_tool(broker.bootstrap, "--describe", "--entity-name", "g-earliest").stdout.splitlines() == expected


def test_a_groups_delivery_count_limit_overrides_the_brokers(broker: ShareBroker, probe: Probe) -> None:
    """``share.delivery.count.limit`` 3 for one group, the broker's being 2: a record released at every
    delivery is delivered three times before it is archived; a refusal of a value outside the broker's
    bounds, or of a key Kafka does not know, is Kafka's."""
    altered = configs_tool(broker.bootstrap, "--alter", "--entity-name", "g-limit3", "--add-config", "share.delivery.count.limit=3")
    assert altered.returncode == 0, altered.stdout + altered.stderr
    create_topic(broker.bootstrap, "share-limit3")
    got = deliveries(probe("consume", broker.bootstrap, "share-limit3", "g-limit3", 10, policy="release-always"))
    assert Counter(d["value"] for d in got) == Counter({f"r-{i}": 3 for i in range(10)})
    refused = configs_tool(broker.bootstrap, "--alter", "--entity-name", "g-limit3", "--add-config", "share.delivery.count.limit=11")
    assert refused.returncode == 1
    assert "InvalidConfigurationException: share.delivery.count.limit must be in the range 2 to 10 inclusive." in refused.stdout + refused.stderr
    unknown = configs_tool(broker.bootstrap, "--alter", "--entity-name", "g-limit3", "--add-config", "share.nothing=1")
    assert unknown.returncode == 1 and "InvalidConfigurationException: Unknown group config name: share.nothing" in unknown.stdout + unknown.stderr


def test_group_config_requests_are_answered_as_kafka_answers_them(broker: ShareBroker, connect: Callable[..., Any]) -> None:
    """What no tool sends: APPEND (Kafka 4.4's controller knows no group key's type, so refuses it even for a
    LIST key), the empty group name, a negative ``by_duration``, validate-only, the legacy AlterConfigs."""
    wire = connect(broker.bootstrap)

    def alter(name: str, *configs: tuple[str, int, str | None], validate_only: bool = False) -> tuple[int, str | None]:
        resources = [{"resource_type": GROUP, "resource_name": name, "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in configs]}]
        (answer,) = wire.call(ApiKey.IncrementalAlterConfigs, 1, {"resources": resources, "validate_only": validate_only}).responses
        return answer.error_code, answer.error_message

    def described(name: str, key: str) -> tuple[int, str | None, list[tuple[str | None, int]]]:
        resources = [{"resource_type": GROUP, "resource_name": name, "configuration_keys": [key]}]
        (result,) = wire.call(ApiKey.DescribeConfigs, 4, {"resources": resources, "include_synonyms": True, "include_documentation": False}).results
        if result.error_code:
            return result.error_code, result.error_message, []
        (config,) = result.configs
        return config.config_source, config.value, [(s.value, s.source) for s in config.synonyms]

    assert alter("g-wire", ("streams.rack.aware.assignment.tags", APPEND, "a")) == (ErrorCode.INVALID_CONFIG, "Can't APPEND to key streams.rack.aware.assignment.tags because its type is not LIST.")
    assert alter("", ("share.auto.offset.reset", SET, "earliest")) == (ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    assert alter("g-wire", ("share.auto.offset.reset", SET, "by_duration:-PT1H")) == (
        ErrorCode.INVALID_CONFIG,
        "Invalid value by_duration:-PT1H for configuration share.auto.offset.reset: Invalid value `by_duration:-PT1H` for configuration "
        "share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
    )
    assert alter("g-wire", ("share.partition.max.record.locks", SET, "50")) == (
        ErrorCode.INVALID_CONFIG, "Invalid value 50 for configuration share.partition.max.record.locks: Value must be at least 100",
    )
    assert alter("g-wire", ("share.auto.offset.reset", SET, "by_duration:PT1H"), validate_only=True) == (ErrorCode.NONE, None)
    assert described("g-wire", "share.auto.offset.reset") == (DEFAULT_CONFIG, "latest", [("latest", DEFAULT_CONFIG)])
    assert described("", "share.auto.offset.reset") == (ErrorCode.INVALID_REQUEST, "Group name must not be empty", [])
    legacy = [{"resource_type": GROUP, "resource_name": "g-wire", "configs": [{"name": "share.isolation.level", "value": "read_committed"}]}]
    (answer,) = wire.call(ApiKey.AlterConfigs, 2, {"resources": legacy, "validate_only": False}).responses
    assert answer.error_code == ErrorCode.NONE
    assert described("g-wire", "share.isolation.level") == (DYNAMIC_GROUP_CONFIG, "read_committed", [("read_committed", DYNAMIC_GROUP_CONFIG), ("read_uncommitted", DEFAULT_CONFIG)])


def test_kafka_share_groups_resets_and_deletes_offsets(broker: ShareBroker, probe: Probe) -> None:
    """``kafka-share-groups.sh --reset-offsets --to-offset`` (AlterShareGroupOffsets) of an empty group: its
    next consumer is delivered again what followed that offset; ``--delete-offsets`` (DeleteShareGroupOffsets)
    forgets the topic's state. Both print what Kafka 4.4 prints."""
    create_topic(broker.bootstrap, "share-reset")
    got = deliveries(probe("consume", broker.bootstrap, "share-reset", "g-reset", 8))
    offset = {d["value"]: d["offset"] for d in got}["r-2"]
    reset = kafka44_jvm.run_tool("kafka-share-groups", "--bootstrap-server", broker.bootstrap, "--reset-offsets", "--group", "g-reset", "--topic", "share-reset", "--to-offset", str(offset), "--execute")
    assert reset.returncode == 0, reset.stderr
    assert [line.split() for line in reset.stdout.splitlines() if line] == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["g-reset", "share-reset", "0", str(offset)]]
    again = deliveries(probe("drain", broker.bootstrap, "share-reset", "g-reset", 6, timeout_ms=30000))
    assert sorted(d["value"] for d in again) == sorted(f"r-{i}" for i in range(2, 8)) and {d["dc"] for d in again} == {1}
    deleted = kafka44_jvm.run_tool("kafka-share-groups", "--bootstrap-server", broker.bootstrap, "--delete-offsets", "--group", "g-reset", "--topic", "share-reset", "--topic", "share-none")
    assert deleted.returncode == 0, deleted.stderr
    rows = [line.split(None, 1) for line in deleted.stdout.splitlines() if line]
    assert rows[0] == ["TOPIC", "STATUS"]  # then a row per topic, in the order of the tool's hash map
    assert sorted(rows[1:]) == [["share-none", "Error: This server does not host this topic-partition."], ["share-reset", "Successful"]]
    described = kafka44_jvm.run_tool("kafka-share-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", "g-reset")
    assert described.stdout.strip() == "Share group 'g-reset' has no offset information.", described.stdout


def test_share_group_offsets_refusals_are_kafkas(broker: ShareBroker, connect: Callable[..., Any]) -> None:
    """DeleteShareGroupOffsets of a group never seen, either API without a group id, a partition that does
    not exist; AlterShareGroupOffsets makes a group it does not know, as Kafka 4.4 does."""
    wire = connect(broker.bootstrap)
    create_topic(broker.bootstrap, "share-refusals")
    gone = wire.call(ApiKey.DeleteShareGroupOffsets, 0, {"group_id": "g-never", "topics": [{"topic_name": "share-refusals"}]})
    assert (gone.error_code, gone.error_message, gone.responses) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group g-never not found.", [])
    nameless = wire.call(ApiKey.AlterShareGroupOffsets, 0, {"group_id": "", "topics": []})
    assert (nameless.error_code, nameless.error_message) == (ErrorCode.INVALID_GROUP_ID, "The group id is invalid.")
    partitions = [{"partition_index": 0, "start_offset": 0}, {"partition_index": 7, "start_offset": 0}]

    def alter() -> Any:
        return wire.call(ApiKey.AlterShareGroupOffsets, 0, {"group_id": "g-made", "topics": [{"topic_name": "share-refusals", "partitions": partitions}]})

    # Kafka's broker learns of the new topic from the metadata log a moment after CreateTopics answers.
    altered = wait_for(lambda: (a := alter()).responses[0].partitions[0].error_code == ErrorCode.NONE and a, timeout_s=10, what="the new topic known")
    assert altered.error_code == ErrorCode.NONE
    assert [(p.partition_index, p.error_code, p.error_message) for p in altered.responses[0].partitions] == [
        (0, ErrorCode.NONE, None), (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
    ]
    listed = kafka44_jvm.run_tool("kafka-share-groups", "--bootstrap-server", broker.bootstrap, "--list")
    assert "g-made" in listed.stdout.split()


def test_kafka_features_describes_share_version_as_on_kafka_44(broker: ShareBroker) -> None:
    """``share.version`` supported 0-2 and finalized at 2, as a fresh Kafka 4.4 cluster has it."""
    done = kafka44_jvm.run_tool("kafka-features", "--bootstrap-server", broker.bootstrap, "describe")
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("Feature: share.version")]
    assert line.split("Epoch:")[0].split() == "Feature: share.version SupportedMinVersion: 0 SupportedMaxVersion: 2 FinalizedVersionLevel: 2".split()


def test_kafka_configs_lists_the_groups_that_have_configs(broker: ShareBroker) -> None:
    """``kafka-configs.sh --describe --entity-type groups`` without a name: ListConfigResources v1 names the
    groups that have configs, each then described."""
    altered = configs_tool(broker.bootstrap, "--alter", "--entity-name", "g-listed", "--add-config", "share.isolation.level=read_committed")
    assert altered.returncode == 0, altered.stdout + altered.stderr
    listed = configs_tool(broker.bootstrap, "--describe")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    at = lines.index("Dynamic configs for group g-listed are:")
    assert lines[at + 1] == "  share.isolation.level=read_committed sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.isolation.level=read_committed, DEFAULT_CONFIG:share.isolation.level=read_uncommitted}"
    assert "Dynamic configs for group g-never-configured are:" not in lines


def topic_id_of(wire: Any, topic: str) -> Any:
    (found,) = wire.call(ApiKey.Metadata, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}).topics
    return found.topic_id


def test_share_state_rpcs_answer_as_kafkas(broker: ShareBroker, probe: Probe, connect: Callable[..., Any]) -> None:
    """The share-state RPCs a share-partition leader sends the share coordinator, sent as a client would:
    ReadShareGroupStateSummary and ReadShareGroupState of a consumed partition (every record up to the
    high watermark done: before the start offset or counted complete after it), of one never consumed,
    the leader-epoch fence, an unknown topic, a negative partition and a nameless group -- each answered
    as Kafka 4.4 answers it."""
    create_topic(broker.bootstrap, "share-state-rpcs")
    got = deliveries(probe("consume", broker.bootstrap, "share-state-rpcs", "g-state-rpcs", 20))
    assert len(got) == 20
    wire = connect(broker.bootstrap)
    topic_id = topic_id_of(wire, "share-state-rpcs")
    (listed,) = wire.call(ApiKey.ListOffsets, 9, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "share-state-rpcs", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}).topics
    end = listed.partitions[0].offset

    def call(api: ApiKey, version: int, group: str, partition: dict[str, Any], topic: Any = topic_id) -> Any:
        answer = wire.call(api, version, {"group_id": group, "topics": [{"topic_id": topic, "partitions": [partition]}]})
        (result,) = answer.results
        (p,) = result.partitions
        assert result.topic_id == topic
        return p

    summary = call(ApiKey.ReadShareGroupStateSummary, 1, "g-state-rpcs", {"partition": 0, "leader_epoch": 0})
    # The state epoch differs: Kafka's group coordinator initializes the state at the group's epoch,
    # odradek's share partition at 0 (docs/protocol.md).
    assert (summary.error_code, summary.error_message, summary.leader_epoch) == (ErrorCode.NONE, None, 0)
    assert summary.start_offset + summary.delivery_complete_count == end, (summary, end)
    read = call(ApiKey.ReadShareGroupState, 0, "g-state-rpcs", {"partition": 0, "leader_epoch": 0})
    assert (read.error_code, read.state_epoch, read.start_offset) == (ErrorCode.NONE, summary.state_epoch, summary.start_offset)
    assert all(b.delivery_state in (ACKNOWLEDGED, ARCHIVED) and b.delivery_count == 1 for b in read.state_batches)
    assert sum(b.last_offset - b.first_offset + 1 for b in read.state_batches) == summary.delivery_complete_count
    never = call(ApiKey.ReadShareGroupStateSummary, 1, "g-state-never", {"partition": 0, "leader_epoch": 0})
    assert (never.error_code, never.state_epoch, never.start_offset, never.delivery_complete_count) == (ErrorCode.NONE, 0, -1, -1), never
    never_read = call(ApiKey.ReadShareGroupState, 0, "g-state-never", {"partition": 0, "leader_epoch": 0})
    assert (never_read.error_code, never_read.error_message) == (ErrorCode.INVALID_REQUEST, "Read operation on uninitialized share partition not allowed.")
    # A leader of a later epoch read: the one before it is fenced, for reads and writes alike.
    assert call(ApiKey.ReadShareGroupState, 0, "g-state-rpcs", {"partition": 0, "leader_epoch": 5}).error_code == ErrorCode.NONE
    stale = call(ApiKey.ReadShareGroupState, 0, "g-state-rpcs", {"partition": 0, "leader_epoch": 4})
    assert (stale.error_code, stale.error_message) == (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_LEADER_EPOCH.message)
    write = {"partition": 0, "state_epoch": summary.state_epoch, "leader_epoch": 4, "start_offset": -1, "delivery_complete_count": -1, "state_batches": []}
    assert call(ApiKey.WriteShareGroupState, 1, "g-state-rpcs", write).error_code == ErrorCode.FENCED_LEADER_EPOCH
    unknown = call(ApiKey.ReadShareGroupStateSummary, 1, "g-state-rpcs", {"partition": 0, "leader_epoch": 0}, topic=uuid.uuid4())
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message)
    negative = call(ApiKey.ReadShareGroupState, 0, "g-state-rpcs", {"partition": -1, "leader_epoch": 0})
    assert negative.error_code == ErrorCode.INVALID_REQUEST
    assert wire.call(ApiKey.ReadShareGroupState, 0, {"group_id": "", "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": 0}]}]}).results == []


def test_a_share_fetch_from_a_member_id_the_group_never_saw_is_served(broker: ShareBroker, connect: Callable[..., Any]) -> None:
    """ShareFetch does not check its member id against the group: once the group's state exists (a member
    heartbeated), a member id the group coordinator never saw acquires records too, on Kafka 4.4 as on
    odradek. (Where no member ever heartbeated, Kafka 4.4 answers the partition UNKNOWN_SERVER_ERROR and
    odradek NONE with no records: docs/protocol.md.)"""
    topic, group = "share-stranger", "g-stranger"
    create_topic(broker.bootstrap, topic)
    wire = connect(broker.bootstrap)
    topic_id = wait_for(lambda: topic_id_of(wire, topic), timeout_s=10, what=f"{topic}'s id")
    wait_for(lambda: wire.call(ApiKey.FindCoordinator, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0].error_code == ErrorCode.NONE, timeout_s=30, what="a group coordinator")
    heartbeat = {"group_id": group, "member_id": uuid.uuid4().hex[:22], "member_epoch": 0, "rack_id": None, "subscribed_topic_names": [topic]}
    wait_for(lambda: (a := wire.call(ApiKey.ShareGroupHeartbeat, 1, heartbeat)).error_code == ErrorCode.NONE and a.assignment and a.assignment.topic_partitions, timeout_s=30, what="the member's assignment")

    def share_fetch(member_id: str) -> Any:
        body = {"group_id": group, "member_id": member_id, "share_session_epoch": 0, "max_wait_ms": 2000, "min_bytes": 1, "max_bytes": 1 << 20,
                "max_records": 10, "batch_size": 10, "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}],
                "forgotten_topics_data": []}
        return wire.call(ApiKey.ShareFetch, 1, body)

    share_fetch(heartbeat["member_id"])  # the share partition starts at the latest offset: before the record
    produced = wire.call(ApiKey.Produce, 9, {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": build_batch([Record(value=b"to anyone")])}]}]})
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    answer = share_fetch(uuid.uuid4().hex[:22])
    (partition,) = answer.responses[0].partitions
    assert (answer.error_code, partition.error_code, [(a.first_offset, a.last_offset) for a in partition.acquired_records]) == (ErrorCode.NONE, ErrorCode.NONE, [(0, 0)])
    assert [r.value for pos, _, _ in iter_batch_positions(partition.records) for r in iter_records(partition.records, pos)] == [b"to anyone"]
