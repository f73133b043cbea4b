"""Apache Kafka 4.4.0 from its Maven jars in KRaft mode, for the APIs Kafka added after 3.9 (issue 24: the
consumer group protocol, share groups, transactions v2): one combined broker+controller node shared by a
test process, a three-node KRaft cluster on loopback started on demand, Kafka 4.4's command-line tools, and
Java programs compiled against kafka-clients 4.4.0.

The jars come from two sets ``make jvm-deps`` copies (see :mod:`kafka_jvm`): ``kafka44`` (broker, tools,
client) and ``kafka44-log4j2`` (the SLF4J binding Kafka's distribution ships in ``libs/``; without it Kafka
4.x logs nothing). Kafka 4.x logs through log4j2, so every JVM started here gets a log4j2 configuration:
the broker writes ``server.log`` in its directory, the tools and Java programs log warnings to standard
error, as ``bin/*.sh`` with ``config/tools-log4j2.yaml`` do.

A KRaft node is formatted before its first start (``kafka-storage format``: the cluster id and, for a fresh
cluster, the features finalized at the newest levels, ``transaction.version`` 2, ``group.version`` 1,
``share.version`` 2 among them), with a static quorum (``controller.quorum.voters``).

``ODRADEK_COMPAT_KAFKA44=host:port`` names a Kafka 4.4 broker to use instead of starting one. Otherwise
:func:`shared_kafka44` starts one node the first time a test asks and stops it (by PID) when the test
process exits. :class:`KRaftCluster` is a context manager: its nodes stop on exit, and at the process's
exit if a test left them running.
"""

from __future__ import annotations

import atexit
import base64
import os
import shutil
import signal
import subprocess as sp
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import kafka_jvm
from kafka_jvm import JavaProcess, JavaPrograms, free_port, start_java, tail, wait_for_port

KAFKA44_ENV = "ODRADEK_COMPAT_KAFKA44"
JAR_SETS = ("kafka44", "kafka44-log4j2")
STARTUP_TIMEOUT_S = 180.0
"""A KRaft node's start-up takes ~10 s on an idle machine; the suite's shared two cores stretch that."""

SINGLE_NODE_SETTINGS: dict[str, str] = {
    **kafka_jvm.BROKER_SETTINGS,
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}
"""The settings the tests' Kafka 3.9 runs with (:data:`kafka_jvm.BROKER_SETTINGS`) plus the share coordinator's
topic on one node; a three-node cluster keeps Kafka's replication defaults (3, min ISR 2)."""

CLUSTER_SETTINGS: dict[str, str] = {k: v for k, v in kafka_jvm.BROKER_SETTINGS.items() if "replication.factor" not in k and "min.isr" not in k}

CONSUMER_GROUP_SETTINGS: dict[str, str] = {
    "group.consumer.min.session.timeout.ms": "10000",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "1000",
}
"""What the consumer group protocol's tests run both brokers with (the shared node has them): members heartbeat
every second rather than every 5 s, so each step of a rebalance waits a second, and a killed member is fenced
after 10 s rather than 45 s. Kafka's bounds (``group.consumer.min.*``) are lowered with them, as they must be."""

TRANSACTION_SETTINGS: dict[str, str] = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}
"""What the transactions v2 tests run both brokers with (the shared node has it): the coordinator looks for
transactions past their timeout every second rather than every 10 s, so a test that lets one time out waits
about its timeout, not up to 10 s more."""

EXIT_CLASS = "org.apache.kafka.common.utils.internals.Exit"
"""Kafka 4.x's ``Exit`` (moved from 3.9's ``common.utils``), through which its tools leave."""

TOOLS: dict[str, str] = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
}
"""Each ``bin/kafka-*.sh`` script of Kafka 4.4 and the main class it runs (tests/e2e/test_kafka44_harness.py
checks that every class is in the jars)."""

TOOLS_LOG4J2 = """\
status = warn
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = stderr
"""
"""Kafka 4.4's ``config/tools-log4j2.yaml`` in log4j2's properties syntax: warnings to standard error only."""

SERVER_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""
"""Kafka 4.4's ``config/log4j2.yaml`` reduced to one file: ``server.log`` at INFO, the request log off (a test
that wants it sets ``kafka.request.logger`` to DEBUG in ``KRaftNode.loggers``)."""


def classpath() -> str:
    """The broker, tools and client jars, then the log4j2 binding."""
    return kafka_jvm.jars_classpath(JAR_SETS)


def log4j2_file(text: str, name: str) -> Path:
    """A log4j2 configuration kept beside the jars (written once; the tools' many JVMs share it)."""
    path = kafka_jvm.JAR_ROOT / name
    if not path.exists() or path.read_text() != text:
        temp = path.with_name(f"{name}.{os.getpid()}.tmp")
        temp.write_text(text)
        os.replace(temp, path)
    return path


def new_cluster_id() -> str:
    """A KRaft cluster id as ``kafka-storage random-uuid`` prints one: 16 random bytes, URL-safe base64 without
    padding (Kafka's Uuid never starts with '-', which its command lines would take for an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def coordinator_partition(key: str, partitions: int = 50) -> int:
    """The partition of ``__consumer_offsets`` (or ``__transaction_state``) holding ``key``'s records:
    ``Utils.abs(key.hashCode()) % partitions``, with Java's String.hashCode (over UTF-16 code units)."""
    h = 0
    units = key.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


@dataclass
class KRaftNode:
    """One Kafka 4.4 node with ``process.roles=broker,controller`` on loopback: a PLAINTEXT listener for the
    clients and a CONTROLLER one for the quorum.

    ``settings`` are ``server.properties`` keys on top of the listeners, the quorum and ``log.dirs``; the
    cluster's nodes share ``cluster_id`` and ``voters`` (``id@host:port`` of every controller).
    """

    root: Path
    node_id: int
    cluster_id: str
    port: int
    controller_port: int
    voters: str = ""
    settings: dict[str, str] = field(default_factory=dict)
    loggers: dict[str, str] = field(default_factory=dict)
    """log4j2 logger levels beyond :data:`SERVER_LOG4J2` (``{"kafka.request.logger": "DEBUG"}``)."""
    host: str = "127.0.0.1"
    process: JavaProcess | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.root / "kafka-logs"

    def properties(self) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters or f"{self.node_id}@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            **self.settings,
        }

    def write_config(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        server_properties = self.root / "server.properties"
        server_properties.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        levels = "".join(f"logger.l{i}.name = {name}\nlogger.l{i}.level = {level}\n" for i, (name, level) in enumerate(self.loggers.items()))
        (self.root / "log4j2.properties").write_text(SERVER_LOG4J2 + levels)
        return server_properties

    def format(self) -> None:
        """``kafka-storage format`` of the log directory, once (a formatted node keeps its data on restart)."""
        if (self.log_dir / "meta.properties").exists():
            return
        done = run_tool("kafka-storage", "format", "-t", self.cluster_id, "-c", str(self.write_config()), timeout_s=STARTUP_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"kafka-storage format of node {self.node_id} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")

    def launch(self, heap: str = "768m") -> JavaProcess:
        """Format when new, write the configuration and start the JVM without waiting for it to serve."""
        self.format()
        server_properties = self.write_config()
        self.process = start_java(
            "kafka.Kafka", [str(server_properties)], log=self.root / "kafka.out", heap=heap, jar_sets=JAR_SETS,
            system_properties={"log4j2.configurationFile": str(self.root / "log4j2.properties"), "kafka.logs.dir": str(self.root)},
        )
        return self.process

    def start(self, heap: str = "768m") -> "KRaftNode":
        process = self.launch(heap)
        wait_for_port(self.port, process.proc, STARTUP_TIMEOUT_S, process.log, self.host)
        wait_until_serving(self.bootstrap, STARTUP_TIMEOUT_S, brokers=1)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()

    def server_log(self) -> str:
        return tail(self.root / "server.log", 80)


def wait_until_serving(bootstrap: str, timeout_s: float, brokers: int) -> None:
    """Until Metadata through ``bootstrap`` lists ``brokers`` brokers (a KRaft broker listens before the
    controller has unfenced it)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            seen = admin.list_topics(timeout=2).brokers
            if len(seen) >= brokers:
                return
            last = f"{len(seen)} of {brokers} brokers registered"
        except Exception as exc:  # not serving yet
            last = exc
        time.sleep(0.3)
    raise RuntimeError(f"Kafka 4.4 at {bootstrap} did not serve {brokers} broker(s) within {timeout_s}s: {last}")


@dataclass
class KRaftCluster:
    """``size`` combined nodes (ids 1..size) on loopback, every one a voter of the quorum."""

    root: Path
    size: int = 3
    settings: dict[str, str] = field(default_factory=lambda: dict(CLUSTER_SETTINGS))
    nodes: list[KRaftNode] = field(default_factory=list)

    def __post_init__(self) -> None:
        cluster_id = new_cluster_id()
        ports = [(free_port(), free_port()) for _ in range(self.size)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{controller}" for i, (_, controller) in enumerate(ports))
        self.nodes = [KRaftNode(self.root / f"node-{i + 1}", i + 1, cluster_id, port, controller, voters, dict(self.settings)) for i, (port, controller) in enumerate(ports)]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def node(self, node_id: int) -> KRaftNode:
        return self.nodes[node_id - 1]

    def start(self, heap: str = "512m") -> "KRaftCluster":
        """All nodes at once (a quorum elects no leader before a majority is up), then until all serve."""
        atexit.register(self.stop)
        try:
            with ThreadPoolExecutor(self.size) as pool:
                list(pool.map(lambda node: node.launch(heap), self.nodes))
            for node in self.nodes:
                assert node.process is not None
                wait_for_port(node.port, node.process.proc, STARTUP_TIMEOUT_S, node.process.log, node.host)
            wait_until_serving(self.bootstrap, STARTUP_TIMEOUT_S, brokers=self.size)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM to every node at once (a node's clean shutdown waits on the quorum the others form), then
        each is waited for and killed if it has not exited in time. No threads: this also runs at exit."""
        running = [node.process for node in self.nodes if node.process is not None and node.process.proc.poll() is None]
        for process in running:
            process.proc.send_signal(signal.SIGTERM)
        for process in running:
            process.stop()
        atexit.unregister(self.stop)

    def __enter__(self) -> "KRaftCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_tool(tool: str, *args: str, timeout_s: float = 120.0, input: str | None = None) -> sp.CompletedProcess[str]:
    """Run one of Kafka 4.4's command-line tools (``kafka-share-groups``, ...) as its ``bin/*.sh`` script would:
    in this process's tool runner (tool_runner.py) unless runners are off."""
    log4j2 = log4j2_file(TOOLS_LOG4J2, "tools-log4j2.properties")
    archive = kafka_jvm.ClassDataArchive.of(*JAR_SETS)
    properties = [f"-Dlog4j2.configurationFile={log4j2}"]
    cmd = ["java", "-Xmx256m", *kafka_jvm.TOOL_JVM_FLAGS, *archive.flags(), *properties, "-cp", classpath(), TOOLS[tool], *args]
    return kafka_jvm.run_java(cmd, archive, kafka_jvm.RunnerCall(classpath(), EXIT_CLASS, properties), TOOLS[tool], args, timeout_s=timeout_s, input=input)


def java_programs(sources: Sequence[Path]) -> JavaPrograms:
    """Java sources compiled once against kafka-clients 4.4.0, each program logging as Kafka 4.4's tools do."""
    return JavaPrograms.compile(sources, JAR_SETS, {"log4j2.configurationFile": str(log4j2_file(TOOLS_LOG4J2, "tools-log4j2.properties"))}, EXIT_CLASS)


@dataclass
class RealKafka44:
    """The tests' one Kafka 4.4: an address, and the node when this process started it."""

    bootstrap: str
    node: KRaftNode | None = None


_shared: RealKafka44 | None = None


def shared_kafka44() -> RealKafka44:
    """The session's Kafka 4.4: ``ODRADEK_COMPAT_KAFKA44`` if set, else one combined KRaft node started once
    (with :data:`CONSUMER_GROUP_SETTINGS` and :data:`TRANSACTION_SETTINGS`)."""
    global _shared
    if _shared is not None:
        return _shared
    address = os.environ.get(KAFKA44_ENV, "").strip()
    if address:
        _shared = RealKafka44(address)
        return _shared
    classpath()  # fails with the command that fetches a missing jar set
    root = Path(tempfile.mkdtemp(prefix="odradek-kafka44-"))
    node = KRaftNode(root, 1, new_cluster_id(), free_port(), free_port(), settings={**SINGLE_NODE_SETTINGS, **CONSUMER_GROUP_SETTINGS, **TRANSACTION_SETTINGS})

    def stop() -> None:
        node.stop()
        shutil.rmtree(root, ignore_errors=True)

    kafka_jvm.stop_with_session(stop)
    try:
        node.start()
    except BaseException:
        stop()
        raise
    _shared = RealKafka44(node.bootstrap, node)
    return _shared
