"""Kafka 3.9's ZooKeeper layout (``kafka.zk.ZkData``): every znode path and the exact bytes Kafka writes there.

A ZooKeeper shared with real Kafka brokers must hold byte-identical data, so besides the fields this module
reproduces the order Kafka's JSON objects come out in. Kafka serializes Scala and Java maps with Jackson,
which writes a map in its iteration order, and that order is the one of the container Kafka happened to
build: a Scala ``Map`` of up to four entries keeps insertion order, a larger immutable one iterates its CHAMP
trie, a ``mutable.Map`` its hash table, a ``java.util.Properties`` its ``ConcurrentHashMap``. Each encoder
below names the container Kafka uses for that znode (:class:`Container`) and :func:`kafka_order` computes
that container's iteration order from the keys' ``String.hashCode``.

Timestamps (broker and controller registrations) are the only bytes that differ between two writers.
"""

from __future__ import annotations

import base64
import enum
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from odradek.protocol.java_hash import hash_map_spread, int32, java_string_hash
from odradek.protocol.kafka_uuid import Uuid
from odradek.storage.topic_partition import TopicPartition

# -- paths ------------------------------------------------------------------------------------------------

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQUENCE_ID = "/brokers/seqid"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
FEATURE = "/feature"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CONSUMERS = "/consumers"


class ConfigType(str, enum.Enum):
    """Kafka's ``ConfigType.ALL``: the entity types under ``/config``, in Kafka's order."""

    TOPIC = "topics"
    CLIENT = "clients"
    USER = "users"
    BROKER = "brokers"
    IP = "ips"
    GROUP = "groups"
    """Kafka 4.4's GROUP config resources, which Kafka keeps in KRaft metadata only; odradek's ZooKeeper mode
    keeps them as the other entities (docs/protocol.md). Not created at startup: Kafka 3.9 has no such path."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def config_entity_path(entity_type: ConfigType, name: str) -> str:
    return f"{CONFIG}/{entity_type.value}/{name}"


PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQUENCE_ID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{t.value}" for t in ConfigType if t is not ConfigType.GROUP),
)
"""``ZkData.PersistentZkPaths``: what every Kafka broker creates (empty, data null) at startup."""

# -- Kafka's map iteration orders --------------------------------------------------------------------------


def _ushr(x: int, n: int) -> int:
    return (x & 0xFFFFFFFF) >> n


class Container(enum.Enum):
    """The map type Kafka builds a JSON object from, which fixes the order Jackson writes its keys in."""

    INSERTION = "scala Map1..Map4 / java LinkedHashMap"
    SCALA_IMMUTABLE = "scala immutable.HashMap (CHAMP)"
    SCALA_MUTABLE = "scala mutable.HashMap"
    JAVA_HASH = "java HashMap / ConcurrentHashMap"


def _scala_mutable_order(keys: Sequence[str], table: int, grow: bool) -> list[str]:
    """``mutable.HashMap``: buckets in index order, each bucket sorted by its improved hash (signed)."""
    if grow:  # an empty map (capacity 16) grows by doubling when an insertion reaches 3/4 of its table
        size = 0
        for _ in keys:
            if size + 1 >= int(table * 0.75):
                table *= 2
            size += 1
    hashes = [(lambda h: int32(h ^ _ushr(h, 16)))(java_string_hash(k)) for k in keys]
    return [k for _, _, k in sorted((h & (table - 1), h, k) for h, k in zip(hashes, keys))]


def _scala_improve(h: int) -> int:
    h = int32(h + ~int32(h << 9))
    h = int32(h ^ _ushr(h, 14))
    h = int32(h + int32(h << 4))
    return int32(h ^ _ushr(h, 10))


def _champ_order(keys: Sequence[str], shift: int = 0) -> list[str]:
    """``immutable.HashMap`` (more than four entries): a node's own entries by bit position, then its sub-nodes."""
    groups: dict[int, list[str]] = {}
    for k in keys:
        groups.setdefault(_ushr(_scala_improve(java_string_hash(k)), shift) & 31, []).append(k)
    ordered = sorted(groups.items())
    own = [g[0] for _, g in ordered if len(g) == 1]
    return own + [k for _, g in ordered if len(g) > 1 for k in _champ_order(g, shift + 5)]


def _java_hash_order(keys: Sequence[str], table: int) -> list[str]:
    """``HashMap``/``ConcurrentHashMap``: buckets in index order (spread hash), insertion order within one.
    Both start at 16 buckets here (``new Properties()`` sizes its map for 8) and double at 3/4 full."""
    while len(keys) >= table * 3 // 4:
        table *= 2
    spread = [hash_map_spread(java_string_hash(k)) for k in keys]
    return [k for _, _, k in sorted(((h & (table - 1)), i, k) for i, (h, k) in enumerate(zip(spread, keys)))]


def kafka_order(keys: Iterable[str], container: Container, *, table: int = 16, grow: bool = False) -> list[str]:
    """The order Kafka's ``container`` iterates ``keys`` (given in insertion order) in."""
    keys = list(keys)
    if container is Container.INSERTION or (container is Container.SCALA_IMMUTABLE and len(keys) <= 4):
        return keys
    if container is Container.SCALA_IMMUTABLE:
        return _champ_order(keys)
    if container is Container.SCALA_MUTABLE:
        return _scala_mutable_order(keys, table, grow)
    return _java_hash_order(keys, table)


def ordered(mapping: Mapping[str, Any], container: Container, **kw: Any) -> dict[str, Any]:
    return {k: mapping[k] for k in kafka_order(mapping, container, **kw)}


_LOWER_HEX_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u00([0-9a-f]{2})")


def to_json(value: Any) -> bytes:
    """Jackson's compact output: no spaces, UTF-8 as is, control characters as upper-case ``\\u00XX``."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return _LOWER_HEX_ESCAPE.sub(lambda m: m.group(1) + "\\u00" + m.group(2).upper(), text).encode()


def from_json(data: bytes | None) -> Any:
    """Kafka's ``Json.parseBytes``: data null, empty or not JSON reads as None."""
    try:
        return json.loads(data) if data else None
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return None


def now_ms() -> str:
    return str(int(time.time() * 1000))


# -- the znodes --------------------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return to_json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return from_json(data)["id"]


@dataclass(frozen=True)
class ControllerRegistration:
    """``/controller`` (ephemeral): version 2 since Kafka 3.4 (KRaft migration's ``kraftControllerEpoch``)."""

    broker_id: int
    timestamp: str = field(default_factory=now_ms)
    kraft_controller_epoch: int = -1

    def encode(self) -> bytes:
        return to_json({"version": 2, "brokerid": self.broker_id, "timestamp": self.timestamp, "kraftControllerEpoch": self.kraft_controller_epoch})

    @classmethod
    def decode(cls, data: bytes) -> "ControllerRegistration":
        js = from_json(data)
        return cls(js["brokerid"], str(js.get("timestamp", "")), js.get("kraftControllerEpoch", -1))


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


@dataclass(frozen=True)
class EndPoint:
    """One advertised listener: ``LISTENER://host:port`` (``EndPoint.connectionString``)."""

    listener: str
    host: str | None
    port: int
    security_protocol: str

    def connection_string(self) -> str:
        host = "" if self.host is None else f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)")


@dataclass(frozen=True)
class BrokerRegistration:
    """``/brokers/ids/<id>`` (ephemeral), JSON version 5 (inter.broker.protocol.version 2.7 and later).

    The top-level ``host``/``port`` are the first PLAINTEXT endpoint's, for old clients (null and -1 without
    one). ZooKeeper-mode brokers of Kafka 3.9 register no supported features (``{}``)."""

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    timestamp: str = field(default_factory=now_ms)
    version: int = 5

    def encode(self) -> bytes:
        plaintext = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), EndPoint("", None, -1, ""))
        protocols: dict[str, str] = {}
        for e in self.endpoints:
            protocols[e.listener] = e.security_protocol
        body: dict[str, Any] = {
            "version": self.version,
            "host": plaintext.host,
            "port": plaintext.port,
            "endpoints": [e.connection_string() for e in self.endpoints],
            "jmx_port": self.jmx_port,
            "timestamp": self.timestamp,
        }
        if self.rack is not None:
            body["rack"] = self.rack
        body["listener_security_protocol_map"] = ordered(protocols, Container.SCALA_IMMUTABLE)
        body["features"] = {
            name: ordered(dict(versions), Container.JAVA_HASH) for name, versions in ordered(dict(self.features), Container.JAVA_HASH).items()
        }
        return to_json(ordered(body, Container.SCALA_MUTABLE))

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> "BrokerRegistration":
        js = from_json(data)
        protocols = js.get("listener_security_protocol_map") or {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}
        if js["version"] == 1:
            endpoints: tuple[EndPoint, ...] = (EndPoint("PLAINTEXT", js["host"], js["port"], "PLAINTEXT"),)
        else:
            endpoints = tuple(cls._endpoint(s, protocols) for s in js["endpoints"])
        return cls(broker_id, endpoints, js.get("rack"), js["jmx_port"], js.get("features") or {}, str(js.get("timestamp", "")), js["version"])

    @staticmethod
    def _endpoint(connection: str, protocols: Mapping[str, str]) -> EndPoint:
        m = _ENDPOINT.match(connection)
        if m is None:
            raise ValueError(f"Unable to parse {connection} to a broker endpoint")
        listener = m.group(1)
        return EndPoint(listener, m.group(2) or None, int(m.group(3)), protocols[listener])

    def endpoint(self, listener: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener == listener), None)


@dataclass(frozen=True)
class ReplicaAssignment:
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/<t>``: version 3, each partition's replicas, those being added and removed, the id."""

    topic_id: Uuid | None
    partitions: Mapping[int, ReplicaAssignment]

    def encode(self) -> bytes:
        def by_partition(replicas: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
            """A ``mutable.Map`` filled partition by partition; adding/removing hold only non-empty lists."""
            return ordered({str(p): list(r) for p, r in replicas.items()}, Container.SCALA_MUTABLE, grow=True)

        body: dict[str, Any] = {
            "version": 3,
            "partitions": by_partition({p: a.replicas for p, a in self.partitions.items()}),
            "adding_replicas": by_partition({p: a.adding for p, a in self.partitions.items() if a.adding}),
            "removing_replicas": by_partition({p: a.removing for p, a in self.partitions.items() if a.removing}),
        }
        if self.topic_id is not None:
            body["topic_id"] = encode_uuid(self.topic_id)
        return to_json(ordered(body, Container.SCALA_MUTABLE, table=8))

    @classmethod
    def decode(cls, data: bytes | None) -> "TopicAssignment":
        """Data that is not JSON reads as no partitions, as Kafka reads it."""
        js = from_json(data) or {}
        adding = js.get("adding_replicas") or {}
        removing = js.get("removing_replicas") or {}
        partitions = {
            int(p): ReplicaAssignment(tuple(r), tuple(adding.get(p, ())), tuple(removing.get(p, ())))
            for p, r in (js.get("partitions") or {}).items()
        }
        topic_id = js.get("topic_id")
        return cls(None if topic_id is None else decode_uuid(topic_id), partitions)


def encode_uuid(u: Uuid) -> str:
    """Kafka's ``Uuid.toString``: 22 characters of URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def decode_uuid(s: str) -> Uuid:
    return Uuid(bytes=base64.urlsafe_b64decode(s + "=="))


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    """``/brokers/topics/<t>/partitions/<p>/state``; its znode version is the partition epoch.
    ``leader_recovery_state`` (1 after an unclean election, until recovered) is written only when not 0."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = 0

    def encode(self) -> bytes:
        body: dict[str, Any] = {
            "version": 1,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "controller_epoch": self.controller_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state != 0:
            body["leader_recovery_state"] = self.leader_recovery_state
        return to_json(ordered(body, Container.SCALA_IMMUTABLE))

    @classmethod
    def decode(cls, data: bytes | None) -> "LeaderIsrAndControllerEpoch | None":
        """None for data that is not JSON (Kafka reads it as no state)."""
        js = from_json(data)
        if js is None:
            return None
        return cls(js["leader"], js["leader_epoch"], tuple(js["isr"]), js["controller_epoch"], js.get("leader_recovery_state", 0))


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """``/config/<type>/<name>``: the entity's overrides, held by Kafka in a ``Properties``."""
    return to_json({"version": 1, "config": ordered(dict(config), Container.JAVA_HASH)})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    js = from_json(data)
    config = js.get("config") if isinstance(js, dict) else None
    return {k: str(v) for k, v in (config or {}).items()}


def encode_config_change(entity_type: ConfigType, name: str) -> bytes:
    """A ``/config/changes/config_change_<seq>`` notification (version 2: ``<type>/<name>``)."""
    return to_json({"version": 2, "entity_path": f"{entity_type.value}/{name}"})


def decode_config_change(data: bytes) -> tuple[ConfigType, str]:
    entity_type, _, name = from_json(data)["entity_path"].partition("/")
    return ConfigType(entity_type), name


def _encode_partitions(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p} for t, p in partitions]


def _decode_partitions(data: bytes | None) -> list[TopicPartition]:
    js = from_json(data)
    return [(p["topic"], p["partition"]) for p in js["partitions"]] if js else []


def encode_isr_change(partitions: Iterable[TopicPartition]) -> bytes:
    return to_json({"version": 1, "partitions": _encode_partitions(partitions)})


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return to_json({"version": 1, "partitions": _encode_partitions(partitions)})


decode_isr_change = _decode_partitions
decode_preferred_replica_election = _decode_partitions

LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    return to_json({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes | None) -> int:
    return from_json(data)["broker"]


def encode_reassignment(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    """``/admin/reassign_partitions`` (legacy, before the AlterPartitionReassignments API): a Jackson bean,
    its properties in constructor order."""
    return to_json({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in reassignment.items()]})


def decode_reassignment(data: bytes) -> dict[TopicPartition, list[int]]:
    return {(a["topic"], a["partition"]): list(a["replicas"]) for a in from_json(data)["partitions"]}


PRODUCER_ID_BLOCK_SIZE = 1000
"""``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``."""


@dataclass(frozen=True)
class ProducerIdBlock:
    """``/latest_producer_id_block``: the last block handed out, its bounds as strings (longs)."""

    broker_id: int
    first: int
    size: int = PRODUCER_ID_BLOCK_SIZE

    @property
    def last(self) -> int:
        return self.first + self.size - 1

    def encode(self) -> bytes:
        return to_json({"version": 1, "broker": self.broker_id, "block_start": str(self.first), "block_end": str(self.last)})

    @classmethod
    def decode(cls, data: bytes) -> "ProducerIdBlock":
        js = from_json(data)
        first = int(js["block_start"])
        return cls(js["broker"], first, int(js["block_end"]) - first + 1)


@dataclass(frozen=True)
class FeatureZNode:
    """``/feature``: version 2 (metadata version 3.3 and later), status 1 (enabled), finalized max levels."""

    features: Mapping[str, int] = field(default_factory=dict)
    status: int = 1
    version: int = 2

    def encode(self) -> bytes:
        features = {name: {"max_version_level": level} if self.version == 2 else {"max_version_level": level, "min_version_level": level} for name, level in self.features.items()}
        return to_json(ordered({"version": self.version, "status": self.status, "features": ordered(features, Container.SCALA_IMMUTABLE)}, Container.SCALA_MUTABLE, table=8))

    @classmethod
    def decode(cls, data: bytes) -> "FeatureZNode":
        js = from_json(data)
        return cls({n: v["max_version_level"] for n, v in js["features"].items()}, js["status"], js["version"])


# -- ACLs (Kafka's ZkAclStore, ZkAclChangeStore and AclEntry JSON) --------------------------------------------

ACL_STORES: dict[str, str] = {"LITERAL": "/kafka-acl", "PREFIXED": "/kafka-acl-extended/prefixed"}
"""Each pattern type's ACL store: ``<store>/<ResourceType>/<name>`` holds a resource's ACLs."""
ACL_CHANGES: dict[str, str] = {"LITERAL": "/kafka-acl-changes", "PREFIXED": "/kafka-acl-extended-changes"}
"""Where each store's change notifications go (literal and extended, prefixed being the only extended type)."""
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_RESOURCE_TYPES = ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")
"""``AclEntry.ResourceTypes`` by ``SecurityUtils.resourceTypeName``: the folders ``createAclPaths`` makes in each store."""
ACL_PATHS: tuple[str, ...] = (
    *(path for store in ACL_STORES.values() for path in (store, *(f"{store}/{t}" for t in ACL_RESOURCE_TYPES))),
    *ACL_CHANGES.values(),
)
"""``KafkaZkClient.createAclPaths``: what an ACL authorizer creates (data null) when it starts."""
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
"""``ZkNodeChangeNotificationListener``'s ``changeExpirationMs``: the config and ACL change listeners purge older
notifications."""


def encode_acls(acls: Sequence[Mapping[str, str]]) -> bytes:
    """A resource's ACL znode: ``AclEntry.toJsonCompatibleMap``, a Java ``HashMap`` of version and the list of
    entries, each a ``HashMap`` of principal, permissionType, operation and host."""
    entries = [ordered(dict(acl), Container.JAVA_HASH) for acl in acls]
    return to_json(ordered({"version": 1, "acls": entries}, Container.JAVA_HASH))


def decode_acls(data: bytes | None) -> dict | None:
    """The znode's JSON object; None for data null, empty or not JSON (Kafka reads no ACLs there)."""
    js = from_json(data)
    return js if isinstance(js, dict) else None


def encode_acl_change(resource_type: str, name: str, pattern_type: str) -> bytes:
    """An ``acl_changes_<seq>`` notification; ``resource_type`` and ``pattern_type`` are Kafka's enum names
    (``TOPIC``, ``PREFIXED``). A literal pattern's is the legacy text ``TOPIC:name``, an extended one's
    ``ExtendedAclChangeEvent`` (a bean: its properties in declaration order)."""
    if pattern_type == "LITERAL":
        return f"{resource_type}:{name}".encode()
    return to_json({"version": 1, "resourceType": resource_type, "name": name, "patternType": pattern_type})


def decode_acl_change(store: str, data: bytes) -> tuple[str, str, str]:
    """(resource type, name, pattern type) of a notification of ``store`` (``LITERAL`` or ``PREFIXED``)."""
    if store == "LITERAL":
        resource_type, sep, name = data.decode().partition(":")
        if not sep:
            raise ValueError(f"expected a string in format ResourceType:ResourceName but got {data.decode()}")
        return resource_type.upper(), name, "LITERAL"
    js = from_json(data)
    if not isinstance(js, dict) or js.get("version") != 1:
        raise ValueError("Failed to parse ACL change event")
    return str(js["resourceType"]).upper(), str(js["name"]), str(js["patternType"]).upper()


# -- delegation tokens (Kafka's DelegationToken*ZNode) --------------------------------------------------------

DELEGATION_TOKENS = "/delegation_token/tokens"
"""``<path>/<token id>``: a token's information (JSON, without its HMAC)."""
DELEGATION_TOKEN_CHANGES = "/delegation_token/token_changes"
"""Sequence znodes ``token_change_<n>`` naming the token (its id, UTF-8) each broker's cache reads again."""
DELEGATION_TOKEN_CHANGE_PREFIX = "token_change_"


def delegation_token_path(token_id: str) -> str:
    return f"{DELEGATION_TOKENS}/{token_id}"
