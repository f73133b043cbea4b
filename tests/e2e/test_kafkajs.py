"""Unmodified kafkajs (Node.js) against odradek: admin, producer (keys, headers, gzip, idempotent), consumer groups.

kafkajs is the one client here that owes nothing to the JVM or librdkafka — its own protocol code, its own
version choices (Produce v7, Fetch v11, JoinGroup v5, ...) — so it finds what the Python and C clients do not.
It runs in one node process per module (tests/e2e/js/driver.mjs), which answers one JSON line per kafkajs call;
the tests make the calls and compare what kafkajs returns or hands to ``eachMessage`` with what was produced,
cross-checked through confluent-kafka and the segment files where kafkajs alone could hide a fault.

Needs node and ``npm ci --prefix tests/e2e/js`` (``make test`` runs it); skips with the reason otherwise.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from odradek.protocol.compression import CompressionType

JS_DIR = Path(__file__).parent / "js"
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed (Debian: apt-get install nodejs npm)"),
    pytest.mark.skipif(
        not (JS_DIR / "node_modules" / "kafkajs" / "package.json").exists(),
        reason="kafkajs is not installed: run `npm ci --prefix tests/e2e/js` (`make test` does)",
    ),
]

# Group members notice a rebalance at their next heartbeat and fetch with short long-polls, so a rebalance
# takes well under a second instead of kafkajs' default 3 s heartbeat and 5 s fetch wait.
MEMBER_CONFIG = {"heartbeatInterval": 300, "maxWaitTimeInMs": 100, "sessionTimeout": 10_000}
_groups = itertools.count()


class KafkaJsError(AssertionError):
    """A kafkajs call rejected: ``name`` is kafkajs' error class, ``type`` the Kafka error name when one."""

    def __init__(self, name: str, type_: str | None, message: str) -> None:
        super().__init__(f"{name} ({type_}): {message}")
        self.name = name
        self.type = type_


class KafkaJs:
    """One node process running driver.mjs against a broker; each call is one kafkajs operation."""

    def __init__(self, bootstrap: str, log: Path) -> None:
        self.log = log
        self._stderr = log.open("w")
        env = {**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"}
        self.proc = subprocess.Popen(
            [NODE, str(JS_DIR / "driver.mjs"), bootstrap],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env,
        )
        self._replies: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._ids = itertools.count(1)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._replies.put(line)
        self._replies.put("")

    def call(self, op: str, timeout: float = 30.0, **args: Any) -> Any:
        assert self.proc.stdin is not None
        request_id = next(self._ids)
        self.proc.stdin.write(json.dumps({"id": request_id, "op": op, "args": args}) + "\n")
        self.proc.stdin.flush()
        try:
            line = self._replies.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"kafkajs {op} gave no answer in {timeout} s; its log:\n{self._log_tail()}") from None
        if not line:
            raise AssertionError(f"the kafkajs driver exited (rc {self.proc.wait()}); its log:\n{self._log_tail()}")
        reply = json.loads(line)
        assert reply["id"] == request_id
        if "error" in reply:
            error = reply["error"]
            raise KafkaJsError(error["name"], error["type"], error["message"])
        return reply["result"]

    def admin(self, method: str, *args: Any) -> Any:
        return self.call("admin", method=method, args=list(args))

    def _log_tail(self) -> str:
        self._stderr.flush()
        return "".join(self.log.read_text().splitlines(keepends=True)[-40:])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._stderr.close()


@pytest.fixture(scope="module")
def kafkajs(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaJs]:
    driver = KafkaJs(bootstrap, tmp_path_factory.mktemp("kafkajs") / "kafkajs.log")
    yield driver
    driver.close()


def message(key: str | None, value: str | None, partition: int | None = None, timestamp: int | None = None, **headers: str) -> dict[str, Any]:
    """A kafkajs message as ``producer.send`` takes it."""
    out: dict[str, Any] = {"key": key, "value": value, "headers": headers}
    if partition is not None:
        out["partition"] = partition
    if timestamp is not None:
        out["timestamp"] = str(timestamp)
    return out


def eventually(read: Callable[[], Any], expected: Any, timeout: float = 10.0) -> Any:
    """``read()`` once it equals ``expected`` (committed offsets land just after the records are handed over)."""
    deadline = time.monotonic() + timeout
    while (got := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    return got


# --- admin ---------------------------------------------------------------------------------------------


def test_admin_topic_lifecycle(kafkajs: KafkaJs) -> None:
    topic = f"kafkajs-admin-{os.getpid()}"
    assert kafkajs.admin("createTopics", {"topics": [{"topic": topic, "numPartitions": 3}]}) is True
    # kafkajs resolves false (not an error) when the broker answers TOPIC_ALREADY_EXISTS.
    assert kafkajs.admin("createTopics", {"topics": [{"topic": topic, "numPartitions": 3}]}) is False

    assert kafkajs.admin("fetchTopicMetadata", {"topics": [topic]}) == {
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partitionErrorCode": 0, "partitionId": p, "leader": 0, "replicas": [0], "isr": [0], "offlineReplicas": []}
                    for p in range(3)
                ],
            }
        ]
    }
    assert topic in kafkajs.admin("listTopics")

    # Partition 0 gets timestamps 1000, 2000, 3000; partition 1 gets 1500, 2500; partition 2 stays empty.
    sent = kafkajs.call(
        "produce",
        producer=topic,
        send={
            "topic": topic,
            "messages": [message(f"k{ts}", f"v{ts}", partition=p, timestamp=ts) for p, ts in ((0, 1000), (1, 1500), (0, 2000), (1, 2500), (0, 3000))],
        },
    )
    assert sorted((r["partition"], r["errorCode"], r["baseOffset"]) for r in sent) == [(0, 0, "0"), (1, 0, "0")]

    offsets = sorted(kafkajs.admin("fetchTopicOffsets", topic), key=lambda o: o["partition"])
    assert offsets == [
        {"partition": 0, "offset": "3", "high": "3", "low": "0"},
        {"partition": 1, "offset": "2", "high": "2", "low": "0"},
        {"partition": 2, "offset": "0", "high": "0", "low": "0"},
    ]

    # The first offset whose timestamp is >= the target; where the broker answers -1 (none), kafkajs
    # substitutes the high watermark.
    by_timestamp = {
        0: ("0", "0", "0"),
        1000: ("0", "0", "0"),
        1001: ("1", "0", "0"),
        2000: ("1", "1", "0"),
        2600: ("2", "2", "0"),
        3001: ("3", "2", "0"),
    }
    for timestamp, expected in by_timestamp.items():
        got = sorted(kafkajs.admin("fetchTopicOffsetsByTimestamp", topic, timestamp), key=lambda o: o["partition"])
        assert tuple(o["offset"] for o in got) == expected, f"offsets for timestamp {timestamp}: {got}"

    # A producer keeps asking for the metadata of the topics it wrote to, and that re-creates a deleted topic
    # on a broker with auto.create.topics.enable (as on Kafka): it goes first.
    kafkajs.call("producer.stop", producer=topic)
    kafkajs.admin("deleteTopics", {"topics": [topic], "timeout": 10_000})
    assert topic not in kafkajs.admin("listTopics")


# --- producer ------------------------------------------------------------------------------------------


def test_keys_headers_and_gzip_reach_the_log_and_other_clients(kafkajs, bootstrap, new_topic, clients, disk_batches) -> None:
    from kafka.partitioner.default import murmur2

    topic = new_topic(partitions=3)
    keys = [f"user-{i % 12}" for i in range(60)]  # twelve keys that murmur2 spreads over all three partitions
    messages = [message(key, f"event {i} " + "payload " * 20, trace=f"t{i}", source="kafkajs") for i, key in enumerate(keys)]
    messages[5]["headers"] = {}  # a record without headers between records with them
    sent = kafkajs.call("produce", send={"topic": topic, "compression": "GZIP", "messages": messages})
    assert all(r["errorCode"] == 0 and r["baseOffset"] == "0" for r in sent)

    # kafkajs' default partitioner is the Java client's: murmur2 of the key, so every key on one partition.
    expected: dict[int, list[tuple]] = {0: [], 1: [], 2: []}
    for m in messages:
        partition = (murmur2(m["key"].encode()) & 0x7FFFFFFF) % 3
        headers = tuple((name, value.encode()) for name, value in m["headers"].items())
        expected[partition].append((m["key"].encode(), m["value"].encode(), headers))
    assert all(expected.values()) and sorted(r["partition"] for r in sent) == [0, 1, 2]

    for partition, records in expected.items():
        got = clients["confluent"].consume(bootstrap, topic, len(records), partition=partition)
        assert [(r.offset, r.key, r.value, r.headers) for r in got] == [(i, *r) for i, r in enumerate(records)]
        batches = disk_batches(topic, partition)
        assert batches and {b.compression for b in batches} == {CompressionType.GZIP}


def test_idempotent_producer_sequences_its_batches(kafkajs, bootstrap, new_topic, clients, disk_batches) -> None:
    topic = new_topic()
    config = {"idempotent": True, "maxInFlightRequests": 1}
    first = kafkajs.call("produce", producer=f"idempotent-{topic}", config=config, send={"topic": topic, "messages": [message(f"k{i}", f"v{i}", partition=0) for i in range(5)]})
    second = kafkajs.call("produce", producer=f"idempotent-{topic}", config=config, send={"topic": topic, "messages": [message(f"k{i}", f"v{i}", partition=0) for i in range(5, 8)]})
    assert [(r["partition"], r["errorCode"], r["baseOffset"]) for r in first + second] == [(0, 0, "0"), (0, 0, "5")]

    # InitProducerId gave the producer an id; its batches carry it with sequence numbers counting records.
    batches = disk_batches(topic)
    assert [(b.base_offset, b.records_count, b.base_sequence, b.producer_epoch) for b in batches] == [(0, 5, 0, 0), (5, 3, 5, 0)]
    assert batches[0].producer_id >= 0 and batches[0].producer_id == batches[1].producer_id

    got = clients["confluent"].consume(bootstrap, topic, 8)
    assert [(r.offset, r.key, r.value) for r in got] == [(i, b"k%d" % i, b"v%d" % i) for i in range(8)]


# --- consumer groups -----------------------------------------------------------------------------------


def _gather(kafkajs: KafkaJs, members: list[str], count: int, timeout: float = 20.0) -> dict[str, list[dict]]:
    """What each member is handed until ``count`` records arrived in all, and a little longer for extras."""
    got: dict[str, list[dict]] = {name: [] for name in members}
    deadline = time.monotonic() + timeout
    while sum(map(len, got.values())) < count and time.monotonic() < deadline:
        for name in members:
            got[name] += kafkajs.call("consumer.take", name=name, count=0)
        time.sleep(0.05)
    time.sleep(0.5)  # a duplicate or a re-delivery would arrive now
    for name in members:
        got[name] += kafkajs.call("consumer.take", name=name, count=0)
    return got


def _by_partition(records: list[dict]) -> dict[int, list[tuple[int, str | None, str | None, dict]]]:
    """Records per partition, in the order they were handed over."""
    out: dict[int, list] = {}
    for r in records:
        out.setdefault(r["partition"], []).append((r["offset"], r["key"], r["value"], r["headers"]))
    return out


def test_reads_what_librdkafka_wrote_with_gzip(kafkajs, bootstrap, new_topic, clients) -> None:
    topic = new_topic()
    records = [(b"k%d" % i, b"value %d " % i * 10, (("n", b"%d" % i), ("from", b"librdkafka")), 1_700_000_000_000 + i) for i in range(50)]
    records[7] = (None, b"no key", (), 1_700_000_000_007)
    records[8] = (b"tombstone", None, (), 1_700_000_000_008)
    clients["confluent"].produce(bootstrap, topic, records, compression="gzip")

    kafkajs.call("consumer.start", name="gzip", config={"groupId": f"kafkajs-{topic}", **MEMBER_CONFIG}, subscribe={"topics": [topic], "fromBeginning": True})
    got = _gather(kafkajs, ["gzip"], len(records))["gzip"]
    kafkajs.call("consumer.stop", name="gzip")

    def text(data: bytes | None) -> str | None:
        return None if data is None else data.decode()

    assert [(r["offset"], r["key"], r["value"], r["headers"], r["timestamp"]) for r in got] == [
        (offset, text(key), text(value), {name: v.decode() for name, v in headers}, timestamp)
        for offset, (key, value, headers, timestamp) in enumerate(records)
    ]



def test_group_consumes_everything_once_and_rebalances_to_a_second_member(kafkajs, new_topic) -> None:
    topic = new_topic(partitions=3)
    group = f"kafkajs-group-{next(_groups)}-{topic}"

    def produce(phase: int, per_partition: int) -> dict[int, list]:
        messages = [message(f"p{p}-{phase}-{i}", f"value {phase}.{i}", partition=p, phase=str(phase)) for p in range(3) for i in range(per_partition)]
        sent = kafkajs.call("produce", send={"topic": topic, "messages": messages})
        base = {r["partition"]: int(r["baseOffset"]) for r in sent}
        expected: dict[int, list] = {}
        for m in messages:
            records = expected.setdefault(m["partition"], [])
            records.append((base[m["partition"]] + len(records), m["key"], m["value"], {"phase": str(phase)}))
        return expected

    def committed() -> list[tuple[int, str]]:
        [entry] = kafkajs.admin("fetchOffsets", {"groupId": group, "topics": [topic]})
        return sorted((p["partition"], p["offset"]) for p in entry["partitions"])

    first = produce(1, 10)
    kafkajs.call("consumer.start", name="a", config={"groupId": group, **MEMBER_CONFIG}, subscribe={"topics": [topic], "fromBeginning": True})
    [join_a] = kafkajs.call("consumer.joins", name="a")["joins"]
    assert join_a["isLeader"] and join_a["memberAssignment"] == {topic: [0, 1, 2]}

    got = _gather(kafkajs, ["a"], 30)
    assert _by_partition(got["a"]) == first, "the only member reads every record once, in offset order per partition"
    assert eventually(committed, [(0, "10"), (1, "10"), (2, "10")]) == [(0, "10"), (1, "10"), (2, "10")]

    kafkajs.call("consumer.start", name="b", config={"groupId": group, **MEMBER_CONFIG}, subscribe={"topics": [topic], "fromBeginning": True})
    joins_b = kafkajs.call("consumer.joins", name="b")
    joins_a = kafkajs.call("consumer.joins", name="a", count=2)
    assert not joins_a["crashes"] and not joins_b["crashes"]
    [join_b] = joins_b["joins"]
    rejoin_a = joins_a["joins"][-1]
    assert len(joins_a["joins"]) == 2, "the first member rejoins once for the second"
    assert rejoin_a["memberId"] == join_a["memberId"] and rejoin_a["isLeader"] and not join_b["isLeader"]
    assert join_b["leaderId"] == join_a["memberId"]
    owned_a, owned_b = set(rejoin_a["memberAssignment"][topic]), set(join_b["memberAssignment"][topic])
    assert owned_a and owned_b and not owned_a & owned_b and owned_a | owned_b == {0, 1, 2}

    # The committed offsets carry over the rebalance: the second member starts at 10, not at the beginning.
    second = produce(2, 5)
    got = _gather(kafkajs, ["a", "b"], 15)
    assert _by_partition(got["a"] + got["b"]) == second
    assert {r["partition"] for r in got["a"]} == owned_a and {r["partition"] for r in got["b"]} == owned_b
    assert eventually(committed, [(0, "15"), (1, "15"), (2, "15")]) == [(0, "15"), (1, "15"), (2, "15")]

    kafkajs.call("consumer.stop", name="b")
    kafkajs.call("consumer.stop", name="a")
    [described] = kafkajs.admin("describeGroups", [group])["groups"]
    assert (described["groupId"], described["state"], described["protocolType"], described["members"]) == (group, "Empty", "consumer", [])
    assert committed() == [(0, "15"), (1, "15"), (2, "15")]
