"""Apache Kafka 3.9.1 from its Maven jars, for the tests: ZooKeeper, a Kafka broker in ZooKeeper mode (the
mode odradek reproduces), Kafka's command-line tools, and Java programs compiled against kafka-clients.

``make jvm-deps`` copies each jar set named by a ``pom.xml`` beside this file (``kafka/``, ``spark-kafka/``)
into ``.cache/jvm/<set>/`` at the top of the repository, once. Nothing here downloads anything: a test that
needs a set that is not there fails with the command that fetches it.

``ODRADEK_COMPAT_KAFKA=host:port`` names a Kafka broker to use instead of starting one. Otherwise
:func:`shared_kafka` starts ZooKeeper and one Kafka broker on loopback the first time a test asks, and
stops both (by PID) when the test process exits; every test directory shares that one pair.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess as sp
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import tool_runner

REPO = Path(__file__).resolve().parents[2]
JAR_ROOT = Path(os.environ.get("ODRADEK_JVM_CACHE", REPO / ".cache" / "jvm"))
KAFKA_ENV = "ODRADEK_COMPAT_KAFKA"
STARTUP_TIMEOUT_S = 60.0

BROKER_SETTINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "log.cleaner.backoff.ms": "1000",
}
"""What the tests' Kafka and odradek both run with beyond Kafka's defaults: one node, no rebalance delay,
and a log cleaner that looks for work every second rather than every 15 s (so compaction shows quickly)."""

CLUSTER_STOP_SETTINGS: dict[str, str] = {"controlled.shutdown.retry.backoff.ms": "100"}
"""For the brokers of a ZooKeeper-mode cluster that a test stops cleanly, all of them at its end (Kafka's and
odradek's alike). The broker stopped last leads partitions whose other replicas have stopped: its controlled
shutdown can move none of them, and Kafka tries it ``controlled.shutdown.max.retries`` (3) times, 5 s apart by
default, before it shuts down anyway -- 10 s of every such cluster's end. 100 ms is what Kafka's own test
harness gives its brokers (``TestUtils.createBrokerConfig``). Not for a test that stops a broker while the
others keep serving and counts on the retries' time for a follower to catch up (a rolling restart)."""

TOOLS: dict[str, str] = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-console-producer": "kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-dump-log": "kafka.tools.DumpLogSegments",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-acls": "kafka.admin.AclCommand",
}
"""Each ``bin/kafka-*.sh`` script of Kafka 3.9 and the main class it runs (checked against the scripts on Kafka's 3.9 branch;
the console producer is still the Scala one there)."""

TOOLS_LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stderr.Target=System.err
"""
"""Kafka's ``config/tools-log4j.properties``: the tools log warnings to standard error only."""

SERVER_LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${kafka.logs.dir}/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.kafka.request.logger=WARN
"""


class JvmUnavailable(RuntimeError):
    """A jar set or the JVM is missing: the message says how to get it."""


def jar_dir(name: str) -> Path:
    """The folder of jar set ``name`` (``kafka`` or ``spark-kafka``); raises when ``make jvm-deps`` has not run."""
    path = JAR_ROOT / name
    if not any(path.glob("*.jar")):
        raise JvmUnavailable(f"no jars in {path}: run `make jvm-deps` (Maven copies tests/jvm/{name}/pom.xml's dependencies there)")
    if shutil.which("java") is None:
        raise JvmUnavailable("no `java` on PATH: install a Java 17 runtime")
    return path


def classpath(name: str = "kafka", *extra: str | Path) -> str:
    return jars_classpath([name], *extra)


def jars_classpath(jar_sets: Sequence[str], *jars: str | Path) -> str:
    """The classpath of ``jar_sets`` then ``jars``: jars only, as a class-data archive needs."""
    return os.pathsep.join([*(str(jar_dir(name) / "*") for name in jar_sets), *map(str, jars)])


def jar_files(jar_sets: Sequence[str]) -> list[Path]:
    """The jars of ``jar_sets``, in classpath order: what a class-data archive or a compilation depends on."""
    return [jar for name in jar_sets for jar in sorted(jar_dir(name).glob("*.jar"))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: sp.Popen, timeout_s: float, log: Path, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}:\n{tail(log)}")
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listened on {port} within {timeout_s}s:\n{tail(log)}")


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} unreadable)"


@dataclass
class JavaProcess:
    """A JVM started in the background, its output in ``log``; stopped by PID."""

    proc: sp.Popen
    log: Path
    archive: "ClassDataArchive | None" = None
    """The class-data archive it maps, or dumps at its exit when there was none yet."""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (Kafka's clean shutdown), then SIGKILL if it has not exited in time."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except sp.TimeoutExpired:
                self.kill()
        self.exited()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.exited()

    def exited(self) -> None:
        """Its archive, if it dumped one, put in place -- only after an exit of its own or on SIGTERM (143): a
        JVM killed, perhaps while dumping, leaves nothing to keep."""
        if self.archive is not None and self.proc.returncode is not None:
            self.archive.finish(kept=self.proc.returncode in (0, 143))


def start_java(main_class: str, args: Sequence[str], *, log: Path, heap: str = "512m", jar_sets: Sequence[str] = ("kafka",), system_properties: Mapping[str, str] | None = None, netns: str | None = None, as_shipped: bool = False) -> JavaProcess:
    """Start a JVM on the classpath of ``jar_sets``; in network namespace ``netns`` when given (``ip netns exec``
    execs the JVM, so the PID is the JVM's own and signals reach it directly). It maps the class-data archive
    of ``main_class`` on those jars (a Kafka broker serves in about half the time), or dumps it at its exit.

    ``as_shipped``: the JVM options of Kafka's own start scripts (:data:`KAFKA_SERVER_JVM_FLAGS`, ``heap``
    as its minimum too) instead of the tests' quick-start ones, and no archive: what benchmarks compare with."""
    props = [f"-D{k}={v}" for k, v in (system_properties or {}).items()]
    in_netns = ["ip", "netns", "exec", netns] if netns else []
    archive = None if as_shipped else ClassDataArchive.of(*jar_sets, user=main_class, side_by_side=True)
    cp = jars_classpath(jar_sets)
    flags = [f"-Xms{heap}", *KAFKA_SERVER_JVM_FLAGS] if archive is None else [*TOOL_JVM_FLAGS, *archive.flags()]
    cmd = [*in_netns, "java", f"-Xmx{heap}", *flags, *props, "-cp", cp, main_class, *args]
    out = open(log, "ab")
    try:
        proc = sp.Popen(cmd, stdout=out, stderr=sp.STDOUT, start_new_session=True)
    finally:
        out.close()
    return JavaProcess(proc, log, archive)


@dataclass
class ZooKeeper:
    """A standalone ZooKeeper server (the jar Kafka depends on) on a free loopback port, or on ``host`` inside
    network namespace ``netns`` (the cluster tests' harness)."""

    root: Path
    port: int = 0
    process: JavaProcess | None = None
    host: str = "127.0.0.1"
    netns: str | None = None
    tick_time_ms: int | None = None
    """ZooKeeper's tick (its default 3000 ms); sessions last 2 to 20 ticks."""

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> "ZooKeeper":
        self.port = self.port or free_port()
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        cfg = self.root / "zoo.cfg"
        cfg.write_text(f"dataDir={self.root / 'data'}\nclientPort={self.port}\nclientPortAddress={self.host}\nadmin.enableServer=false\nmaxClientCnxns=0\n" + (f"tickTime={self.tick_time_ms}\n" if self.tick_time_ms else ""))
        log4j = self.root / "log4j.properties"
        log4j.write_text(TOOLS_LOG4J)
        self.process = start_java(
            "org.apache.zookeeper.server.ZooKeeperServerMain", [str(cfg)], log=self.root / "zookeeper.out", heap="256m",
            system_properties={"log4j.configuration": log4j.as_uri(), "zookeeper.admin.enableServer": "false"}, netns=self.netns,
        )
        wait_for_port(self.port, self.process.proc, STARTUP_TIMEOUT_S, self.process.log, self.host)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


@dataclass
class KafkaBroker:
    """Apache Kafka 3.9.1 (``kafka.Kafka``, ZooKeeper mode) on a free loopback port.

    ``settings`` are ``server.properties`` keys on top of the listener, log directory, ZooKeeper and
    :data:`BROKER_SETTINGS`; everything else is Kafka's default. ``host`` and ``netns`` put it on another
    address, inside a network namespace (the cluster tests' harness).
    """

    root: Path
    zookeeper_connect: str
    broker_id: int = 0
    settings: dict[str, str] = field(default_factory=dict)
    port: int = 0
    process: JavaProcess | None = None
    host: str = "127.0.0.1"
    netns: str | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.root / "kafka-logs"

    def properties(self) -> dict[str, str]:
        return {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.log_dir),
            "zookeeper.connect": self.zookeeper_connect,
            **BROKER_SETTINGS,
            **self.settings,
        }

    def launch(self, heap: str = "768m", as_shipped: bool = False) -> JavaProcess:
        """Write the broker's files and start its JVM without waiting for it to serve (also for a start that
        must fail: its ``server.log`` then says why). ``as_shipped``: with the JVM options of Kafka's start
        scripts (see :func:`start_java`; give ``heap="1G"`` as kafka-server-start.sh does), for benchmarks."""
        self.port = self.port or free_port()
        self.root.mkdir(parents=True, exist_ok=True)
        server_properties = self.root / "server.properties"
        server_properties.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        log4j = self.root / "log4j.properties"
        log4j.write_text(SERVER_LOG4J)
        self.process = start_java(
            "kafka.Kafka", [str(server_properties)], log=self.root / "kafka.out", heap=heap,
            system_properties={"log4j.configuration": log4j.as_uri(), "kafka.logs.dir": str(self.root)}, netns=self.netns, as_shipped=as_shipped,
        )
        return self.process

    def start(self, heap: str = "768m", as_shipped: bool = False) -> "KafkaBroker":
        self.launch(heap, as_shipped)
        return self.serving()

    def serving(self) -> "KafkaBroker":
        """Until the launched broker serves: its port open, then Metadata naming brokers and the controller."""
        assert self.process is not None, "launch() first"
        wait_for_port(self.port, self.process.proc, STARTUP_TIMEOUT_S, self.process.log, self.host)
        wait_until_serving(self.bootstrap, STARTUP_TIMEOUT_S)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()

    def server_log(self) -> str:
        return tail(self.root / "server.log", 80)


def wait_until_serving(bootstrap: str, timeout_s: float) -> None:
    """Until the broker answers Metadata naming brokers and the controller. A ZooKeeper-mode broker (Kafka's
    or odradek's) listens before it knows either: both come with the controller's first UpdateMetadata,
    and until then it answers no brokers and controller -1 -- which an admin client (librdkafka) that
    bootstrapped on it takes as "no controller yet" and does not ask again for a while."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(timeout=2)
            if metadata.brokers and metadata.controller_id >= 0:
                return
        except Exception as exc:  # not serving yet
            last = exc
        time.sleep(0.2)
    raise RuntimeError(f"Kafka at {bootstrap} did not start serving within {timeout_s}s: {last}")


@dataclass(frozen=True)
class ClassDataArchive:
    """A jar set's shared class-data archive (JDK AppCDS), for the tools' many short JVMs.

    A tool's JVM spends most of its ~1.5 s loading and verifying the same classes as the last one; mapping
    them from an archive halves that. A run that finds no archive dumps one at exit to a name of its own,
    renamed into place afterwards, so concurrent runs cannot leave half an archive; later runs map it. The
    archive's name holds a digest of the JVM and the jars, so a changed set never meets a stale archive, and
    ``-Xlog:disable`` keeps the JVM's CDS warnings (about old class files it skips) out of the tools' output.
    """

    path: Path
    dump_to: Path | None

    @classmethod
    def of(cls, *names: str, jar: Path | None = None, user: str = "", side_by_side: bool = False) -> "ClassDataArchive":
        """The archive of the classpath made of jar sets ``names``, in that order, then ``jar`` if given; one of
        its own for ``user`` (a main class: a broker loads other classes than a tool). ``side_by_side``: JVMs
        this thread starts may run (and dump) at once, so each dumps to a file of its own; a tool's dump file
        is named by process and thread only, so a tool's command line is the same in every call."""
        jars = [*jar_files(names), *([jar] if jar else [])]
        java = os.path.realpath(shutil.which("java") or "java")
        listing = "\n".join([java, *(f"{j.name}:{j.stat().st_size}:{j.stat().st_mtime_ns}" for j in jars)])
        path = JAR_ROOT / f"{'-'.join(filter(None, [names[0], user]))}-{hashlib.sha256(listing.encode()).hexdigest()[:16]}.jsa"
        return cls(path, None if path.exists() else path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}{f'.{uuid.uuid4().hex[:12]}' if side_by_side else ''}.tmp"))

    def flags(self) -> list[str]:
        use = f"-XX:ArchiveClassesAtExit={self.dump_to}" if self.dump_to else f"-XX:SharedArchiveFile={self.path}"
        return ["-Xlog:disable", use]

    def runner_flags(self) -> list[str]:
        """The flags of a long-lived JVM on this classpath (tool_runner): the archive if there is one, never a
        dump (such a JVM is killed, and a dump would take in its own classes)."""
        return ["-Xlog:disable", f"-XX:SharedArchiveFile={self.path}"] if self.path.exists() else []

    def finish(self, kept: bool = True) -> None:
        if self.dump_to is not None and self.dump_to.exists():
            if kept:
                os.replace(self.dump_to, self.path)
            else:
                self.dump_to.unlink(missing_ok=True)


@atexit.register
def _forget_unfinished_archives() -> None:
    """The dumps this process's JVMs left unfinished (one whose owner never stopped it: a start that failed)."""
    for left in JAR_ROOT.glob(f"*.jsa.{os.getpid()}.*.tmp"):
        left.unlink(missing_ok=True)


TOOL_JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
"""The tests' JVMs start quickly: one GC thread, and only the first compiler tier (peak speed is not what a
test waits for; a benchmark must not use these against odradek: :data:`KAFKA_SERVER_JVM_FLAGS`)."""
KAFKA_SERVER_JVM_FLAGS = [
    "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
]
"""``KAFKA_JVM_PERFORMANCE_OPTS`` of Kafka's bin/kafka-run-class.sh; bin/kafka-server-start.sh adds a 1 GiB heap
(``-Xmx1G -Xms1G``): a broker as Kafka ships it, for benchmarks."""
EXIT_CLASS = "org.apache.kafka.common.utils.Exit"
"""Kafka 3.9's ``Exit``, through which its tools leave (a runner JVM traps it: tool_runner)."""
RUNNER_HEAP = "-Xmx512m"
"""A tool runner's heap (tool_runner): its tools' 256 MiB, and room for the classes of all of them."""


def tools_log4j() -> Path:
    """:data:`TOOLS_LOG4J` in a file beside the jars (written once; the tools' and programs' JVMs share it)."""
    log4j = JAR_ROOT / "tools-log4j.properties"
    if not log4j.exists():
        log4j.parent.mkdir(parents=True, exist_ok=True)
        log4j.write_text(TOOLS_LOG4J)
    return log4j


@dataclass(frozen=True)
class JavaPrograms:
    """Java sources compiled once (``javac -Werror``) against jar sets, each program run as a JVM of its own:
    ``programs.run("Main", *args)``, or in a runner JVM that stays up (``lasting=True``, tool_runner) when
    the program is fit for one: it leaves through Kafka's ``Exit`` (:attr:`exit_class`), never
    ``System.exit`` or ``halt``, keeps no state from one run to the next and closes its clients.

    The classes go into one jar beside the jar sets, named by a digest of the sources, the JDK and the jars,
    so every test process finds the same file: a class-data archive (:class:`ClassDataArchive`) is dumped only
    from a classpath of jars, and maps only where the classpath is the one it was dumped from. The first run
    dumps it; each later JVM maps Kafka's client classes from it instead of loading them (about half of a
    short program's start-up CPU).
    """

    jar: Path
    jar_sets: tuple[str, ...]
    system_properties: tuple[tuple[str, str], ...]
    """The logging configuration each program gets, as ``bin/*.sh`` gives the tools theirs."""
    exit_class: str
    """Kafka's ``Exit`` class in these jar sets, which a runner JVM traps (tool_runner)."""

    @classmethod
    def compile(cls, sources: Sequence[Path], jar_sets: Sequence[str], system_properties: Mapping[str, str], exit_class: str, timeout_s: float = 180.0) -> "JavaPrograms":
        javac, jar_tool = shutil.which("javac"), shutil.which("jar")
        if javac is None or jar_tool is None:
            raise JvmUnavailable("no `javac` or `jar` on PATH: install a Java 17 JDK (make test does)")
        cp = jars_classpath(jar_sets)
        jars = jar_files(jar_sets)
        digest = hashlib.sha256()
        for part in [os.path.realpath(javac).encode(), *(f"{j.name}:{j.stat().st_size}".encode() for j in jars), *(s.name.encode() + s.read_bytes() for s in sorted(sources))]:
            digest.update(part + b"\0")
        folder = JAR_ROOT / f"programs-{jar_sets[0]}-{digest.hexdigest()[:16]}"
        if not (folder / "programs.jar").exists():
            temp = Path(tempfile.mkdtemp(prefix=f"{folder.name}.", dir=JAR_ROOT))
            try:
                for command in ([javac, "-Xlint:all", "-Werror", "-d", str(temp / "classes"), "-cp", cp, *map(str, sources)], [jar_tool, "cf", str(temp / "programs.jar"), "-C", str(temp / "classes"), "."]):
                    done = sp.run(command, capture_output=True, text=True, timeout=timeout_s)
                    if done.returncode != 0:
                        raise RuntimeError(f"{Path(command[0]).name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
                shutil.rmtree(temp / "classes")
                os.rename(temp, folder)
            except OSError:  # another process put it there first
                if not (folder / "programs.jar").exists():
                    raise
            finally:
                shutil.rmtree(temp, ignore_errors=True)
        return cls(folder / "programs.jar", tuple(jar_sets), tuple(system_properties.items()), exit_class)

    def archive(self) -> ClassDataArchive:
        return ClassDataArchive.of(*self.jar_sets, jar=self.jar)

    def command(self, main_class: str, *args: str, heap: str = "256m", cds: Sequence[str] | None = None) -> list[str]:
        """The command line of ``main_class``; one that runs until killed (a group member) maps the archive when
        there is one, and never dumps it (a killed JVM dumps nothing)."""
        flags = self.archive().runner_flags() if cds is None else cds
        properties = [f"-D{k}={v}" for k, v in self.system_properties]
        cp = jars_classpath(self.jar_sets, self.jar)
        return ["java", f"-Xmx{heap}", *TOOL_JVM_FLAGS, *flags, *properties, "-cp", cp, main_class, *args]

    def run(self, main_class: str, *args: str, timeout_s: float = 180.0, lasting: bool = False) -> sp.CompletedProcess[str]:
        """``main_class`` run to its exit (the first such run dumps the archive); ``lasting``: in this process's
        runner JVM for these programs instead, unless runners are off."""
        archive = self.archive()
        command = self.command(main_class, *args, cds=archive.flags())
        runner = RunnerCall(jars_classpath(self.jar_sets, self.jar), self.exit_class, [f"-D{k}={v}" for k, v in self.system_properties]) if lasting else None
        return run_java(command, archive, runner, main_class, args, timeout_s=timeout_s)


@dataclass(frozen=True)
class RunnerCall:
    """What a runner JVM (tool_runner) needs beyond a main class's own command line: its classpath, the Kafka
    ``Exit`` class it traps, and the system properties its calls share."""

    classpath: str
    exit_class: str
    properties: list[str]


def run_java(command: list[str], archive: ClassDataArchive | None, runner: RunnerCall | None, main_class: str, args: Sequence[str], *, timeout_s: float, input: str | None = None) -> sp.CompletedProcess[str]:
    """``main_class`` with ``args`` run to its exit: in this process's runner JVM (tool_runner) when ``runner``
    says how to start one and runners are on, else as ``command``, a JVM of its own that maps or dumps
    ``archive``. The answer is ``subprocess.run(command, capture_output=True, text=True)``'s either way."""
    if runner is not None:
        jvm = [RUNNER_HEAP, *TOOL_JVM_FLAGS, *(archive.runner_flags() if archive else []), *runner.properties]
        done = tool_runner.run(jvm, runner.classpath, runner.exit_class, main_class, args, input=input, timeout_s=timeout_s, command=command, cache=JAR_ROOT)
        if done is not None:
            return done
    try:
        return sp.run(command, capture_output=True, text=True, timeout=timeout_s, input=input)
    finally:
        if archive:
            archive.finish()


def java_programs(sources: Sequence[Path], timeout_s: float = 180.0) -> JavaPrograms:
    """Java sources compiled once against kafka-clients 3.9.1, each program logging as Kafka's tools do."""
    return JavaPrograms.compile(sources, ["kafka"], {"log4j.configuration": tools_log4j().as_uri()}, EXIT_CLASS, timeout_s)


def run_tool(tool: str, *args: str, timeout_s: float = 120.0, input: str | None = None, cp: str | None = None) -> sp.CompletedProcess[str]:
    """Run one of Kafka's command-line tools (``kafka-topics``, ...) as its ``bin/*.sh`` script would: in this
    process's tool runner (tool_runner.py) unless ``cp`` names another classpath or runners are off."""
    log4j = tools_log4j()
    archive = ClassDataArchive.of("kafka") if cp is None else None
    cds = archive.flags() if archive else []
    properties = [f"-Dlog4j.configuration={log4j.as_uri()}"]
    cmd = ["java", "-Xmx256m", *TOOL_JVM_FLAGS, *cds, *properties, "-cp", cp or classpath(), TOOLS[tool], *args]
    runner = RunnerCall(classpath(), EXIT_CLASS, properties) if archive is not None else None
    return run_java(cmd, archive, runner, TOOLS[tool], args, timeout_s=timeout_s, input=input)


@dataclass
class RealKafka:
    """The tests' one real Kafka: an address, and the broker and ZooKeeper when this process started them."""

    bootstrap: str
    broker: KafkaBroker | None = None
    zookeeper: ZooKeeper | None = None


_shared: RealKafka | None = None


def shared_kafka() -> RealKafka:
    """The session's real Kafka: ``ODRADEK_COMPAT_KAFKA`` if set, else ZooKeeper and a broker started once."""
    global _shared
    if _shared is not None:
        return _shared
    address = os.environ.get(KAFKA_ENV, "").strip()
    if address:
        _shared = RealKafka(address)
        return _shared
    jar_dir("kafka")
    root = Path(tempfile.mkdtemp(prefix="odradek-real-kafka-"))
    zookeeper = ZooKeeper(root / "zookeeper").start()
    try:
        broker = KafkaBroker(root / "kafka", zookeeper.connect).start()
    except BaseException:
        zookeeper.stop()
        raise

    def stop() -> None:
        try:
            broker.stop()
        finally:
            zookeeper.stop()
            shutil.rmtree(root, ignore_errors=True)

    stop_with_session(stop)
    _shared = RealKafka(broker.bootstrap, broker, zookeeper)
    return _shared


_stops = contextlib.ExitStack()
"""How to stop the shared JVMs this process started: each stop runs even if an earlier one failed."""


def stop_with_session(stop: Callable[[], None]) -> None:
    """``stop`` (of a JVM shared by the whole session: :func:`shared_kafka`, ``kafka44_jvm.shared_kafka44``)
    run by :func:`stop_shared`."""
    _stops.callback(stop)


@atexit.register
def stop_shared() -> None:
    """Stop the JVMs shared by a whole test session, last started first; at most once each. The session's end
    calls it (tests/conftest.py), not only the exit: pytest-xdist gives a worker's exit handlers 10 s and
    then kills the worker, and a JVM whose stop was not reached by then (each is stopped by SIGTERM and
    waited for) outlives the run."""
    _stops.close()
