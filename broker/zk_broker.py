"""A broker in a ZooKeeper-mode cluster (``zookeeper.connect`` set): Kafka 3.9's ``KafkaServer`` parts that
talk to ZooKeeper and to the controller.

It opens the broker's ZooKeeper session (the cluster id comes from ``/cluster/id``), registers
``/brokers/ids/<id>`` with the advertised endpoints, runs a :class:`ZkController` candidate with the
inter-broker :class:`ControllerChannelManager`, and acts on what the active controller sends: LeaderAndIsr
(become leader or follower), UpdateMetadata (the :class:`ZkMetadataCache` the handlers read) and StopReplica.

Toward the handlers it is the ZooKeeper mode's :class:`MetadataSupport` (Kafka's ``ZkSupport``), but, as a
Kafka ZooKeeper-mode broker does, it only writes ZooKeeper: the controller notices and tells every broker,
this one included. A topic created here is therefore in this broker's metadata only once the controller's
UpdateMetadata arrived, and the admin requests wait for it (:class:`MetadataWaits`). ZooKeeper calls are
kazoo's blocking calls, made on a worker thread (:meth:`ZkBroker.admin_call`) as Kafka's request threads make
them (a few milliseconds on the network ZooKeeper is on).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from kazoo.exceptions import NodeExistsError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch

from odradek.broker.replication.alter_partition_manager import AlterPartitionManager
from odradek.broker.config import BrokerConfig
from odradek.broker.controller_channel import ControllerChannelManager
from odradek.broker.dynamic_config import DEFAULT_ENTITY
from odradek.broker.features import FinalizedFeatures, finalized_in_cluster, registered_features
from odradek.broker.network.kafka_client import BrokerConnection, DisconnectedError, Node, ResponseError
from odradek.broker.metadata_waits import MetadataWaits
from odradek.broker.quotas import IP_KEYS, USER_CLIENT_KEYS, quota_configs
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.broker.security.client import PLAINTEXT, ClientSecurity
from odradek.broker.security.credentials import ZkCredentialStore
from odradek.broker.zk_metadata_cache import LEADER_DURING_DELETE, ZkMetadataCache
from odradek.controller import zk_admin
from odradek.controller import zk_data as zd
from odradek.controller import leader_election
from odradek.controller.embedded_controller import new_cluster_id
from odradek.controller.leader_election import ElectionError, ElectionType
from odradek.controller.metadata_image import BrokerInfo, MetadataImage, PartitionState, TopicInfo
from odradek.controller.metadata_support import MetadataSupport, PartitionErrors
from odradek.controller.reassignment import ApiError
from odradek.controller.replica_assignment import assign_replicas_to_brokers
from odradek.controller.zk_client import ZkClient
from odradek.controller.zk_controller import LeaderBalance, ZkController
from odradek.controller.zk_controller_state import NO_EPOCH, leader_and_isr_states, stop_replica_states
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.kafka_uuid import Uuid, ZERO_UUID, random_uuid
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.controller.metadata_image import MetadataListener
    from odradek.controller.metadata_support import ControllerForBrokers
    from odradek.protocol.message_types.alter_configs import AlterConfigsResponseDict
    from odradek.protocol.message_types.controlled_shutdown import ControlledShutdownResponse

log = logging.getLogger(__name__)

T = TypeVar("T")

CONTROLLED_SHUTDOWN_VERSION = 3
"""Kafka 3.9's brokers send ControlledShutdown v3 (with the broker epoch)."""

class ZooKeeperClientTimeoutError(Exception):
    """Kafka's ``ZooKeeperClientTimeoutException``: no ZooKeeper session within ``zookeeper.connection.timeout.ms``
    (by default the session timeout); the broker does not start."""


def security_protocols(config: BrokerConfig) -> dict[str, str]:
    """``listener.security.protocol.map``: listener name -> security protocol."""
    pairs = (item.split(":", 1) for item in config["listener.security.protocol.map"].split(",") if item.strip())
    return {name.strip(): protocol.strip() for name, protocol in pairs}


class ZkBroker(MetadataSupport):
    def __init__(self, config: BrokerConfig, me: BrokerInfo, listener: MetadataListener, replica_manager: ReplicaManager, *, security: ClientSecurity = PLAINTEXT,
        on_finalized_features: Callable[[FinalizedFeatures], None] = lambda features: None,
    ) -> None:
        """Connects to ZooKeeper and reads (or makes) the cluster id; :meth:`startup` joins the cluster, once
        the logs are loaded. ``security``: how this broker connects to the others' inter-broker listener.
        ``on_finalized_features``: told the feature levels every registered broker supports, at startup and
        whenever they change (:meth:`_broker_changes`)."""
        super().__init__()
        self.config = config
        self.security = security
        self.broker_id = me.node_id
        self.listener = listener
        self.replica_manager = replica_manager
        session_ms = config["zookeeper.session.timeout.ms"]
        try:
            self.zk = ZkClient(config["zookeeper.connect"], session_timeout_s=session_ms / 1000, connect_timeout_s=(config["zookeeper.connection.timeout.ms"] or session_ms) / 1000)
        except KazooTimeoutError:
            raise ZooKeeperClientTimeoutError("Timed out waiting for connection while in state: CONNECTING") from None
        self.zk.create_top_level_paths()
        cluster_id = self.zk.create_or_get_cluster_id(new_cluster_id())
        broker_configs = {e: c for e in (DEFAULT_ENTITY, str(me.node_id)) if (c := self.zk.entity_config(zd.ConfigType.BROKER, e))}
        client_quotas = {
            f"{t.value}/{name}": quotas
            for t in (zd.ConfigType.USER, zd.ConfigType.CLIENT, zd.ConfigType.IP)
            for name, config in self.zk.all_entity_configs(t).items()
            if (quotas := quota_configs(config))
        }
        group_configs = {name: config for name, config in self.zk.all_entity_configs(zd.ConfigType.GROUP).items() if config}
        image = MetadataImage(cluster_id, -1, {}, broker_configs=broker_configs, entity_configs=client_quotas, group_configs=group_configs)
        self.cache = ZkMetadataCache(image, self._topic_configs)
        self.credentials: ZkCredentialStore | None = None
        """The SCRAM credentials, which follow the users' config changes (:meth:`follow_credentials`)."""
        self.metadata_waits = MetadataWaits(lambda: self.cache.image)
        """Requests waiting for this broker's metadata to show a change (ElectLeaders, topic changes)."""
        self._last_config_change = ""
        """The newest ``/config/changes`` notification applied (their names sort in sequence order)."""
        protocols = security_protocols(config)
        self.registration = zd.BrokerRegistration(
            me.node_id, tuple(zd.EndPoint(name, host, port, protocols.get(name, name)) for name, host, port in me.endpoints), me.rack,
            features=registered_features(),
        )
        self.on_finalized_features = on_finalized_features
        self.finalized_features: FinalizedFeatures | None = None
        self._broker_changes([])  # before the listeners answer: the registered brokers, not the table's levels
        self.inter_broker_listener = config["inter.broker.listener.name"] or config["security.inter.broker.protocol"]
        self.controller_epoch = -1
        """The highest controller epoch a request came with: an older one is a deposed controller's."""
        self.broker_epoch = -1
        self.channel: ControllerChannelManager | None = None
        self.controller: ZkController | None = None
        replica_manager.on_log_dir_offline = lambda: self.zk.propagate_log_dir_event(self.broker_id)

    @property
    def image(self) -> MetadataImage:
        return self.cache.image

    # -- lifecycle -------------------------------------------------------------------------------------------

    def startup(self) -> None:
        """Register (again in every new session), stand for election, and follow config changes. Called on
        the event loop, whose token the ZooKeeper watches use to hand changes over."""
        self._loop_token = anyio.lowlevel.current_token()
        self._last_config_change = max(self.zk.kazoo.get_children(zd.CONFIG_CHANGES), default="")
        ChildrenWatch(self.zk.kazoo, zd.CONFIG_CHANGES, self._config_changes)
        self.zk.keep_registered(self.registration, lambda epoch: setattr(self, "broker_epoch", epoch))
        log.info("Registered broker %d at path %s with epoch %d", self.broker_id, zd.broker_path(self.broker_id), self.broker_epoch)
        ChildrenWatch(self.zk.kazoo, zd.BROKER_IDS, self._broker_changes)
        self.channel = ControllerChannelManager(self.broker_id, self.inter_broker_listener, security=self.security)
        self.controller = ZkController(
            self.zk, self.broker_id, self.channel,
            inter_broker_listener=self.inter_broker_listener,
            unclean_leader_election=self.config["unclean.leader.election.enable"],
            delete_topic_enable=self.config["delete.topic.enable"],
            leader_balance=LeaderBalance(
                self.config["auto.leader.rebalance.enable"], self.config["leader.imbalance.per.broker.percentage"],
                float(self.config["leader.imbalance.check.interval.seconds"]),
            ),
        )
        self.channel.on_response = self.controller.on_response
        self.controller.startup()

    async def controlled_shutdown(self) -> None:
        """Kafka's ``controlledShutdown`` (``controlled.shutdown.enable``): ask the active controller to move
        this broker's leaderships to the other in-sync replicas before it stops serving, so that clients move
        on with retriable errors; again after ``controlled.shutdown.retry.backoff.ms`` while partitions remain
        or the controller cannot be reached, at most ``controlled.shutdown.max.retries`` times."""
        if not self.config["controlled.shutdown.enable"]:
            return
        for attempt in range(self.config["controlled.shutdown.max.retries"]):
            if attempt:
                await anyio.sleep(self.config["controlled.shutdown.retry.backoff.ms"] / 1000)
            node = self._controller_node()
            if node is None:
                log.warning("Controlled shutdown: no controller known; trying again")
                continue
            try:
                async with anyio.create_task_group() as tg:
                    connection = await BrokerConnection.connect(node.host, node.port, tg, client_id=f"broker-{self.broker_id}", security=self.security)
                    response: ControlledShutdownResponse = await connection.send(ApiKey.ControlledShutdown, CONTROLLED_SHUTDOWN_VERSION, {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch})
                    tg.cancel_scope.cancel()
            except (DisconnectedError, TimeoutError, OSError, ResponseError) as exc:
                log.warning("Controlled shutdown: the controller (broker %d) could not be asked: %s", node.node_id, exc)
                continue
            remaining = [f"{p.topic_name}-{p.partition_index}" for p in response.remaining_partitions]
            if response.error_code == ErrorCode.NONE and not remaining:
                log.info("Controlled shutdown request returned successfully")
                return
            log.info("Controlled shutdown: %s, remaining partitions to move: %s", ErrorCode(response.error_code).name, ",".join(remaining))
        log.warning("Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed")

    def shutdown(self) -> None:
        """Resign (if active), close the controller's connections, and end the session: the registration
        goes with it, which tells the controller this broker is gone."""
        if self.controller is not None:
            self.controller.shutdown()
        if self.channel is not None:
            self.channel.close()
        self.zk.close()

    # -- finalized features ---------------------------------------------------------------------------------

    def _broker_changes(self, children: list[str]) -> None:
        """On a kazoo thread (and at :meth:`startup`): the feature levels all registered brokers support.
        The epoch is ``/brokers/ids``' child version when they last changed: it grows in ZooKeeper, so it
        never goes back, not even across restarts."""
        _, stat = self.zk.kazoo.get_children(zd.BROKER_IDS, include_data=True)
        features = finalized_in_cluster(r.features for r, _ in self.zk.broker_registrations().values())
        if self.finalized_features is None or self.finalized_features.features != features:
            self.finalized_features = FinalizedFeatures(features, stat.cversion)
            log.info("Finalized features of the live brokers: %s (epoch %d)", {f.name: f.level for f in features}, stat.cversion)
            self.on_finalized_features(self.finalized_features)

    # -- config changes (Kafka's ZkConfigManager) -----------------------------------------------------------

    def _config_changes(self, children: list[str]) -> None:
        """On a kazoo thread: each new notification's entity configs, read and applied on the event loop."""
        for child in sorted(c for c in children if c > self._last_config_change):
            data, _ = self.zk.get_data_and_version(f"{zd.CONFIG_CHANGES}/{child}")
            self._last_config_change = child
            if data is None:
                continue
            entity_type, name = zd.decode_config_change(data)
            config = self.zk.entity_config(entity_type, name)
            try:
                anyio.from_thread.run_sync(self.apply_config, entity_type, name, config, token=self._loop_token)
            except RuntimeError:  # the event loop is gone: the broker is stopping
                return
        self.zk.purge_obsolete_notifications(zd.CONFIG_CHANGES, children)

    def apply_config(self, entity_type: zd.ConfigType, name: str, config: dict[str, str]) -> None:
        """An entity's configs as ZooKeeper now holds them, applied on the event loop where they differ."""
        if entity_type == zd.ConfigType.TOPIC:
            topic = self.image.topics.get(name)
            if topic is not None and topic.configs != config:
                topic.configs = config
                self.listener.on_topic_configs_changed(topic)
        elif entity_type == zd.ConfigType.BROKER:
            if name in (DEFAULT_ENTITY, str(self.broker_id)) and self.image.broker_configs.get(name, {}) != config:
                self._put(self.image.broker_configs, name, config)
                self.listener.on_broker_configs_changed(name)
        elif entity_type == zd.ConfigType.GROUP:
            self._put(self.image.group_configs, name, config)
        else:
            self._put(self.image.entity_configs, f"{entity_type.value}/{name}", quota_configs(config))
            if entity_type == zd.ConfigType.USER and "/" not in name and self.credentials is not None:
                self.credentials.update(name, config)

    @staticmethod
    def _put(configs: dict[str, dict[str, str]], key: str, config: dict[str, str]) -> None:
        """An entity without configs has no entry, as ZooKeeper's empty config znode."""
        if config:
            configs[key] = dict(config)
        else:
            configs.pop(key, None)

    # -- what the controller sends ----------------------------------------------------------------------------

    def _stale(self, body: Any) -> ErrorCode | None:
        """Kafka's checks of every controller request: the broker epoch it was meant for, then the controller's."""
        if body.broker_epoch != -1 and body.broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        if body.controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = body.controller_epoch
        return None

    def update_metadata(self, body: Any) -> ErrorCode:
        if (error := self._stale(body)) is not None:
            log.warning("Ignoring UpdateMetadata from controller %d with epoch %d: %s", body.controller_id, body.controller_epoch, error.name)
            return error
        for topic in self.cache.update(body):
            log.info("Topic %s is being deleted: removed from the metadata cache", topic.name)
        self.metadata_waits.changed()
        return ErrorCode.NONE

    def leader_and_isr(self, body: Any) -> tuple[ErrorCode, PartitionErrors]:
        """Become leader or follower of each partition whose leader epoch is not older than the one served;
        answers the request's error and each partition's."""
        states = leader_and_isr_states(body)
        if (error := self._stale(body)) is not None:
            log.warning("Ignoring LeaderAndIsr from controller %d with epoch %d: %s", body.controller_id, body.controller_epoch, error.name)
            return error, {key: error for key in states}
        self._start_isr_changes()
        errors: dict[TopicPartition, ErrorCode] = {}
        changed: dict[str, TopicInfo] = {}
        for (name, index), (topic_id, state) in states.items():
            current = self.replica_manager.partitions.get((name, index))
            if current is not None and state.leader_epoch < current.state.leader_epoch:
                errors[(name, index)] = ErrorCode.STALE_CONTROLLER_EPOCH
            elif self.broker_id not in state.replicas:
                errors[(name, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif (name, index) in self.replica_manager.offline_partitions:  # the controller takes it offline
                errors[(name, index)] = ErrorCode.KAFKA_STORAGE_ERROR
            else:
                errors[(name, index)] = ErrorCode.NONE
                topic = changed.get(name)
                if topic is None:
                    configs = self.image.topics[name].configs if name in self.image.topics else self._topic_configs(name)
                    topic = changed[name] = TopicInfo(name, topic_id, {}, configs)
                topic.partitions[index] = state
        for topic in changed.values():
            try:
                self.listener.on_partitions_changed(topic, sorted(topic.partitions))
            except KafkaError as exc:
                log.error("Cannot serve %s as LeaderAndIsr says: %s", topic.name, exc.message)
                errors.update({(topic.name, index): exc.code for index in topic.partitions})
        return ErrorCode.NONE, errors

    def _start_isr_changes(self) -> None:
        """Leaders send their ISR changes to the active controller (AlterPartition). Started at the first
        LeaderAndIsr, on the event loop: before it this broker leads nothing, and the network's task group the
        sender runs in exists only once the broker serves."""
        if self.replica_manager.alter_partition_manager is None:
            manager = AlterPartitionManager(self.broker_id, lambda: self.broker_epoch, self._controller_node, self.replica_manager.tasks, security=self.security)
            self.replica_manager.start_isr_changes(manager)

    def _controller_node(self) -> Node | None:
        """The active controller's endpoint on the inter-broker listener, as UpdateMetadata last said."""
        broker = self.image.brokers.get(self.image.controller_id)
        endpoint = broker.endpoint(self.inter_broker_listener) if broker is not None else None
        return Node(broker.node_id, *endpoint) if broker is not None and endpoint is not None else None

    def stop_replica(self, body: Any) -> tuple[ErrorCode, PartitionErrors]:
        """Stop serving the named replicas and, where the controller says so, delete them."""
        wanted = stop_replica_states(body)
        if (error := self._stale(body)) is not None:
            log.warning("Ignoring StopReplica from controller %d with epoch %d: %s", body.controller_id, body.controller_epoch, error.name)
            return error, {}  # Kafka names no partition then
        errors: dict[TopicPartition, ErrorCode] = {}
        stopped: dict[tuple[str, bool, bool], TopicInfo] = {}
        """(topic, delete, the topic is being deleted) -> the partitions."""
        for (name, index), (leader_epoch, delete) in wanted.items():
            current = self.replica_manager.partitions.get((name, index))
            if (name, index) in self.replica_manager.offline_partitions:  # ignored, as Kafka: its log dir failed
                errors[(name, index)] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if current is not None and leader_epoch not in (NO_EPOCH, LEADER_DURING_DELETE) and leader_epoch < current.state.leader_epoch:
                errors[(name, index)] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            errors[(name, index)] = ErrorCode.NONE
            topic_id = current.topic_id if current is not None else ZERO_UUID
            # the controller deleting a topic says so with the epoch LeaderDuringDelete (versions without
            # epochs cannot tell: a deletion); any other deletion is a replica moved away (reassignment)
            topic_deleted = delete and leader_epoch in (NO_EPOCH, LEADER_DURING_DELETE)
            stopped.setdefault((name, delete, topic_deleted), TopicInfo(name, topic_id, {})).partitions[index] = current.state if current is not None else PartitionState(-1, -1, [], [])
        for (_, delete, topic_deleted), topic in stopped.items():
            if topic_deleted:
                self.listener.on_topic_deleted(topic)
            else:
                self.listener.on_replicas_stopped(topic, delete)
        return ErrorCode.NONE, errors

    # -- what the handlers ask, written to ZooKeeper ------------------------------------------------------------

    def is_controller(self) -> bool:
        """Kafka 3.9's ZooKeeper-mode brokers answer NOT_CONTROLLER unless the active controller runs on them."""
        return self.controller is not None and self.controller.active

    def controller_for_brokers(self) -> ControllerForBrokers | None:
        return self.controller if self.is_controller() else None

    async def admin_call(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """On a worker thread: Kafka's request threads block on ZooKeeper, here one thread serves every client.
        An async handler runs when the connection's answers reach it, one after another, so a connection's
        requests still take effect in the order sent."""
        return await anyio.to_thread.run_sync(functools.partial(call, *args, **kwargs))

    def makes_logs_before_publishing(self) -> bool:
        """No: made first, a broker that lost the race to create the name (two brokers auto-creating
        ``__consumer_offsets`` at once) would hold logs with a topic id that is not the topic's, and refuse the
        LeaderAndIsr that arrives while its own write to ZooKeeper is still out."""
        return False

    async def until_led(self, partitions: Mapping[str, Iterable[int]], timeout_s: float) -> set[str]:
        """Every topic when the request does not wait (``timeout_s <= 0``), as Kafka's ``ZkAdminManager``:
        only the controller's UpdateMetadata shows the partitions here."""
        if timeout_s <= 0:
            return set(partitions)
        return await self.metadata_waits.until_led(partitions, timeout_s)

    async def until_gone(self, topics: Iterable[str], timeout_s: float) -> set[str]:
        if timeout_s <= 0:
            return set(topics)
        return await self.metadata_waits.until_gone(topics, timeout_s)

    def config_writes(self) -> ZooKeeperConfigWrites:
        return ZooKeeperConfigWrites(self)

    async def elect_leaders(self, partitions: set[TopicPartition], election_type: ElectionType, timeout_s: float) -> dict[TopicPartition, ElectionError]:
        """The controller's outcome (NOT_CONTROLLER unless it is active here), each elected leader awaited in
        this broker's metadata (``DelayedElectLeader``): REQUEST_TIMED_OUT for one not shown in time."""
        deadline = time.monotonic() + timeout_s
        if self.controller is None:
            return {p: leader_election.NOT_CONTROLLER for p in partitions}
        outcome = await asyncio.wrap_future(self.controller.elect_leaders(partitions, election_type))
        expected = {p: leader for p, leader in outcome.items() if isinstance(leader, int)}

        def leads(partition: TopicPartition, leader: int) -> bool:
            topic = self.image.topics.get(partition[0])
            state = topic.partitions.get(partition[1]) if topic is not None else None
            return state is not None and state.leader == leader

        await self.metadata_waits.wait_until(lambda: all(leads(p, leader) for p, leader in expected.items()), deadline - time.monotonic())
        answers = {p: result for p, result in outcome.items() if isinstance(result, ElectionError)}
        answers.update({p: leader_election.ELECTED if leads(p, leader) else leader_election.TIMED_OUT for p, leader in expected.items()})
        return answers

    async def alter_partition_reassignments(self, targets: dict[TopicPartition, tuple[int, ...] | None]) -> dict[TopicPartition, ApiError] | ApiError:
        """Started by the controller on its event thread; an answer once each partition's move has begun."""
        if self.controller is None:
            return ApiError.of(ErrorCode.NOT_CONTROLLER)
        return await asyncio.wrap_future(self.controller.alter_partition_reassignments(targets))

    async def list_partition_reassignments(self, partitions: list[TopicPartition] | None) -> dict[TopicPartition, zd.ReplicaAssignment] | ApiError:
        if self.controller is None:
            return ApiError.of(ErrorCode.NOT_CONTROLLER)
        return await asyncio.wrap_future(self.controller.list_partition_reassignments(partitions))

    def _topic_configs(self, name: str) -> dict[str, str]:
        return self.zk.entity_config(zd.ConfigType.TOPIC, name)

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        assignments: dict[int, list[int]] | None = None,
        *,
        validate_only: bool = False,
        default_partitions: int = 1,
        default_replication_factor: int = 1,
        topic_id: Uuid | None = None,
    ) -> TopicInfo:
        """Kafka's ``ZkAdminManager.createTopics``: validated and assigned over the registered brokers; unless
        ``validate_only``, the config and assignment written (the controller brings the partitions online)."""
        if name in self.creating:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.")
        else:
            partitions = default_partitions if num_partitions == -1 else num_partitions
            rf = default_replication_factor if replication_factor == -1 else replication_factor
            assignments = assign_replicas_to_brokers(zk_admin.broker_metadatas(self.zk), partitions, rf)
        zk_admin.validate_topic_create(self.zk, name, assignments)
        topic = TopicInfo(
            name, topic_id or random_uuid(), {p: PartitionState(r[0], 0, list(r), list(r)) for p, r in assignments.items()}, dict(configs or {})
        )
        if validate_only:
            return topic
        assignment = zd.TopicAssignment(topic.topic_id, {p: zd.ReplicaAssignment(tuple(r)) for p, r in assignments.items()})
        try:
            self.zk.create_topic(name, assignment, topic.configs)
        except NodeExistsError:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
        return topic

    def delete_topic(self, name: str) -> TopicInfo:
        """Mark the topic for deletion (``/admin/delete_topics/<t>``): the controller deletes it."""
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        self.zk.mark_topic_for_deletion(name)
        return topic

    def plan_partitions(self, name: str, count: int, assignments: list[list[int]] | None) -> TopicInfo:
        """The topic, with no partitions: in ZooKeeper mode no log is made in advance (each replica's broker
        makes its log on LeaderAndIsr), and the request is validated when it is written
        (:meth:`create_partitions`)."""
        found = self.zk.topic_assignment(name)
        if found is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        return TopicInfo(name, found[0].topic_id or ZERO_UUID, {})

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None) -> list[int]:
        """``AdminZkClient.addPartitions``: the grown assignment written; the controller brings them online.
        Answers the new partitions."""
        found = self.zk.topic_assignment(name)
        if found is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        first = len(found[0].partitions)
        return sorted(zk_admin.add_partitions(self.zk, name, count, None if assignments is None else {first + i: list(r) for i, r in enumerate(assignments)}))

    async def change_config(self, entity_type: zd.ConfigType, name: str, configs: dict[str, str]) -> None:
        """A topic's or broker entity's configs (AlterConfigs), written to ``/config/<type>/<name>`` with a
        change notification on a worker thread, then applied here at once (the notification reaches every
        broker, this one too, which then finds nothing new)."""
        await anyio.to_thread.run_sync(self.zk.change_entity_config, entity_type, name, configs)
        self.apply_config(entity_type, name, dict(configs))

    def follow_credentials(self, store: ZkCredentialStore) -> None:
        """The users' SCRAM credentials, read now and kept as their config change notifications say."""
        store.bind(self.zk)
        self.credentials = store

    def set_entity_config(self, path: str, props: dict[str, str]) -> None:
        """A client quota entity's configs (``users/u``, ``clients/c``, ``users/u/clients/c``, ``ips/i``)."""
        entity_type, name = path.split("/", 1)
        kept = {k: v for k, v in self.zk.entity_config(zd.ConfigType(entity_type), name).items() if k not in USER_CLIENT_KEYS and k not in IP_KEYS}
        self.zk.change_entity_config(zd.ConfigType(entity_type), name, {**kept, **props})
        self._put(self.image.entity_configs, path, props)

    allocating_producer_ids_waits = True

    def allocate_producer_ids(self) -> range:
        """A block from ``/latest_producer_id_block``, unique across the cluster (called on a worker thread)."""
        block = self.zk.new_producer_id_block(self.broker_id)
        return range(block.first, block.last + 1)


@dataclass
class ZooKeeperConfigWrites:
    """One request's config changes, gathered while it is checked on the event loop, then written to
    ZooKeeper off it and applied to this broker before the answer goes: a DescribeConfigs sent next on the
    connection sees the change."""

    broker: ZkBroker
    writes: list[tuple[zd.ConfigType, str, dict[str, str]]] = field(default_factory=list)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.writes.append((zd.ConfigType.TOPIC, name, dict(configs)))

    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        self.writes.append((zd.ConfigType.BROKER, entity, dict(configs)))

    def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        self.writes.append((zd.ConfigType.GROUP, group, dict(configs)))

    async def written(self, answer: AlterConfigsResponseDict) -> AlterConfigsResponseDict:
        for entity_type, name, configs in self.writes:
            await self.broker.change_config(entity_type, name, configs)
        return answer
