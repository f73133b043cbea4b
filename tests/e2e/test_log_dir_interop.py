"""The on-disk format in both directions against Apache Kafka 3.9.1.

The same data -- topics with several partitions, a compacted one, one compacted while the broker runs, a
LogAppendTime one; records in every codec with keys, headers and timestamps from idempotent producers; two
consumer groups' committed offsets, one of them a subscribed group so that group metadata is written too --
goes once into an odradek broker and once into a real Kafka (ZooKeeper mode), both with small segments and
index intervals so that every partition rolls several segments. Both also get transactions, one of them
aborted. Both are stopped cleanly. Then:

* Kafka's ``kafka-dump-log`` (DumpLogSegments) and ``odradek dump-log`` print the same thing for every
  segment, index, time index, transaction index and producer snapshot of odradek's directory, of Kafka's,
  and of Kafka's after odradek served and appended to it, and Kafka's tool finds every index consistent
  with its log (``--index-sanity-check``, ``--verify-index-only``);
* odradek started on (a copy of) Kafka's directory serves what Kafka served before it stopped: the topics
  and their partition counts, every record (aborted transactions hidden from READ_COMMITTED consumers),
  ListOffsets answers, committed group offsets and the groups themselves.
"""

from __future__ import annotations

import random
import re
import shutil
import socket
import struct
import subprocess as sp
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import kafka_jvm
from odradek import Broker
from odradek.storage.file_records import FileRecords

SETTINGS = {
    "log.segment.bytes": "4096",
    "log.index.interval.bytes": "256",
    "log.cleaner.backoff.ms": "200",
    "transaction.state.log.num.partitions": "2",
}
"""Given to both brokers: segments roll every few batches, indexes get an entry every few hundred bytes,
and the log cleaner looks for work often."""

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS_PER_CODEC = 150
NO_COMPACTION_YET = {"min.compaction.lag.ms": "3600000"}
"""Keeps both brokers' cleaners off the compacted topic while the test runs, so what was produced stays."""

TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    "interop-events": (3, {}),
    "interop-compacted": (2, {"cleanup.policy": "compact", **NO_COMPACTION_YET}),
    "interop-append-time": (1, {"message.timestamp.type": "LogAppendTime"}),
    "interop-cleaned": (1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}),
}
CLEANED = ("interop-cleaned", 0)
"""Compacted while the broker runs: its cleaned segments, tombstones with a delete horizon, are compared too."""
TRANSACTIONS = "interop-transactions"
"""Committed and aborted transactions, written into either broker."""
ASSIGNED_GROUP = "interop-assigned"
SUBSCRIBED_GROUP = "interop-subscribed"
CLIENT_QUIET = {"log_level": 0}


# --- the data, produced the same way into either broker -------------------------------------------------------


def create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_QUIET})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs) for name, (partitions, configs) in TOPICS.items()])
    for future in futures.values():
        future.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # Kafka elects the leaders a moment after answering CreateTopics
        topics = admin.list_topics(timeout=10).topics
        if all(name in topics and all(p.leader >= 0 for p in topics[name].partitions.values()) for name in TOPICS):
            return
        time.sleep(0.1)
    raise AssertionError("topics have no leaders after 30 s")


def produce(bootstrap: str, topic: str, codec: str, records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]], int]]) -> None:
    """(partition, key, value, headers, timestamp) tuples, from one idempotent producer, in small batches."""
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "compression.type": codec,
        "batch.size": 2048,
        "linger.ms": 20,
        **CLIENT_QUIET,
    })
    errors: list[Any] = []
    for partition, key, value, headers, timestamp in records:
        producer.produce(topic, value, key, partition=partition, headers=headers, timestamp=timestamp,
                         on_delivery=lambda err, _msg: err is not None and errors.append(err))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors


def commit(bootstrap: str, group: str, offsets: list[tuple[str, int, int, str | None]]) -> None:
    """OffsetCommit of (topic, partition, offset, metadata) by a consumer that is no group member."""
    from confluent_kafka import Consumer, TopicPartition

    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **CLIENT_QUIET})
    try:
        committer.commit(offsets=[TopicPartition(t, p, o, **({} if m is None else {"metadata": m})) for t, p, o, m in offsets], asynchronous=False)
    finally:
        committer.close()


def populate(bootstrap: str) -> None:
    """Everything the test reads back, written through real clients."""
    from confluent_kafka import Consumer

    create_topics(bootstrap)
    base = int(time.time() * 1000) - 3_600_000  # recent: no time-based retention deletes them
    text = b"odradek and kafka share one on-disk format; " * 6
    noise = random.Random(10)  # hex digits: printable, and not so compressible that batches stay tiny
    runs: list[list[tuple[str, str, list]]] = []  # each run's producers one after the other, runs at once
    for n, codec in enumerate(CODECS):
        records = []
        for i in range(RECORDS_PER_CODEC):
            partition = i % 3
            key = None if i % 17 == 0 else f"key-{i % 23}".encode()
            value = None if i % 29 == 0 else b"%s %d %s %s" % (codec.encode(), i, noise.randbytes(10 + i % 40).hex().encode(), text[: 7 * (i % 30)])
            headers = [("codec", codec.encode()), ("i", str(i).encode())] if i % 2 else []
            records.append((partition, key, value, headers, base + n * 60_000 + i * 250))
        runs.append([("interop-events", codec, records)])
    compacted = [(i % 2, f"user-{i % 9}".encode(), None if i % 31 == 30 else b"state %d " % i + text, [], base + i) for i in range(120)]
    runs.append([("interop-compacted", "lz4", compacted)])
    runs.append([("interop-append-time", codec, [(0, b"a%d" % i, b"appended %d" % i, [("h", b"v")], base + i) for i in range(40)]) for codec in ("zstd", "none")])
    # Every key written twice, the second time later (and two keys' last write a tombstone), then records of
    # other keys until the tombstones are in a segment the cleaner may clean. The second writes have later
    # timestamps than the first: a cleaned segment whose largest timestamp is in a batch the cleaner emptied
    # gets a time index entry pointing at that empty batch -- Kafka's cleaner writes it, odradek's too --
    # which Kafka's tool then reports as a timestamp mismatch ("log timestamp: -1").
    runs.append([
        *(("interop-cleaned", codec, [
            (0, b"id-%d" % (i % 15), None if n and i >= 135 and i % 15 in (3, 7) else b"v%d " % i + text[:80], [], base + 1000 * n + i)
            for i in range(150)
        ]) for n, codec in enumerate(("none", "gzip"))),
        ("interop-cleaned", "none", [(0, b"other-%d" % i, b"w%d " % i + text[:80], [], base + 2000 + i) for i in range(80)]),
    ])
    with ThreadPoolExecutor(len(runs)) as pool:
        for done in [pool.submit(lambda run: [produce(bootstrap, *step) for step in run], run) for run in runs]:
            done.result()

    commit(bootstrap, ASSIGNED_GROUP, [("interop-events", p, 10 * (p + 1), f"meta-{p}") for p in range(3)] + [("interop-compacted", 1, 7, None)])
    subscriber = Consumer({
        "bootstrap.servers": bootstrap, "group.id": SUBSCRIBED_GROUP, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "client.id": "interop-subscriber", **CLIENT_QUIET,
    })
    try:
        subscriber.subscribe(["interop-append-time"])
        deadline = time.monotonic() + 30
        consumed = 0
        while consumed < 25 and time.monotonic() < deadline:
            consumed += sum(1 for m in subscriber.consume(25 - consumed, 0.5) if m.error() is None)
        assert consumed == 25, consumed
        subscriber.commit(asynchronous=False)
    finally:
        subscriber.close()


# --- what clients observe of a broker --------------------------------------------------------------------------


@dataclass
class Observed:
    """What a user of the broker sees of the data: compared between Kafka and odradek on Kafka's files."""

    topics: dict[str, int]
    records: dict[tuple[str, int], list[tuple]]
    uncommitted_records: dict[tuple[str, int], list[tuple]]
    list_offsets: dict[tuple[str, int, str], tuple[int, int, int | None]]
    groups: dict[str, dict[tuple[str, int], tuple[int, str]]]
    group_states: dict[str, tuple]
    read_committed_fetches: dict[tuple[int, int], tuple]


def observe(bootstrap: str) -> Observed:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_QUIET})
    topics = {name: len(t.partitions) for name, t in admin.list_topics(timeout=10).topics.items()}
    partitions = [(name, p) for name, count in topics.items() if name.startswith("interop-") for p in range(count)]
    records = read_everything(bootstrap, partitions, "read_committed")
    uncommitted = read_everything(bootstrap, partitions, "read_uncommitted")

    specs: dict[tuple[str, int], list[tuple[str, Any]]] = {}
    for topic, p in partitions:
        stamps = sorted({r[4][1] for r in records[(topic, p)]})
        specs[(topic, p)] = [("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest()), ("max-timestamp", OffsetSpec.max_timestamp())] + [
            (f"at {t}", OffsetSpec.for_timestamp(t)) for t in [stamps[0] - 1, *stamps[:: max(1, len(stamps) // 12)], stamps[-1], stamps[-1] + 1]
        ]
    futures: dict[tuple[str, int, str], Future] = {}
    for round_ in range(max(map(len, specs.values()))):  # one request per round: a spec for every partition
        asked = {(t, p): specs[(t, p)][round_] for t, p in partitions if round_ < len(specs[(t, p)])}
        answers = admin.list_offsets({TopicPartition(t, p): spec for (t, p), (_, spec) in asked.items()})
        for tp, future in answers.items():
            futures[(tp.topic, tp.partition, asked[(tp.topic, tp.partition)][0])] = future
    list_offsets = {}
    for key, future in futures.items():
        info = future.result(30)
        list_offsets[key] = (info.offset, info.timestamp, info.leader_epoch)

    groups = {}
    for group in (ASSIGNED_GROUP, SUBSCRIBED_GROUP):
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
        groups[group] = {(tp.topic, tp.partition): (tp.offset, tp.metadata) for tp in result.topic_partitions}
    listed = admin.list_consumer_groups().result(30)
    group_states = {g.group_id: (g.is_simple_consumer_group, str(g.state)) for g in listed.valid if g.group_id.startswith("interop-")}
    for group, future in admin.describe_consumer_groups(sorted(group_states)).items():
        described = future.result(30)
        group_states[group] += (described.is_simple_consumer_group, described.partition_assignor, str(described.state), len(described.members))
    fetches = read_committed_fetches(bootstrap) if TRANSACTIONS in topics else {}
    return Observed(topics, records, uncommitted, list_offsets, groups, group_states, fetches)


def read_committed_fetches(bootstrap: str) -> dict[tuple[int, int], tuple]:
    """READ_COMMITTED Fetch answers for the transactional partition, from before, inside and after the
    aborted transaction, whole and one batch at a time: (error, high watermark, last stable offset,
    aborted transactions) by (fetch offset, partition max bytes)."""
    from odradek.protocol.api import ApiKey, decode_response, encode_request

    host, port = bootstrap.rsplit(":", 1)
    answers = {}
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        reader = sock.makefile("rb")
        for correlation_id, (offset, max_bytes) in enumerate((o, m) for o in (0, 10, 11, 16, 17, 18, 22) for m in (1, 1 << 20)):
            body = {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 1, "session_id": 0,
                "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic": TRANSACTIONS, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1, "partition_max_bytes": max_bytes}
                ]}],
            }
            sock.sendall(encode_request(ApiKey.Fetch, 11, correlation_id, body, client_id="interop"))
            (size,) = struct.unpack(">i", reader.read(4))
            _, response = decode_response(ApiKey.Fetch, 11, reader.read(size))
            answer = response.responses[0].partitions[0]
            aborted = [(t.producer_id, t.first_offset) for t in answer.aborted_transactions or []]
            answers[(offset, max_bytes)] = (answer.error_code, answer.high_watermark, answer.last_stable_offset, aborted)
    return answers


def read_everything(bootstrap: str, partitions: list[tuple[str, int]], isolation: str) -> dict[tuple[str, int], list[tuple]]:
    """Every record a consumer with this isolation level is given, by partition."""
    from confluent_kafka import Consumer, TopicPartition

    records: dict[tuple[str, int], list[tuple]] = {tp: [] for tp in partitions}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "interop-reader", "enable.auto.commit": False,
                         "isolation.level": isolation, **CLIENT_QUIET})
    try:
        ends = {(t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10) for t, p in partitions}
        consumer.assign([TopicPartition(t, p, ends[(t, p)][0]) for t, p in partitions])
        deadline = time.monotonic() + 30
        unread = list(partitions)
        while unread and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.2):
                assert m.error() is None, m.error()
                records[(m.topic(), m.partition())].append((m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()))
            # the position passes markers and compacted-away offsets no record shows
            unread = [(tp.topic, tp.partition) for tp in consumer.position([TopicPartition(t, p) for t, p in unread]) if tp.offset < ends[(tp.topic, tp.partition)][1]]
        assert not unread, f"not read to the end within 30 s: {unread}"
    finally:
        consumer.close()
    return records


def produce_transactions(bootstrap: str) -> None:
    """A committed transaction, an aborted one, a committed one (control batches, a transaction index entry,
    ``__transaction_state``)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_QUIET})
    admin.create_topics([NewTopic(TRANSACTIONS, 1, 1)])[TRANSACTIONS].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "interop-txn", **CLIENT_QUIET})
    producer.init_transactions(30)
    for n, (count, commit) in enumerate([(10, True), (6, False), (4, True)]):
        producer.begin_transaction()
        for i in range(count):
            producer.produce(TRANSACTIONS, b"txn %d record %d" % (n, i), b"k%d" % i)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)
            producer.abort_transaction(30)


# --- the two directories ------------------------------------------------------------------------------------------


def wait_until_cleaned(log_dir: Path) -> None:
    """Until the log cleaner has cleaned the compacted topic up to its active segment (its checkpoint file
    says how far it got): after that it has nothing left to clean there."""
    checkpoint = log_dir / "cleaner-offset-checkpoint"
    partition_dir = log_dir / f"{CLEANED[0]}-{CLEANED[1]}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        active = max(int(f.name.split(".")[0]) for f in partition_dir.glob("*.log"))
        if checkpoint.exists() and f"{CLEANED[0]} {CLEANED[1]} {active}\n" in checkpoint.read_text():
            return
        time.sleep(0.2)
    raise AssertionError(f"{CLEANED} was not cleaned up to its active segment within 60 s")


@dataclass
class WrittenDir:
    """A cleanly stopped broker's log directory and what clients saw of it just before the stop."""

    log_dir: Path
    observed: Observed


@pytest.fixture(scope="module")
def odradek_written(tmp_path_factory: pytest.TempPathFactory) -> WrittenDir:
    broker = Broker(log_dir=tmp_path_factory.mktemp("odradek-written"), subprocess=True, config={**kafka_jvm.BROKER_SETTINGS, **SETTINGS})
    with broker:
        populate(broker.bootstrap)
        produce_transactions(broker.bootstrap)
        wait_until_cleaned(broker.log_dir)
        observed = observe(broker.bootstrap)
    return WrittenDir(broker.log_dir, observed)


@pytest.fixture(scope="module")
def kafka_written(tmp_path_factory: pytest.TempPathFactory) -> WrittenDir:
    try:
        kafka_jvm.jar_dir("kafka")
    except kafka_jvm.JvmUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    root = tmp_path_factory.mktemp("kafka-written")
    zookeeper = kafka_jvm.ZooKeeper(root / "zookeeper").start()
    try:
        kafka = kafka_jvm.KafkaBroker(root / "kafka", zookeeper.connect, settings=SETTINGS).start()
        try:
            populate(kafka.bootstrap)
            produce_transactions(kafka.bootstrap)
            wait_until_cleaned(kafka.log_dir)
            observed = observe(kafka.bootstrap)
        finally:
            kafka.stop()
        assert kafka.process is not None and kafka.process.proc.returncode in (0, 143), kafka.server_log()
        assert (kafka.log_dir / ".kafka_cleanshutdown").exists(), kafka.server_log()
    finally:
        zookeeper.stop()
    return WrittenDir(kafka.log_dir, observed)


@pytest.fixture(scope="module")
def kafka_dir_served(kafka_written: WrittenDir, tmp_path_factory: pytest.TempPathFactory) -> WrittenDir:
    """odradek started on a copy of Kafka's directory (the original stays as Kafka left it): what clients
    observe first, then more records and commits appended by odradek to Kafka's segments, then a clean stop."""
    copy = tmp_path_factory.mktemp("kafka-dir-served") / "kafka-logs"
    shutil.copytree(kafka_written.log_dir, copy)
    broker_id = dict(line.split("=", 1) for line in (copy / "meta.properties").read_text().splitlines() if "=" in line)["broker.id"]
    with Broker(log_dir=copy, subprocess=True, config={**kafka_jvm.BROKER_SETTINGS, **SETTINGS, "broker.id": broker_id}) as broker:
        observed = observe(broker.bootstrap)
        now = int(time.time() * 1000)
        for codec in ("none", "zstd"):
            produce(broker.bootstrap, "interop-events", codec, [(i % 3, b"more-%d" % i, b"appended by odradek %d" % i * 3, [], now + i) for i in range(45)])
        produce(broker.bootstrap, "interop-append-time", "gzip", [(0, None, b"later %d" % i, [], now) for i in range(20)])
        commit(broker.bootstrap, ASSIGNED_GROUP, [("interop-events", 0, 99, "after the move")])
    return WrittenDir(copy, observed)


# --- dump-log, Kafka's and ours ---------------------------------------------------------------------------------


def partition_files(log_dirs: list[Path], suffixes: tuple[str, ...], internal_topic: str | None = None) -> list[str]:
    """The files of an internal topic's partitions, or (None) of the other topics', whose names end with one
    of ``suffixes`` (``"."``: any name with a dot)."""
    return [
        str(f) for log_dir in log_dirs for f in sorted(f for suffix in suffixes for f in log_dir.glob(f"*-*/*{suffix}*" if suffix == "." else f"*-*/*{suffix}"))
        if (f.parent.name.rpartition("-")[0] == internal_topic if internal_topic else not f.parent.name.startswith("__"))
    ]


def both_dump_logs(files: list[str], *options: str) -> tuple[sp.CompletedProcess[str], sp.CompletedProcess[str]]:
    assert files
    argv = ["--files", ",".join(files), *options]
    kafka = kafka_jvm.run_tool("kafka-dump-log", *argv)
    ours = sp.run([sys.executable, "-m", "odradek", "dump-log", *argv], capture_output=True, text=True, timeout=120)
    return kafka, ours


_EMPTIED = re.compile(r"Found timestamp mismatch in :(?P<path>\S+)\.timeindex\n  Index timestamp: (?P<timestamp>\d+), log timestamp: -1\n")


def strip_emptied_batch_reports(stderr: str) -> str:
    """``kafka-dump-log --verify-index-only``'s report without its mismatches at batches the cleaner emptied.

    The cleaner keeps a producer's last batch when all its records are compacted away, as an empty batch that
    still carries the producer's fields and the batch's max timestamp (Kafka's ``MemoryRecords.filterTo``,
    ``writeEmptyHeader``), and counts that timestamp for the cleaned segment's time index
    (``updateRetainedBatchMetadata(batch, 0, true)``, then ``LogSegment.onBecomeInactiveSegment``). The tool
    takes the max timestamp of the records it finds there, none, so Kafka's own cleaned logs get the same
    report. Each report taken out is checked to be that: an empty batch of the segment with that timestamp."""

    def emptied(match: re.Match[str]) -> str:
        timestamp = int(match["timestamp"])
        records = FileRecords.open(Path(match["path"] + ".log"), writable=False)
        try:
            assert any(header.records_count == 0 and header.max_timestamp == timestamp for _, header, _ in records.batches()), match[0]
        finally:
            records.close()
        return ""

    return _EMPTIED.sub(emptied, stderr)


def assert_same_dump(kafka: sp.CompletedProcess[str], ours: sp.CompletedProcess[str]) -> None:
    assert kafka.returncode == 0, kafka.stderr
    assert ours.stderr == kafka.stderr
    assert ours.stdout.splitlines() == kafka.stdout.splitlines()
    assert ours.returncode == 0


DUMPS = {
    # partition.metadata and the cleaner's .deleted leftovers too, which both tools ignore
    "every-file": ((".",), None, ()),
    "deep-iteration": ((".log",), None, ("--deep-iteration",)),
    "print-data-log": ((".log",), None, ("--print-data-log",)),
    "payloads-of-the-first-bytes": ((".log",), None, ("--print-data-log", "--skip-record-metadata", "--max-bytes", "2500")),
    "offsets-decoder": ((".log", ".snapshot"), "__consumer_offsets", ("--offsets-decoder",)),
    "transaction-log-decoder": ((".log",), "__transaction_state", ("--transaction-log-decoder",)),
}
"""kafka-dump-log runs compared: (file kinds, of that internal topic or of the others, options)."""


@pytest.fixture(scope="module")
def log_dirs(odradek_written: WrittenDir, kafka_written: WrittenDir, kafka_dir_served: WrittenDir) -> list[Path]:
    """odradek's directory, Kafka's, and Kafka's after odradek served and appended to it: each tool runs
    once over the files of all three (a JVM start costs seconds)."""
    return [odradek_written.log_dir, kafka_written.log_dir, kafka_dir_served.log_dir]


@pytest.mark.parametrize("dump", DUMPS)
def test_kafka_dump_log_and_ours_print_the_same(log_dirs: list[Path], dump: str) -> None:
    kinds, internal_topic, options = DUMPS[dump]
    files = partition_files(log_dirs, kinds, internal_topic)
    kafka, ours = both_dump_logs(files, *options)
    assert_same_dump(kafka, ours)
    assert kafka.stdout.count("Dumping ") == len(files)


@pytest.mark.parametrize("check", ["--index-sanity-check", "--verify-index-only"])
def test_kafka_finds_the_indexes_consistent(log_dirs: list[Path], check: str) -> None:
    files = [f for topic in (None, "__consumer_offsets", "__transaction_state") for f in partition_files(log_dirs, (".index", ".timeindex"), topic)]
    kafka, ours = both_dump_logs(files, check)
    assert kafka.returncode == 0 and strip_emptied_batch_reports(kafka.stderr) == "", kafka.stderr
    assert ours.stderr == kafka.stderr
    if check == "--index-sanity-check":
        assert all(line.startswith("Dumping ") or line.endswith((" passed sanity check.", " is empty.")) for line in kafka.stdout.splitlines())
    else:
        assert all(line.startswith("Dumping ") or line.endswith(" is empty.") for line in kafka.stdout.splitlines())
    assert_same_dump(kafka, ours)


def test_a_file_name_without_a_dot_stops_both_tools_there(odradek_written: WrittenDir) -> None:
    partition = odradek_written.log_dir / "interop-events-0"
    files = [str(partition / "00000000000000000000.index"), str(partition / "leader-epoch-checkpoint"), str(partition / "00000000000000000000.log")]
    kafka, ours = both_dump_logs(files)
    assert kafka.returncode == ours.returncode == 1
    assert "StringIndexOutOfBoundsException" in kafka.stderr and "StringIndexOutOfBoundsException" in ours.stderr
    assert ours.stdout == kafka.stdout
    assert kafka.stdout.splitlines()[-1] == f"Dumping {files[1]}"


def test_the_directories_hold_rolled_segments_producer_snapshots_and_cleaned_segments(log_dirs: list[Path]) -> None:
    """So the comparisons above cover rolled segments, producer state and compaction's tombstones."""
    for log_dir in log_dirs:
        events = log_dir / "interop-events-0"
        assert len(list(events.glob("*.log"))) >= 3
        assert list(events.glob("*.snapshot"))
        cleaned = partition_files([log_dir], (".log",))
        dump = sp.run([sys.executable, "-m", "odradek", "dump-log", "--files", ",".join(f for f in cleaned if f"/{CLEANED[0]}-" in f)],
                      capture_output=True, text=True, timeout=60, check=True)
        assert "count: 0 " in dump.stdout  # a batch the cleaner emptied, kept for its producer's sequence
        assert "deleteHorizonMs: OptionalLong[" in dump.stdout  # tombstones kept until the horizon


# --- odradek serving Kafka's directory ------------------------------------------------------------------------------


def test_odradek_serves_kafkas_topics(kafka_written: WrittenDir, kafka_dir_served: WrittenDir) -> None:
    assert kafka_dir_served.observed.topics == kafka_written.observed.topics
    assert kafka_written.observed.topics["__consumer_offsets"] == 50


def test_odradek_serves_every_record_kafka_held(kafka_written: WrittenDir, kafka_dir_served: WrittenDir) -> None:
    expected = kafka_written.observed.records
    assert sum(map(len, expected.values())) >= len(CODECS) * RECORDS_PER_CODEC + 120 + 80 + 13 + 80
    assert kafka_dir_served.observed.records == expected


def test_odradek_hides_the_aborted_transaction_from_read_committed_consumers_as_kafka_did(kafka_written: WrittenDir, kafka_dir_served: WrittenDir) -> None:
    committed = [r[2] for r in kafka_written.observed.records[(TRANSACTIONS, 0)]]
    assert committed == [b"txn 0 record %d" % i for i in range(10)] + [b"txn 2 record %d" % i for i in range(4)]
    assert len(kafka_written.observed.uncommitted_records[(TRANSACTIONS, 0)]) == 20
    assert kafka_dir_served.observed.records[(TRANSACTIONS, 0)] == kafka_written.observed.records[(TRANSACTIONS, 0)]
    assert kafka_dir_served.observed.uncommitted_records == kafka_written.observed.uncommitted_records
    fetches = kafka_written.observed.read_committed_fetches
    assert any(aborted for _, _, _, aborted in fetches.values()) and any(not aborted for _, _, _, aborted in fetches.values())
    assert kafka_dir_served.observed.read_committed_fetches == fetches


def test_odradek_keeps_the_same_transactions_as_kafka(odradek_written: WrittenDir, kafka_written: WrittenDir) -> None:
    """The same transactions written into odradek: its markers, transaction index and last stable offset make
    READ_COMMITTED consumers read what Kafka's did, and READ_UNCOMMITTED ones every record."""
    def seen(observed: dict[tuple[str, int], list[tuple]]) -> list[tuple]:
        return [(offset, key, value) for offset, key, value, _, _ in observed[(TRANSACTIONS, 0)]]  # timestamps differ

    assert seen(odradek_written.observed.records) == seen(kafka_written.observed.records)
    assert seen(odradek_written.observed.uncommitted_records) == seen(kafka_written.observed.uncommitted_records)
    assert (odradek_written.log_dir / f"{TRANSACTIONS}-0" / "00000000000000000000.txnindex").exists()


def test_odradek_answers_list_offsets_as_kafka_did(kafka_written: WrittenDir, kafka_dir_served: WrittenDir) -> None:
    expected = kafka_written.observed.list_offsets
    assert expected[("interop-events", 0, "latest")][0] == len(CODECS) * RECORDS_PER_CODEC // 3
    # Many distinct answers, so the comparison below means something. Told apart by partition: the five codecs'
    # producers write at once, and how their batches interleave decides how many lookups share an offset.
    assert len({(p, offset) for (topic, p, how), (offset, _, _) in expected.items() if topic == "interop-events" and how.startswith("at ")}) > 10
    assert kafka_dir_served.observed.list_offsets == kafka_written.observed.list_offsets


def test_odradek_serves_kafkas_committed_offsets(kafka_written: WrittenDir, kafka_dir_served: WrittenDir) -> None:
    expected = kafka_written.observed.groups
    assert expected[ASSIGNED_GROUP][("interop-events", 2)] == (30, "meta-2")
    assert expected[SUBSCRIBED_GROUP][("interop-append-time", 0)][0] == 25
    assert kafka_dir_served.observed.groups == expected


def test_odradek_lists_and_describes_kafkas_groups(kafka_written: WrittenDir, kafka_dir_served: WrittenDir) -> None:
    expected = kafka_written.observed.group_states
    assert set(expected) == {ASSIGNED_GROUP, SUBSCRIBED_GROUP}
    assert kafka_dir_served.observed.group_states == expected


def test_a_damaged_transaction_index_fails_only_its_partitions_read_committed_fetches(broker: Broker, new_topic: Any, wire: Any) -> None:
    """Kafka's read throws on an entry of an unknown version; that partition alone answers UNKNOWN_SERVER_ERROR."""
    from odradek.protocol.api import ApiKey

    topic = new_topic(partitions=2)
    for partition in (0, 1):
        produce(broker.bootstrap, topic, "none", [(partition, b"k", b"v%d" % i, [], int(time.time() * 1000)) for i in range(3)])
    (broker.log_dir / f"{topic}-0" / "00000000000000000000.txnindex").write_bytes(struct.pack(">hqqqq", 1, 5, 0, 1, 2))
    connection = wire()

    def fetch(isolation_level: int) -> list[tuple[int, int, bool]]:
        body = {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": isolation_level, "session_id": 0,
            "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in (0, 1)
            ]}],
        }
        response = connection.call(ApiKey.Fetch, 11, body)
        return [(p.error_code, p.high_watermark, bool(p.records)) for p in response.responses[0].partitions]

    assert fetch(1) == [(-1, -1, False), (0, 3, True)]
    assert fetch(0) == [(0, 3, True), (0, 3, True)]
