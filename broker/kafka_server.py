"""The broker's components, wired together (Kafka's ``KafkaServer``), independent of the network.

``KafkaServer`` owns the log manager, the replica manager, the metadata support, the coordinators and the
fetch sessions; it receives metadata changes from the controller as Kafka's brokers receive LeaderAndIsr,
UpdateMetadata and StopReplica. The socket server feeds it request frames and sends what it answers.

The metadata mode (the embedded single-node controller, or a ZooKeeper cluster) is chosen here, once, at
start (:func:`credential_store`, :func:`start_metadata_support`); everything else asks the
:class:`MetadataSupport` and never which mode it runs in.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterable, cast

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer import create_authorizer
from odradek.broker.quotas import ClientQuotaConfigs, ClientQuotas
from odradek.broker.config import BrokerConfig
from odradek.broker.features import FinalizedFeatures
from odradek.broker.coordinator.coordinators import CoordinatorKind, Coordinators, CoordinatorTopic, offsets_topic, share_group_state_topic, transaction_state_topic
from odradek.broker.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from odradek.broker.replication.new_logs import make_logs, unmake_logs
from odradek.broker.replication.replication_quota import FOLLOWER_RATE, LEADER_RATE, rate_bound
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.broker.security.credential_file import SCRAM_CREDENTIALS_FILE, FileCredentialStore
from odradek.broker.security.listeners import inter_broker_protocol
from odradek.controller.embedded_controller import EmbeddedController
from odradek.controller.metadata_image import BrokerInfo, MetadataImage, TopicInfo
from odradek.controller.metadata_support import MetadataSupport
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.kafka_uuid import Uuid
from odradek.storage.config_types import ConfigError
from odradek.storage.log_manager import LogManager

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from odradek.broker.security.credentials import ZkCredentialStore
    from odradek.broker.security.delegation_token import DelegationTokenManager
    from odradek.broker.security.scram import CredentialStore
    from odradek.broker.coordinator.group.share_groups import ShareGroupCoordinator
    from odradek.broker.coordinator.transaction.producer_id_manager import ProducerIdManager
    from odradek.broker.coordinator.transaction.transaction_markers import MarkerWriter
    from odradek.broker.authorizer.acl_authorizer import AclStore
    from odradek.broker.share.partition_metadata_client import PartitionMetadataClient
    from odradek.broker.share.share_partition_manager import ShareConfig, SharePartitionManager
    from odradek.broker.network.kafka_client import Node
    from odradek.broker.security.client import ClientSecurity
    from odradek.broker.replication.fetch_session import FetchSessionCache
    from odradek.broker.replication.replica_fetcher import FetcherConfig
    from odradek.broker.coordinator.transaction.transaction_verification import TransactionVerifier

log = logging.getLogger("odradek.server")

GROUP_COORDINATOR_MODULES = ("odradek.broker.coordinator.group.group_coordinator", "odradek.broker.coordinator.partitions")
TRANSACTION_COORDINATOR_MODULES = (
    "odradek.broker.coordinator.partitions", "odradek.broker.coordinator.transaction.transaction_coordinator",
    "odradek.broker.coordinator.transaction.transaction_markers", "odradek.broker.network.inter_broker_send",
)
SHARE_COORDINATOR_MODULES = ("odradek.broker.coordinator.partitions", "odradek.broker.coordinator.share.share_coordinator")
"""What each coordinator's building (``KafkaServer._group_coordinator``, ...) imports: FindCoordinator has
them imported off the event loop first (``Coordinators.prepare``)."""


def credential_store(config: BrokerConfig) -> CredentialStore:
    """Where the users' SCRAM credentials are kept: in ZooKeeper with ``zookeeper.connect`` (bound to the
    broker's session when it connects, :func:`start_metadata_support`), else in a file beside the embedded
    controller's metadata. Chosen before the broker starts: the listeners' authenticators need it."""
    store: "ZkCredentialStore | FileCredentialStore"
    if config["zookeeper.connect"]:
        from odradek.broker.security.credentials import ZkCredentialStore  # ZooKeeper mode's modules only in it

        store = ZkCredentialStore()
    else:
        store = FileCredentialStore(config.log_dirs[0] / SCRAM_CREDENTIALS_FILE)
    if config["delegation.token.secret.key"] or config["delegation.token.master.key"]:
        from odradek.broker.security.delegation_token import DELEGATION_TOKENS_FILE, FileTokenStore, token_manager

        if config["zookeeper.connect"]:
            store.tokens = token_manager(config, None)  # ZooKeeper's, once the broker's session is there (ZkCredentialStore.bind)
        else:
            store.tokens = token_manager(config, FileTokenStore(config.log_dirs[0] / DELEGATION_TOKENS_FILE))
            store.tokens.start()
    return store


def start_metadata_support(server: "KafkaServer", me: BrokerInfo) -> "tuple[MetadataSupport, AclStore]":
    """The one place the metadata mode is chosen: a broker of the ZooKeeper cluster ``zookeeper.connect``
    names (Kafka 3.9's ZooKeeper mode), else the embedded single-node controller. Also answers where the
    ACLs live. A third mode (KRaft) is a third branch here and a third :class:`MetadataSupport`."""
    config = server.config
    if config["zookeeper.connect"]:
        # ZooKeeper mode's modules (kazoo, the ZooKeeper controller's) are imported only here: a single node
        # needs none of them.
        from odradek.broker.authorizer.zk_acl_store import ZkAclStore
        from odradek.broker.replication.log_dir_failure import LogDirFailureChannel
        from odradek.broker.security.credentials import ZkCredentialStore
        from odradek.broker.zk_broker import ZkBroker

        zk_support = ZkBroker(
            config, me, server, server.replica_manager, security=server.inter_broker_security,
            on_finalized_features=lambda features: setattr(server, "finalized_features", features),
        )
        server.replica_manager.log_dir_failure = LogDirFailureChannel(server.log_dirs, server.replica_manager.take_log_dir_offline)
        if isinstance(server.credentials, ZkCredentialStore):
            zk_support.follow_credentials(server.credentials)
        return zk_support, ZkAclStore(zk_support.zk)
    internal_topic_configs = {topic.name: topic.configs for topic in server.coordinators.topics()}
    embedded = EmbeddedController(me, server.log_dirs[0], server, config["cluster.id"], log_dirs=server.log_dirs, internal_topic_configs=internal_topic_configs)
    return embedded, embedded


class KafkaServer:
    def __init__(self, config: BrokerConfig, credentials: CredentialStore | None = None) -> None:
        """``credentials``: the SCRAM credential store, shared with the listeners' authenticators (the
        runner's); by default ZooKeeper's in a cluster, else the one beside the metadata in the first log directory."""
        self.config = config
        self.broker_id = config.broker_id
        self.log_dirs = config.log_dirs
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self.credentials: CredentialStore = credentials if credentials is not None else credential_store(config)
        self.delegation_tokens = cast("DelegationTokenManager | None", self.credentials.tokens)
        """The broker's own manager (credential_store made it): the store's protocol shows SCRAM only its logins."""
        self.dynamic_config = DynamicBrokerConfig(config)
        self.broker_defaults = config.broker_defaults_for_topics()
        """What topic configs fall back to: the static configuration, then with the dynamic levels over it."""
        self.log_manager = LogManager(self.log_dirs, self.broker_defaults)
        if inter_broker_protocol(config)[1] != "PLAINTEXT":
            self.inter_broker_security  # made now: a TLS or SASL setting it cannot use refuses the start, as in Kafka
        self.replica_manager = ReplicaManager(
            self.broker_id, self.log_manager, self.broker_defaults,
            fetcher_config=self._fetcher_config,
            num_replica_fetchers=config["num.replica.fetchers"], replica_lag_time_max_ms=config["replica.lag.time.max.ms"],
            quota_window=(config["replication.quota.window.num"], config["replication.quota.window.size.seconds"]),
        )
        self.replica_manager.leader_node = self._inter_broker_node
        self.replica_manager.metadata = lambda: self.metadata_support.image if self.metadata_support is not None else None
        if config["replica.selector.class"] is not None:
            from odradek.broker.replication.replica_selector import SELECTORS

            self.replica_manager.replica_selector = SELECTORS[config["replica.selector.class"]]
        self.metadata_support: MetadataSupport | None = None
        """The metadata mode, chosen at :meth:`startup` (:func:`start_metadata_support`)."""
        self.finalized_features = FinalizedFeatures()
        """What ApiVersions reports: on a single node the feature table's levels; in a ZooKeeper cluster
        those every registered broker supports, replaced by the ZooKeeper broker as brokers come and go."""
        self.authorization = Authorization()
        self.coordinators = Coordinators({
            "group": CoordinatorKind(offsets_topic(config), self._group_coordinator, GROUP_COORDINATOR_MODULES),
            "transaction": CoordinatorKind(transaction_state_topic(config), self._transaction_coordinator, TRANSACTION_COORDINATOR_MODULES),
            "share": CoordinatorKind(share_group_state_topic(config), self._share_coordinator, SHARE_COORDINATOR_MODULES),
        })
        """Built at their first use (broker/coordinator/coordinators.py)."""
        self.replica_manager.make_transaction_verifier = self._transaction_verifier
        """Verifies a v1 transactional client's writes (``transaction.partition.verification.enable``) and adds
        a v2 client's partitions to its transaction (always)."""
        self.metrics: Any = None
        """The runner's ``BrokerMetrics`` (broker/metrics.py, which reads this server), when prometheus.port is set."""

    @cached_property
    def inter_broker_security(self) -> ClientSecurity:
        """How this broker connects to the others (fetchers, the controller's channel, requests to the
        controller, transaction markers): the inter-broker listener's TLS and SASL. Made at its first use, or at
        start when that listener is not PLAINTEXT: a single node's start does not import the module."""
        from odradek.broker.security.client import inter_broker_security

        return inter_broker_security(self.config)

    @cached_property
    def fetch_sessions(self) -> "FetchSessionCache":
        """Incremental fetch sessions (KIP-227), the Fetch handler's service: made at the first fetch."""
        from odradek.broker.replication.fetch_session import FetchSessionCache

        return FetchSessionCache(self.config["max.incremental.fetch.session.cache.slots"])

    @property
    def group_coordinator(self) -> Any:
        """The group coordinator's runtime (``.coordinator``, ``.respond``), the group handlers' service."""
        return self.coordinators["group"]

    @property
    def transaction_coordinator(self) -> Any:
        """The transaction coordinator, the transaction handlers' service."""
        return self.coordinators["transaction"].coordinator

    def _group_coordinator(self, topic: CoordinatorTopic) -> Any:
        from odradek.broker.coordinator.group.group_coordinator import group_coordinator_runtime
        from odradek.broker.coordinator.partitions import ReplicaManagerPartitions

        config = self.config
        offsets = ReplicaManagerPartitions(
            self.replica_manager, topic.name, commit_timeout_ms=config["offsets.commit.timeout.ms"],
            load_buffer_size=config["offsets.load.buffer.size"], spawn=self._spawn,
        )
        return group_coordinator_runtime(
            config, topic, offsets, offsets.load, broker_id=self.broker_id, metadata=lambda: self.metadata,
            create_topic=lambda t: self.create_topic_in_background(t.name, t.num_partitions, t.replication_factor, t.configs),
        )

    def _transaction_coordinator(self, topic: CoordinatorTopic) -> Any:
        from odradek.broker.coordinator.partitions import ReplicaManagerPartitions
        from odradek.broker.coordinator.transaction.transaction_coordinator import transaction_coordinator_runtime
        from odradek.broker.coordinator.transaction.transaction_markers import MarkerChannel, WriteTxnMarkers
        from odradek.broker.network.inter_broker_send import InterBrokerSender

        config = self.config
        transactions = ReplicaManagerPartitions(
            self.replica_manager, topic.name, commit_timeout_ms=config["request.timeout.ms"],
            load_buffer_size=config["transaction.state.log.load.buffer.size"], spawn=self._spawn,
        )
        return transaction_coordinator_runtime(
            config, topic, transactions, transactions.load,
            MarkerChannel(
                self.broker_id, lambda: self.metadata, self.marker_writer, self._spawn,
                InterBrokerSender(self.broker_id, "txn-markers", WriteTxnMarkers(), self._inter_broker_node, lambda: self.background, config["request.timeout.ms"] / 1000, self.inter_broker_security),
            ),
            self.next_producer_id, broker_id=self.broker_id, metadata=lambda: self.metadata,
            create_topic=lambda t: self.create_topic_in_background(t.name, t.num_partitions, t.replication_factor, t.configs),
            transaction_version=lambda: self.finalized_features.level("transaction.version"),
        )

    def _share_coordinator(self, topic: CoordinatorTopic) -> Any:
        from odradek.broker.coordinator.partitions import ReplicaManagerPartitions
        from odradek.broker.coordinator.share.share_coordinator import share_coordinator_runtime

        config = self.config
        shares = ReplicaManagerPartitions(
            self.replica_manager, topic.name, commit_timeout_ms=config["share.coordinator.write.timeout.ms"],
            load_buffer_size=config["share.coordinator.load.buffer.size"], spawn=self._spawn,
        )
        return share_coordinator_runtime(
            config, topic, shares, shares.load, broker_id=self.broker_id, metadata=lambda: self.metadata,
            create_topic=lambda t: self.create_topic_in_background(t.name, t.num_partitions, t.replication_factor, t.configs),
        )

    @cached_property
    def share_partitions(self) -> "SharePartitionManager":
        """Share groups' partitions and sessions (KIP-932), ShareFetch's and ShareAcknowledge's service; built,
        with the share coordinator, at the first share fetch. Its lock-expiry timers run in the network's task group."""
        from odradek.broker.network.inter_broker_send import InterBrokerSender
        from odradek.broker.share.persister import Persister, ShareStateRequest
        from odradek.broker.share.share_partition_manager import SharePartitionManager

        timeout_s = self.config["request.timeout.ms"] / 1000
        persister = Persister(
            self.coordinators["share"].coordinator,
            lambda api: InterBrokerSender(self.broker_id, f"share-state-{api.value}", ShareStateRequest(api), self._inter_broker_node, lambda: self.background, timeout_s, self.inter_broker_security),
            self._spawn,
        )
        manager = SharePartitionManager(self.replica_manager, persister, self._share_config, max_sessions=self.config["group.share.max.share.sessions"])
        self._spawn(manager.run)
        return manager

    @cached_property
    def partition_metadata_client(self) -> "PartitionMetadataClient":
        """The latest offsets of partitions wherever they are led (KIP-1226): DescribeShareGroupOffsets' lags."""
        from odradek.broker.network.inter_broker_send import InterBrokerSender
        from odradek.broker.share.partition_metadata_client import LatestOffsets, PartitionMetadataClient

        timeout_s = self.config["request.timeout.ms"] / 1000
        return PartitionMetadataClient(
            self.broker_id, self.replica_manager, lambda: self.metadata,
            lambda: InterBrokerSender(self.broker_id, "latest-offsets", LatestOffsets(), self._inter_broker_node, lambda: self.background, timeout_s, self.inter_broker_security),
        )

    @cached_property
    def share_groups(self) -> "ShareGroupCoordinator":
        """Share groups' membership (KIP-932), ShareGroupHeartbeat's and ShareGroupDescribe's service."""
        from odradek.broker.coordinator.group.share_groups import ShareGroupCoordinator, ShareGroups

        config = self.config
        return ShareGroupCoordinator(
            self.coordinators["group"],
            ShareGroups(self._topic_partitions, self._topic_names, max_size=config["group.share.max.size"]),
            self.share_partitions.timers,
            self.share_partitions.release_member,
            self.share_partitions.delete_group,
            session_timeout_ms=config["group.share.session.timeout.ms"],
            heartbeat_interval_ms=config["group.share.heartbeat.interval.ms"],
        )

    @property
    def built_share_groups(self) -> "ShareGroupCoordinator | None":
        """The share groups' coordinator if a share group used this broker already (ListGroups lists its
        groups), else None: listing groups builds nothing."""
        return self.__dict__.get("share_groups")

    def _share_config(self, group: str) -> "ShareConfig":
        """A share group's settings: its group configs (broker/group_config.py), else the broker's ``group.share.*``."""
        from odradek.broker.group_config import broker_lookup, group_value
        from odradek.broker.share.share_partition_manager import READ_COMMITTED, READ_UNCOMMITTED, ShareConfig

        overrides = self.metadata.group_configs.get(group, {}) if self.metadata_support is not None else {}
        broker = broker_lookup(self.config)

        def value(name: str) -> Any:
            return group_value(name, overrides, broker)

        return ShareConfig(
            lock_duration_ms=value("share.record.lock.duration.ms"),
            delivery_count_limit=value("share.delivery.count.limit"),
            max_in_flight=value("share.partition.max.record.locks"),
            auto_offset_reset=value("share.auto.offset.reset"),
            isolation_level=READ_COMMITTED if value("share.isolation.level") == "read_committed" else READ_UNCOMMITTED,
        )

    def _topic_names(self) -> list[str]:
        return list(self.metadata.topics) if self.metadata_support is not None else []

    def _topic_partitions(self, name: str) -> tuple[Uuid, int] | None:
        topic = self.metadata.topics.get(name) if self.metadata_support is not None else None
        return None if topic is None else (topic.topic_id, len(topic.partitions))

    @cached_property
    def marker_writer(self) -> "MarkerWriter":
        """Appends the transaction markers (WriteTxnMarkers, and this broker's own coordinator's)."""
        from odradek.broker.coordinator.transaction.transaction_markers import MarkerWriter

        return MarkerWriter(self.replica_manager, self._complete_group_transaction, self.config["request.timeout.ms"])

    def _complete_group_transaction(self, producer_id: int, producer_epoch: int, offsets_partitions: "Iterable[int]", committed: bool) -> None:
        """A marker written to ``__consumer_offsets`` partitions: the group coordinator applies or drops the
        transaction's offsets there. One not built leads none of them (it loads the marker with the log)."""
        group = self.coordinators.built.get("group")
        if group is not None:
            group.coordinator.complete_transaction(producer_id, producer_epoch, offsets_partitions, committed)

    def _transaction_verifier(self) -> "TransactionVerifier":
        """The check of a transactional produce against the transaction coordinator, made at the first one."""
        from odradek.broker.coordinator.transaction.transaction_verification import AddPartitionsToTxnVerify, TransactionVerifier
        from odradek.broker.network.inter_broker_send import InterBrokerSender

        return TransactionVerifier(
            self.transaction_coordinator, lambda: self.metadata,
            InterBrokerSender(self.broker_id, "txn-verification", AddPartitionsToTxnVerify(), self._inter_broker_node, lambda: self.background, self.config["request.timeout.ms"] / 1000, self.inter_broker_security),
            verification_enabled=self.config["transaction.partition.verification.enable"],
        )

    @property
    def background(self) -> "TaskGroup | None":
        """The network's task group, for work no request waits for (the socket server sets it)."""
        return self.replica_manager.background

    @background.setter
    def background(self, task_group: "TaskGroup | None") -> None:
        self.replica_manager.background = task_group
        if self.replica_manager.alter_log_dirs is not None:
            self.replica_manager.alter_log_dirs.start()  # moves between log directories a stop interrupted

    def _spawn(self, work: "Callable[[], Coroutine[Any, Any, None]]") -> None:
        """Start ``work`` in the network's task group: coordinator appends waiting for their replicas,
        transaction markers."""
        self.replica_manager.tasks.start_soon(work)

    def startup(self, advertised_host: str, advertised_port: int, endpoints: tuple[tuple[str, str, int], ...] = ()) -> None:
        """Bring up storage, then the controller, which hands this broker its partitions. ``endpoints``: the
        (listener, host, port) of every advertised listener."""
        me = BrokerInfo(self.broker_id, advertised_host, advertised_port, self.config["broker.rack"], endpoints)
        support, acl_store = start_metadata_support(self, me)
        self.metadata_support = support
        self.authorization.authorizer = create_authorizer(
            self.config["authorizer.class.name"], acl_store, self.config["super.users"], self.config["allow.everyone.if.no.acl.found"]
        )
        if self.authorization.authorizer is not None:
            acl_store.follow_changes(self.authorization.authorizer.refresh)
        self.client_quotas = ClientQuotaConfigs(support)
        self.quotas = ClientQuotas.from_config(self.client_quotas, self.config["quota.window.num"], self.config["quota.window.size.seconds"])
        for entity in (DEFAULT_ENTITY, str(self.broker_id)):
            self._load_broker_configs(entity)
        self._apply_broker_defaults()
        self._apply_replication_quotas()
        self.log_manager.startup(support.image.cluster_id, self.broker_id)
        support.startup()

    async def controlled_shutdown(self) -> None:
        """The controller first moves this broker's leaderships, while it still serves."""
        if self.metadata_support is not None:
            await self.metadata_support.controlled_shutdown()

    def shutdown(self, mark_clean: bool = True) -> None:
        """``mark_clean``: False when another worker process of this broker died (broker/supervisor.py)."""
        if self.metadata_support is not None:
            self.metadata_support.shutdown()
        self.log_manager.shutdown(mark_clean)

    def _fetcher_config(self) -> "FetcherConfig":
        """The replica fetchers' settings, from the broker's configuration (when this broker first follows)."""
        from odradek.broker.replication.replica_fetcher import FetcherConfig

        return replace(FetcherConfig.from_broker_config(self.broker_id, self.config.values), security=self.inter_broker_security)

    def _inter_broker_node(self, broker_id: int) -> "Node | None":
        """A live broker's endpoint on the inter-broker listener (named, or that of
        ``security.inter.broker.protocol``): where a follower fetches from."""
        from odradek.broker.network.kafka_client import Node  # the inter-broker client only where it connects

        broker = self.metadata.brokers.get(broker_id) if self.metadata_support is not None else None
        endpoint = broker.endpoint(self.config["inter.broker.listener.name"] or self.config["security.inter.broker.protocol"]) if broker is not None else None
        return Node(broker_id, *endpoint) if endpoint is not None else None

    # -- MetadataListener ---------------------------------------------------------------------------------

    def on_partitions_changed(self, topic: TopicInfo, partitions: list[int]) -> None:
        self.replica_manager.become_leader_or_follower(topic, partitions)
        coordinator = self.coordinators.leading(topic, partitions, self.broker_id)
        if coordinator is not None:
            coordinator.on_partitions_changed(topic, partitions)
        if "share_partitions" in self.__dict__:  # built: some share group fetched
            self.share_partitions.on_partitions_changed(topic.name, partitions, lambda index: topic.partitions[index].leader == self.broker_id)
        if "share_groups" in self.__dict__:
            self.share_groups.groups.on_metadata_changed()

    def on_topic_deleted(self, topic: TopicInfo) -> None:
        for coordinator in list(self.coordinators.built.values()):
            coordinator.on_topic_deleted(topic)
        self.replica_manager.stop_replicas(topic, delete=True)
        log.info("Deleted topic %s (id %s)", topic.name, topic.topic_id)

    def on_replicas_stopped(self, topic: TopicInfo, delete: bool) -> None:
        """A deleted replica of a coordinator's topic is a partition it no longer coordinates here (Kafka's
        handleStopReplicaRequest: onResignation); the topic's other partitions, and the offsets committed for
        the moved one, stay."""
        self.replica_manager.stop_replicas(topic, delete=delete)
        if delete:
            for coordinator in list(self.coordinators.built.values()):
                if coordinator.topic.name == topic.name:
                    for index in topic.partitions:
                        coordinator.unload(index)

    def on_topic_configs_changed(self, topic: TopicInfo) -> None:
        self.replica_manager.update_configs(topic)

    def on_broker_configs_changed(self, entity: str) -> None:
        """New dynamic broker configs: every topic without an override of its own follows the new defaults."""
        self._load_broker_configs(entity)
        self._apply_broker_defaults()
        self._apply_replication_quotas()
        for topic in self.metadata.topics.values():
            try:
                self.replica_manager.update_configs(topic)
            except ConfigError as exc:
                log.error("Topic %s keeps its configuration: with the new broker defaults %s", topic.name, exc)

    def _load_broker_configs(self, entity: str) -> None:
        if entity in (DEFAULT_ENTITY, str(self.broker_id)):
            per_broker = entity != DEFAULT_ENTITY
            stored = DynamicBrokerConfig.from_persistent(self.metadata.broker_configs.get(entity, {}), per_broker)
            self.dynamic_config.update(stored, per_broker=per_broker)

    def _apply_replication_quotas(self) -> None:
        """The replication throttle rates (KIP-73), as Kafka's BrokerConfigHandler takes them: no KafkaConfig
        keys, read from the stored dynamic configs, this broker's over the cluster default."""
        configs = self.metadata.broker_configs
        per_broker, cluster_default = configs.get(str(self.broker_id), {}), configs.get(DEFAULT_ENTITY, {})
        self.replica_manager.leader_quota.bound = rate_bound(per_broker, cluster_default, LEADER_RATE)
        self.replica_manager.follower_quota.bound = rate_bound(per_broker, cluster_default, FOLLOWER_RATE)

    def _apply_broker_defaults(self) -> None:
        """The replica manager shares ``broker_defaults``; the log manager keeps its own copy."""
        self.broker_defaults.clear()
        self.broker_defaults.update(self.dynamic_config.current.broker_defaults_for_topics())
        self.log_manager.set_broker_defaults(self.broker_defaults)

    # -- shared operations --------------------------------------------------------------------------------

    @property
    def metadata(self) -> MetadataImage:
        assert self.metadata_support is not None
        return self.metadata_support.image

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1, configs: dict[str, str] | None = None, assignments: dict[int, list[int]] | None = None, *, validate_only: bool = False, topic_id: Uuid | None = None) -> TopicInfo:
        """Validate configs against the topic config table, then let the controller create the topic."""
        from odradek.storage.log_config import LogConfig
        from odradek.storage.config_types import ConfigError

        assert self.metadata_support is not None
        try:
            LogConfig.from_props(configs or {}, self.broker_defaults)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        topic = self.metadata_support.create_topic(
            name,
            num_partitions,
            replication_factor,
            configs,
            assignments,
            validate_only=validate_only,
            default_partitions=self.config["num.partitions"],
            default_replication_factor=self.config["default.replication.factor"],
            topic_id=topic_id,
        )
        if not validate_only:
            # Kafka's "due to limitations in metric names" warning is kafka-topics.sh's, printed to the user
            # who creates such a topic; the broker does not log it.
            log.info("Created topic %s with %d partitions (id %s)", name, len(topic.partitions), topic.topic_id)
        return topic

    def reserve_topic(self, planned: TopicInfo) -> TopicInfo:
        """Take a validated, planned topic's name (no other request creates it meanwhile); then
        :meth:`finish_topic` makes its logs off the event loop and publishes it. Made inline, a topic's
        directories, files and checkpoint fsyncs stall every client: fifty offsets partitions half a second."""
        assert self.metadata_support is not None
        self.metadata_support.reserve_topic_name(planned.name)
        return planned

    async def finish_topic(self, planned: TopicInfo, num_partitions: int = -1, replication_factor: int = -1, configs: dict[str, str] | None = None) -> TopicInfo:
        support = self.metadata_support
        assert support is not None
        try:
            # else the controller's LeaderAndIsr makes them, as on Kafka's brokers
            made = await make_logs(self.replica_manager, planned) if support.makes_logs_before_publishing() else []
        finally:
            support.release_topic_name(planned.name)
        try:  # off the event loop where the store blocks: the event loop serves the others meanwhile
            return await support.admin_call(self.create_topic, planned.name, num_partitions, replication_factor, configs, topic_id=planned.topic_id)
        except KafkaError:
            unmake_logs(self.replica_manager, planned.name, made)  # not published: nothing of it stays
            raise

    async def auto_create_topic(self, name: str) -> TopicInfo:
        """A topic with the broker's defaults (Metadata's auto-creation), its logs made off the event loop; in
        ZooKeeper mode checked (ZooKeeper reads) on a worker thread too. Two creations of the name passing
        their checks at once both reserve it: ZooKeeper takes one, the other is TOPIC_ALREADY_EXISTS."""
        assert self.metadata_support is not None
        planned = await self.metadata_support.admin_call(self.create_topic, name, validate_only=True)
        return await self.finish_topic(self.reserve_topic(planned))

    def create_topic_in_background(self, name: str, num_partitions: int = -1, replication_factor: int = -1, configs: dict[str, str] | None = None) -> None:
        """A creation Kafka answers before it is done (the offsets topic at a group's first FindCoordinator,
        answered COORDINATOR_NOT_AVAILABLE): the client asks again until it is published."""
        planned = self.reserve_topic(self.create_topic(name, num_partitions, replication_factor, configs, validate_only=True))

        async def create() -> None:
            try:
                await self.finish_topic(planned, num_partitions, replication_factor, configs)
            except KafkaError as exc:
                log.error("Could not create topic %s: %s", name, exc.message)

        self.replica_manager.tasks.start_soon(create)

    @cached_property
    def producer_ids(self) -> "ProducerIdManager":
        """Producer ids come in blocks from the controller, as brokers get them from ZooKeeper; in ZooKeeper
        mode the block is claimed on a worker thread, its ZooKeeper round trips off the event loop."""
        from odradek.broker.coordinator.transaction.producer_id_manager import ProducerIdManager

        assert self.metadata_support is not None
        support = self.metadata_support
        return ProducerIdManager(support.allocate_producer_ids, self._spawn if support.allocating_producer_ids_waits else None)

    def next_producer_id(self) -> int:
        """The next producer id; KafkaError COORDINATOR_LOAD_IN_PROGRESS while this broker has no block."""
        return self.producer_ids.generate()
