"""kcat, the librdkafka command-line client, against odradek: what a user types and what it prints.

Each test runs the real ``kcat`` binary (Debian's package) and compares its output, byte for byte, with what
was produced — metadata listings, keys, headers, offsets, timestamps, offset-for-time answers — and checks
what the tool cannot show (a batch's codec) in the segment files. Records kcat produced are read back through
confluent-kafka too, so a fault cannot hide behind kcat reading what kcat wrote.

Needs ``kcat`` on the PATH (``make test`` installs Debian's package); fails with the reason otherwise.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from odradek.protocol.compression import CompressionType

KCAT = shutil.which("kcat")


@pytest.fixture(autouse=True)
def kcat_installed() -> None:
    if KCAT is None:
        pytest.fail("kcat is not installed (Debian: apt-get install kcat; `make test` does)", pytrace=False)


def kcat(bootstrap: str, *args: str, input: str | None = None) -> str:
    """Run ``kcat -b BOOTSTRAP ARGS...`` to completion and return what it printed on stdout."""
    done = subprocess.run([KCAT, "-b", bootstrap, *args], input=input, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"kcat {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
    return done.stdout


def test_metadata_listing(bootstrap, new_topic) -> None:
    topic = new_topic(partitions=3)
    broker_line = f"  broker 0 at {bootstrap} (controller)"
    topic_block = [f'  topic "{topic}" with 3 partitions:'] + [f"    partition {p}, leader 0, replicas: 0, isrs: 0" for p in range(3)]

    assert kcat(bootstrap, "-L", "-t", topic).splitlines() == [
        f"Metadata for {topic} (from broker 0: {bootstrap}/0):",
        " 1 brokers:",
        broker_line,
        " 1 topics:",
        *topic_block,
    ]

    listing = kcat(bootstrap, "-L").splitlines()
    assert listing[:3] == [f"Metadata for all topics (from broker 0: {bootstrap}/0):", " 1 brokers:", broker_line]
    start = listing.index(topic_block[0])
    assert listing[start : start + 4] == topic_block


def test_produce_keys_and_headers_then_consume_formatted(bootstrap, new_topic, clients) -> None:
    topic = new_topic()
    lines = ["k1:first", "k2:second value", "k3:", "k4:a:b"]  # an empty value; a value holding the delimiter
    kcat(bootstrap, "-t", topic, "-p", "0", "-P", "-K:", "-H", "trace=abc", "-H", "origin=kcat", input="\n".join(lines) + "\n")

    records = [("k1", "first"), ("k2", "second value"), ("k3", ""), ("k4", "a:b")]
    formatted = [f"{key} {value} trace=abc,origin=kcat {offset}" for offset, (key, value) in enumerate(records)]
    fmt = "%k %s %h %o\\n"
    assert kcat(bootstrap, "-t", topic, "-C", "-e", "-o", "beginning", "-f", fmt).splitlines() == formatted
    assert kcat(bootstrap, "-t", topic, "-C", "-e", "-o", "-2", "-f", fmt).splitlines() == formatted[2:]
    assert kcat(bootstrap, "-t", topic, "-C", "-e", "-o", "1", "-c", "1", "-f", fmt).splitlines() == formatted[1:2]
    assert kcat(bootstrap, "-t", topic, "-C", "-e", "-o", "end", "-f", fmt) == ""

    got = clients["confluent"].consume(bootstrap, topic, len(records))
    assert [(r.offset, r.key, r.value, r.headers) for r in got] == [
        (offset, key.encode(), value.encode(), (("trace", b"abc"), ("origin", b"kcat"))) for offset, (key, value) in enumerate(records)
    ]


def test_null_keys_and_values(bootstrap, new_topic, clients) -> None:
    topic = new_topic()
    # With -Z an empty key or value is sent as null (not as zero bytes) and a null one prints as NULL.
    kcat(bootstrap, "-t", topic, "-P", "-Z", "-K:", input="only-key:\n:only-value\n")
    got = clients["confluent"].consume(bootstrap, topic, 2)
    assert [(r.offset, r.key, r.value) for r in got] == [(0, b"only-key", None), (1, None, b"only-value")]
    # %K and %S print the key's and the value's length, -1 for null.
    fmt = "%o %k %s %K %S\\n"
    assert kcat(bootstrap, "-t", topic, "-C", "-e", "-Z", "-f", fmt).splitlines() == ["0 only-key NULL 8 -1", "1 NULL only-value -1 10"]


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_compressed_produce_and_consume(bootstrap, new_topic, disk_batches, codec: str) -> None:
    topic = new_topic()
    values = [f"{i:04d} " + "compressible " * 30 for i in range(200)]
    kcat(bootstrap, "-t", topic, "-p", "0", "-P", "-X", f"compression.codec={codec}", input="\n".join(values) + "\n")

    assert kcat(bootstrap, "-t", topic, "-C", "-e", "-o", "beginning", "-f", "%o %s\\n").splitlines() == [f"{i} {v}" for i, v in enumerate(values)]
    batches = disk_batches(topic)
    assert sum(b.records_count for b in batches) == len(values)
    assert {b.compression for b in batches} == {CompressionType[codec.upper()]}


def test_offsets_for_timestamps(bootstrap, new_topic, clients) -> None:
    topic = new_topic(partitions=2)
    clients["confluent"].produce(bootstrap, topic, [(b"a", b"1", (), 1000), (b"b", b"2", (), 2000), (b"c", b"3", (), 3000)], partition=0)
    clients["confluent"].produce(bootstrap, topic, [(b"d", b"4", (), 1500)], partition=1)

    printed = kcat(bootstrap, "-t", topic, "-C", "-e", "-o", "beginning", "-f", "%p %o %k %T\\n").splitlines()
    assert sorted(printed) == ["0 0 a 1000", "0 1 b 2000", "0 2 c 3000", "1 0 d 1500"]

    def query(timestamp: int) -> list[str]:
        return sorted(kcat(bootstrap, "-Q", "-t", f"{topic}:0:{timestamp}", "-t", f"{topic}:1:{timestamp}").splitlines())

    # The first offset whose timestamp is at or after the target, -1 where there is none; -1 and -2 ask for
    # the end and the beginning of the log.
    expected = {
        999: (0, 0),
        1000: (0, 0),
        1001: (1, 0),
        1500: (1, 0),
        1501: (1, -1),
        3000: (2, -1),
        3001: (-1, -1),
        -1: (3, 1),
        -2: (0, 0),
    }
    for timestamp, (p0, p1) in expected.items():
        assert query(timestamp) == [f"{topic} [0] offset {p0}", f"{topic} [1] offset {p1}"], f"timestamp {timestamp}"

    # Consuming from a time (s@) and up to one (e@, exclusive) looks up the same offsets.
    fmt = "%o %k %T\\n"
    assert kcat(bootstrap, "-t", topic, "-p", "0", "-C", "-e", "-o", "s@1500", "-f", fmt).splitlines() == ["1 b 2000", "2 c 3000"]
    assert kcat(bootstrap, "-t", topic, "-p", "0", "-C", "-e", "-o", "s@1000", "-o", "e@3000", "-f", fmt).splitlines() == ["0 a 1000", "1 b 2000"]


def _group_offsets(admin: Any, group: str) -> list[tuple[str, int, int]]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    [future] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return sorted((tp.topic, tp.partition, tp.offset) for tp in future.result(10).topic_partitions)


def test_consumer_group_mode_resumes_at_committed_offsets(bootstrap, new_topic, admin) -> None:
    from kafka.partitioner.default import murmur2

    topic = new_topic(partitions=3)
    group = f"kcat-{topic}"

    def produce(keys: list[str]) -> None:
        # murmur2 is the Java client's partitioner, so the test knows where each key lands.
        kcat(bootstrap, "-t", topic, "-P", "-K:", "-X", "partitioner=murmur2", input="".join(f"{k}:value of {k}\n" for k in keys))

    def consume_as_group() -> list[str]:
        return kcat(bootstrap, "-G", group, "-e", "-X", "auto.offset.reset=earliest", "-f", "%p %o %k %s\\n", topic).splitlines()

    def expected_lines(keys: list[str], ends: dict[int, int]) -> list[str]:
        """``partition offset key value`` per record, continuing each partition from ``ends``."""
        lines = []
        for key in keys:
            partition = (murmur2(key.encode()) & 0x7FFFFFFF) % 3
            lines.append(f"{partition} {ends[partition]} {key} value of {key}")
            ends[partition] += 1
        return lines

    def per_partition(lines: list[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for line in lines:
            out.setdefault(line.split(" ", 1)[0], []).append(line)
        return out

    ends = {0: 0, 1: 0, 2: 0}
    first_keys = [f"key-{i}" for i in range(12)]
    first = expected_lines(first_keys, ends)
    assert all(ends.values()), "the keys reach every partition"
    produce(first_keys)

    # Partitions interleave as they arrive, but each partition's records come in offset order, once.
    assert per_partition(consume_as_group()) == per_partition(first)
    assert consume_as_group() == [], "a member of the same group resumes at the offsets committed on close"
    assert _group_offsets(admin, group) == [(topic, p, ends[p]) for p in range(3)]

    more_keys = [f"key-{i}" for i in range(12, 18)]
    more = expected_lines(more_keys, ends)
    produce(more_keys)
    assert per_partition(consume_as_group()) == per_partition(more)
    assert _group_offsets(admin, group) == [(topic, p, ends[p]) for p in range(3)]
