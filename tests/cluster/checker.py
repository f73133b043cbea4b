"""A workload that writes numbered records under continuous load, and the checker that judges the log after it.

:class:`Workload` runs an idempotent producer (confluent-kafka, ``acks=all``) that writes the numbers
0, 1, 2, ... to each partition of a topic and records the offset of every write the cluster acknowledged,
and a consumer (``read_committed`` or ``read_uncommitted``) that reads the partitions all along and records
every record it was given. After the faults, :meth:`Workload.finish` reads what survived (each partition
from its start to its high watermark) and :func:`check` compares the three:

- **lost**: an acknowledged write that is not at its acknowledged offset in the surviving log (or, when
  the acknowledgement carried no offset, nowhere in it);
- **no offset**: an acknowledged write whose acknowledgement carried no offset (librdkafka's -1001). Kafka
  answers a retry of one of the producer's last five batches with the original batch's offsets, so the
  broker's answers never cause it; but librdkafka also acknowledges a batch whose request failed retriably
  (a timeout, a lost connection) without an offset when a later batch of the partition then succeeds (its
  "implicit ack"). The leader faults bring that about on Kafka 3.9.1 as on odradek (2 to 4 records a
  fault in a run of test_leader_faults.py). Reported, but not held against :attr:`Report.ok`: tests that
  rule it out assert its count;
- **duplicate**: a number written twice in a partition;
- **reordered**: numbers out of order in a partition (an idempotent producer keeps them in order);
- **phantom read**: a consumer read a record that is not in the surviving log at that offset (it was read
  beyond the high watermark, or from a leader whose log was later truncated).

The result is a :class:`Report` with the counts and the first violations of each kind, so that a failing
round says what happened, not only that something did.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

REQUEST_TIMEOUT_MS = 5_000
"""The clients' request timeouts (librdkafka's ``request.timeout.ms`` 30 s and ``socket.timeout.ms`` 60 s
by default). A request in flight to a frozen or cut-off leader is only given up after them, and the
idempotent producer sends nothing to the new leader until then (to keep order), so they bound how long a
fail-over takes as the client sees it."""

IN_FLIGHT_LIMIT = 2000
"""Writes produced but not yet answered beyond which the producer waits: during a fail-over the backlog
stays bounded, and every write counts (nothing is dropped for a full queue)."""

STABLE_ENDS_S = 3.0
"""How long the high watermarks must stay put before the read of the surviving log ends."""


class ViolationKind(Enum):
    LOST = "lost"
    NO_OFFSET = "no offset"
    DUPLICATE = "duplicate"
    REORDERED = "reordered"
    PHANTOM_READ = "phantom read"


@dataclass(frozen=True)
class Violation:
    kind: ViolationKind
    partition: int
    offset: int
    number: int
    detail: str

    def __str__(self) -> str:
        return f"{self.kind.value}: partition {self.partition} offset {self.offset} number {self.number}: {self.detail}"


@dataclass
class Report:
    """What the checker found: counts, every violation (in partition and offset order)."""

    acknowledged: int
    failed: int
    read: int
    surviving: int
    violations: list[Violation]
    delivery_errors: Counter[str] = field(default_factory=Counter)
    producer_fatal: str | None = None
    """The idempotent producer's fatal error, if it stopped on one (e.g. OUT_OF_ORDER_SEQUENCE_NUMBER when
    the partition's log lost writes it had acknowledged)."""

    @property
    def ok(self) -> bool:
        """No violation but acknowledgements without offsets (see the module's list), no fatal error."""
        return all(v.kind is ViolationKind.NO_OFFSET for v in self.violations) and self.producer_fatal is None

    def count(self, kind: ViolationKind) -> int:
        return sum(1 for v in self.violations if v.kind is kind)

    def __str__(self) -> str:
        counts = ", ".join(f"{self.count(kind)} {kind.value}" for kind in ViolationKind)
        lines = [
            f"{self.acknowledged} writes acknowledged, {self.failed} failed, {self.read} records read, "
            f"{self.surviving} in the surviving log: {counts}",
        ]
        if self.producer_fatal:
            lines.append(f"the producer stopped on a fatal error: {self.producer_fatal}")
        if self.delivery_errors:
            lines.append("delivery errors: " + ", ".join(f"{name} x{n}" for name, n in self.delivery_errors.most_common()))
        for kind in ViolationKind:
            first = next((v for v in self.violations if v.kind is kind), None)
            if first is not None:
                lines.append(f"first {first}")
        return "\n".join(lines)


def check(
    acknowledged: dict[int, dict[int, int | None]],
    reads: dict[int, list[tuple[int, int]]],
    surviving: dict[int, list[tuple[int, int]]],
    *,
    failed: int = 0,
    delivery_errors: Counter[str] | None = None,
    producer_fatal: str | None = None,
) -> Report:
    """Judge a run. Per partition: ``acknowledged`` maps each acknowledged number to its offset (None when
    not reported), ``reads`` and ``surviving`` are (offset, number) in the order the consumer got them / in
    log order."""
    violations: list[Violation] = []
    for partition in sorted(set(acknowledged) | set(reads) | set(surviving)):
        log = surviving.get(partition, [])
        at_offset = dict(log)
        numbers = {number for _, number in log}
        for number, offset in acknowledged.get(partition, {}).items():
            if offset is None:
                if number not in numbers:
                    violations.append(Violation(ViolationKind.LOST, partition, -1, number, "acknowledged without an offset, and not in the surviving log"))
                else:
                    violations.append(Violation(ViolationKind.NO_OFFSET, partition, -1, number, "acknowledged without an offset"))
                continue
            found = at_offset.get(offset)
            if found != number:
                where = "nothing" if found is None else f"number {found}"
                violations.append(Violation(ViolationKind.LOST, partition, offset, number, f"acknowledged at this offset, which now holds {where}"))
        first_seen: dict[int, int] = {}
        previous: tuple[int, int] | None = None
        for offset, number in log:
            if number in first_seen:
                violations.append(Violation(ViolationKind.DUPLICATE, partition, offset, number, f"also at offset {first_seen[number]}"))
            else:
                first_seen[number] = offset
            if previous is not None and number <= previous[1]:
                violations.append(Violation(ViolationKind.REORDERED, partition, offset, number, f"after number {previous[1]} at offset {previous[0]}"))
            previous = (offset, number)
        for offset, number in reads.get(partition, []):
            found = at_offset.get(offset)
            if found != number:
                where = "nothing" if found is None else f"number {found}"
                violations.append(Violation(ViolationKind.PHANTOM_READ, partition, offset, number, f"read, but the surviving log holds {where} there"))
    violations.sort(key=lambda v: (v.partition, v.offset))
    return Report(
        acknowledged=sum(len(a) for a in acknowledged.values()),
        failed=failed,
        read=sum(len(r) for r in reads.values()),
        surviving=sum(len(s) for s in surviving.values()),
        violations=violations,
        delivery_errors=delivery_errors or Counter(),
        producer_fatal=producer_fatal,
    )


class Workload:
    """An idempotent producer and a consumer running in threads against ``topic`` until :meth:`finish`.

    A context manager: leaving it stops both threads even when the test failed before :meth:`finish`.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, isolation_level: str = "read_committed", rate_per_partition: float = 200.0) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.isolation_level = isolation_level
        self.interval = 1.0 / rate_per_partition
        self.lock = threading.Lock()
        self.acknowledged: dict[int, dict[int, int | None]] = {p: {} for p in range(partitions)}
        self.acknowledged_at: dict[int, dict[int, float]] = {p: {} for p in range(partitions)}
        """When each acknowledgement reached the producer (``time.monotonic()``; the delivery callback runs in
        the producer's thread, which polls every 10 ms)."""
        self.reads: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
        self.produced_at: list[float] = []
        """When number n was handed to the producer (for every partition at once)."""
        self.failed = 0
        self.delivery_errors: Counter[str] = Counter()
        self.in_flight = 0
        self.producer_fatal: str | None = None
        self.stopping = threading.Event()
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "socket.timeout.ms": REQUEST_TIMEOUT_MS,
            "message.timeout.ms": 120_000,
            "log_level": 0,
        })
        self.threads = [threading.Thread(target=self._produce, daemon=True), threading.Thread(target=self._consume, daemon=True)]
        for thread in self.threads:
            thread.start()

    def __enter__(self) -> "Workload":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop writing and reading (outstanding writes are left unanswered)."""
        self.stopping.set()
        for thread in self.threads:
            thread.join()

    def _delivered(self, err: KafkaError | None, msg: object) -> None:
        with self.lock:
            self.in_flight -= 1
            if err is not None:
                self.failed += 1
                self.delivery_errors[err.name()] += 1
                return
            offset = msg.offset()  # type: ignore[attr-defined]
            self.acknowledged[msg.partition()][int(msg.value())] = offset if offset is not None and offset >= 0 else None  # type: ignore[attr-defined]
            self.acknowledged_at[msg.partition()][int(msg.value())] = time.monotonic()  # type: ignore[attr-defined]

    def _produce(self) -> None:
        """Until stopped, or until the producer fails fatally (kept for the report: it is what a client of
        a log that lost acknowledged writes sees)."""
        try:
            self._produce_numbers()
        except KafkaException as exc:
            self.producer_fatal = str(exc.args[0])

    def _produce_numbers(self) -> None:
        number = 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            if self.in_flight < IN_FLIGHT_LIMIT and time.monotonic() >= next_at:
                with self.lock:
                    self.produced_at.append(time.monotonic())
                    self.in_flight += self.partitions
                for partition in range(self.partitions):
                    self.producer.produce(self.topic, str(number).encode(), partition=partition, on_delivery=self._delivered)
                number += 1
                next_at += self.interval
            self.producer.poll(min(0.01, max(0.0, next_at - time.monotonic())))

    def _consume(self) -> None:
        consumer = self._consumer()
        try:
            while not self.stopping.is_set():
                for msg in consumer.consume(500, timeout=0.2):
                    if msg.error() is None:
                        with self.lock:
                            self.reads[msg.partition()].append((msg.offset(), int(msg.value())))
        finally:
            consumer.close()

    def _consumer(self) -> Consumer:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap,
            "group.id": f"checker-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "isolation.level": self.isolation_level,
            "socket.timeout.ms": REQUEST_TIMEOUT_MS,
            "log_level": 0,
        })
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        return consumer

    def acknowledged_count(self) -> dict[int, int]:
        with self.lock:
            return {p: len(a) for p, a in self.acknowledged.items()}

    def acknowledged_since(self, partition: int, since: float) -> int:
        """How many writes to ``partition`` produced at ``since`` (``time.monotonic()``) or later were acknowledged."""
        with self.lock:
            return sum(1 for number in self.acknowledged[partition] if self.produced_at[number] >= since)

    def acknowledged_within(self, partition: int, start: float, end: float) -> list[int]:
        """The numbers written to ``partition`` whose acknowledgement reached the producer between ``start``
        and ``end`` (``time.monotonic()``)."""
        with self.lock:
            return sorted(number for number, at in self.acknowledged_at[partition].items() if start <= at <= end)

    def acknowledged_offsets(self, partition: int, numbers: list[int]) -> dict[int, int | None]:
        """The offset each of ``numbers`` was acknowledged at (None: the acknowledgement carried none)."""
        with self.lock:
            return {n: self.acknowledged[partition][n] for n in numbers}

    def describe_acknowledgements(self, partition: int, numbers: list[int], since: float) -> str:
        """Each write's offset, and when (seconds after ``since``) it was produced and its acknowledgement
        reached the producer: what a failed check of :meth:`acknowledged_within` needs to be told apart (a
        write appended before a fault and answered late, or one appended after it)."""
        with self.lock:
            return ", ".join(
                f"{n} at offset {self.acknowledged[partition][n]} produced {self.produced_at[n] - since:+.2f}s acknowledged {self.acknowledged_at[partition][n] - since:+.2f}s"
                for n in numbers
            )

    def wait_for_progress(self, timeout_s: float = 60.0) -> float:
        """Until every partition has more acknowledged writes than when called; the seconds it took."""
        start = time.monotonic()
        before = self.acknowledged_count()
        while time.monotonic() - start < timeout_s:
            if self.producer_fatal is not None:
                raise RuntimeError(f"the producer stopped on a fatal error: {self.producer_fatal}")
            now = self.acknowledged_count()
            if all(now[p] > before[p] for p in before):
                return time.monotonic() - start
            time.sleep(0.05)
        with self.lock:
            waiting = f"{self.in_flight} writes awaiting an answer, {self.failed} failed {dict(self.delivery_errors)}, {len(self.produced_at)} rounds produced"
        raise TimeoutError(f"no acknowledged write on some partition of {self.topic} within {timeout_s}s: {before} -> {self.acknowledged_count()}; {waiting}")

    def finish(self, timeout_s: float = 60.0) -> Report:
        """Stop writing, wait for every outstanding write's answer, stop reading, read what survived, check."""
        self.stop()
        if self.producer_fatal is not None:  # nothing more will be answered: count what is left as failed
            self.producer.purge()
        remaining = self.producer.flush(timeout_s)
        if remaining:
            raise TimeoutError(f"{remaining} writes still unanswered after {timeout_s}s")
        return check(self.acknowledged, self.reads, self.read_surviving(timeout_s), failed=self.failed, delivery_errors=self.delivery_errors, producer_fatal=self.producer_fatal)

    def read_surviving(self, timeout_s: float) -> dict[int, list[tuple[int, int]]]:
        """Every partition from its start to its high watermark, as a fresh consumer sees it now.

        A leader just resumed from a pause may still answer as leader, with the high watermark it had when it
        stopped, until the controller's LeaderAndIsr reaches it: the watermarks are asked again once reached,
        and the read ends only when they stayed put for :data:`STABLE_ENDS_S`."""
        consumer = self._consumer()
        try:
            log: dict[int, list[tuple[int, int]]] = {p: [] for p in range(self.partitions)}
            deadline = time.monotonic() + timeout_s
            ends: dict[int, int] = {}
            stable_since = None
            while True:
                reached = all(end == 0 or (log[p] and log[p][-1][0] + 1 >= end) for p, end in ends.items())
                if reached:  # first, and again each time the ends known are reached (not while reading up to them:
                    # each ask waits behind the consumer's fetch on that connection, up to fetch.wait.max.ms)
                    try:
                        latest = {p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10, cached=False)[1] for p in range(self.partitions)}
                    except KafkaException:
                        # While the client's view of the leaders settles (librdkafka destroys the handle of a broker
                        # that left its metadata under a request in flight): asked again until the deadline.
                        latest = ends
                    if latest != ends:
                        ends, stable_since = {p: max(ends.get(p, 0), end) for p, end in latest.items()}, time.monotonic()
                    reached = all(end == 0 or (log[p] and log[p][-1][0] + 1 >= end) for p, end in ends.items())
                if reached and stable_since is not None and time.monotonic() - stable_since >= STABLE_ENDS_S:
                    return log
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading {self.topic} to its high watermarks {ends}: only {({p: len(r) for p, r in log.items()})}")
                for msg in consumer.consume(1000, timeout=0.5):
                    if msg.error() is not None:
                        continue
                    records = log[msg.partition()]
                    if not records or msg.offset() > records[-1][0]:
                        records.append((msg.offset(), int(msg.value())))
        finally:
            consumer.close()
