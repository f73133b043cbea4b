"""The scenarios' operations with confluent-kafka (librdkafka)."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic, OffsetSpec

from compat_client import CONFIG_SOURCES, Client, GroupMember, MemberConfig, Offsets, PartitionReader, PolledMember, ProducerSession, Record, TopicSpec, seen_record, text
from compat_observe import error_name

TIMEOUT_S = 15
ADMIN_REFRESH_MS = 5000
"""How often the admin client re-reads the broker list (librdkafka's ``topic.metadata.refresh.interval.ms``;
default 5 min, and at most every 10 s for a client with no topics of its own).

A ZooKeeper-mode broker that restarts (Kafka's, in the restart scenarios) answers Metadata with no brokers
and controller -1 for the moment between enabling its listener and handling the controller's first
UpdateMetadata; clients that reconnected while it was starting are answered first. librdkafka 2.16 takes
that answer to its post-reconnect Metadata as one to drop without retrying ("No brokers or topics in
metadata: should retry", then nothing) while it keeps the controller id it knew: an admin request then waits
for a broker of that id that it no longer has, until the next periodic broker list refresh -- 5 minutes by
default. librdkafka's open issue 5301 is the same trap with topics in the answer. A user of librdkafka's admin
client restarting a ZooKeeper-mode cluster gets out of it with this setting."""
TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}
# librdkafka's names for the states DescribeGroups reports, back to Kafka's.
GROUP_STATES = {"STABLE": "Stable", "EMPTY": "Empty", "DEAD": "Dead", "PREPARING_REBALANCING": "PreparingRebalance", "COMPLETING_REBALANCING": "CompletingRebalance"}
_API_VERSION_LINE = re.compile(r"ApiKey \S+ \((\d+)\) Versions (\d+)\.\.(\d+)")


def _code(exc: BaseException) -> str:
    """Kafka's name for the broker error inside a confluent-kafka exception."""
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if error is None:
        raise exc
    if error.code() < 0:  # a librdkafka-local error, not one the broker sent
        return f"LOCAL:{error.name()}"
    return error_name(error.code())


def _settle(futures: dict) -> dict[str, str]:
    out = {}
    for key, future in futures.items():
        try:
            future.result(TIMEOUT_S)
            out[key] = "NONE"
        except KafkaException as exc:
            out[key] = _code(exc)
    return out


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


class ConfluentReader(PartitionReader):
    def __init__(self, bootstrap: str, topic: str, partition: int, offset: int, max_wait_ms: int, min_bytes: int, isolation: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "compat-unused",  # required by librdkafka even when no group is joined
                "enable.auto.commit": False,
                "auto.offset.reset": "error",
                "fetch.wait.max.ms": max_wait_ms,
                "fetch.min.bytes": min_bytes,
                "enable.partition.eof": False,
                "isolation.level": isolation,
            }
        )
        self.consumer.assign([TopicPartition(topic, partition, offset)])

    def read(self, count: int, timeout_s: float) -> tuple[list[dict], str | None]:
        records: list[dict] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < count and time.monotonic() < deadline:
            msg = self.consumer.poll(min(0.1, max(0.0, deadline - time.monotonic())))
            if msg is None:
                continue
            if msg.error() is not None:
                error = msg.error()
                # librdkafka reports the broker's OFFSET_OUT_OF_RANGE as _AUTO_OFFSET_RESET when reset is "error"
                if error.code() == KafkaError._AUTO_OFFSET_RESET and "out of range" in error.str().lower():
                    return records, "OFFSET_OUT_OF_RANGE"
                return records, error_name(error.code()) if error.code() >= 0 else f"LOCAL:{error.name()}"
            ts_type, ts = msg.timestamp()
            records.append(seen_record(msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers() or [], TIMESTAMP_TYPES.get(ts_type, "NoTimestampType"), ts))
        return records, None

    def close(self) -> None:
        self.consumer.close()


class ConfluentMember(PolledMember):
    # librdkafka names "none" "error": no committed offset is then an _AUTO_OFFSET_RESET error event
    OFFSET_RESETS = {"earliest": "earliest", "latest": "latest", "none": "error"}

    def __init__(self, bootstrap: str, group: str, topics: list[str], config: MemberConfig) -> None:
        settings = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": config.client_id,
            "partition.assignment.strategy": config.assignor,
            "enable.auto.commit": False,
            "auto.offset.reset": self.OFFSET_RESETS[config.auto_offset_reset],
            "session.timeout.ms": config.session_timeout_ms,
            "heartbeat.interval.ms": 200,
        }
        if config.instance_id is not None:
            settings["group.instance.id"] = config.instance_id
        self.consumer = Consumer(settings)
        self.consumer.subscribe(topics)
        super().__init__()

    def poll_once(self) -> list[tuple[str, int, int, str | None]]:
        msg = self.consumer.poll(self.POLL_S)
        if msg is None:
            return []
        error = msg.error()
        if error is not None:
            self.errors.append(error_name(error.code()) if error.code() >= 0 else f"LOCAL:{error.name()}")
            return []
        return [(msg.topic(), msg.partition(), msg.offset(), text(msg.value()))]

    def current_assignment(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    def commit(self, offsets: Offsets) -> None:
        self.call(lambda: self.consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False))

    def leave(self) -> None:
        self.consumer.close()


class ConfluentProducer(ProducerSession):
    def __init__(self, config: dict) -> None:
        self.producer = Producer(config)

    def send(self, topic: str, records: list[Record]) -> list[dict]:
        reports: list[dict] = [{} for _ in records]

        def report(index: int):
            def on_delivery(err, msg) -> None:
                if err is not None:
                    reports[index] = {"partition": msg.partition(), "offset": -1, "error": error_name(err.code()) if err.code() >= 0 else f"LOCAL:{err.name()}"}
                else:
                    reports[index] = {"partition": msg.partition(), "offset": msg.offset(), "error": "NONE"}

            return on_delivery

        for index, r in enumerate(records):
            kwargs: dict[str, Any] = {"timestamp": r.timestamp_ms} if r.timestamp_ms is not None else {}
            if r.partition is not None:
                kwargs["partition"] = r.partition
            self.producer.produce(topic, value=r.value, key=r.key, headers=list(r.headers) or None, on_delivery=report(index), **kwargs)
        remaining = self.producer.flush(TIMEOUT_S)
        if remaining:
            raise TimeoutError(f"{remaining} records not delivered within {TIMEOUT_S}s")
        return reports

    def close(self) -> None:
        self.producer.flush(TIMEOUT_S)


class ConfluentClient(Client):
    name = "confluent-kafka"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "topic.metadata.refresh.interval.ms": ADMIN_REFRESH_MS})

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """librdkafka shows the ApiVersions answer only in its ``feature`` debug log, so read it there."""
        lines = _Lines()
        logger = logging.getLogger(f"compat.librdkafka.{id(lines)}")
        logger.addHandler(lines)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "debug": "feature", "logger": logger})
        admin.describe_cluster().result(TIMEOUT_S)
        admin.poll(0.2)
        versions: dict[int, tuple[int, int]] = {}
        for line in lines.lines:
            match = _API_VERSION_LINE.search(line)
            if match:
                key, low, high = map(int, match.groups())
                versions[key] = (low, high)
        return versions

    def cluster(self) -> dict:
        md = self.admin.list_topics(timeout=TIMEOUT_S)
        return {
            "cluster_id": md.cluster_id,
            "controller_id": md.controller_id,
            "brokers": {b.id: [b.host, b.port] for b in md.brokers.values()},
        }

    def describe_topics(self, names: list[str]) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for name, future in self.admin.describe_topics(TopicCollection(names)).items():
            try:
                desc = future.result(TIMEOUT_S)
            except KafkaException as exc:
                out[name] = {"error": _code(exc)}
                continue
            out[name] = {
                "error": "NONE",
                "partitions": {
                    p.id: {"leader": p.leader.id, "replicas": [n.id for n in p.replicas], "isr": [n.id for n in p.isr]}
                    for p in desc.partitions
                },
            }
        return out

    def topic_ids(self, names: list[str]) -> dict[str, Any]:
        return {name: str(f.result(TIMEOUT_S).topic_id) for name, f in self.admin.describe_topics(TopicCollection(names)).items()}

    def create_topics(self, specs: list[TopicSpec]) -> dict[str, str]:
        topics = [NewTopic(s.name, s.partitions, s.replication_factor, config=dict(s.configs)) for s in specs]
        return _settle(self.admin.create_topics(topics, operation_timeout=TIMEOUT_S))

    def delete_topics(self, names: list[str]) -> dict[str, str]:
        return _settle(self.admin.delete_topics(names, operation_timeout=TIMEOUT_S))

    def create_partitions(self, counts: dict[str, int]) -> dict[str, str]:
        return _settle(self.admin.create_partitions([NewPartitions(t, n) for t, n in counts.items()], operation_timeout=TIMEOUT_S))

    def topic_configs(self, name: str) -> dict[str, dict]:
        (future,) = self.admin.describe_configs([ConfigResource("topic", name)]).values()
        return {
            key: {"value": e.value, "source": CONFIG_SOURCES[int(e.source)], "read_only": e.is_read_only, "sensitive": e.is_sensitive}
            for key, e in future.result(TIMEOUT_S).items()
        }

    def alter_topic_configs(self, name: str, configs: dict[str, str], *, incremental: bool) -> str:
        if incremental:
            entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
            futures = self.admin.incremental_alter_configs([ConfigResource("topic", name, incremental_configs=entries)])
        else:
            futures = self.admin.alter_configs([ConfigResource("topic", name, set_config=configs)])
        (error,) = _settle(futures).values()
        return error

    def list_offset(self, topic: str, partition: int, spec: str | int) -> dict:
        specs = {"earliest": OffsetSpec.earliest, "latest": OffsetSpec.latest, "max_timestamp": OffsetSpec.max_timestamp}
        offset_spec = specs[spec]() if isinstance(spec, str) else OffsetSpec.for_timestamp(spec)
        (future,) = self.admin.list_offsets({TopicPartition(topic, partition): offset_spec}).values()
        try:
            info = future.result(TIMEOUT_S)
        except KafkaException as exc:
            return {"error": _code(exc)}
        return {"offset": info.offset, "timestamp": info.timestamp}

    def delete_records(self, topic: str, partition: int, before_offset: int) -> dict:
        (future,) = self.admin.delete_records([TopicPartition(topic, partition, before_offset)], operation_timeout=TIMEOUT_S).values()
        try:
            result = future.result(TIMEOUT_S)
        except KafkaException as exc:
            return {"error": _code(exc)}
        return {"low_watermark": result.low_watermark}

    def producer(self, *, compression: str = "none", idempotent: bool = False, bootstrap: str | None = None, create_topic: bool = True) -> ProducerSession:
        return ConfluentProducer(
            {
                "bootstrap.servers": bootstrap or self.bootstrap,
                "compression.type": compression,
                "enable.idempotence": idempotent,
                "acks": "all",
                "linger.ms": 5,
                "allow.auto.create.topics": create_topic,
                "message.timeout.ms": TIMEOUT_S * 1000,
            }
        )

    def reader(self, topic: str, partition: int, offset: int, *, max_wait_ms: int = 500, min_bytes: int = 1, isolation: str = "read_uncommitted") -> PartitionReader:
        return ConfluentReader(self.bootstrap, topic, partition, offset, max_wait_ms, min_bytes, isolation)

    def transactions(self, topic: str, transactional_id: str, transactions: list[tuple[list[Record], bool]]) -> list[str]:
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": transactional_id, "linger.ms": 5, "message.timeout.ms": TIMEOUT_S * 1000})
        producer.init_transactions(TIMEOUT_S)
        outcomes = []
        for records, commit in transactions:
            producer.begin_transaction()
            for r in records:
                producer.produce(topic, value=r.value, key=r.key, partition=r.partition if r.partition is not None else -1)
            try:
                producer.flush(TIMEOUT_S)
                (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT_S)
                outcomes.append("NONE")
            except KafkaException as exc:
                outcomes.append(_code(exc))
        producer.flush(TIMEOUT_S)
        return outcomes

    def group_member(self, group: str, topics: list[str], config: MemberConfig = MemberConfig()) -> GroupMember:
        return ConfluentMember(self.bootstrap, group, topics, config)

    def describe_group(self, group: str) -> dict:
        (future,) = self.admin.describe_consumer_groups([group]).values()
        try:
            desc = future.result(TIMEOUT_S)
        except KafkaException as exc:
            return {"error": _code(exc)}
        return {
            "error": "NONE",
            "state": GROUP_STATES.get(desc.state.name, desc.state.name),
            "protocol_type": "" if desc.is_simple_consumer_group else "consumer",
            "protocol": desc.partition_assignor,
            "members": [
                {"client_id": m.client_id, "client_host": m.host, "assignment": sorted([tp.topic, tp.partition] for tp in m.assignment.topic_partitions)}
                for m in desc.members
            ],
        }

    def group_offsets(self, group: str, partitions: list[tuple[str, int]]) -> dict[str, int]:
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in partitions])
        (future,) = self.admin.list_consumer_group_offsets([request]).values()
        return {f"{tp.topic}:{tp.partition}": max(tp.offset, -1) for tp in future.result(TIMEOUT_S).topic_partitions}  # librdkafka: -1001

    def delete_groups(self, groups: list[str]) -> dict[str, str]:
        return _settle(self.admin.delete_consumer_groups(groups, request_timeout=TIMEOUT_S))
