"""The cluster as an admin client sees it: brokers, topics, partitions, offsets, sizes on disk and configs.

One :func:`read_cluster` call makes a :class:`ClusterView` from Metadata, ListOffsets (to each partition's
leader), DescribeLogDirs (to each broker) and DescribeConfigs. A principal that may not describe the
cluster or its configs still gets the rest: each part it is refused is left unknown (None) and the refusal
kept in ``ClusterView.notes``, so the pages show what it may see and say what it may not.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from odradek.broker.network.kafka_client import DisconnectedError, KafkaClient, ResponseError, UnsupportedVersionError
from odradek.controller.zk_data import BROKER_IDS, CONTROLLER_EPOCH, BrokerRegistration, decode_controller_epoch
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.tools.admin_common import EARLIEST, LATEST, CommandError, ConfigEntry, describe_configs, list_offsets

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
BROKER_KEYS = ("listeners", "advertised.listeners", "inter.broker.protocol.version", "prometheus.port", "prometheus.host", "zookeeper.connect")
"""Broker configs the cluster page shows or the charts need (the last three only odradek has)."""
ADMIN_ERRORS = (CommandError, ResponseError, DisconnectedError, UnsupportedVersionError, TimeoutError)
"""What a request of the console may fail with: shown on the page, never a crash of the page."""


@dataclass
class PartitionView:
    topic: str
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    log_start: int | None = None
    log_end: int | None = None
    size: int | None = None
    """Bytes on disk, the leader's replica (None: not known)."""

    @property
    def offline(self) -> bool:
        return self.leader < 0

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def records(self) -> int | None:
        """Records between the log start and end offsets (fewer when compacted or transactional)."""
        return None if self.log_start is None or self.log_end is None else self.log_end - self.log_start


@dataclass
class TopicView:
    name: str
    topic_id: object
    internal: bool
    partitions: list[PartitionView]
    min_isr: int | None = None
    replica_bytes: int | None = None
    """Bytes on disk of every replica of every partition (None: the log dirs could not be described)."""

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0

    def under_min_isr(self, p: PartitionView) -> bool:
        return self.min_isr is not None and not p.offline and len(p.isr) < self.min_isr

    @property
    def records(self) -> int | None:
        counts = [p.records for p in self.partitions if p.records is not None]
        return sum(counts) if len(counts) == len(self.partitions) else None

    @property
    def problems(self) -> dict[str, int]:
        return {
            "offline": sum(p.offline for p in self.partitions),
            "under-replicated": sum(p.under_replicated for p in self.partitions),
            "under min ISR": sum(self.under_min_isr(p) for p in self.partitions),
        }


@dataclass
class BrokerView:
    node_id: int
    host: str
    port: int
    rack: str | None
    configs: dict[str, str | None] = field(default_factory=dict)
    leaders: int = 0
    replicas: int = 0
    log_dir_bytes: int | None = None

    @property
    def metrics_url(self) -> str | None:
        """odradek's Prometheus endpoint, from the broker's own prometheus.port and prometheus.host."""
        port = self.configs.get("prometheus.port")
        if not port or port == "0":
            return None
        return f"http://{self.configs.get('prometheus.host') or self.host}:{port}/metrics"


@dataclass
class ClusterView:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerView]
    topics: list[TopicView]
    notes: list[str] = field(default_factory=list)

    def topic(self, name: str) -> TopicView | None:
        return next((t for t in self.topics if t.name == name), None)

    @property
    def problem_partitions(self) -> list[tuple[TopicView, PartitionView, list[str]]]:
        out = []
        for t in self.topics:
            for p in t.partitions:
                what = [w for w, bad in (("offline", p.offline), ("under-replicated", p.under_replicated), ("under min ISR", t.under_min_isr(p))) if bad]
                if what:
                    out.append((t, p, what))
        return out


async def read_cluster(client: KafkaClient, *, topics: list[str] | None = None, sizes: bool = True, broker_configs: bool = True) -> ClusterView:
    """The cluster's state; ``topics`` narrows the topics read (None: all the principal may describe)."""
    metadata = await client.refresh_metadata(topics)
    brokers = {b.node_id: BrokerView(b.node_id, b.host, b.port, b.rack) for b in metadata.brokers}
    view = ClusterView(getattr(metadata, "cluster_id", None), getattr(metadata, "controller_id", -1), [brokers[i] for i in sorted(brokers)], [])
    for t in sorted(metadata.topics, key=lambda t: t.name):
        if t.error_code != ErrorCode.NONE:
            if topics is not None:
                view.notes.append(f"{t.name}: {ErrorCode(t.error_code).message}")
            continue
        partitions = [
            PartitionView(t.name, p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes), list(getattr(p, "offline_replicas", [])))
            for p in sorted(t.partitions, key=lambda p: p.partition_index)
        ]
        view.topics.append(TopicView(t.name, getattr(t, "topic_id", None), t.is_internal, partitions))
        for p in partitions:
            if p.leader in brokers:
                brokers[p.leader].leaders += 1
            for r in p.replicas:
                if r in brokers:
                    brokers[r].replicas += 1
    await _read_offsets(client, view)
    await _read_min_isr(client, view)
    if sizes:
        await _read_sizes(client, view)
    if broker_configs:
        for broker in view.brokers:
            try:
                entries = await describe_configs(client, BROKER_RESOURCE, str(broker.node_id), node_id=broker.node_id)
            except ADMIN_ERRORS as exc:
                view.notes.append(f"broker {broker.node_id} configs: {exc}")
                continue
            broker.configs = {e.name: e.value for e in entries if e.name in BROKER_KEYS}
    return view


async def _read_offsets(client: KafkaClient, view: ClusterView) -> None:
    partitions = [(p.topic, p.partition) for t in view.topics for p in t.partitions]
    try:
        starts = await list_offsets(client, partitions, EARLIEST)
        ends = await list_offsets(client, partitions, LATEST)
    except ADMIN_ERRORS as exc:
        view.notes.append(f"offsets: {exc}")
        return
    for t in view.topics:
        for p in t.partitions:
            p.log_start, p.log_end = starts.get((p.topic, p.partition)), ends.get((p.topic, p.partition))


async def _read_min_isr(client: KafkaClient, view: ClusterView) -> None:
    if not view.topics:
        return
    resources = [{"resource_type": TOPIC_RESOURCE, "resource_name": t.name, "configuration_keys": ["min.insync.replicas"]} for t in view.topics]
    try:
        response = await client.request(ApiKey.DescribeConfigs, {"resources": resources, "include_synonyms": False, "include_documentation": False})
    except ADMIN_ERRORS as exc:
        view.notes.append(f"topic configs: {exc}")
        return
    for result in response.results:
        topic = view.topic(result.resource_name)
        if topic is not None and result.error_code == ErrorCode.NONE:
            topic.min_isr = next((int(c.value) for c in result.configs if c.name == "min.insync.replicas" and c.value), None)


async def _read_sizes(client: KafkaClient, view: ClusterView) -> None:
    """DescribeLogDirs of every broker: each partition's leader replica size and each topic's total."""
    sizes: dict[tuple[str, int, int], int] = {}
    for broker in view.brokers:
        try:
            response = await client.request(ApiKey.DescribeLogDirs, {"topics": None}, node_id=broker.node_id)
        except ADMIN_ERRORS as exc:
            view.notes.append(f"log dirs of broker {broker.node_id}: {exc}")
            continue
        if getattr(response, "error_code", ErrorCode.NONE) != ErrorCode.NONE:
            view.notes.append(f"log dirs of broker {broker.node_id}: {ErrorCode(response.error_code).message}")
            continue
        broker.log_dir_bytes = 0
        for result in response.results:
            for t in result.topics if result.error_code == ErrorCode.NONE else ():
                for p in t.partitions:
                    if not p.is_future_key:
                        sizes[(t.name, p.partition_index, broker.node_id)] = p.partition_size
                        broker.log_dir_bytes += p.partition_size
    known = {b.node_id for b in view.brokers if b.log_dir_bytes is not None}
    for t in view.topics:
        for p in t.partitions:
            p.size = sizes.get((p.topic, p.partition, p.leader))
        if known:
            t.replica_bytes = sum(sizes.get((p.topic, p.partition, r), 0) for p in t.partitions for r in p.replicas)


async def topic_configs(client: KafkaClient, name: str) -> list[ConfigEntry]:
    return sorted(await describe_configs(client, TOPIC_RESOURCE, name), key=lambda e: e.name)


@dataclass
class ZooKeeperView:
    """What a ZooKeeper-mode cluster keeps in ZooKeeper only: the controller epoch (``/controller_epoch``), and
    each broker's registered endpoints (``/brokers/ids/<id>``): every listener with the address and the port it
    is bound to (a listener configured with port 0 registers the port it got), where the Kafka protocol tells a
    client only the endpoint of the listener it came through and DescribeConfigs the configured ``:0``."""

    controller_epoch: int | None = None
    endpoints: dict[int, list[str]] = field(default_factory=dict)


def read_zookeeper(zookeeper_connect: str, broker_ids: list[int], timeout_s: float = 3.0) -> ZooKeeperView:
    """The :class:`ZooKeeperView` of a ZooKeeper-mode cluster; what cannot be read (no kazoo, the ``zookeeper``
    extra; ZooKeeper unreachable from the console; a broker gone) is left unknown. Blocking: run it on a
    worker thread."""
    view = ZooKeeperView()
    try:
        from kazoo.client import KazooClient
        from kazoo.exceptions import NoNodeError
    except ImportError:
        return view
    quiet = logging.getLogger("odradek.console.zookeeper")
    quiet.setLevel(logging.CRITICAL)
    zk = KazooClient(hosts=zookeeper_connect, timeout=timeout_s, read_only=True, logger=quiet)
    try:
        zk.start(timeout=timeout_s)
        view.controller_epoch = decode_controller_epoch(zk.get(CONTROLLER_EPOCH)[0])
        for broker_id in broker_ids:
            try:
                registration = BrokerRegistration.decode(broker_id, zk.get(f"{BROKER_IDS}/{broker_id}")[0])
            except NoNodeError:  # gone since the metadata named it
                continue
            view.endpoints[broker_id] = [e.connection_string() for e in registration.endpoints]
    except Exception:  # noqa: BLE001 -- any failure of these optional figures leaves the rest unknown
        pass
    finally:
        zk.stop()
        zk.close()
    return view
