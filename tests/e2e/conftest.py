"""Fixtures for end-to-end tests: one real broker per session, real clients over real sockets.

Starting a broker costs little, but the clients' first connections and metadata round trips do not, so
the tests share one broker and keep apart by topic: ``new_topic`` makes a fresh one per call.
The three Python clients (confluent-kafka, kafka-python, aiokafka) are driven through one small table of
producer and consumer functions so that a test can cross them (one produces, another consumes) by name.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import kafka_jvm
import pytest

from odradek import Broker


class Outgoing(NamedTuple):
    """A record as a producer sends it (tests pass plain tuples); ``timestamp`` None lets the client pick."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int | None = None


class Received(NamedTuple):
    """A record as a consumer hands it to the application, the same whichever client read it."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    log_append_time: bool


class Acked(NamedTuple):
    """A producer's acknowledgement of one record: where it landed and the timestamp the broker reported."""

    offset: int
    timestamp: int


class ProduceFailed(AssertionError):
    def __init__(self, client: str, error: Any) -> None:
        super().__init__(f"{client}: {error}")
        self.error = error


# --- confluent-kafka ------------------------------------------------------------------------------------


def _confluent_produce(bootstrap: str, topic: str, records: Sequence[Outgoing], *, partition: int = 0, compression: str = "none", idempotent: bool = False, **config: Any) -> list[Acked]:
    from confluent_kafka import Producer

    conf = {
        "bootstrap.servers": bootstrap,
        "compression.type": compression,
        "enable.idempotence": idempotent,
        "linger.ms": 10,
        "batch.size": 1 << 20,
        "queue.buffering.max.messages": max(100_000, 2 * len(records)),
        "message.timeout.ms": 20_000,
        "log_level": 3,
    }
    conf.update(config)
    producer = Producer(conf)
    acked: list[Acked | None] = [None] * len(records)
    errors: list[Any] = []

    def on_delivery(index: int) -> Callable[[Any, Any], None]:
        def done(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                acked[index] = Acked(msg.offset(), msg.timestamp()[1])

        return done

    for i, r in enumerate(records):
        kwargs: dict[str, Any] = {"key": r.key, "value": r.value, "partition": partition, "on_delivery": on_delivery(i)}
        if r.headers:
            kwargs["headers"] = list(r.headers)
        if r.timestamp is not None:
            kwargs["timestamp"] = r.timestamp
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(30)
    if errors:
        raise ProduceFailed("confluent", errors[0])
    assert remaining == 0, f"{remaining} records still unacknowledged after 30 s"
    return [a for a in acked if a is not None]


def _confluent_received(msg: Any) -> Received:
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    ts_type, ts = msg.timestamp()
    return Received(msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()), ts, ts_type == TIMESTAMP_LOG_APPEND_TIME)


def _confluent_consume(bootstrap: str, topic: str, count: int, *, partition: int = 0, offset: int = 0, timeout: float = 20.0, **config: Any) -> list[Received]:
    from confluent_kafka import Consumer, TopicPartition

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"e2e-{topic}",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
        "log_level": 3,
    }
    conf.update(config)
    consumer = Consumer(conf)
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        out: list[Received] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(min(count - len(out), 10_000), 0.5):
                assert msg.error() is None, msg.error()
                out.append(_confluent_received(msg))
        return out
    finally:
        consumer.close()


# --- kafka-python ---------------------------------------------------------------------------------------


def _kafka_python_produce(bootstrap: str, topic: str, records: Sequence[Outgoing], *, partition: int = 0, compression: str = "none", idempotent: bool = False, **config: Any) -> list[Acked]:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    conf: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "compression_type": None if compression == "none" else compression,
        "linger_ms": 10,
        "batch_size": 256 * 1024,
        "enable_idempotence": idempotent,
    }
    conf.update(config)
    producer = KafkaProducer(**conf)
    try:
        futures = [
            producer.send(topic, key=r.key, value=r.value, headers=list(r.headers), partition=partition, timestamp_ms=r.timestamp)
            for r in records
        ]
        producer.flush(30)
        try:
            return [Acked(m.offset, m.timestamp) for m in (f.get(0) for f in futures)]
        except KafkaError as exc:
            raise ProduceFailed("kafka-python", exc) from exc
    finally:
        producer.close(5)


def _kafka_python_consume(bootstrap: str, topic: str, count: int, *, partition: int = 0, offset: int = 0, timeout: float = 20.0, **config: Any) -> list[Received]:
    from kafka import KafkaConsumer, TopicPartition

    conf: dict[str, Any] = {"bootstrap_servers": bootstrap, "group_id": None, "enable_auto_commit": False, "fetch_max_wait_ms": 100}
    conf.update(config)
    consumer = KafkaConsumer(**conf)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        out: list[Received] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for batch in consumer.poll(500, max_records=50_000).values():
                out.extend(
                    Received(r.offset, r.key, r.value, tuple(r.headers or ()), r.timestamp, r.timestamp_type == 1) for r in batch
                )
        return out
    finally:
        consumer.close()


# --- aiokafka -------------------------------------------------------------------------------------------


def _aiokafka_produce(bootstrap: str, topic: str, records: Sequence[Outgoing], *, partition: int = 0, compression: str = "none", idempotent: bool = False, **config: Any) -> list[Acked]:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def run() -> list[Acked]:
        conf: dict[str, Any] = {
            "bootstrap_servers": bootstrap,
            "compression_type": None if compression == "none" else compression,
            "linger_ms": 10,
            "max_batch_size": 256 * 1024,
            "enable_idempotence": idempotent,
        }
        conf.update(config)
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            futures = [
                await producer.send(topic, key=r.key, value=r.value, headers=list(r.headers) or None, partition=partition, timestamp_ms=r.timestamp)
                for r in records
            ]
            try:
                return [Acked(m.offset, m.timestamp) for m in await asyncio.gather(*futures)]
            except KafkaError as exc:
                raise ProduceFailed("aiokafka", exc) from exc
        finally:
            await producer.stop()

    return asyncio.run(run())


def _aiokafka_consume(bootstrap: str, topic: str, count: int, *, partition: int = 0, offset: int = 0, timeout: float = 20.0, **config: Any) -> list[Received]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[Received]:
        conf: dict[str, Any] = {"bootstrap_servers": bootstrap, "group_id": None, "enable_auto_commit": False, "fetch_max_wait_ms": 100}
        conf.update(config)
        consumer = AIOKafkaConsumer(**conf)
        await consumer.start()
        try:
            tp = TopicPartition(topic, partition)
            consumer.assign([tp])
            consumer.seek(tp, offset)
            out: list[Received] = []
            deadline = time.monotonic() + timeout
            while len(out) < count and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=500, max_records=50_000)).values():
                    out.extend(
                        Received(r.offset, r.key, r.value, tuple(r.headers or ()), r.timestamp, r.timestamp_type == 1) for r in batch
                    )
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


@dataclass(frozen=True)
class Client:
    """One client library's produce and consume, with the same signatures for all three.

    ``produce(bootstrap, topic, records, partition=0, compression="none", idempotent=False, **config)``
    takes (key, value, headers, timestamp) tuples and returns one :class:`Acked` per record, in order;
    ``consume(bootstrap, topic, count, partition=0, offset=0, timeout=20, **config)`` reads from ``offset``
    until ``count`` records arrived or ``timeout`` passed. ``config`` is in the client's own spelling.
    """

    name: str
    _produce: Callable[..., list[Acked]]
    _consume: Callable[..., list[Received]]

    def produce(self, bootstrap: str, topic: str, records: Sequence[tuple], **options: Any) -> list[Acked]:
        return self._produce(bootstrap, topic, [Outgoing(*r) for r in records], **options)

    def consume(self, bootstrap: str, topic: str, count: int, **options: Any) -> list[Received]:
        return self._consume(bootstrap, topic, count, **options)


CLIENT_TABLE: dict[str, Client] = {
    "confluent": Client("confluent", _confluent_produce, _confluent_consume),
    "kafka-python": Client("kafka-python", _kafka_python_produce, _kafka_python_consume),
    "aiokafka": Client("aiokafka", _aiokafka_produce, _aiokafka_consume),
}




# --- fixtures -------------------------------------------------------------------------------------------

JAVA_SOURCES = Path(__file__).parent / "java"
PROBE_TIMEOUT_S = 120


@pytest.fixture(scope="session")
def probe() -> Callable[..., list[dict[str, Any]]]:
    """``probe(sub_command, bootstrap, *args)``: runs tests/e2e/java/ClientProbe.java (Kafka's Java client,
    compiled once) and returns the JSON lines it printed. Each run is a call to the test process's lasting runner
    JVM (tool_runner): a JVM start is most of a short run's CPU."""
    programs = kafka_jvm.java_programs(sorted(JAVA_SOURCES.glob("*.java")), PROBE_TIMEOUT_S)

    def run(sub_command: str, bootstrap: str, *args: str) -> list[dict[str, Any]]:
        done = programs.run("ClientProbe", sub_command, bootstrap, *args, timeout_s=PROBE_TIMEOUT_S, lasting=True)
        assert done.returncode == 0, f"ClientProbe {sub_command} exited {done.returncode}:\n{done.stderr[-4000:]}"
        return [json.loads(line) for line in done.stdout.splitlines()]

    return run




@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the whole session (tests keep apart by topic), in its own process as in production:
    in-process it would share the GIL with the Python clients, and on a busy machine that contention
    slowed a 100k-record read twentyfold."""
    # Tests write records with fixed timestamps from 2023 (so they can assert them exactly); time-based
    # retention would delete those segments at its first check, 30 s after start, as Kafka's does.
    config = {"log.retention.ms": "-1"}
    with Broker(log_dir=tmp_path_factory.mktemp("e2e-broker"), subprocess=True, config=config) as b:
        yield b


@pytest.fixture(autouse=True)
def broker_log_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """When a test using the session broker fails, show what the broker logged while it ran."""
    if "broker" not in request.fixturenames:
        yield
        return
    broker: Broker = request.getfixturevalue("broker")
    seen = len(broker.output)
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        lines = list(broker.output)[seen:] if len(broker.output) < broker.output.maxlen else list(broker.output)
        report.sections.append(("broker log during the test", "".join(lines[-200:]) or "(nothing logged)"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[Any]:
    report = yield
    if report.when == "call":
        item.rep_call = report  # read by broker_log_on_failure
    return report


@pytest.fixture(scope="session")
def bootstrap(broker: Broker) -> str:
    return broker.bootstrap


@pytest.fixture(scope="session")
def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


_topic_numbers = itertools.count()


@pytest.fixture(scope="session")
def make_topic(admin: Any) -> Callable[..., str]:
    """``make_topic(name, partitions=1, config={...})`` creates a topic through CreateTopics and returns its name."""
    from confluent_kafka.admin import NewTopic

    def create(name: str, partitions: int = 1, config: dict[str, str] | None = None) -> str:
        futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10)
        futures[name].result(10)
        return name

    return create


@pytest.fixture
def new_topic(make_topic: Callable[..., str], request: pytest.FixtureRequest) -> Callable[..., str]:
    """Create a fresh topic named after the test: ``new_topic(partitions=1, config={...})`` returns its name."""
    stem = re.sub(r"[^a-zA-Z0-9-]+", "-", request.node.name).strip("-")[:200]  # no "." or "_": Kafka warns of metric-name collisions

    def make(partitions: int = 1, config: dict[str, str] | None = None) -> str:
        return make_topic(f"{stem}-{next(_topic_numbers)}", partitions, config)

    return make


@pytest.fixture(scope="session")
def clients() -> dict[str, Client]:
    return CLIENT_TABLE


@pytest.fixture
def disk_batches(broker: Broker) -> Callable[..., list[Any]]:
    """``disk_batches(topic, partition=0)``: the headers of the batches in the partition's segment files.

    Reads what the broker wrote to disk, to check facts no consumer shows (how records were batched,
    which codec a batch carries).
    """
    from odradek.protocol.record_batch import iter_batch_positions, parse_header

    def read(topic: str, partition: int = 0) -> list[Any]:
        headers = []
        for segment in sorted((broker.log_dir / f"{topic}-{partition}").glob("*.log")):
            data = segment.read_bytes()
            headers.extend(parse_header(data, pos) for pos, _, _ in iter_batch_positions(data))
        return headers

    return read


@pytest.fixture
def wire(broker: Broker, connect: Callable[..., Any]) -> Callable[[], Any]:
    """Open raw connections (tests/conftest.py's Wire) to the session broker; closed after the test."""
    return lambda: connect(broker.bootstrap, "e2e-wire")
