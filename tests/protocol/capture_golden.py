"""Record the request frames real clients send, as golden files for ``test_golden.py``.

Run by hand (``python tests/protocol/capture_golden.py [output dir]``), not by pytest. A recording TCP
proxy sits between each client and a real odradek broker; the broker advertises the proxy's address, so
every connection a client opens (bootstrap, partition leader, group coordinator) passes through it. Each
request frame the client sends is saved, without its 4-byte size prefix, as
``<client>_<Api>_v<version>_<seq>.bin``. Frames repeat a lot (metadata refreshes, empty fetches,
heartbeats): a few of each kind are kept, produce frames once per codec, and none over 32 KiB.

The workloads cover what each client does in ordinary use: admin calls, produce with every codec (and
idempotently), assign-and-fetch, offsets for times, and a consumer group with commits.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import socket
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable

from odradek import Broker
from odradek.protocol.api import APIS, decode_request, peek_header
from odradek.protocol.record_batch import peek_magic, read_batch_header
from odradek.protocol.schema import DecodeError

GOLDEN = Path(__file__).parent / "golden"
MAX_FRAME = 32 * 1024
KEEP_PER_KIND = 4
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_NAMES = dict(enumerate(CODECS))


class RecordingProxy:
    """Forwards bytes both ways; cuts the client-to-broker stream into frames and hands each to ``save``."""

    def __init__(self, port: int, target: tuple[str, int], save: Callable[[bytes], None]) -> None:
        self.target = target
        self.save = save
        self.listener = socket.create_server(("127.0.0.1", port))
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self.running:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, record: bool) -> None:
        pending = bytearray()
        try:
            while data := source.recv(1 << 16):
                if record:
                    pending += data
                    while len(pending) >= 4 and len(pending) >= 4 + int.from_bytes(pending[:4], "big"):
                        size = int.from_bytes(pending[:4], "big")
                        self.save(bytes(pending[4 : 4 + size]))
                        del pending[: 4 + size]
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self.running = False
        self.listener.close()


class Recorder:
    """Names and keeps frames: a few distinct ones per (client, API, version, codec), numbered in arrival order."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.client = "none"
        self.kept: Counter = Counter()
        self.seen: set[tuple[str, bytes]] = set()
        self.seq = itertools.count()
        self.lock = threading.Lock()

    def save(self, frame: bytes) -> None:
        if len(frame) > MAX_FRAME:
            return
        try:
            api_key, version, _ = peek_header(frame)
            api = APIS[api_key].name
        except (DecodeError, KeyError):
            api, version = "Unknown", 0
        kind = (self.client, api, version, _codec(frame) if api == "Produce" else "")
        without_correlation_id = frame[:4] + frame[8:]
        with self.lock:
            if self.kept[kind] >= KEEP_PER_KIND or (self.client, without_correlation_id) in self.seen:
                return
            self.seen.add((self.client, without_correlation_id))
            self.kept[kind] += 1
            name = f"{self.client}_{api}_v{version}_{next(self.seq):04d}.bin"
        (self.out / name).write_bytes(frame)


def _codec(frame: bytes) -> str:
    """The codec of a produce frame's first batch, so that each codec's frame is kept."""
    try:
        request = decode_request(frame)
        records = request.body.topic_data[0].partition_data[0].records
        if peek_magic(records) == 2:
            return CODEC_NAMES.get(read_batch_header(records).compression, "?")
        return f"magic{peek_magic(records)}"
    except Exception:  # an undecodable frame is kept all the same: the test will say what is wrong with it
        return "?"


def _records(client: str, codec: str) -> list[tuple[bytes | None, bytes | None, list, int]]:
    """Three records, repetitive enough that every codec shrinks them (librdkafka sends a batch
    uncompressed when compressing would not make it smaller)."""
    now = int(time.time() * 1000)
    text = b"%s %s golden record " % (client.encode(), codec.encode())
    return [
        (b"key-1", text * 8, [("h", b"1")], now),
        (None, text * 4, [], now + 1),
        (b"tombstone", None, [("a", b"x"), ("b", b"")], now + 2),
    ]


# --- workloads ------------------------------------------------------------------------------------------


def confluent_workload(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec

    topic = "golden-confluent"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "3600000"})])[topic].result(10)
    admin.list_topics(timeout=10)
    admin.describe_cluster().result(10)
    admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    next(iter(admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()}).values())).result(10)
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20})
        for key, value, headers, ts in _records("confluent", codec):
            producer.produce(topic, key=key, value=value, headers=headers, timestamp=ts, partition=0)
        producer.flush(10)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    producer.produce(topic, value=b"idempotent", partition=0)
    producer.flush(10)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "golden-confluent-assign", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    consumer.consume(100, 3)
    consumer.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=10)
    consumer.close()

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "golden-confluent", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not consumer.consume(100, 0.5):
        pass
    consumer.commit(asynchronous=False)
    consumer.committed([TopicPartition(topic, 0)], timeout=10)
    consumer.close()


def kafka_python_workload(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    topic, old_topic = "golden-kafka-python", "golden-kafka-python-old"  # zstd batches cannot be down-converted
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1), NewTopic(old_topic, 1, 1)])
    admin.close()
    for codec in CODECS:
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec, linger_ms=20)
        for key, value, headers, ts in _records("kafka-python", codec):
            producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts, partition=0)
        producer.flush(10)
        producer.close()
    for api_version in ((0, 10, 1), (0, 9)):  # legacy Produce v1-v2 and Fetch v1-v3 (magic 0/1 message sets)
        producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version, compression_type="gzip")
        producer.send(old_topic, key=b"old", value=b"protocol", partition=0).get(10)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=api_version, group_id=None)
        consumer.assign([TopicPartition(old_topic, 0)])
        consumer.seek(TopicPartition(old_topic, 0), 0)
        consumer.poll(2000)
        consumer.close()

    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    consumer.poll(2000)
    consumer.offsets_for_times({tp: 0})
    consumer.end_offsets([tp])
    consumer.close()

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="golden-kafka-python", auto_offset_reset="earliest", enable_auto_commit=False)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not consumer.poll(500):
        pass
    consumer.commit()
    consumer.committed(tp)
    consumer.close()


def aiokafka_workload(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = "golden-aiokafka"

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(topic, 1, 1)])
        await admin.close()
        for codec in CODECS:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec, linger_ms=20)
            await producer.start()
            futures = [await producer.send(topic, key=k, value=v, headers=h or None, timestamp_ms=ts, partition=0) for k, v, h, ts in _records("aiokafka", codec)]
            await asyncio.gather(*futures)
            await producer.stop()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        await producer.send_and_wait(topic, b"idempotent", partition=0)
        await producer.stop()

        tp = TopicPartition(topic, 0)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        await consumer.start()
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        await consumer.getmany(timeout_ms=2000)
        await consumer.offsets_for_times({tp: 0})
        await consumer.stop()

        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="golden-aiokafka", auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not await consumer.getmany(timeout_ms=500):
            pass
        await consumer.commit()
        await consumer.committed(tp)
        await consumer.stop()

    asyncio.run(run())


WORKLOADS = {"confluent": confluent_workload, "kafka-python": kafka_python_workload, "aiokafka": aiokafka_workload}


def capture(out: Path = GOLDEN) -> None:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    recorder = Recorder(out)
    proxy_port = _free_port()  # chosen first: the broker must advertise it
    config = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"}
    with Broker(config=config) as broker:
        proxy = RecordingProxy(proxy_port, (broker.host, broker.port), recorder.save)
        try:
            for client, workload in WORKLOADS.items():
                recorder.client = client
                workload(f"127.0.0.1:{proxy_port}")
                time.sleep(0.5)  # let the client's last frames (leave group, close) arrive under its name
        finally:
            proxy.close()
    frames = sorted(out.glob("*.bin"))
    print(f"{len(frames)} frames, {sum(f.stat().st_size for f in frames)} bytes in {out}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    capture(Path(sys.argv[1]) if len(sys.argv) > 1 else GOLDEN)
