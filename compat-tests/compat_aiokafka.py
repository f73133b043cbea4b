"""The scenarios' operations with aiokafka.

aiokafka is asyncio-only: each adapter owns an event loop on a thread, and every operation is a coroutine
run there, so scenarios stay plain functions and group members keep heartbeating between calls.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Awaitable, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.client import AIOKafkaClient as LowLevelClient
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import KafkaError, OffsetOutOfRangeError
from aiokafka.protocol.admin import ApiVersionRequest, DeleteGroupsRequest, DeleteRecordsRequest
from aiokafka.protocol.metadata import MetadataRequest

from compat_client import CONFIG_SOURCES, Client, GroupMember, MemberConfig, Offsets, PartitionReader, ProducerSession, Record, TopicSpec, seen_record, text
from compat_observe import NotOffered, error_name

TIMEOUT_S = 15
ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
T = TypeVar("T")


def _code(exc: KafkaError) -> str:
    """Kafka's name for an aiokafka broker error (its classes carry Kafka's code as ``errno``)."""
    if getattr(exc, "errno", None) is None:
        raise exc
    return error_name(exc.errno)


class Loop:
    """An event loop on its own thread; ``run`` waits for a coroutine scheduled on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="compat-aiokafka")
        self.thread.start()

    def run(self, coro: Awaitable[T], timeout_s: float = TIMEOUT_S * 2) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class AIOKafkaReader(PartitionReader):
    def __init__(self, loop: Loop, bootstrap: str, topic: str, partition: int, offset: int, max_wait_ms: int, min_bytes: int, isolation: str) -> None:
        self.loop = loop
        self.tp = TopicPartition(topic, partition)

        async def start() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap,
                enable_auto_commit=False,
                auto_offset_reset="none",
                fetch_max_wait_ms=max_wait_ms,
                fetch_min_bytes=min_bytes,
                isolation_level=isolation,
            )
            await consumer.start()
            consumer.assign([self.tp])
            consumer.seek(self.tp, offset)
            return consumer

        self.consumer = loop.run(start())

    def read(self, count: int, timeout_s: float) -> tuple[list[dict], str | None]:
        async def read() -> tuple[list[dict], str | None]:
            records: list[dict] = []
            deadline = time.monotonic() + timeout_s
            while len(records) < count and time.monotonic() < deadline:
                try:
                    batch = await self.consumer.getmany(self.tp, timeout_ms=100, max_records=count - len(records))
                except OffsetOutOfRangeError:
                    return records, "OFFSET_OUT_OF_RANGE"
                except KafkaError as exc:
                    return records, _code(exc)
                for m in batch.get(self.tp, []):
                    records.append(seen_record(m.partition, m.offset, m.key, m.value, m.headers, TIMESTAMP_TYPES[m.timestamp_type], m.timestamp))
            return records, None

        return self.loop.run(read(), timeout_s + TIMEOUT_S)

    def close(self) -> None:
        self.loop.run(self.consumer.stop())


class AIOKafkaMember(GroupMember):
    """The consumer's coordinator task heartbeats and rejoins on the loop; a getmany task keeps it fetching."""

    def __init__(self, loop: Loop, bootstrap: str, group: str, topics: list[str], config: MemberConfig) -> None:
        super().__init__()
        self.loop = loop

        async def start() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(
                *topics,
                bootstrap_servers=bootstrap,
                group_id=group,
                client_id=config.client_id,
                group_instance_id=config.instance_id,
                partition_assignment_strategy=(ASSIGNORS[config.assignor],),
                enable_auto_commit=False,
                auto_offset_reset=config.auto_offset_reset,
                session_timeout_ms=config.session_timeout_ms,
                heartbeat_interval_ms=200,
            )
            await consumer.start()
            return consumer

        self.consumer = loop.run(start())
        self.task = asyncio.run_coroutine_threadsafe(self._consume(), loop.loop)

    async def _consume(self) -> None:
        while True:
            try:
                batch = await self.consumer.getmany(timeout_ms=100)
            except KafkaError as exc:  # raised to the user: recorded, and consuming goes on
                self.errors.append(type(exc).__name__)
                await asyncio.sleep(0.05)
                continue
            self.received.extend((m.topic, m.partition, m.offset, text(m.value)) for msgs in batch.values() for m in msgs)
            self._saw({(tp.topic, tp.partition) for tp in self.consumer.assignment()})

    def assignment(self) -> set[tuple[str, int]]:
        async def current() -> set[tuple[str, int]]:
            return {(tp.topic, tp.partition) for tp in self.consumer.assignment()}

        current = self.loop.run(current())
        self._saw(current)
        return current

    def commit(self, offsets: Offsets) -> None:
        self.loop.run(self.consumer.commit({TopicPartition(t, p): o for (t, p), o in offsets.items()}))

    def close(self) -> None:
        self.task.cancel()
        self.loop.run(self.consumer.stop())


class AIOKafkaProducerSession(ProducerSession):
    def __init__(self, loop: Loop, producer: AIOKafkaProducer) -> None:
        self.loop = loop
        self.producer = producer

    def send(self, topic: str, records: list[Record]) -> list[dict]:
        async def send() -> list[dict]:
            futures = [
                await self.producer.send(topic, value=r.value, key=r.key, headers=list(r.headers), partition=r.partition, timestamp_ms=r.timestamp_ms)
                for r in records
            ]
            reports = []
            for r, future in zip(records, futures):
                try:
                    meta = await future
                    reports.append({"partition": meta.partition, "offset": meta.offset, "error": "NONE"})
                except KafkaError as exc:
                    reports.append({"partition": r.partition, "offset": -1, "error": _code(exc)})
            return reports

        return self.loop.run(send())

    def close(self) -> None:
        self.loop.run(self.producer.stop())


class AiokafkaClient(Client):
    name = "aiokafka"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self.loop = Loop()

        async def start() -> AIOKafkaAdminClient:
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
            await admin.start()
            return admin

        self.admin = self.loop.run(start())

    def close(self) -> None:
        self.loop.run(self.admin.close())
        self.loop.stop()

    def _with_client(self, fn: Any) -> Any:
        """aiokafka's low-level client, for requests its admin client does not make."""

        async def run() -> Any:
            client = LowLevelClient(bootstrap_servers=self.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
            await client.bootstrap()
            try:
                return await fn(client)
            finally:
                await client.close()

        return self.loop.run(run())

    def api_versions(self) -> dict[int, tuple[int, int]]:
        async def ask(client: LowLevelClient) -> Any:
            return await client.send(client.get_random_node(), ApiVersionRequest())

        response = self._with_client(ask)
        return {key: (low, high) for key, low, high, *_ in response.api_versions}

    def cluster(self) -> dict:
        info = self.loop.run(self.admin.describe_cluster())
        return {
            "cluster_id": info["cluster_id"],
            "controller_id": info["controller_id"],
            "brokers": {b["node_id"]: [b["host"], b["port"]] for b in info["brokers"]},
        }

    def describe_topics(self, names: list[str]) -> dict[str, dict]:
        """Through the low-level client: the admin client's Metadata requests allow auto-creation."""

        async def ask(client: LowLevelClient) -> Any:
            return await client.send(client.get_random_node(), MetadataRequest(names, allow_auto_topic_creation=False))

        out: dict[str, dict] = {}
        for t in self._with_client(ask).to_object()["topics"]:
            if t["error_code"]:
                out[t["topic"]] = {"error": error_name(t["error_code"])}
                continue
            out[t["topic"]] = {
                "error": "NONE",
                "partitions": {p["partition"]: {"leader": p["leader"], "replicas": p["replicas"], "isr": p["isr"]} for p in t["partitions"]},
            }
        return out

    def create_topics(self, specs: list[TopicSpec]) -> dict[str, str]:
        topics = [NewTopic(s.name, s.partitions, s.replication_factor, topic_configs=dict(s.configs)) for s in specs]
        response = self.loop.run(self.admin.create_topics(topics))
        return {t[0]: error_name(t[1]) for t in response.topic_errors}

    def delete_topics(self, names: list[str]) -> dict[str, str]:
        response = self.loop.run(self.admin.delete_topics(names))
        return {t[0]: error_name(t[1]) for t in response.topic_error_codes}

    def create_partitions(self, counts: dict[str, int]) -> dict[str, str]:
        out = {}
        for topic, count in counts.items():  # aiokafka raises on the first error, so one topic per request
            try:
                self.loop.run(self.admin.create_partitions({topic: NewPartitions(count)}))
                out[topic] = "NONE"
            except KafkaError as exc:
                out[topic] = _code(exc)
        return out

    def topic_configs(self, name: str) -> dict[str, dict]:
        (response,) = self.loop.run(self.admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)]))
        out = {}
        for resource in response.resources:
            for entry in resource[4]:
                key, value, read_only, source, sensitive = entry[:5]
                out[key] = {"value": value, "source": CONFIG_SOURCES[source], "read_only": read_only, "sensitive": sensitive}
        return out

    def alter_topic_configs(self, name: str, configs: dict[str, str], *, incremental: bool) -> str:
        if incremental:
            raise NotOffered("aiokafka has no IncrementalAlterConfigs")
        (response,) = self.loop.run(self.admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs)]))
        ((code, *_),) = response.resources
        return error_name(code)

    def list_offset(self, topic: str, partition: int, spec: str | int) -> dict:
        if spec == "max_timestamp":
            raise NotOffered("aiokafka cannot ask ListOffsets for the max timestamp (KIP-734)")
        tp = TopicPartition(topic, partition)

        async def ask() -> dict:
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
            await consumer.start()
            try:
                if spec == "earliest":
                    return {"offset": (await consumer.beginning_offsets([tp]))[tp], "timestamp": -1}
                if spec == "latest":
                    return {"offset": (await consumer.end_offsets([tp]))[tp], "timestamp": -1}
                found = (await consumer.offsets_for_times({tp: spec}))[tp]
                return {"offset": -1, "timestamp": -1} if found is None else {"offset": found.offset, "timestamp": found.timestamp}
            except KafkaError as exc:
                return {"error": _code(exc)}
            finally:
                await consumer.stop()

        return self.loop.run(ask())

    def delete_records(self, topic: str, partition: int, before_offset: int) -> dict:
        tp = TopicPartition(topic, partition)
        try:
            result = self.loop.run(self.admin.delete_records({tp: RecordsToDelete(before_offset)}))
        except KafkaError as exc:
            return {"error": _code(exc)}
        return {"low_watermark": result[tp]}

    def delete_records_unrouted(self, topic: str, partition: int, before_offset: int, node_id: int) -> dict:
        async def delete(client: LowLevelClient) -> Any:
            return await client.send(node_id, DeleteRecordsRequest([(topic, [(partition, before_offset)])], TIMEOUT_S * 1000))

        for _, partitions, *_ in self._with_client(delete).topics:
            for _, low_watermark, code, *_ in partitions:
                return {"error": error_name(code)} if code else {"low_watermark": low_watermark}
        raise AssertionError("DeleteRecords answered without the partition asked about")

    def producer(self, *, compression: str = "none", idempotent: bool = False, bootstrap: str | None = None, create_topic: bool = True) -> ProducerSession:
        async def start() -> AIOKafkaProducer:
            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap or self.bootstrap,
                compression_type=None if compression == "none" else compression,
                enable_idempotence=idempotent,
                acks="all",
                linger_ms=5,
                request_timeout_ms=TIMEOUT_S * 1000,
            )
            await producer.start()
            return producer

        return AIOKafkaProducerSession(self.loop, self.loop.run(start()))

    def reader(self, topic: str, partition: int, offset: int, *, max_wait_ms: int = 500, min_bytes: int = 1, isolation: str = "read_uncommitted") -> PartitionReader:
        return AIOKafkaReader(self.loop, self.bootstrap, topic, partition, offset, max_wait_ms, min_bytes, isolation)

    def transactions(self, topic: str, transactional_id: str, transactions: list[tuple[list[Record], bool]]) -> list[str]:
        async def run() -> list[str]:
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=transactional_id, linger_ms=5, request_timeout_ms=TIMEOUT_S * 1000)
            await producer.start()  # InitProducerId for the transactional id
            try:
                outcomes = []
                for records, commit in transactions:
                    await producer.begin_transaction()
                    for r in records:
                        await producer.send(topic, value=r.value, key=r.key, partition=r.partition)
                    try:
                        await producer.flush()
                        await (producer.commit_transaction() if commit else producer.abort_transaction())
                        outcomes.append("NONE")
                    except KafkaError as exc:
                        outcomes.append(_code(exc))
                return outcomes
            finally:
                await producer.stop()

        return self.loop.run(run())

    def group_member(self, group: str, topics: list[str], config: MemberConfig = MemberConfig()) -> GroupMember:
        return AIOKafkaMember(self.loop, self.bootstrap, group, topics, config)

    def describe_group(self, group: str) -> dict:
        (response,) = self.loop.run(self.admin.describe_consumer_groups([group]))
        (described,) = response.groups
        code, _, state, protocol_type, protocol, members = described[:6]

        def assignment(raw: bytes) -> list[list]:
            if not raw:
                return []
            decoded = ConsumerProtocolMemberAssignment.decode(raw)
            return sorted([tp.topic, tp.partition] for tp in decoded.partitions())

        return {
            "error": error_name(code),
            "state": state,
            "protocol_type": protocol_type,
            "protocol": protocol,
            "members": [{"client_id": m[1], "client_host": m[2], "assignment": assignment(m[-1])} for m in members],
        }

    def group_offsets(self, group: str, partitions: list[tuple[str, int]]) -> dict[str, int]:
        found = self.loop.run(self.admin.list_consumer_group_offsets(group, partitions=[TopicPartition(t, p) for t, p in partitions]))
        return {f"{tp.topic}:{tp.partition}": meta.offset for tp, meta in found.items()}

    def delete_groups(self, groups: list[str]) -> dict[str, str]:
        """aiokafka's admin client has no delete_consumer_groups: DeleteGroups through its low-level client."""

        async def delete(client: LowLevelClient) -> Any:
            out = {}
            for group in groups:
                coordinator = await self.admin.find_coordinator(group)
                response = await client.send(coordinator, DeleteGroupsRequest([group]))
                for name, code, *_ in response.results:
                    out[name] = error_name(code)
            return out

        return self._with_client(delete)

