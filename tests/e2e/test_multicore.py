"""``odradek serve`` over two worker processes (``worker.processes=2``, docs/multicore.md step 1): real
clients over real sockets against a real multi-process broker. What a user sees must not change: produce,
consume and groups work whichever worker holds a connection, answers come in request order, fetched records
(Fetch's and ShareFetch's, sent by the front with sendfile from its own descriptor) are the bytes stored, connections spread over the
workers, and a dead worker or supervisor stops the broker without losing an acknowledged record or leaving
a process behind."""

from __future__ import annotations

import os
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
from odradek.protocol.records import Record, build_batch
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


def one_on_each_worker(broker: Broker, connect) -> tuple:
    """Connections, one held by worker 0 and one by worker 1: opened until each worker has one (the supervisor
    hands each to the worker holding fewer; connections left from other tests may tip the count)."""
    zero, front = workers(broker)
    held: dict[int, object] = {}
    for _ in range(10):
        wire = connect(broker.bootstrap)
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
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(500, 0.2) if m.error() is None]
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
    try:
        got = [m.value for m in consumer][:200]
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
