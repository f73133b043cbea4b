"""A broker restarted or killed mid-stream keeps every acknowledged record, and clients carry on.

The broker runs as a child process (``Broker(subprocess=True)``) so that it can be stopped with SIGTERM or
SIGKILL while an idempotent producer (acks=all) and a consumer are running against it. Afterwards a fresh
consumer reads the whole log: every acknowledged record is at the offset its acknowledgement named, no
value appears twice, the values are in the order they were produced, and the consumer that was reading
across the restart saw exactly the same records.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest

from odradek import Broker

N = 30_000
TOPIC = "e2e-restart"

# librdkafka backs off reconnects up to 10 s by default; a test waiting on that measures nothing.
FAST_RECONNECT = {"reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 300, "log_level": 0}


@dataclass
class ProducerRun:
    """An idempotent producer writing ``N`` sequence-numbered values on its own thread."""

    bootstrap: str
    acked: dict[bytes, int] = field(default_factory=dict)
    errors: list = field(default_factory=list)
    fatal: list = field(default_factory=list)
    thread: threading.Thread | None = None
    unflushed: int = -1

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="e2e-producer")
        self.thread.start()

    def _run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                "error_cb": lambda err: self.fatal.append(err) if err.fatal() else None,
                **FAST_RECONNECT,
            }
        )

        def delivered(err, msg) -> None:
            if err is None:
                self.acked[msg.value()] = msg.offset()
            else:
                self.errors.append(err)

        for i in range(N):
            producer.produce(TOPIC, value=b"seq-%08d" % i, partition=0, on_delivery=delivered)
            if i % 500 == 0:
                producer.poll(0.02)  # paced: the stream spans the restart instead of landing before it
        self.unflushed = producer.flush(60)

    def wait_acked(self, count: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(self.acked) >= count, f"only {len(self.acked)} records acknowledged"

    def join(self) -> None:
        assert self.thread is not None
        self.thread.join(90)


@dataclass
class ConsumerRun:
    """A consumer reading from offset 0 on its own thread until told to stop and caught up."""

    bootstrap: str
    seen: list[tuple[int, bytes]] = field(default_factory=list)
    errors: list = field(default_factory=list)
    stop_at: int | None = None
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="e2e-consumer")
        self.thread.start()

    def _run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "e2e-restart", "enable.auto.commit": False, "fetch.wait.max.ms": 100, **FAST_RECONNECT})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 90
        try:
            while time.monotonic() < deadline and (self.stop_at is None or len(self.seen) < self.stop_at):
                for msg in consumer.consume(5000, 0.2):
                    if msg.error() is None:
                        self.seen.append((msg.offset(), msg.value()))
                    elif msg.error().code() >= 0 or msg.error().fatal():
                        self.errors.append(msg.error())  # from the broker: connection losses are expected
        finally:
            consumer.close()

    def finish(self, count: int) -> None:
        self.stop_at = count
        assert self.thread is not None
        self.thread.join(60)


def _read_log(bootstrap: str) -> list[tuple[int, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-restart-check", "enable.auto.commit": False, "log_level": 3})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10, cached=False)
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 20
        while len(out) < high and time.monotonic() < deadline:
            out += [(m.offset(), m.value()) for m in consumer.consume(10_000, 0.5) if m.error() is None]
        assert low == 0 and len(out) == high, f"log [{low}, {high}) but read {len(out)} records"
        return out
    finally:
        consumer.close()


@pytest.fixture
def subprocess_broker(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    # librdkafka's consumers look up a group coordinator even when only assigned, which creates
    # __consumer_offsets; one partition instead of 50 keeps recovery after kill -9 out of the timing.
    broker = Broker(log_dir=tmp_path / "logs", subprocess=True, config={"offsets.topic.num.partitions": 1}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(10)
        yield broker
    finally:
        broker.stop()


def _bounce(broker: Broker, how: str) -> None:
    if how == "restart":
        broker.restart()  # SIGTERM: clean shutdown, then start on the same port and log dir
    else:
        broker.kill()  # SIGKILL: no flush, no checkpoints, no clean-shutdown marker
        broker.start()


@pytest.mark.parametrize("how", ["restart", "kill -9"])
def test_restart_mid_stream_loses_and_duplicates_nothing(subprocess_broker, how):
    broker = subprocess_broker
    producer = ProducerRun(broker.bootstrap)
    consumer = ConsumerRun(broker.bootstrap)
    consumer.start()
    producer.start()

    producer.wait_acked(N // 3)
    _bounce(broker, how)
    producer.join()
    log = _read_log(broker.bootstrap)
    consumer.finish(len(log))

    values = [v for _, v in log]
    assert producer.unflushed == 0 and producer.errors == [] and producer.fatal == []
    assert len(producer.acked) == N, "every record is acknowledged once the broker is back"
    assert len(set(values)) == len(values), "the idempotent producer's retries left no duplicates"
    assert values == [b"seq-%08d" % i for i in range(N)], "no gaps, in order"
    assert all(log[offset] == (offset, value) for value, offset in producer.acked.items()), "each record sits at the offset its acknowledgement named"
    assert consumer.errors == []
    assert consumer.seen == log, "the consumer reading across the restart resumed where it was"


@pytest.mark.parametrize("how", ["restart", "kill -9"])
def test_log_and_positions_survive_a_bounce_at_rest(subprocess_broker, clients, how):
    """Records written before the bounce read back identically through every client, end offsets included."""
    broker = subprocess_broker
    records = [(b"k%d" % i, b"v%d" % i, (("h", b"%d" % i),), 1_700_000_000_000 + i) for i in range(2000)]
    clients["confluent"].produce(broker.bootstrap, TOPIC, records[:1000], compression="zstd", acks="all")
    clients["kafka-python"].produce(broker.bootstrap, TOPIC, records[1000:], compression="gzip", acks="all")
    before = clients["confluent"].consume(broker.bootstrap, TOPIC, 2000)

    _bounce(broker, how)

    assert [r.offset for r in before] == list(range(2000))
    for name, client in clients.items():
        assert client.consume(broker.bootstrap, TOPIC, 2000) == before, f"{name} reads the same log after {how}"
    acked = clients["aiokafka"].produce(broker.bootstrap, TOPIC, [(b"after", b"bounce", (), None)])
    assert [a.offset for a in acked] == [2000], "appends continue at the old log end"
