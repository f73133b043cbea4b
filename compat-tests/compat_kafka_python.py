"""The scenarios' operations with kafka-python."""

from __future__ import annotations

import re
import time
from typing import Any

import kafka.errors as Errors
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from compat_client import Client, GroupMember, MemberConfig, Offsets, PartitionReader, PolledMember, ProducerSession, Record, TopicSpec, seen_record, text
from compat_observe import error_name

TIMEOUT_S = 15
ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
OFFSET_SPECS = {"earliest": OffsetSpec.EARLIEST, "latest": OffsetSpec.LATEST, "max_timestamp": OffsetSpec.MAX_TIMESTAMP}


def _code(exc: Exception) -> str:
    """Kafka's name for a kafka-python broker error (its classes carry Kafka's code as ``errno``)."""
    errno = getattr(exc, "errno", None)
    if isinstance(exc, Errors.BrokerResponseError) and errno is not None:
        return error_name(errno)
    raise exc


class KafkaPythonReader(PartitionReader):
    def __init__(self, bootstrap: str, topic: str, partition: int, offset: int, max_wait_ms: int, min_bytes: int, isolation: str) -> None:
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="none",
            fetch_max_wait_ms=max_wait_ms,
            fetch_min_bytes=min_bytes,
            isolation_level=isolation,
        )
        self.tp = TopicPartition(topic, partition)
        self.consumer.assign([self.tp])
        self.consumer.seek(self.tp, offset)

    def read(self, count: int, timeout_s: float) -> tuple[list[dict], str | None]:
        records: list[dict] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < count and time.monotonic() < deadline:
            try:
                batch = self.consumer.poll(timeout_ms=100, max_records=count - len(records))
            except Errors.OffsetOutOfRangeError:
                return records, "OFFSET_OUT_OF_RANGE"
            except Errors.BrokerResponseError as exc:
                return records, _code(exc)
            for msgs in batch.values():
                for m in msgs:
                    records.append(seen_record(m.partition, m.offset, m.key, m.value, m.headers, TIMESTAMP_TYPES[m.timestamp_type], m.timestamp))
        return records, None

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonMember(PolledMember):
    # kafka-python 3.0.12 can stall for good when a poll times out while its SyncGroup is in flight (its
    # coordinator logs "timeout in ensure_active_group; returning early" and never heartbeats again), so
    # each poll is given long enough for a join to complete; it returns as soon as records arrive.
    POLL_S = 0.5

    def __init__(self, bootstrap: str, group: str, topics: list[str], config: MemberConfig) -> None:
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=config.client_id,
            group_instance_id=config.instance_id,
            partition_assignment_strategy=[ASSIGNORS[config.assignor]],
            enable_auto_commit=False,
            auto_offset_reset=config.auto_offset_reset,
            session_timeout_ms=config.session_timeout_ms,
            heartbeat_interval_ms=200,
        )
        # kafka-python joins without waiting for the subscribed topics' metadata, and a leader that lacks it
        # assigns those topics to no one until a later metadata refresh; users load it first.
        for topic in topics:
            self.consumer.partitions_for_topic(topic)
        self.consumer.subscribe(topics)
        super().__init__()

    def poll_once(self) -> list[tuple[str, int, int, str | None]]:
        batch = self.consumer.poll(timeout_ms=int(self.POLL_S * 1000))
        return [(m.topic, m.partition, m.offset, text(m.value)) for msgs in batch.values() for m in msgs]

    def current_assignment(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    def commit(self, offsets: Offsets) -> None:
        from kafka import OffsetAndMetadata

        self.call(lambda: self.consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}))

    def leave(self) -> None:
        self.consumer.close()


class KafkaPythonProducer(ProducerSession):
    def __init__(self, producer: KafkaProducer) -> None:
        self.producer = producer

    def send(self, topic: str, records: list[Record]) -> list[dict]:
        futures = [
            self.producer.send(topic, value=r.value, key=r.key, headers=list(r.headers), partition=r.partition, timestamp_ms=r.timestamp_ms)
            for r in records
        ]
        self.producer.flush(TIMEOUT_S)
        reports = []
        for r, future in zip(records, futures):
            try:
                meta = future.get(TIMEOUT_S)
                reports.append({"partition": meta.partition, "offset": meta.offset, "error": "NONE"})
            except Errors.BrokerResponseError as exc:
                reports.append({"partition": r.partition, "offset": -1, "error": _code(exc)})
        return reports

    def close(self) -> None:
        self.producer.close(TIMEOUT_S)


class KafkaPythonClient(Client):
    name = "kafka-python"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)

    def close(self) -> None:
        self.admin.close()

    def api_versions(self) -> dict[int, tuple[int, int]]:
        return {int(key): tuple(versions) for key, versions in self.admin.api_versions().items()}

    def cluster(self) -> dict:
        info = self.admin.describe_cluster()
        return {
            "cluster_id": info["cluster_id"],
            "controller_id": info["controller_id"],
            "brokers": {b["broker_id"]: [b["host"], b["port"]] for b in info["brokers"]},
        }

    def _metadata(self, names: list[str]) -> list[dict]:
        return self.admin.describe_topics(names)

    def describe_topics(self, names: list[str]) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for t in self._metadata(names):
            if t["error_code"]:
                out[t["name"]] = {"error": error_name(t["error_code"])}
                continue
            out[t["name"]] = {
                "error": "NONE",
                "partitions": {p["partition_index"]: {"leader": p["leader_id"], "replicas": p["replica_nodes"], "isr": p["isr_nodes"]} for p in t["partitions"]},
            }
        return out

    def topic_ids(self, names: list[str]) -> dict[str, Any]:
        return {t["name"]: t["topic_id"] for t in self._metadata(names)}

    def leader_epochs(self, name: str) -> dict[int, int]:
        (topic,) = self._metadata([name])
        return {p["partition_index"]: p["leader_epoch"] for p in topic["partitions"]}

    def create_topics(self, specs: list[TopicSpec]) -> dict[str, str]:
        request = {s.name: {"num_partitions": s.partitions, "replication_factor": s.replication_factor, "configs": dict(s.configs)} for s in specs}
        result = self.admin.create_topics(request, raise_errors=False)
        return {t["name"]: error_name(t["error_code"]) for t in result["topics"]}

    def delete_topics(self, names: list[str]) -> dict[str, str]:
        result = self.admin.delete_topics(names, raise_errors=False)
        return {t["name"]: error_name(t["error_code"]) for t in result["topics"]}

    def create_partitions(self, counts: dict[str, int]) -> dict[str, str]:
        from kafka.admin import NewPartitions

        response = self.admin.create_partitions({t: NewPartitions(n) for t, n in counts.items()}, raise_errors=False)
        return {r.name: error_name(r.error_code) for r in response.results}

    def topic_configs(self, name: str) -> dict[str, dict]:
        result = self.admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all")
        return {
            key: {"value": c["value"], "source": c["config_source"], "read_only": c["read_only"], "sensitive": c["is_sensitive"]}
            for key, c in result["topic"][name].items()
        }

    def alter_topic_configs(self, name: str, configs: dict[str, str], *, incremental: bool) -> str:
        # {"topic": {name: "OK" or str() of kafka-python's error, which starts "[Error <code>] "}}
        result = self.admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs)], incremental=incremental)["topic"][name]
        if result == "OK":
            return "NONE"
        match = re.match(r"\[Error (-?\d+)\]", result)
        if match is None:
            raise AssertionError(f"kafka-python reported {result!r}")
        return error_name(int(match.group(1)))

    def list_offset(self, topic: str, partition: int, spec: str | int) -> dict:
        tp = TopicPartition(topic, partition)
        try:
            result = self.admin.list_partition_offsets({tp: OFFSET_SPECS[spec] if isinstance(spec, str) else spec})
        except Errors.BrokerResponseError as exc:
            return {"error": _code(exc)}
        found = result[tp]
        return {"offset": found.offset, "timestamp": found.timestamp}

    def delete_records(self, topic: str, partition: int, before_offset: int) -> dict:
        tp = TopicPartition(topic, partition)
        try:
            result = self.admin.delete_records({tp: before_offset})
        except Errors.BrokerResponseError as exc:
            return {"error": _code(exc)}
        return {"low_watermark": result[tp]["low_watermark"]}

    def delete_records_unrouted(self, topic: str, partition: int, before_offset: int, node_id: int) -> dict:
        tp = TopicPartition(topic, partition)
        try:
            result = self.admin.delete_records({tp: before_offset}, partition_leader_id=node_id)
        except Errors.BrokerResponseError as exc:
            return {"error": _code(exc)}
        return {"low_watermark": result[tp]["low_watermark"]}

    def producer(self, *, compression: str = "none", idempotent: bool = False, bootstrap: str | None = None, create_topic: bool = True) -> ProducerSession:
        return KafkaPythonProducer(
            KafkaProducer(
                bootstrap_servers=bootstrap or self.bootstrap,
                compression_type=None if compression == "none" else compression,
                enable_idempotence=idempotent,
                acks="all",
                linger_ms=5,
                allow_auto_create_topics=create_topic,
                delivery_timeout_ms=TIMEOUT_S * 1000,
                request_timeout_ms=TIMEOUT_S * 1000 - 100,
            )
        )

    def reader(self, topic: str, partition: int, offset: int, *, max_wait_ms: int = 500, min_bytes: int = 1, isolation: str = "read_uncommitted") -> PartitionReader:
        return KafkaPythonReader(self.bootstrap, topic, partition, offset, max_wait_ms, min_bytes, isolation)

    def transactions(self, topic: str, transactional_id: str, transactions: list[tuple[list[Record], bool]]) -> list[str]:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=transactional_id, linger_ms=5, delivery_timeout_ms=TIMEOUT_S * 1000, request_timeout_ms=TIMEOUT_S * 1000 - 100)
        try:
            producer.init_transactions()
            outcomes = []
            for records, commit in transactions:
                producer.begin_transaction()
                for r in records:
                    producer.send(topic, value=r.value, key=r.key, partition=r.partition)
                try:
                    producer.flush(TIMEOUT_S)
                    (producer.commit_transaction if commit else producer.abort_transaction)()
                    outcomes.append("NONE")
                except Errors.BrokerResponseError as exc:
                    outcomes.append(_code(exc))
            return outcomes
        finally:
            producer.close(TIMEOUT_S)

    def group_member(self, group: str, topics: list[str], config: MemberConfig = MemberConfig()) -> GroupMember:
        return KafkaPythonMember(self.bootstrap, group, topics, config)

    def describe_group(self, group: str) -> dict:
        try:
            desc = self.admin.describe_groups([group])[group]
        except Errors.BrokerResponseError as exc:
            return {"error": _code(exc)}
        return {
            "error": "NONE" if desc["error"] is None else _code(desc["error"]),
            "state": desc["group_state"],
            "protocol_type": desc["protocol_type"],
            "protocol": desc["protocol_data"],
            "members": [
                {
                    "client_id": m["client_id"],
                    "client_host": m["client_host"],
                    "assignment": sorted([a["topic"], p] for a in (m["member_assignment"] or {}).get("assigned_partitions", []) for p in a["partitions"]),
                }
                for m in desc["members"]
            ],
        }

    def group_offsets(self, group: str, partitions: list[tuple[str, int]]) -> dict[str, int]:
        found = self.admin.list_group_offsets({group: [TopicPartition(t, p) for t, p in partitions]})[group]
        return {f"{tp.topic}:{tp.partition}": meta.offset for tp, meta in found.items()}

    def delete_groups(self, groups: list[str]) -> dict[str, str]:
        # {group: "OK" or the name of kafka-python's error class}
        return {group: "NONE" if error == "OK" else error_name(getattr(Errors, error).errno) for group, error in self.admin.delete_groups(groups).items()}
