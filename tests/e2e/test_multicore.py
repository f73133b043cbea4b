"""``odradek serve`` over two worker processes (``worker.processes=2``, docs/multicore.md step 1): real
clients over real sockets against a real multi-process broker. What a user sees must not change: produce,
consume and groups work whichever worker holds a connection, answers come in request order, fetched records
(Fetch's and ShareFetch's, sent by the front with sendfile from its own descriptor) are the bytes stored, connections spread over the
workers, and a dead worker or supervisor stops the broker without losing an acknowledged record or leaving
a process behind."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import uuid
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import Broker
from odradek.protocol.api import ApiKey, decode_response, encode_request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch, iter_records
from tests.e2e.test_share_fetch_sendfile import Sendfiles, share_fetch

CONFIG = {"worker.processes": 2, "offsets.topic.num.partitions": 1}


def workers(broker: Broker) -> list[int]:
    """The supervisor's children: worker 0 first (forked first, so the lower pid unless pids wrapped)."""
    with open(f"/proc/{broker.pid}/task/{broker.pid}/children") as f:
        return sorted(int(pid) for pid in f.read().split())


def client_ports(pid: int, port: int) -> set[int]:
    """The peer ports of the process's sockets that are connections accepted on the broker's port."""
    inodes = set()
    for target in open_files(pid):
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                local_port = int(fields[1].rsplit(":", 1)[1], 16)
                if local_port == port and fields[3] == "01" and fields[9] in inodes:  # 01: ESTABLISHED
                    ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports


def open_files(pid: int) -> list[str]:
    """What the process's descriptors point at."""
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return targets


def one_on_each_worker(broker: Broker, connect, client_id: str = "wire-test") -> tuple:
    """Connections, one held by worker 0 and one by worker 1: opened until each worker has one (the supervisor
    hands each to the worker holding fewer; connections left from other tests may tip the count)."""
    zero, front = workers(broker)
    held: dict[int, object] = {}
    for _ in range(10):
        wire = connect(broker.bootstrap, client_id)
        port = wire.sock.getsockname()[1]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # accepted by the supervisor, then passed to a worker: not at once
            holder = next((pid for pid in (zero, front) if port in client_ports(pid, broker.port)), None)
            if holder is not None:
                held.setdefault(holder, wire)
                break
            time.sleep(0.02)
        if len(held) == 2:
            return held[zero], held[front]
    raise AssertionError(f"connections not spread over the workers: {held}")


def consume_values(consumer: Consumer, count: int) -> list[bytes]:
    """The values of up to ``count`` records the subscribed consumer reads within 60 s."""
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        got += [m.value() for m in consumer.consume(500, 0.2) if m.error() is None]
    return got


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    with Broker(tmp_path_factory.mktemp("multicore"), subprocess=True, config=CONFIG) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("mc", 2, 1)])["mc"].result(15)
        yield b


def test_produce_consume_and_a_group_with_connections_on_both_workers(broker) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    values = [b"record-%05d-" % i + bytes([i % 251]) * (i % 700) for i in range(3000)]
    failures: list = []
    for i, value in enumerate(values):
        producer.produce("mc", value=value, partition=i % 2, on_delivery=lambda err, msg: err is not None and failures.append(err))
        if i % 200 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0 and failures == []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "mc-group", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["mc"])
        got = consume_values(consumer, len(values))
        assert sorted(got) == sorted(values)
        # The producer, the consumer and its coordinator connection: each worker holds some.
        held = [len(client_ports(pid, broker.port)) for pid in workers(broker)]
        assert len(held) == 2 and min(held) >= 1, held
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition("mc", 0), TopicPartition("mc", 1)], timeout=10)
        assert sum(tp.offset for tp in committed) == len(values)
    finally:
        consumer.close()


def test_kafka_python_produces_and_consumes(broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    futures = [producer.send("mc-kafka-python", value=b"kp-%d" % i) for i in range(200)]
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    assert offsets == list(range(200))
    consumer = KafkaConsumer("mc-kafka-python", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    got: list[bytes] = []
    try:
        for m in consumer:  # until the 200th record (or 10 s without one), not until 10 s without one
            got.append(m.value)
            if len(got) == 200:
                break
    finally:
        consumer.close()
    assert got == [b"kp-%d" % i for i in range(200)]


def fetch_body(topic: str, offset: int, max_bytes: int) -> dict:
    return {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": 0,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": max_bytes}]}],
    }


def test_pipelined_answers_in_order_and_fetched_bytes_whichever_worker(broker, connect) -> None:
    """Connections held at once spread over the workers (the supervisor hands each to the one with fewer);
    on one of each worker, 60 pipelined requests of three APIs come back in request order, and every fetch
    answer (records by sendfile from the front's descriptor on worker 1) is byte for byte the other's."""
    first, second = one_on_each_worker(broker, connect)
    zero, front = workers(broker)
    created = first.call(ApiKey.CreateTopics, 7, {"topics": [{"name": "mc-pipe", "num_partitions": 1, "replication_factor": 1, "configs": [{"name": "segment.bytes", "value": "65536"}]}], "timeout_ms": 5000})
    assert created.topics[0].error_code == ErrorCode.NONE
    # Enough records for several 64 KiB segments, so fetches are served from more than one segment file.
    for i in range(40):
        batch = build_batch([Record(value=bytes([i]) * 1000 + b"%d" % j) for j in range(10)])
        body = {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": "mc-pipe", "partition_data": [{"index": 0, "records": batch}]}]}
        assert first.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0].error_code == ErrorCode.NONE
    requests = []
    for i in range(60):
        kind = i % 3
        if kind == 0:
            requests.append((ApiKey.Fetch, 12, fetch_body("mc-pipe", (i * 7) % 400, 20_000 + i * 997)))
        elif kind == 1:
            requests.append((ApiKey.ApiVersions, 3, {"client_software_name": "mc", "client_software_version": "1"}))
        else:
            requests.append((ApiKey.Metadata, 12, {"topics": [{"name": "mc-pipe", "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}))
    answers = []
    for wire in (first, second):
        for correlation_id, (api, version, body) in enumerate(requests, start=100):
            wire.send(encode_request(api, version, correlation_id, body, client_id="mc-pipe"))
        frames = [wire.read_frame() for _ in requests]
        decoded = [decode_response(api, version, frame) for (api, version, _), frame in zip(requests, frames)]
        assert [correlation_id for correlation_id, _ in decoded] == list(range(100, 160))
        answers.append([response.responses[0].partitions[0].records for (api, _, _), (_, response) in zip(requests, decoded) if api == ApiKey.Fetch])
    assert all(records for records in answers[0])
    assert answers[0] == answers[1]
    # The front sent the records from its own descriptors of the segment files (sendfile), opened by name.
    assert any("/mc-pipe-0/" in target and target.endswith(".log") for target in open_files(front))
    stored = b"".join((Path(broker.log_dir) / "mc-pipe-0" / name).read_bytes() for name in sorted(os.listdir(Path(broker.log_dir) / "mc-pipe-0")) if name.endswith(".log"))
    for records in answers[1]:
        assert bytes(records) in stored  # what the front sent is what the log holds


def test_a_share_fetch_answer_goes_out_from_the_front_by_sendfile(broker, connect, tmp_path) -> None:
    """A ShareFetch on a connection the front (worker 1) holds, answered by worker 0: its records, slices of the
    segment file, leave the front by sendfile from its own descriptor of it, byte for byte as stored."""
    first, second = one_on_each_worker(broker, connect)
    _, front = workers(broker)
    created = first.call(ApiKey.CreateTopics, 7, {"topics": [{"name": "mc-share", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 5000})
    assert created.topics[0].error_code == ErrorCode.NONE
    earliest = [{"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]
    altered = first.call(ApiKey.IncrementalAlterConfigs, 1, {"resources": [{"resource_type": 32, "resource_name": "mc-share-group", "configs": earliest}], "validate_only": False})
    assert altered.responses[0].error_code == ErrorCode.NONE
    body = {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": "mc-share", "partition_data": [{"index": 0, "records": build_batch([Record(value=bytes([i]) * 10_000) for i in range(4)])}]}]}
    assert first.call(ApiKey.Produce, 9, body).responses[0].partition_responses[0].error_code == ErrorCode.NONE
    watching = Sendfiles(front, tmp_path / "strace.out")
    try:
        answer = share_fetch(second, "mc-share-group", "member", 0, created.topics[0].topic_id, max_records=500)
    finally:
        sent = watching.stop()
    stored = (Path(broker.log_dir) / "mc-share-0" / "00000000000000000000.log").read_bytes()
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in answer.acquired_records] == [(0, 3, 1)]
    assert bytes(answer.records) == stored and sent == len(stored)
    assert any(target.endswith("/mc-share-0/00000000000000000000.log") for target in open_files(front))


def produce_until_killed(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """Produce ``count`` records with acks=all, one partition; the values acknowledged."""
    acked: list[bytes] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "message.timeout.ms": 10_000, "retries": 0})
    for i in range(count):
        producer.produce(topic, value=b"acked-%06d" % i, partition=0, on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
        producer.poll(0)
    producer.flush(15)
    return acked


@pytest.mark.parametrize("which", [0, 1])
def test_a_killed_worker_stops_the_broker_and_a_restart_loses_no_acknowledged_record(tmp_path, which) -> None:
    broker = Broker(tmp_path / "logs", subprocess=True, config=CONFIG).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("mc-kill", 1, 1)])["mc-kill"].result(15)
        acked = produce_until_killed(broker.bootstrap, "mc-kill", 2000)
        assert len(acked) == 2000
        pids = workers(broker)
        os.kill(pids[which], signal.SIGKILL)
        assert broker.wait(60) != 0  # the broker stops, and says it did not stop cleanly
        assert all(gone(pid) for pid in pids)
        assert any(f"Worker {which} (pid {pids[which]}) killed by SIGKILL" in line for line in broker.output)
        assert not (tmp_path / "logs" / ".kafka_cleanshutdown").exists()
        broker.start()
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "mc-kill-check", "auto.offset.reset": "earliest"})
        try:
            consumer.assign([TopicPartition("mc-kill", 0, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < len(acked) and time.monotonic() < deadline:
                got += [m.value() for m in consumer.consume(1000, 0.5) if m.error() is None]
        finally:
            consumer.close()
        assert got[: len(acked)] == acked
    finally:
        if broker._proc is not None:
            broker.stop()


def test_a_killed_supervisor_leaves_no_worker_behind(tmp_path) -> None:
    broker = Broker(tmp_path / "logs", subprocess=True, config=CONFIG).start()
    pids = workers(broker)
    assert len(pids) == 2
    broker.kill()  # SIGKILL of the process odradek serve started: the supervisor
    deadline = time.monotonic() + 30
    while not all(gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(gone(pid) for pid in pids)


@pytest.mark.parametrize("to", ["the supervisor", "every process"])
def test_sigterm_stops_every_process_cleanly(tmp_path, to) -> None:
    """SIGTERM to the process odradek serve started, or to each of its processes at once (as a service
    manager stops a service): one clean shutdown, exit status 0."""
    broker = Broker(tmp_path / "logs", subprocess=True, config=CONFIG).start()
    pids = workers(broker)
    for pid in [broker.pid, *pids] if to == "every process" else [broker.pid]:
        os.kill(pid, signal.SIGTERM)
    assert broker.wait(60) == 0
    assert all(gone(pid) for pid in pids)
    assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()
    assert any("[worker 0]" in line and "shut down completed" in line for line in broker.output)


def test_a_hostile_client_on_either_worker_is_closed_and_the_broker_serves_on(broker, connect) -> None:
    """A frame over socket.request.max.bytes, and bytes that are no request, close that connection (worker
    0 decides, whichever worker holds it); the other connections are still answered."""
    on = one_on_each_worker(broker, connect)
    others = one_on_each_worker(broker, connect)
    for wire in on:
        wire.send((200 * 1024 * 1024).to_bytes(4, "big") + b"\0" * 1000)  # 200 MiB announced: over 100 MiB
        assert wire.closed_by_peer(10)
    for wire in one_on_each_worker(broker, connect):
        wire.send(b"\0\0\0\x08" + b"\xff" * 8)  # an unknown API key
        assert wire.closed_by_peer(10)
    for wire in others:
        assert wire.call(ApiKey.ApiVersions, 3, {"client_software_name": "mc", "client_software_version": "1"}).error_code == ErrorCode.NONE


def test_the_java_client_produces_idempotently_and_consumes(broker, probe) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("mc-java", 3, 1)])["mc-java"].result(15)
    per_codec, codecs = 300, ("none", "lz4")
    lines = probe("produce", broker.bootstrap, "mc-java", str(per_codec), *codecs)
    acked = [record for line in lines if line["step"] == "acked" for record in line["records"]]
    (consumed,) = [line for line in lines if line["step"] == "consumed"]
    assert [i for i, _, _ in acked] == list(range(per_codec * len(codecs)))
    assert sorted(consumed["records"]) == sorted([p, o, f"key-{i}", f"value-{i}"] for i, p, o in acked)


def test_a_listener_that_cannot_bind_is_one_line_and_exit_status_1(tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "odradek", "serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={tmp_path}", "--override", "worker.processes=2"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
        )
    assert done.returncode == 1
    (line,) = [line for line in done.stdout.splitlines() if " INFO " not in line]
    assert f"Exiting odradek due to fatal exception during startup: Socket server failed to bind to 127.0.0.1:{port}: Address already in use." in line
    assert "Traceback" not in done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sasl_and_the_authorizer_see_the_principal_whichever_worker_holds_the_connection(tmp_path) -> None:
    """A front forwards the SASL exchange unchanged: worker 0 authenticates it and the authorizer sees the
    user. admin (a super user) produces; alice, whom no ACL allows, is refused; each from two producers at
    once, whose connections are on both workers."""
    sasl_port = free_port()
    config = {
        **CONFIG,
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" user_alice="alice-secret";',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }
    with Broker(tmp_path / "logs", subprocess=True, config=config) as broker:
        results: dict[str, list] = {}
        for user in ("admin", "alice"):
            producers = [Producer({
                "bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": user, "sasl.password": f"{user}-secret", "message.timeout.ms": 10_000,
            }) for _ in range(2)]
            results[user] = errors = []
            for producer in producers:
                producer.produce(f"mc-sasl-{user}", b"v", on_delivery=lambda err, msg: errors.append(err))
                producer.flush(20)
            if user == "admin":  # while both producers are open: their connections are on both workers
                assert all(client_ports(pid, sasl_port) for pid in workers(broker))
            del producers
        assert results["admin"] == [None, None]
        assert len(results["alice"]) == 2 and all(err is not None and "authorization" in str(err).lower() for err in results["alice"])


# -- step 2: a front decodes a Produce request and checks its batches (broker/network/forwarded_produce.py) --


def with_crc(batch: bytes | bytearray) -> bytes:
    """The batch with its CRC recomputed (after an edit)."""
    from odradek.protocol.record_batch import compute_crc

    edited = bytearray(batch)
    edited[17:21] = compute_crc(edited, 0, len(edited)).to_bytes(4, "big")
    return bytes(edited)


def refused_batches() -> dict[str, tuple[bytes, ErrorCode]]:
    """Batches the validator refuses, each with the code Kafka answers (topics: mc-check, mc-check-compact
    with cleanup.policy=compact, mc-check-time with message.timestamp.before.max.ms=60000)."""
    good = build_batch([Record(value=b"v1", key=b"k1"), Record(value=b"v2", key=b"k2")])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0x55  # a byte of the last record: the CRC no longer matches
    short = bytearray(build_batch([Record(value=b"only", key=b"k")]))
    short[23:27] = (1).to_bytes(4, "big")  # last offset delta 1 and 2 records announced, 1 there
    short[57:61] = (2).to_bytes(4, "big")
    return {
        "crc": (bytes(corrupt), ErrorCode.CORRUPT_MESSAGE),
        "records missing": (with_crc(short), ErrorCode.INVALID_RECORD),
        "two batches": (good + good, ErrorCode.INVALID_RECORD),
        "base offset": (build_batch([Record(value=b"v")], base_offset=5), ErrorCode.INVALID_RECORD),
        "no key, compacted": (build_batch([Record(value=b"no key")]), ErrorCode.INVALID_RECORD),
        "old timestamp": (build_batch([Record(value=b"old", timestamp=1000)]), ErrorCode.INVALID_TIMESTAMP),
    }


def produce_body(topic: str, records: bytes, acks: int = 1) -> dict:
    return {"acks": acks, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}


@pytest.fixture(scope="module")
def check_topics(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = [
        NewTopic("mc-check", 1, 1),
        NewTopic("mc-check-compact", 1, 1, config={"cleanup.policy": "compact"}),
        NewTopic("mc-check-time", 1, 1, config={"message.timestamp.before.max.ms": "60000"}),
        NewTopic("mc-front-codecs", 1, 1),
        NewTopic("mc-idem", 1, 1),
    ]
    for future in admin.create_topics(topics).values():
        future.result(15)


def test_a_batch_the_front_refuses_gets_the_answer_worker_0_gives(broker, connect, check_topics) -> None:
    """Each refused batch, sent on a connection worker 0 holds and on one the front holds (where the front
    decodes the request and checks the batch): the same answer, Kafka's code and message, nothing
    appended; a good batch after them is appended at offset 0, 1 (once per connection)."""
    on_zero, on_front = one_on_each_worker(broker, connect)
    topic_of = {"no key, compacted": "mc-check-compact", "old timestamp": "mc-check-time"}
    for name, (records, code) in refused_batches().items():
        topic = topic_of.get(name, "mc-check")
        answers = [wire.call(ApiKey.Produce, 9, produce_body(topic, records)).responses[0].partition_responses[0] for wire in (on_zero, on_front)]
        # A timestamp's message names the bounds from the time of its check: the same up to the millisecond.
        seen = [(a.error_code, a.error_message, [(e.batch_index, re.sub(r"\[-?\d+, -?\d+\]", "[low, high]", e.batch_index_error_message)) for e in a.record_errors], a.base_offset) for a in answers]
        assert seen[0] == seen[1], name
        assert seen[1][0] == code, name
        # An unknown partition is reported as such before its batch is looked at, by the front or not.
        unknown = on_front.call(ApiKey.Produce, 9, produce_body("mc-check-none", records)).responses[0].partition_responses[0]
        assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name
    assert on_zero.call(ApiKey.Produce, 9, produce_body("mc-check-compact", build_batch([Record(value=b"no key")]))).responses[0].partition_responses[0].record_errors[0].batch_index_error_message == (
        "Compacted topic cannot accept message without key in topic partition mc-check-compact-0"
    )
    offsets = [wire.call(ApiKey.Produce, 9, produce_body("mc-check", build_batch([Record(value=b"good")]))).responses[0].partition_responses[0] for wire in (on_zero, on_front)]
    assert [(o.error_code, o.base_offset) for o in offsets] == [(ErrorCode.NONE, 0), (ErrorCode.NONE, 1)]


def test_produce_through_the_front_consumed_back_byte_identical(broker, connect, check_topics) -> None:
    """Batches of every codec, produced on the front's connection, are stored as the client sent them
    (offsets aside) and fetched back byte for byte; among them one that expands past what a walk on the
    event loop takes (1 MiB: the front leaves it to worker 0, which walks it on a thread)."""
    from odradek.protocol.compression import CompressionType

    _, on_front = one_on_each_worker(broker, connect)
    sent = []
    for codec in (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD):
        batch = build_batch([Record(value=b"codec-%d-%d" % (codec, i) * 20, key=b"k%d" % i, headers=[("h", b"%d" % i)]) for i in range(5)], compression=codec)
        answer = on_front.call(ApiKey.Produce, 9, produce_body("mc-front-codecs", batch))
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        sent.append((answer.responses[0].partition_responses[0].base_offset, batch))
    expanding = build_batch([Record(value=bytes(600 * 1024), key=b"big-%d" % i) for i in range(3)], compression=CompressionType.GZIP)
    answer = on_front.call(ApiKey.Produce, 9, produce_body("mc-front-codecs", expanding)).responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NONE
    sent.append((answer.base_offset, expanding))
    fetched = on_front.call(ApiKey.Fetch, 12, fetch_body("mc-front-codecs", 0, 1 << 20)).responses[0].partitions[0].records
    pos = 0
    for base_offset, batch in sent:
        stored = bytes(fetched[pos : pos + len(batch)])
        assert int.from_bytes(stored[:8], "big") == base_offset
        assert stored[8:12] == batch[8:12] and stored[16:] == batch[16:]  # the length; the magic, CRC and all after them
        pos += len(batch)
    assert pos == len(fetched)


def test_pipelined_produces_on_the_front_are_answered_in_order(broker, connect, check_topics) -> None:
    """60 requests sent at once on the front's connection, Produce (good and refused batches, each checked by
    the front) between Metadata and ApiVersions: answers in request order, the good batches at consecutive
    offsets in the order sent."""
    _, on_front = one_on_each_worker(broker, connect)
    crc, _ = refused_batches()["crc"]
    requests = []
    for i in range(60):
        if i % 4 == 3:
            requests.append((ApiKey.Metadata, 12, {"topics": [{"name": "mc-check", "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}))
        elif i % 4 == 2:
            requests.append((ApiKey.Produce, 9, produce_body("mc-check", crc)))
        else:
            requests.append((ApiKey.Produce, 9, produce_body("mc-check", build_batch([Record(value=b"pipelined-%d" % i)]))))
    data = b"".join(encode_request(api, version, correlation_id, body, client_id="mc-pipe") for correlation_id, (api, version, body) in enumerate(requests, start=500))
    on_front.send(data)
    answers = [decode_response(api, version, on_front.read_frame()) for api, version, _ in requests]
    assert [correlation_id for correlation_id, _ in answers] == list(range(500, 560))
    produced = [(i, body.responses[0].partition_responses[0]) for i, (_, body) in enumerate(answers) if requests[i][0] == ApiKey.Produce]
    assert all(p.error_code == ErrorCode.CORRUPT_MESSAGE for i, p in produced if i % 4 == 2)
    offsets = [p.base_offset for i, p in produced if i % 4 != 2]
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))


def test_idempotent_produce_through_the_front_deduplicates(broker, connect, check_topics) -> None:
    """The same idempotent batch sent twice on the front's connection (a retry): the second answer is the
    first's offset, and the log holds it once; a sequence gap is refused as Kafka refuses it."""
    _, on_front = one_on_each_worker(broker, connect)
    producer = on_front.call(ApiKey.InitProducerId, 4, {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})
    assert producer.error_code == ErrorCode.NONE
    batch = build_batch([Record(value=b"once-%d" % i) for i in range(3)], producer_id=producer.producer_id, producer_epoch=producer.producer_epoch, base_sequence=0)
    first, again = (on_front.call(ApiKey.Produce, 9, produce_body("mc-idem", batch, acks=-1)).responses[0].partition_responses[0] for _ in range(2))
    assert (first.error_code, again.error_code) == (ErrorCode.NONE, ErrorCode.NONE)
    assert again.base_offset == first.base_offset
    gap = build_batch([Record(value=b"gap")], producer_id=producer.producer_id, producer_epoch=producer.producer_epoch, base_sequence=7)
    assert on_front.call(ApiKey.Produce, 9, produce_body("mc-idem", gap, acks=-1)).responses[0].partition_responses[0].error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    fetched = on_front.call(ApiKey.Fetch, 12, fetch_body("mc-idem", 0, 1 << 20)).responses[0].partitions[0]
    assert fetched.high_watermark == 3 and bytes(fetched.records)[21:] == batch[21:]


def test_transactional_produce_through_both_workers(broker, check_topics) -> None:
    """Transactional producers (confluent-kafka), their connections on both workers: committed records are
    read once by a read_committed consumer, aborted ones never."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("mc-txn", 1, 1)])["mc-txn"].result(15)
    producers = [Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"mc-txn-{i}", "enable.idempotence": True}) for i in range(2)]
    for producer in producers:
        producer.init_transactions(20)
    assert all(client_ports(pid, broker.port) for pid in workers(broker))
    expected = []
    for round_ in range(3):
        for i, producer in enumerate(producers):
            producer.begin_transaction()
            values = [b"txn-%d-%d-%d" % (round_, i, n) for n in range(20)]
            for value in values:
                producer.produce("mc-txn", value, partition=0)
            if round_ == 1:
                producer.abort_transaction(20)
            else:
                producer.commit_transaction(20)
                expected += values
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "mc-txn-check", "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition("mc-txn", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(expected) and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(500, 0.5) if m.error() is None]
        got += [m.value() for m in consumer.consume(500, 1) if m.error() is None]
    finally:
        consumer.close()
    assert sorted(got) == sorted(expected)


def test_the_prometheus_endpoint_counts_produces_the_front_decoded(tmp_path, connect) -> None:
    """With metrics on (worker 0's endpoint), a Produce the front decoded is counted as one worker 0 decoded:
    messages and bytes in, per topic (and it is answered, not failed by the metrics' reading of it)."""
    import urllib.request

    metrics_port = free_port()
    with Broker(tmp_path / "logs", subprocess=True, config={**CONFIG, "prometheus.port": metrics_port}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("mc-metered", 1, 1)])["mc-metered"].result(15)
        on_zero, on_front = one_on_each_worker(broker, connect)
        batch = build_batch([Record(value=b"m%d" % i) for i in range(7)])
        for wire in (on_zero, on_front):
            assert wire.call(ApiKey.Produce, 9, produce_body("mc-metered", batch)).responses[0].partition_responses[0].error_code == ErrorCode.NONE
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
            text = response.read().decode()
    counted = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines() if 'topic="mc-metered"' in line and not line.startswith("#")}
    assert counted['kafka_server_brokertopicmetrics_messagesin_total{topic="mc-metered"}'] == 14
    assert counted['kafka_server_brokertopicmetrics_bytesin_total{topic="mc-metered"}'] == 2 * len(batch)


# -- step 2, continued: placement, worker 0's frames served from the channel, the front encoding answers --


@pytest.fixture(scope="module")
def fronts_broker(tmp_path_factory: pytest.TempPathFactory):
    """worker.placement=fronts: every client connection is the front's."""
    with Broker(tmp_path_factory.mktemp("multicore-fronts"), subprocess=True, config={**CONFIG, "worker.placement": "fronts"}) as b:
        yield b


def test_placement_fronts_hands_every_connection_to_the_front(fronts_broker, connect) -> None:
    """With worker.placement=fronts the supervisor hands worker 0 no client connection while the front lives:
    confluent-kafka and kafka-python produce (acks 1, all and 0) and consume through the front alone, and
    every record comes back."""
    from kafka import KafkaProducer

    zero, front = workers(fronts_broker)
    wires = [connect(fronts_broker.bootstrap) for _ in range(4)]
    producer = Producer({"bootstrap.servers": fronts_broker.bootstrap, "acks": "all", "linger.ms": 0})
    values = [b"fronts-%04d" % i for i in range(300)]
    failures: list = []
    for value in values[:200]:
        producer.produce("mc-fronts", value, on_delivery=lambda err, msg: err is not None and failures.append(err))
        producer.poll(0)
    assert producer.flush(30) == 0 and failures == []
    kp = KafkaProducer(bootstrap_servers=fronts_broker.bootstrap, acks=0)
    for value in values[200:]:
        kp.send("mc-fronts", value)
    kp.flush(30)
    ports = {wire.sock.getsockname()[1] for wire in wires}
    deadline = time.monotonic() + 10
    while not ports <= client_ports(front, fronts_broker.port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ports <= client_ports(front, fronts_broker.port)
    assert client_ports(zero, fronts_broker.port) == set()
    consumer = Consumer({"bootstrap.servers": fronts_broker.bootstrap, "group.id": "mc-fronts", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["mc-fronts"])
        got = consume_values(consumer, len(values))
        assert sorted(got) == values
        assert client_ports(zero, fronts_broker.port) == set()
    finally:
        consumer.close()
        kp.close()


def produce_frames(wire, requests: list[tuple[int, dict]], client_id: str = "mc-answers") -> list[bytes]:
    """Each (version, body) sent as a Produce request in turn; the raw answer frames of those with acks other
    than 0 (acks 0 has none), read after all were sent."""
    for correlation_id, (version, body) in enumerate(requests, start=1000):
        wire.send(encode_request(ApiKey.Produce, version, correlation_id, body, client_id=client_id))
    return [wire.read_frame() for _, body in requests if body["acks"] != 0]


def test_produce_answers_byte_identical_on_worker_0_and_the_front_at_every_version(broker, connect, check_topics) -> None:
    """At every Produce version worker 0 serves, the same requests on a connection of worker 0 and on one of the
    front (where worker 0 serves the front's decoded request from the channel, and the front builds the
    answer from the outcome worker 0 sends): answers byte for byte the same, topic names aside. The requests
    cover two topics with three partitions (one unknown), a corrupt batch, a compacted topic's key-less
    record (record errors from v8), an unknown topic, acks 0 (no answer) between them and acks all."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([
        NewTopic(f"mc-ans-{side}", 2, 1) for side in "ab"
    ] + [NewTopic(f"mc-ans-c{side}", 1, 1, config={"cleanup.policy": "compact"}) for side in "ab"]).values():
        future.result(15)
    on_zero, on_front = one_on_each_worker(broker, connect)
    good = build_batch([Record(value=b"answer", key=b"k")])
    corrupt, _ = refused_batches()["crc"]
    keyless = build_batch([Record(value=b"no key"), Record(value=b"no key either")])
    frames = []
    for side, wire in (("a", on_zero), ("b", on_front)):
        topic, compacted = f"mc-ans-{side}", f"mc-ans-c{side}"
        requests = []
        for version in range(0, 13):
            requests += [
                (version, {"acks": 1, "timeout_ms": 5000, "topic_data": [
                    {"name": topic, "partition_data": [{"index": 0, "records": good}, {"index": 1, "records": corrupt}, {"index": 7, "records": good}]},
                    {"name": compacted, "partition_data": [{"index": 0, "records": keyless}]},
                    {"name": "mc-ans-none", "partition_data": [{"index": 0, "records": good}]},
                ]}),
                (version, {"acks": 0, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 1, "records": good}]}]}),
                (version, {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 1, "records": good}]}]}),
            ]
        frames.append(produce_frames(wire, requests))
    assert len(frames[0]) == len(frames[1]) == 26
    for version, zero, front in zip((v for v in range(13) for _ in range(2)), *frames):
        assert zero.replace(b"mc-ans-a", b"mc-ans-b").replace(b"mc-ans-ca", b"mc-ans-cb") == front, version
    # What they say: the good batch appended, each refusal with its code, record errors where the version has them.
    last = decode_response(ApiKey.Produce, 12, frames[1][-2])[1]
    codes = [[(p.index, p.error_code) for p in t.partition_responses] for t in last.responses]
    assert codes == [[(0, ErrorCode.NONE), (1, ErrorCode.CORRUPT_MESSAGE), (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)], [(0, ErrorCode.INVALID_RECORD)], [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]]
    assert [e.batch_index for e in last.responses[1].partition_responses[0].record_errors] == [0, 1]
    # Every acks 0 and acks all batch of partition 1 was appended, in order, after the partition's own.
    assert decode_response(ApiKey.Produce, 12, frames[1][-1])[1].responses[0].partition_responses[0].base_offset == 2 * 13 - 1


def test_throttle_time_in_answers_built_by_the_front(broker, connect, check_topics) -> None:
    """A client over its producer_byte_rate: the throttle time is in the answer on the front's connection as on
    worker 0's (the rest of the answer the same)."""
    on_zero, on_front = one_on_each_worker(broker, connect, client_id="mc-throttled")
    entry = {"entity": [{"entity_type": "client-id", "entity_name": "mc-throttled"}], "ops": [{"key": "producer_byte_rate", "value": 1000.0, "remove": False}]}
    assert on_zero.call(ApiKey.AlterClientQuotas, 1, {"entries": [entry], "validate_only": False}).entries[0].error_code == ErrorCode.NONE
    time.sleep(0.5)  # the quota reaches the quota manager
    big = build_batch([Record(value=bytes(50_000))])
    answers = []
    for wire in (on_zero, on_front):
        frame = produce_frames(wire, [(9, produce_body("mc-check", big))], client_id="mc-throttled")[0]
        answers.append(decode_response(ApiKey.Produce, 9, frame)[1])
    assert all(a.throttle_time_ms > 0 for a in answers), [a.throttle_time_ms for a in answers]
    assert [a.responses[0].partition_responses[0].error_code for a in answers] == [ErrorCode.NONE, ErrorCode.NONE]


def test_pipelined_behind_a_waiting_produce_on_the_front_in_order(broker, connect, check_topics) -> None:
    """On the front's connection, a Produce whose answer waits (a batch expanding past 1 MiB, walked on a
    thread) with small Produce (acks 1, 0 and all) and Metadata requests pipelined behind it: answers in
    request order, the batches appended in the order sent."""
    from odradek.protocol.compression import CompressionType

    _, on_front = one_on_each_worker(broker, connect)
    expanding = build_batch([Record(value=bytes(600 * 1024), key=b"big-%d" % i) for i in range(3)], compression=CompressionType.GZIP)
    requests: list[tuple[int, int, dict]] = [(ApiKey.Produce, 9, produce_body("mc-front-codecs", expanding, acks=-1))]
    for i in range(30):
        if i % 10 == 9:
            requests.append((ApiKey.Metadata, 12, {"topics": [{"name": "mc-front-codecs", "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}))
        else:
            requests.append((ApiKey.Produce, 9, produce_body("mc-front-codecs", build_batch([Record(value=b"behind-%d" % i)]), acks=(1, 0, -1)[i % 3])))
    on_front.send(b"".join(encode_request(api, version, correlation_id, body, client_id="mc-behind") for correlation_id, (api, version, body) in enumerate(requests, start=700)))
    answered = [(correlation_id, request) for correlation_id, request in enumerate(requests, start=700) if request[0] != ApiKey.Produce or request[2]["acks"] != 0]
    answers = [decode_response(api, version, on_front.read_frame()) for _, (api, version, _) in answered]
    assert [correlation_id for correlation_id, _ in answers] == [correlation_id for correlation_id, _ in answered]
    produced = [body.responses[0].partition_responses[0] for (_, (api, _, _)), (_, body) in zip(answered, answers) if api == ApiKey.Produce]
    assert all(p.error_code == ErrorCode.NONE for p in produced)
    first = produced[0].base_offset
    fetched = on_front.call(ApiKey.Fetch, 12, fetch_body("mc-front-codecs", first + 3, 1 << 20)).responses[0].partitions[0].records
    data, values, pos = bytes(fetched), [], 0
    while pos < len(data):  # one record per batch
        values += [r.value for r in iter_records(data, pos)]
        pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
    assert values == [b"behind-%d" % i for i in range(30) if i % 10 != 9]


def test_an_acks_0_produce_refused_closes_the_connection_on_either_worker(broker, connect, check_topics) -> None:
    """acks=0 gets no answer, and a refused one closes the connection (so the client notices), whichever
    worker holds it; an acks=0 produce that was appended leaves it open and the next answer is the next
    request's."""
    corrupt, _ = refused_batches()["crc"]
    for wire in one_on_each_worker(broker, connect):
        frames = produce_frames(wire, [(9, produce_body("mc-check", build_batch([Record(value=b"quiet")]), acks=0)), (9, produce_body("mc-check", build_batch([Record(value=b"loud")])))])
        assert len(frames) == 1 and int.from_bytes(frames[0][:4], "big") == 1001
        wire.send(encode_request(ApiKey.Produce, 9, 5, produce_body("mc-check", corrupt, acks=0)))
        assert wire.closed_by_peer(10)
