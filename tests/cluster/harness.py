"""A cluster under faults: ZooKeeper and N brokers as processes, each in a network namespace of its own.

The clients (tests, checker, benchmarks) stay in the root namespace and reach every node over a bridge::

    root namespace: bridge <slot-prefix>br, 10.77.<slot>.1/24 (clients)
      ├─ veth ── namespace <prefix>-zk   10.77.<slot>.2   ZooKeeper :2181
      ├─ veth ── namespace <prefix>-b1   10.77.<slot>.11  broker 1  :9092
      └─ ...

so a link can be cut like a real network would cut it: ``partition(a, b)`` drops every packet between two
nodes (nftables rules inside both namespaces: established connections hang, new ones time out),
``isolate(broker)`` takes its veth down (cut from everyone, clients included), and ``heal()`` undoes both.
``kill`` is SIGKILL and ``pause``/``resume`` are SIGSTOP/SIGCONT of the broker's process.

The brokers are real Apache Kafka 3.9.1 (``broker_kind="kafka"``, the jars of ``tests/jvm``) or odradek
(``broker_kind="odradek"``, ``odradek serve --override ...``) behind the same interface, so one test runs
against either; ``kinds=("odradek", "odradek", "kafka")`` makes a mixed cluster, its broker 1 the controller.

Several harnesses can run on one machine at once (several test runs): each takes a *slot*, a lock file
held while it lives, and its names and subnet carry the slot number. A slot's namespaces, bridge and the
processes inside them left by a run that crashed are removed when the next harness takes the slot; its own
are removed by :meth:`Cluster.close`, whatever happened.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess as sp
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jvm"))

import kafka_jvm  # noqa: E402

from odradek.protocol.api import ApiKey  # noqa: E402
from tests.conftest import Wire  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ODRADEK = REPO / ".venv" / "bin" / "odradek"
SLOTS = 16
LOCK_DIR = Path("/run/lock")
BROKER_PORT = 9092
ZOOKEEPER_PORT = 2181
NFT_TABLE = "harness"
START_TIMEOUT_S = 90.0
ZOOKEEPER_TICK_MS = 1000

CLUSTER_SETTINGS: dict[str, str] = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "4000",
    "group.initial.rebalance.delay.ms": "0",
}
"""What every broker of a test cluster runs with: Kafka's durable settings (rf 3, min ISR 2, no unclean
election), and failure detection shortened so that a round of faults takes seconds: a ZooKeeper session of
6 s (Kafka's default 18 s; a shorter one expires while a restarted JVM starts on a busy machine,
which Kafka cannot survive; ZooKeeper ticks every :data:`ZOOKEEPER_TICK_MS`, so it expires on time), a
follower out of the ISR after 4 s without catching up."""


class HarnessUnavailable(RuntimeError):
    """The machine cannot run the harness (not root, no ``ip``/``nft``, no jars): the message says why."""


def run(*args: str, check: bool = True) -> sp.CompletedProcess[str]:
    result = sp.run(args, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"`{' '.join(args)}` failed ({result.returncode}): {result.stderr.strip()}")
    return result


def in_netns(netns: str, *args: str, check: bool = True) -> sp.CompletedProcess[str]:
    return run("ip", "netns", "exec", netns, *args, check=check)


def require_tools() -> None:
    if os.geteuid() != 0:
        raise HarnessUnavailable("the cluster harness creates network namespaces: run the tests as root")
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            raise HarnessUnavailable(f"no `{tool}` on PATH: `make system-deps` installs iproute2 and nftables")


@dataclass(frozen=True)
class Node:
    """One network namespace with one address on the bridge."""

    name: str
    netns: str
    address: str
    host_veth: str


@dataclass
class Network:
    """The bridge, the namespaces and the cuts between them, for one slot."""

    slot: int
    lock: IO[str]
    nodes: dict[str, Node] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        return f"odk{self.slot}"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    @property
    def client_address(self) -> str:
        """The root namespace's address on the bridge: where the nodes see clients come from."""
        return f"10.77.{self.slot}.1"

    @classmethod
    def create(cls, slots: Iterable[int] = range(SLOTS)) -> "Network":
        """Take the first free slot of ``slots``, remove what a crashed run left in it, and bring its bridge up."""
        require_tools()
        for slot in slots:
            lock = open(LOCK_DIR / f"odradek-cluster-harness-{slot}.lock", "w")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            network = cls(slot, lock)
            network.remove_leftovers()
            run("ip", "link", "add", network.bridge, "type", "bridge")
            run("ip", "addr", "add", f"{network.client_address}/24", "dev", network.bridge)
            run("ip", "link", "set", network.bridge, "up")
            return network
        raise HarnessUnavailable(f"the harness slots are all in use ({LOCK_DIR}/odradek-cluster-harness-*.lock)")

    def add_node(self, name: str, host_number: int) -> Node:
        """A namespace with loopback up and a veth to the bridge, and an empty nftables table for cuts. ``name``
        starts with a letter (:meth:`owns_link`)."""
        if not name[:1].isalpha():
            raise ValueError(f"a node's name starts with a letter: {name!r}")
        node = Node(name, f"{self.prefix}-{name}", f"10.77.{self.slot}.{host_number}", f"{self.prefix}{name}")
        peer = f"{node.host_veth}p"
        run("ip", "netns", "add", node.netns)
        self.nodes[name] = node
        in_netns(node.netns, "ip", "link", "set", "lo", "up")
        run("ip", "link", "add", node.host_veth, "type", "veth", "peer", "name", peer)
        run("ip", "link", "set", peer, "netns", node.netns)
        in_netns(node.netns, "ip", "link", "set", peer, "name", "eth0")
        in_netns(node.netns, "ip", "addr", "add", f"{node.address}/24", "dev", "eth0")
        in_netns(node.netns, "ip", "link", "set", "eth0", "up")
        run("ip", "link", "set", node.host_veth, "master", self.bridge)
        run("ip", "link", "set", node.host_veth, "up")
        ruleset = (
            f"table inet {NFT_TABLE} {{\n"
            "  chain input { type filter hook input priority 0; policy accept; }\n"
            "  chain output { type filter hook output priority 0; policy accept; }\n"
            "}\n"
        )
        sp.run(["ip", "netns", "exec", node.netns, "nft", "-f", "-"], input=ruleset, text=True, check=True, capture_output=True)
        return node

    def partition(self, a: Node, b: Node) -> None:
        """Drop every packet between ``a`` and ``b``, both ways, in both namespaces."""
        for here, there in ((a, b), (b, a)):
            in_netns(here.netns, "nft", "add", "rule", "inet", NFT_TABLE, "input", "ip", "saddr", there.address, "drop")
            in_netns(here.netns, "nft", "add", "rule", "inet", NFT_TABLE, "output", "ip", "daddr", there.address, "drop")

    def isolate(self, node: Node) -> None:
        """Cut ``node`` from everyone, clients included: its veth goes down."""
        run("ip", "link", "set", node.host_veth, "down")

    def heal(self) -> None:
        """Every link up, every drop rule gone."""
        for node in self.nodes.values():
            in_netns(node.netns, "nft", "flush", "table", "inet", NFT_TABLE)
            run("ip", "link", "set", node.host_veth, "up")

    def remove_leftovers(self) -> None:
        """What a run of this slot left: the processes in its namespaces (SIGKILL), the namespaces, the
        veths and the bridge. The veths are deleted by name: a namespace outlives its name while the
        kernel still holds sockets of it (connections to a cut peer), and its veth with it."""
        listed = run("ip", "netns", "list", check=False).stdout.split("\n")
        for netns in (line.split()[0] for line in listed if line.startswith(f"{self.prefix}-")):
            for pid in run("ip", "netns", "pids", netns, check=False).stdout.split():
                kill_quietly(int(pid), signal.SIGKILL)
            run("ip", "netns", "del", netns, check=False)
        links = run("ip", "-o", "link", "show", check=False).stdout.splitlines()
        for name in (line.split(":")[1].strip().split("@")[0] for line in links if ":" in line):
            if self.owns_link(name):
                run("ip", "link", "del", name, check=False)

    def owns_link(self, name: str) -> bool:
        """Whether a link is this slot's: its bridge or a node's veth, the prefix followed by the node's name,
        which starts with a letter (so slot 1's prefix ``odk1`` never claims slot 11's ``odk11b1``)."""
        return name.startswith(self.prefix) and name[len(self.prefix) : len(self.prefix) + 1].isalpha()

    def close(self) -> None:
        self.remove_leftovers()
        self.nodes.clear()
        self.lock.close()


def kill_quietly(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


class BrokerProcess(Protocol):
    """A broker of the cluster, whichever implementation: started and signalled by PID."""

    broker_id: int
    node: Node

    @property
    def bootstrap(self) -> str: ...

    @property
    def pid(self) -> int | None: ...

    @property
    def log_dir(self) -> Path: ...

    def launch(self) -> None: ...

    def running(self) -> bool: ...

    def kill(self) -> None: ...

    def log_tail(self) -> str: ...


def broker_properties(broker_id: int, node: Node, zookeeper_connect: str, log_dir: Path, settings: Mapping[str, str]) -> dict[str, str]:
    """The ``server.properties`` keys of one broker of the cluster, the same as ``kafka_jvm.KafkaBroker``
    writes for Kafka: the tests' :data:`kafka_jvm.BROKER_SETTINGS`, then the cluster's."""
    return {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://{node.address}:{BROKER_PORT}",
        "log.dirs": str(log_dir),
        "zookeeper.connect": zookeeper_connect,
        **kafka_jvm.BROKER_SETTINGS,
        **CLUSTER_SETTINGS,
        **settings,
    }


@dataclass
class KafkaBrokerProcess:
    """Apache Kafka 3.9.1 from the jars (``kafka_jvm.KafkaBroker``) in the node's namespace, 256 MiB of heap."""

    broker_id: int
    node: Node
    root: Path
    zookeeper_connect: str
    settings: Mapping[str, str]
    broker: kafka_jvm.KafkaBroker = field(init=False)

    def __post_init__(self) -> None:
        self.broker = kafka_jvm.KafkaBroker(
            self.root, self.zookeeper_connect, broker_id=self.broker_id, port=BROKER_PORT, host=self.node.address, netns=self.node.netns,
            settings={**CLUSTER_SETTINGS, **self.settings},
        )

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def pid(self) -> int | None:
        return self.broker.process.pid if self.broker.process else None

    @property
    def log_dir(self) -> Path:
        return self.broker.log_dir

    def launch(self) -> None:
        self.broker.launch(heap="256m")

    def running(self) -> bool:
        return self.broker.process is not None and self.broker.process.proc.poll() is None

    def kill(self) -> None:
        self.broker.kill()

    def log_tail(self) -> str:
        return self.broker.server_log()


@dataclass
class OdradekBrokerProcess:
    """odradek (``odradek serve --override ...``) in the node's namespace, with the same properties."""

    broker_id: int
    node: Node
    root: Path
    zookeeper_connect: str
    settings: Mapping[str, str]
    proc: sp.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.node.address}:{BROKER_PORT}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def log(self) -> Path:
        return self.root / "odradek.out"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    def launch(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        properties = broker_properties(self.broker_id, self.node, self.zookeeper_connect, self.log_dir, self.settings)
        overrides = [arg for key, value in properties.items() for arg in ("--override", f"{key}={value}")]
        with open(self.log, "ab") as out:
            self.proc = sp.Popen(
                ["ip", "netns", "exec", self.node.netns, str(ODRADEK), "serve", *overrides], stdout=out, stderr=sp.STDOUT, start_new_session=True
            )

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.running():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(30)

    def log_tail(self) -> str:
        return kafka_jvm.tail(self.log, 80)


@dataclass
class ShippedKafkaBrokerProcess(KafkaBrokerProcess):
    """Apache Kafka 3.9.1 started as its own scripts start it (1 GiB heap, G1, full JIT compilation), not with
    the tests' quick-start JVM options: for benchmarks that compare with Kafka (benchmarks/bench_replication.py)."""

    def launch(self) -> None:
        self.broker.launch(heap="1G", as_shipped=True)


BROKER_KINDS: dict[str, Callable[..., BrokerProcess]] = {"kafka": KafkaBrokerProcess, "kafka-as-shipped": ShippedKafkaBrokerProcess, "odradek": OdradekBrokerProcess}
"""The implementations a cluster can be made of, by the name tests parametrise with (``broker_kind``)."""


@dataclass(frozen=True)
class PartitionState:
    """A partition as the brokers' Metadata answers describe it."""

    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's ``/brokers/topics/<t>/partitions/<p>/state`` znode: what the controller decided, which
    no broker's stale view can hide."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


class Cluster:
    """ZooKeeper and ``size`` brokers (ids 1..size) of one kind, each in its namespace, and their faults.

    ``kinds`` makes a mixed cluster instead: broker ``i`` is of kind ``kinds[i - 1]``, and broker 1 is
    started alone until it is the controller (so a test chooses which implementation leads), the others
    after it. ``broker_settings`` adds keys to some brokers only (``{1: {"broker.rack": "a"}}``). Use as a
    context manager: leaving it kills every process and removes every namespace, link
    and rule.
    """

    def __init__(
        self, root: Path, broker_kind: str = "kafka", size: int = 3, settings: Mapping[str, str] | None = None, kinds: Sequence[str] | None = None,
        broker_settings: Mapping[int, Mapping[str, str]] | None = None,
    ) -> None:
        kinds = tuple(kinds) if kinds is not None else (broker_kind,) * size
        unknown = set(kinds) - set(BROKER_KINDS)
        if unknown:
            raise ValueError(f"unknown broker kinds {sorted(unknown)}: each one of {sorted(BROKER_KINDS)}")
        if {"kafka", "kafka-as-shipped"} & set(kinds):
            try:
                kafka_jvm.jar_dir("kafka")
            except kafka_jvm.JvmUnavailable as exc:
                raise HarnessUnavailable(str(exc)) from exc
        self.root = root
        self._admin: AdminClient | None = None
        self._zk: KazooClient | None = None
        self.network = Network.create()
        try:
            zk_node = self.network.add_node("zk", 2)
            self.zookeeper = kafka_jvm.ZooKeeper(root / "zookeeper", port=ZOOKEEPER_PORT, host=zk_node.address, netns=zk_node.netns, tick_time_ms=ZOOKEEPER_TICK_MS)
            self.zk_node = zk_node
            self.brokers: dict[int, BrokerProcess] = {}
            for broker_id, kind in enumerate(kinds, start=1):
                node = self.network.add_node(f"b{broker_id}", 10 + broker_id)
                own = {**(settings or {}), **(broker_settings or {}).get(broker_id, {})}
                self.brokers[broker_id] = BROKER_KINDS[kind](broker_id, node, root / f"broker-{broker_id}", self.zookeeper_connect, own)
            self.zookeeper.start()
            if len(set(kinds)) > 1:
                self.brokers[1].launch()
                self.wait_until(lambda: self.controller() == 1, "broker 1 the controller", START_TIMEOUT_S)
            for broker in self.brokers.values():
                if not broker.running():
                    broker.launch()
            for broker_id in self.brokers:
                self.wait_registered(broker_id)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def zookeeper_connect(self) -> str:
        return f"{self.zk_node.address}:{ZOOKEEPER_PORT}"

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def admin(self) -> AdminClient:
        """The cluster's one admin client (a future outlives its call only while its client lives)."""
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        return self._admin

    # -- faults ------------------------------------------------------------------------------------------

    def kill(self, broker_id: int) -> None:
        """SIGKILL: the process dies with whatever it had not written."""
        self.brokers[broker_id].kill()

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the process is frozen (a long GC pause, a stalled VM), its connections stay open."""
        self.signal(broker_id, signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        self.signal(broker_id, signal.SIGCONT)

    def signal(self, broker_id: int, sig: signal.Signals) -> None:
        pid = self.brokers[broker_id].pid
        if pid is None:
            raise RuntimeError(f"broker {broker_id} was never started")
        os.kill(pid, sig)

    def stop(self, broker_id: int, timeout_s: float = 60.0) -> float:
        """SIGTERM, as an operator stops a broker (Kafka's controlled shutdown first), and wait for the process
        to exit; the seconds it took."""
        self.signal(broker_id, signal.SIGTERM)
        return self.wait_until(lambda: not self.brokers[broker_id].running(), f"broker {broker_id} stopped", timeout_s)

    def restart(self, broker_id: int) -> None:
        """Start a killed, stopped (or never started) broker again on its log directory."""
        broker = self.brokers[broker_id]
        if broker.running():
            raise RuntimeError(f"broker {broker_id} is still running")
        broker.launch()
        self.wait_registered(broker_id)

    def partition(self, a: int, b: int) -> None:
        """Cut the link between brokers ``a`` and ``b``."""
        self.network.partition(self.brokers[a].node, self.brokers[b].node)

    def partition_from_brokers(self, broker_id: int) -> None:
        """Cut ``broker_id`` from every other broker; ZooKeeper and the clients still reach it."""
        for other in self.brokers:
            if other != broker_id:
                self.partition(broker_id, other)

    def isolate_from_zk(self, broker_id: int) -> None:
        """Cut ``broker_id`` from ZooKeeper only: its session expires, the other brokers and clients still reach it."""
        self.network.partition(self.brokers[broker_id].node, self.zk_node)

    def isolate(self, broker_id: int) -> None:
        """Cut ``broker_id`` from everyone: ZooKeeper, the other brokers and the clients."""
        self.network.isolate(self.brokers[broker_id].node)

    def heal(self) -> None:
        """Undo every cut (processes are left as they are: resume or restart them yourself)."""
        self.network.heal()

    # -- observing -----------------------------------------------------------------------------------------

    def wait_registered(self, broker_id: int, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the broker answers Metadata from its own address listing itself (it has joined the cluster)."""
        broker = self.brokers[broker_id]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not broker.running():
                raise RuntimeError(f"broker {broker_id} exited while starting:\n{broker.log_tail()}")
            try:
                if broker_id in admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # not serving yet
                pass
            time.sleep(0.3)
        raise RuntimeError(f"broker {broker_id} did not join the cluster within {timeout_s}s:\n{broker.log_tail()}")

    def partitions(self, topic: str) -> dict[int, PartitionState]:
        """What the cluster's metadata says of each partition of ``topic``."""
        metadata = self.admin().list_topics(topic, timeout=10).topics[topic]
        if metadata.error is not None:
            raise RuntimeError(f"metadata of {topic}: {metadata.error}")
        return {p: PartitionState(m.leader, tuple(m.replicas), tuple(m.isrs)) for p, m in metadata.partitions.items()}

    def znode(self, path: str) -> dict:
        """A znode's JSON, read by the harness's own ZooKeeper session."""
        return json.loads(self._zookeeper_session().get(path)[0])

    def finalized_features(self, broker_id: int) -> tuple[dict[str, int], int]:
        """The feature levels broker ``broker_id`` finalizes and their epoch, from its ApiVersions v4 answer as
        a Kafka 4.x client reads them."""
        answer = Wire.call_once(self.brokers[broker_id].bootstrap, ApiKey.ApiVersions, 4, {"client_software_name": "probe", "client_software_version": "1"})
        return {f.name: f.max_version_level for f in answer.finalized_features}, answer.finalized_features_epoch

    def znode_version(self, path: str) -> int:
        """How many times the znode was written since its creation (a partition state's: every leader or
        ISR change)."""
        return self._zookeeper_session().get(path)[1].version

    def znode_exists(self, path: str) -> bool:
        return self._zookeeper_session().exists(path) is not None

    def _zookeeper_session(self) -> KazooClient:
        if self._zk is None:
            self._zk = KazooClient(hosts=self.zookeeper_connect)
            self._zk.start(timeout=15)
        return self._zk

    def leader_and_isr(self, topic: str, partition: int) -> LeaderAndIsr:
        """The partition's state in ZooKeeper."""
        state = self.znode(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return LeaderAndIsr(state["leader"], state["leader_epoch"], tuple(state["isr"]))

    def controller(self) -> int:
        """The controller's broker id, from ``/controller``."""
        return int(self.znode("/controller")["brokerid"])

    def wait_for_leader_change(self, topic: str, partition: int, old: LeaderAndIsr, timeout_s: float = 60.0) -> LeaderAndIsr:
        """Until the controller has elected another leader than ``old``'s (in ZooKeeper); the new state."""
        self.wait_until(lambda: self.leader_and_isr(topic, partition).leader not in (old.leader, -1), f"a new leader of {topic}-{partition}", timeout_s)
        return self.leader_and_isr(topic, partition)

    def wait_until(self, condition: Callable[[], bool], what: str, timeout_s: float) -> float:
        """Poll ``condition`` until true; the seconds it took. Errors of a cluster in flux count as false."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            try:
                if condition():
                    return time.monotonic() - start
            except Exception:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"{what}: not within {timeout_s}s")

    def broker_partitions(self, broker_id: int, topic: str) -> dict[int, PartitionState]:
        """What broker ``broker_id``'s own Metadata answer says of each partition of ``topic``: its view, which
        follows the controller's decisions only once their UpdateMetadata has reached it."""
        body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        (found,) = Wire.call_once(self.brokers[broker_id].bootstrap, ApiKey.Metadata, 12, body).topics
        if found.error_code != 0:
            raise RuntimeError(f"broker {broker_id}'s metadata of {topic}: error {found.error_code}")
        return {p.partition_index: PartitionState(p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes)) for p in found.partitions}

    def wait_fully_replicated(self, topic: str, timeout_s: float = 60.0, partitions: int | None = None) -> float:
        """Until every running broker's metadata shows ``topic`` with its ``partitions`` (by default, as many as
        ZooKeeper assigns it), each with a leader and all its replicas in the ISR. (Without the count, metadata
        naming none of them yet passed.) Every broker's, because a client's next request may go to any: one
        whose UpdateMetadata was still on its way answered LEADER_NOT_AVAILABLE just after another showed the
        topic complete."""
        expected = partitions if partitions is not None else len(self.znode(f"/brokers/topics/{topic}")["partitions"])

        def replicated() -> bool:
            for broker_id, broker in self.brokers.items():
                if broker.running():
                    states = self.broker_partitions(broker_id, topic)
                    if len(states) != expected or not all(s.leader >= 0 and set(s.isr) == set(s.replicas) for s in states.values()):
                        return False
            return True

        return self.wait_until(replicated, f"every replica of {topic}'s {expected} partitions in the ISR, as every broker sees it", timeout_s)

    def create_topic(
        self, topic: str, partitions: int, replication_factor: int = 3, config: Mapping[str, str] | None = None, timeout_s: float = 60.0,
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Create ``topic`` and wait until it is fully replicated. Tried again, by a new client each time
        (librdkafka keeps the controller it knew), while the cluster settles after a fault (a controller
        that was frozen answers UNKNOWN_SERVER_ERROR or NOT_CONTROLLER until it learns it lost its
        session), an earlier try's topic then counting as created. ``assignment`` places the replicas of
        each partition (its first the preferred, so first, leader) instead of ``replication_factor``."""
        deadline = time.monotonic() + timeout_s
        tried = False
        configs = dict(config or {})
        if assignment is None:
            new_topic = NewTopic(topic, partitions, replication_factor, config=configs)
        else:
            new_topic = NewTopic(topic, partitions, replica_assignment=[list(r) for r in assignment], config=configs)
        while True:
            admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
            futures = admin.create_topics([new_topic], operation_timeout=30)
            try:
                futures[topic].result(timeout_s)
                break
            except KafkaException as exc:
                error = exc.args[0]
                if tried and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    break
                if time.monotonic() > deadline:
                    raise
                tried = True
                time.sleep(0.5)
        self.wait_fully_replicated(topic, partitions=partitions)

    def close(self) -> None:
        """Kill every process (resumed first, so nothing stays frozen), then remove the network."""
        for broker in getattr(self, "brokers", {}).values():
            if broker.running() and broker.pid is not None:
                kill_quietly(broker.pid, signal.SIGCONT)
            broker.kill()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
        if getattr(self, "zookeeper", None) is not None and self.zookeeper.process is not None:
            self.zookeeper.process.kill()
        self.network.close()


@contextlib.contextmanager
def running_cluster(root: Path, *args: Any, **kwargs: Any) -> Iterator[Cluster]:
    """A :class:`Cluster` (same arguments) for a fixture: a machine that cannot run one (not root, no
    ``ip``/``nft``, no jars) fails the test rather than skipping it, and the cluster is closed on the way
    out, whatever happened. ``root`` stays: a caller that mounted disks under it removes it after them."""
    try:
        cluster = Cluster(root, *args, **kwargs)
    except HarnessUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    with cluster:
        yield cluster
