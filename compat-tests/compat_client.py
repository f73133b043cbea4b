"""The operations scenarios perform, as one interface that each client library implements.

A scenario says what a user does (create a topic, produce these records, join a group) and records what
the client then shows. Each adapter does that with its library's public API and reports in Kafka's
vocabulary (error names, ``CreateTime``/``LogAppendTime``, config sources as Kafka names them); where a
library offers no way to do or see something it raises :class:`NotOffered` and the scenario is skipped
for that client, with the reason.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from compat_observe import NotOffered, unique

Offsets = dict[tuple[str, int], int]
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
}


@dataclass(frozen=True)
class Record:
    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp_ms: int | None = None
    partition: int | None = 0  # None: the client's partitioner chooses


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int = 1
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)


def text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


def seen_record(partition: int, offset: int, key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]], timestamp_type: str, timestamp: int) -> dict:
    """A consumed record as every adapter reports it."""
    return {
        "partition": partition,
        "offset": offset,
        "key": text(key),
        "value": text(value),
        "headers": [[k, text(v)] for k, v in headers],
        "timestamp_type": timestamp_type,
        "timestamp": timestamp,
    }


class PartitionReader:
    """A consumer assigned one partition at a given offset, without a group (``assign`` + ``seek``)."""

    def read(self, count: int, timeout_s: float) -> tuple[list[dict], str | None]:
        """Up to ``count`` records within ``timeout_s``; stops early at the first error (its Kafka name)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class MemberConfig:
    """How a group member is configured beyond its group and topics."""

    assignor: str = "range"
    client_id: str = "compat-member"
    instance_id: str | None = None  # group.instance.id: a static member (KIP-345)
    auto_offset_reset: str = "earliest"  # "earliest", "latest" or "none"
    session_timeout_ms: int = 6000


class ProducerSession:
    """One producer kept open across several sends (acks=all), e.g. across a broker restart."""

    def send(self, topic: str, records: list[Record]) -> list[dict]:
        """Send ``records`` and wait for every delivery report: [{"partition", "offset", "error"}] in send
        order (offset -1 on error). A record's ``partition`` None leaves the choice to the client's partitioner."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class GroupMember:
    """A consumer in a group, kept alive (polled) in the background so that rebalances complete.

    It keeps what a user of the consumer sees: the records it was handed, the errors it raised (as the
    client names them), and each assignment it held in turn."""

    def __init__(self) -> None:
        self.received: list[tuple[str, int, int, str | None]] = []  # topic, partition, offset, value
        self.errors: list[str] = []
        self.assignments: list[set[tuple[str, int]]] = []

    def assignment(self) -> set[tuple[str, int]]:
        raise NotImplementedError

    def commit(self, offsets: Offsets) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Leave the group (LeaveGroup), as a consumer closing cleanly does."""
        raise NotImplementedError

    def wait_for(self, predicate: Callable[[set[tuple[str, int]]], bool], timeout_s: float) -> set[tuple[str, int]]:
        deadline = time.monotonic() + timeout_s
        while True:
            current = self.assignment()
            if predicate(current) or time.monotonic() > deadline:
                return current
            time.sleep(0.05)

    def wait_for_records(self, count: int, timeout_s: float) -> list[tuple[str, int, int, str | None]]:
        """Until ``count`` records arrived, an error was raised, or ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        while len(self.received) < count and not self.errors and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.received)

    def _saw(self, assignment: set[tuple[str, int]]) -> None:
        if not self.assignments or self.assignments[-1] != assignment:
            self.assignments.append(set(assignment))


class PolledMember(GroupMember):
    """For consumers that are not thread-safe: one thread polls, and runs every other call between polls."""

    POLL_S = 0.05

    def __init__(self) -> None:
        super().__init__()
        self._calls: queue.Queue = queue.Queue()
        self._assignment: set[tuple[str, int]] = set()
        self._running = True
        self._thread = threading.Thread(target=self._loop, daemon=True, name="compat-member")
        self._thread.start()

    def _loop(self) -> None:
        while self._running:
            try:
                self.received.extend(self.poll_once())
            except Exception as exc:  # the client raised it to its user: recorded, and polling goes on
                self.errors.append(self.error_name(exc))
                time.sleep(self.POLL_S)
            self._assignment = self.current_assignment()
            self._saw(self._assignment)
            while not self._calls.empty():
                call, done = self._calls.get()
                try:
                    done.put((call(), None))
                except Exception as exc:  # handed back to the calling thread
                    done.put((None, exc))

    def call(self, fn: Callable[[], Any], timeout_s: float = 30) -> Any:
        done: queue.Queue = queue.Queue()
        self._calls.put((fn, done))
        result, error = done.get(timeout=timeout_s)
        if error is not None:
            raise error
        return result

    def assignment(self) -> set[tuple[str, int]]:
        return set(self._assignment)

    def close(self) -> None:
        def leave_and_stop() -> None:
            self._running = False
            self.leave()

        self.call(leave_and_stop)
        self._thread.join(30)

    def poll_once(self) -> list[tuple[str, int, int, str | None]]:
        """One poll; the records it returned."""
        raise NotImplementedError

    def error_name(self, exc: Exception) -> str:
        """How the client names an error its poll raised."""
        return type(exc).__name__

    def current_assignment(self) -> set[tuple[str, int]]:
        raise NotImplementedError

    def leave(self) -> None:
        raise NotImplementedError


class Client:
    """One client library, bound to one cluster (``bootstrap``)."""

    name: str

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def close(self) -> None:
        """Release admin connections."""

    # cluster -----------------------------------------------------------------------------------------
    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's ApiVersions answer: API key -> (min, max)."""
        raise NotOffered(f"{self.name} does not show the broker's ApiVersions")

    def cluster(self) -> dict:
        """{"cluster_id", "controller_id", "brokers": {node_id: [host, port]}} from Metadata."""
        raise NotImplementedError

    def describe_topics(self, names: list[str]) -> dict[str, dict]:
        """Per topic: {"error", "partitions": {index: {"leader", "replicas", "isr"}}} from a Metadata request
        that does not create topics."""
        raise NotImplementedError

    def wait_for_topic(self, name: str, partitions: int, timeout_s: float = 10) -> dict:
        """Until Metadata shows the topic with all its partitions led: Kafka's brokers learn of a new
        topic shortly after CreateTopics answers, so users (and Kafka's own tests) wait for it."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                seen = self.describe_topics([name])[name]
            except Exception:  # e.g. the broker restarting: clients raise until they reconnect
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                continue
            parts = seen.get("partitions", {})
            if seen["error"] == "NONE" and len(parts) == partitions and all(p["leader"] >= 0 for p in parts.values()):
                return seen
            if time.monotonic() > deadline:
                return seen
            time.sleep(0.1)

    def topic_ids(self, names: list[str]) -> dict[str, Any]:
        """Topic name -> topic id (KIP-516), in whatever form the client gives it."""
        raise NotOffered(f"{self.name} does not show topic ids")

    def leader_epochs(self, name: str) -> dict[int, int]:
        """Partition -> leader epoch, as Metadata reports it."""
        raise NotOffered(f"{self.name} does not show leader epochs from Metadata")

    # topics ------------------------------------------------------------------------------------------
    def create_topics(self, specs: list[TopicSpec]) -> dict[str, str]:
        raise NotImplementedError

    def new_topic(self, label: str, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        """A topic of a name no other scenario uses, created and waited for until its partitions are led:
        the set-up most scenarios start from."""
        topic = unique(label)
        self.create_topics([TopicSpec(topic, partitions=partitions, configs=configs or {})])
        self.wait_for_topic(topic, partitions)
        return topic

    def delete_topics(self, names: list[str]) -> dict[str, str]:
        raise NotImplementedError

    def create_partitions(self, counts: dict[str, int]) -> dict[str, str]:
        raise NotImplementedError

    def topic_configs(self, name: str) -> dict[str, dict]:
        """DescribeConfigs of a topic: key -> {"value", "source", "read_only", "sensitive"}."""
        raise NotImplementedError

    def alter_topic_configs(self, name: str, configs: dict[str, str], *, incremental: bool) -> str:
        """Set a topic's configs with IncrementalAlterConfigs (SET) or the legacy AlterConfigs (which
        replaces all of them): the topic's error name."""
        raise NotImplementedError

    # offsets -----------------------------------------------------------------------------------------
    def list_offset(self, topic: str, partition: int, spec: str | int) -> dict:
        """ListOffsets for "earliest", "latest", "max_timestamp" or a timestamp: {"offset", "timestamp"} or
        {"error"}. No offset for a timestamp is offset -1."""
        raise NotImplementedError

    def delete_records(self, topic: str, partition: int, before_offset: int) -> dict:
        """DeleteRecords: {"low_watermark"} or {"error"}."""
        raise NotImplementedError

    def delete_records_unrouted(self, topic: str, partition: int, before_offset: int, node_id: int) -> dict:
        """DeleteRecords sent to ``node_id`` as asked, without the client first checking Metadata for the
        partition: the one way to see the broker's own answer for a partition that does not exist."""
        raise NotOffered(f"{self.name} checks partitions against Metadata itself before sending")

    # producing and consuming -------------------------------------------------------------------------
    def producer(self, *, compression: str = "none", idempotent: bool = False, bootstrap: str | None = None, create_topic: bool = True) -> ProducerSession:
        raise NotImplementedError

    def produce(self, topic: str, records: list[Record], *, compression: str = "none", idempotent: bool = False, bootstrap: str | None = None, create_topic: bool = True) -> list[dict]:
        """Send ``records`` with a producer of their own (see :meth:`ProducerSession.send`)."""
        session = self.producer(compression=compression, idempotent=idempotent, bootstrap=bootstrap, create_topic=create_topic)
        try:
            return session.send(topic, records)
        finally:
            session.close()

    def reader(self, topic: str, partition: int, offset: int, *, max_wait_ms: int = 500, min_bytes: int = 1, isolation: str = "read_uncommitted") -> PartitionReader:
        """A consumer at ``offset`` that reports OFFSET_OUT_OF_RANGE rather than resetting; ``isolation``:
        "read_uncommitted" or "read_committed"."""
        raise NotImplementedError

    def read(self, topic: str, partition: int, offset: int, count: int, timeout_s: float = 10, *, isolation: str = "read_uncommitted") -> tuple[list[dict], str | None]:
        reader = self.reader(topic, partition, offset, isolation=isolation)
        try:
            return reader.read(count, timeout_s)
        finally:
            reader.close()

    def transactions(self, topic: str, transactional_id: str, transactions: list[tuple[list[Record], bool]]) -> list[str]:
        """One transactional producer (``transactional_id``) sends each list of records in a transaction of its
        own, committed (True) or aborted (False); what each commit or abort gave ("NONE" or the error's name)."""
        raise NotImplementedError

    # groups ------------------------------------------------------------------------------------------
    def group_member(self, group: str, topics: list[str], config: MemberConfig = MemberConfig()) -> GroupMember:
        """A consumer subscribed to ``topics`` in ``group`` (the "range" or "roundrobin" assignor)."""
        raise NotImplementedError

    def describe_group(self, group: str) -> dict:
        """{"error", "state", "protocol_type", "protocol", "members": [{"client_id", "client_host",
        "assignment": [[topic, partition], ...]}]}."""
        raise NotImplementedError

    def group_offsets(self, group: str, partitions: list[tuple[str, int]]) -> dict[str, int]:
        """Committed offsets, keyed "topic:partition" (-1: none committed)."""
        raise NotImplementedError

    def delete_groups(self, groups: list[str]) -> dict[str, str]:
        raise NotImplementedError
