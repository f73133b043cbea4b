"""A broker's ZooKeeper session, doing what Kafka 3.9's ``KafkaZkClient`` does with it (over kazoo).

Everything here is a blocking ZooKeeper round trip: it runs on the controller's own thread or a worker
thread, never on the broker's event loop. Writes that race with other brokers are conditional on the znode
version Kafka would expect (``zkVersion``), and what Kafka creates with data null is created with data null
(kazoo passes ``None`` through), so a Kafka broker reading the same ZooKeeper finds what it would have
written itself.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import BadVersionError, ConnectionLoss, NodeExistsError, NoNodeError, RolledBackError, SessionExpiredError
from kazoo.protocol.states import ZnodeStat
from kazoo.retry import KazooRetry

from odradek.controller import zk_data as zd
from odradek.storage.topic_partition import TopicPartition

log = logging.getLogger(__name__)

INITIAL_CONTROLLER_EPOCH = 0
"""``KafkaController.InitialControllerEpoch``: what ``/controller_epoch`` holds before the first election."""
UNKNOWN_VERSION = -2
"""``ZkVersion.UnknownVersion``: the version of a znode that does not exist."""
DEFAULT_SESSION_TIMEOUT_S = 18.0
"""``zookeeper.session.timeout.ms`` default."""
RECONNECT_MAX_DELAY_S = 1.0
"""The longest pause between two connection attempts (Kafka's ZooKeeper client retries about every second)."""


class ControllerMovedError(Exception):
    """Another broker won the election (or the epoch moved) while this one was registering."""


class InconsistentClusterIdError(Exception):
    """``/cluster/id`` and a log directory's ``meta.properties`` name different clusters (Kafka refuses to start)."""


def verify_meta_cluster_id(meta_properties: str, stored: str | None, cluster_id: str) -> None:
    """Kafka 3.9's ``MetaPropertiesEnsemble.verify``: a log directory written for another cluster (its
    ``meta.properties`` at path ``meta_properties``) stops the broker. Kafka takes the cluster id from
    ZooKeeper (creating a new one there if absent) before it looks at the log directories."""
    if stored is not None and stored != cluster_id:
        raise InconsistentClusterIdError(f"Invalid cluster.id in: {meta_properties}. Expected {cluster_id}, but read {stored}")


def split_connect(connect: str) -> tuple[str, str]:
    """``host:port,host:port/chroot`` into the hosts and the chroot ("" for none), as ``zookeeper.connect``."""
    slash = connect.find("/")
    if slash < 0:
        return connect, ""
    return connect[:slash], connect[slash:].rstrip("/")


class ZkClient:
    """One ZooKeeper session under the chroot of ``zookeeper.connect``."""

    def __init__(self, connect: str, *, session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S, connect_timeout_s: float = 18.0) -> None:
        hosts, chroot = split_connect(connect)
        if chroot:
            self._create_chroot(hosts, chroot, connect_timeout_s)
        # Reconnect for ever, at most a second apart (kazoo's default backs off to an hour between attempts).
        self.kazoo = KazooClient(hosts=hosts + chroot, timeout=session_timeout_s, connection_retry=KazooRetry(max_tries=-1, max_delay=RECONNECT_MAX_DELAY_S))
        self._new_session_handlers: list[Callable[[], None]] = []
        self._lost = False
        self.kazoo.add_listener(self._on_state)
        self.kazoo.start(timeout=connect_timeout_s)

    @staticmethod
    def _create_chroot(hosts: str, chroot: str, timeout_s: float) -> None:
        """Kafka creates a missing chroot before connecting under it (``KafkaServer.initZkClient``)."""
        root = KazooClient(hosts=hosts)
        root.start(timeout=timeout_s)
        try:
            _create_recursive(root, chroot, None)
        finally:
            root.stop()
            root.close()

    def close(self) -> None:
        self.kazoo.stop()
        self.kazoo.close()

    # -- sessions ---------------------------------------------------------------------------------------

    @property
    def session_id(self) -> int:
        return self.kazoo.client_id[0] if self.kazoo.client_id else 0

    def on_new_session(self, handler: Callable[[], None]) -> None:
        """Call ``handler`` (on a kazoo worker) each time a session replaces an expired one: ephemeral
        znodes (the broker's registration, ``/controller``) died with the old session and must be made again."""
        self._new_session_handlers.append(handler)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._lost = True
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            for handler in self._new_session_handlers:
                self.kazoo.handler.spawn(handler)

    # -- generic ----------------------------------------------------------------------------------------

    def create_recursive(self, path: str, data: bytes | None, *, ephemeral: bool = False, sequence: bool = False, exist_ok: bool = True) -> str:
        return _create_recursive(self.kazoo, path, data, ephemeral=ephemeral, sequence=sequence, exist_ok=exist_ok)

    def get_data_and_version(self, path: str) -> tuple[bytes | None, int]:
        try:
            data, stat = self.kazoo.get(path)
        except NoNodeError:
            return None, UNKNOWN_VERSION
        return data, stat.version

    def conditional_update(self, path: str, data: bytes, expected_version: int) -> tuple[bool, int]:
        """Kafka's ``conditionalUpdatePath``: (True, new version), or (False, UNKNOWN_VERSION) when the znode
        moved on (or is gone)."""
        try:
            return True, self.kazoo.set(path, data, version=expected_version).version
        except (BadVersionError, NoNodeError):
            return False, UNKNOWN_VERSION

    def create_top_level_paths(self) -> None:
        for path in zd.PERSISTENT_PATHS:
            self.create_recursive(path, None)

    # -- cluster id ---------------------------------------------------------------------------------------

    def create_or_get_cluster_id(self, proposed: str) -> str:
        try:
            _create_recursive(self.kazoo, zd.CLUSTER_ID, zd.encode_cluster_id(proposed), exist_ok=False)
            return proposed
        except NodeExistsError:
            data, _ = self.kazoo.get(zd.CLUSTER_ID)
            return zd.decode_cluster_id(data)

    # -- broker registration ------------------------------------------------------------------------------

    def register_broker(self, registration: zd.BrokerRegistration) -> int:
        """Create ``/brokers/ids/<id>`` (ephemeral; created empty then set, as Kafka's ``CheckedEphemeral``) and
        answer the broker epoch (its czxid). A znode of this session already there is ours; another
        session's means the id is taken (NodeExistsError)."""
        path = zd.broker_path(registration.broker_id)
        return self._checked_ephemeral(path, registration.encode()).czxid

    def keep_registered(self, registration: zd.BrokerRegistration, on_registered: Callable[[int], None] = lambda epoch: None) -> int:
        """Register now and again in every session that replaces an expired one (Kafka's
        ``afterInitializingSession``); ``on_registered`` hears each new broker epoch."""

        def register_again() -> None:
            try:
                on_registered(self.register_broker(registration))
            except Exception:
                log.exception("re-registering broker %d after a new ZooKeeper session failed", registration.broker_id)

        self.on_new_session(register_again)
        epoch = self.register_broker(registration)
        on_registered(epoch)
        return epoch

    def _checked_ephemeral(self, path: str, data: bytes) -> ZnodeStat:
        tx = self.kazoo.transaction()
        tx.create(path, b"", ephemeral=True)  # Kafka's null; set at once below, so never seen
        tx.set_data(path, data, version=0)
        results = tx.commit()
        if not any(isinstance(r, Exception) for r in results):
            return results[1]
        if isinstance(results[0], NodeExistsError):
            _, stat = self.kazoo.get(path)
            if stat.ephemeralOwner == self.session_id:
                return stat
            raise NodeExistsError(path)
        raise next(r for r in results if isinstance(r, Exception) and not _rolled_back(r))

    def broker_registrations(self) -> dict[int, tuple[zd.BrokerRegistration, int]]:
        """Every registered broker with its epoch (the registration's czxid)."""
        found = {}
        for child in self.kazoo.get_children(zd.BROKER_IDS):
            try:
                data, stat = self.kazoo.get(zd.broker_path(int(child)))
            except NoNodeError:
                continue
            found[int(child)] = (zd.BrokerRegistration.decode(int(child), data), stat.czxid)
        return found

    # -- controller -------------------------------------------------------------------------------------

    def controller_id(self) -> int | None:
        data, _ = self.get_data_and_version(zd.CONTROLLER)
        return None if data is None else zd.ControllerRegistration.decode(data).broker_id

    def controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, znode version) of ``/controller_epoch``, None before any election."""
        data, version = self.get_data_and_version(zd.CONTROLLER_EPOCH)
        return None if data is None else (zd.decode_controller_epoch(data), version)

    def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int]:
        """Kafka's election: create ``/controller`` and bump ``/controller_epoch`` (at the version read) in
        one multi-op; answer (new epoch, its znode version) or raise ControllerMovedError."""
        current = self.controller_epoch() or self._create_controller_epoch()
        epoch, version = current[0] + 1, current[1]
        tx = self.kazoo.transaction()
        tx.create(zd.CONTROLLER, zd.ControllerRegistration(broker_id).encode(), ephemeral=True)
        tx.set_data(zd.CONTROLLER_EPOCH, zd.encode_controller_epoch(epoch), version=version)
        results = tx.commit()
        if not any(isinstance(r, Exception) for r in results):
            return epoch, results[1].version
        if any(isinstance(r, (NodeExistsError, BadVersionError)) for r in results):
            # A retried multi may have succeeded: it did if /controller is ours and the epoch is the new one.
            if self.controller_id() == broker_id and (now := self.controller_epoch()) is not None and now[0] == epoch:
                return now
            raise ControllerMovedError("Controller moved to another broker. Aborting controller startup procedure")
        raise next(r for r in results if isinstance(r, Exception) and not _rolled_back(r))

    def _create_controller_epoch(self) -> tuple[int, int]:
        try:
            self.kazoo.create(zd.CONTROLLER_EPOCH, zd.encode_controller_epoch(INITIAL_CONTROLLER_EPOCH))
            return INITIAL_CONTROLLER_EPOCH, 0
        except NodeExistsError:
            found = self.controller_epoch()
            if found is None:
                raise
            return found

    def resign_controller(self, broker_id: int) -> None:
        """Delete ``/controller`` if it is still this broker's (a resigning or stopping controller). A session
        already lost took the ephemeral znode with it: nothing to do then."""
        try:
            data, stat = self.kazoo.get(zd.CONTROLLER)
            if zd.ControllerRegistration.decode(data).broker_id == broker_id and stat.ephemeralOwner == self.session_id:
                self.kazoo.delete(zd.CONTROLLER, version=stat.version)
        except (NoNodeError, BadVersionError, SessionExpiredError, ConnectionLoss):
            pass

    # -- topics -------------------------------------------------------------------------------------------

    def topics(self) -> list[str]:
        return self.kazoo.get_children(zd.BROKER_TOPICS)

    def topic_assignment(self, topic: str) -> tuple[zd.TopicAssignment, int] | None:
        data, version = self.get_data_and_version(zd.topic_path(topic))
        return None if version == UNKNOWN_VERSION else (zd.TopicAssignment.decode(data), version)

    def create_topic(self, topic: str, assignment: zd.TopicAssignment, config: dict[str, str]) -> None:
        """``AdminZkClient.createTopicWithAssignment``: the config znode first, then the assignment (whose
        appearance is what the controller watches). NodeExistsError if the topic exists."""
        config_path = zd.config_entity_path(zd.ConfigType.TOPIC, topic)
        data = zd.encode_entity_config(config)
        try:
            self.kazoo.create(config_path, data, makepath=True)
        except NodeExistsError:
            self.kazoo.set(config_path, data)
        self.kazoo.create(zd.topic_path(topic), assignment.encode())

    def set_topic_assignment(self, topic: str, assignment: zd.TopicAssignment, expected_version: int) -> tuple[bool, int]:
        return self.conditional_update(zd.topic_path(topic), assignment.encode(), expected_version)

    def partition_state(self, topic: str, partition: int) -> tuple[zd.LeaderIsrAndControllerEpoch, int] | None:
        """The partition's leader and ISR and its znode version (the partition epoch)."""
        data, version = self.get_data_and_version(zd.partition_state_path(topic, partition))
        state = zd.LeaderIsrAndControllerEpoch.decode(data)
        return None if state is None else (state, version)

    def create_partition_state(self, topic: str, partition: int, state: zd.LeaderIsrAndControllerEpoch) -> bool:
        """False when a state is already there (a controller before this one got to it)."""
        try:
            self.create_recursive(zd.partition_state_path(topic, partition), state.encode(), exist_ok=False)
            return True
        except NodeExistsError:
            return False

    def update_partition_state(self, topic: str, partition: int, state: zd.LeaderIsrAndControllerEpoch, expected_version: int) -> tuple[bool, int]:
        return self.conditional_update(zd.partition_state_path(topic, partition), state.encode(), expected_version)

    # -- the controller's writes, fenced by the controller epoch's znode version -------------------------------

    def _fenced(self, epoch_zk_version: int) -> TransactionRequest:
        tx = self.kazoo.transaction()
        tx.check(zd.CONTROLLER_EPOCH, epoch_zk_version)
        return tx

    def _commit_fenced(self, tx: TransactionRequest) -> list[Any]:
        """Commit a multi whose first op checks the controller epoch; ControllerMovedError if that failed.
        The results are kazoo's (untyped): an op's ZnodeStat, path or True, or the exception it met."""
        results = tx.commit()
        if isinstance(results[0], BadVersionError):
            raise ControllerMovedError("Controller epoch zkVersion check fails")
        return results

    def create_partition_state_fenced(self, topic: str, partition: int, state: zd.LeaderIsrAndControllerEpoch, epoch_zk_version: int) -> bool:
        """Kafka's ``createTopicPartitionStatesRaw``: parents made as needed, the state only as this
        controller (False if a state is already there)."""
        self.create_recursive(zd.partition_path(topic, partition), None)
        tx = self._fenced(epoch_zk_version)
        tx.create(zd.partition_state_path(topic, partition), state.encode())
        return not any(isinstance(r, Exception) for r in self._commit_fenced(tx))

    def update_partition_state_fenced(
        self, topic: str, partition: int, state: zd.LeaderIsrAndControllerEpoch, expected_version: int, epoch_zk_version: int
    ) -> int | None:
        """Kafka's ``updateLeaderAndIsr`` for one partition: the new znode version, or None when the state
        moved on since it was read (to be re-read and retried)."""
        tx = self._fenced(epoch_zk_version)
        tx.set_data(zd.partition_state_path(topic, partition), state.encode(), version=expected_version)
        results = self._commit_fenced(tx)
        return None if any(isinstance(r, Exception) for r in results) else results[1].version

    def delete_topic_znodes(self, topic: str) -> None:
        """The end of a deletion: the assignment (with partition states), the config, the deletion mark."""
        self.kazoo.delete(zd.topic_path(topic), recursive=True)
        for path in (zd.config_entity_path(zd.ConfigType.TOPIC, topic), zd.delete_topic_path(topic)):
            try:
                self.kazoo.delete(path)
            except NoNodeError:
                pass

    def preferred_replica_election(self) -> list[TopicPartition] | None:
        """The partitions ``/admin/preferred_replica_election`` asks to hand back to their preferred replica
        (None when nothing asks)."""
        data, version = self.get_data_and_version(zd.PREFERRED_REPLICA_ELECTION)
        return None if version == UNKNOWN_VERSION else zd.decode_preferred_replica_election(data)

    def delete_preferred_replica_election(self, epoch_zk_version: int) -> None:
        tx = self._fenced(epoch_zk_version)
        tx.delete(zd.PREFERRED_REPLICA_ELECTION)
        self._commit_fenced(tx)

    def set_topic_assignment_fenced(self, topic: str, assignment: zd.TopicAssignment, epoch_zk_version: int) -> None:
        """Kafka's ``setTopicAssignmentRaw``: the controller rewrites a topic's assignment (any version, as
        this controller only)."""
        tx = self._fenced(epoch_zk_version)
        tx.set_data(zd.topic_path(topic), assignment.encode())
        results = self._commit_fenced(tx)
        if isinstance(results[1], Exception):
            raise results[1]

    def partition_reassignment(self) -> dict[TopicPartition, list[int]] | None:
        """What the legacy ``/admin/reassign_partitions`` asks (None when it does not exist; data that is not
        a reassignment reads as none, as Kafka's ``getPartitionReassignment``)."""
        data, version = self.get_data_and_version(zd.REASSIGN_PARTITIONS)
        if version == UNKNOWN_VERSION:
            return None
        try:
            return zd.decode_reassignment(data or b"")
        except (ValueError, KeyError, TypeError):
            log.warning("Ignoring %s: not a partition reassignment", zd.REASSIGN_PARTITIONS)
            return {}

    def set_partition_reassignment(self, reassignment: dict[TopicPartition, list[int]], epoch_zk_version: int) -> None:
        """``setOrCreatePartitionReassignment``: what is left of the legacy request, as this controller only."""
        tx = self._fenced(epoch_zk_version)
        tx.set_data(zd.REASSIGN_PARTITIONS, zd.encode_reassignment(reassignment))
        if isinstance(self._commit_fenced(tx)[1], NoNodeError):
            tx = self._fenced(epoch_zk_version)
            tx.create(zd.REASSIGN_PARTITIONS, zd.encode_reassignment(reassignment))
            self._commit_fenced(tx)

    def delete_partition_reassignment(self, epoch_zk_version: int) -> None:
        tx = self._fenced(epoch_zk_version)
        tx.delete(zd.REASSIGN_PARTITIONS)
        self._commit_fenced(tx)

    def isr_change_notifications(self) -> list[str]:
        """The sequence znodes under ``/isr_change_notification`` (written by brokers before AlterPartition)."""
        return sorted(self.kazoo.get_children(zd.ISR_CHANGE_NOTIFICATION))

    def isr_change_partitions(self, names: list[str]) -> list[TopicPartition]:
        partitions: list[TopicPartition] = []
        for name in names:
            data, _ = self.get_data_and_version(f"{zd.ISR_CHANGE_NOTIFICATION}/{name}")
            partitions += [p for p in zd.decode_isr_change(data) if p not in partitions]
        return partitions

    def delete_isr_change_notifications(self, names: list[str], epoch_zk_version: int) -> None:
        for name in names:
            tx = self._fenced(epoch_zk_version)
            tx.delete(f"{zd.ISR_CHANGE_NOTIFICATION}/{name}")
            self._commit_fenced(tx)  # one already gone fails alone; nothing to do about it

    def propagate_log_dir_event(self, broker_id: int) -> None:
        """A broker's log directory went offline (``ZkClient.propagateLogDirEvent``): a sequential znode the
        controller watches for. Asynchronous, so the event loop that noticed the failure does not wait."""
        self.kazoo.create_async(f"{zd.LOG_DIR_EVENT_NOTIFICATION}/{zd.LOG_DIR_EVENT_PREFIX}", zd.encode_log_dir_event(broker_id), sequence=True)

    def log_dir_event_notifications(self) -> list[str]:
        return sorted(self.kazoo.get_children(zd.LOG_DIR_EVENT_NOTIFICATION))

    def brokers_from_log_dir_events(self, names: list[str]) -> set[int]:
        """The brokers the notifications name (one gone or unreadable names none)."""
        brokers: set[int] = set()
        for name in names:
            data, _ = self.get_data_and_version(f"{zd.LOG_DIR_EVENT_NOTIFICATION}/{name}")
            try:
                brokers.add(zd.decode_log_dir_event(data))
            except (KeyError, TypeError):
                log.warning("Ignoring the unreadable log dir event notification %s", name)
        return brokers

    def delete_log_dir_event_notifications(self, names: list[str], epoch_zk_version: int) -> None:
        for name in names:
            tx = self._fenced(epoch_zk_version)
            tx.delete(f"{zd.LOG_DIR_EVENT_NOTIFICATION}/{name}")
            self._commit_fenced(tx)

    def topics_marked_for_deletion(self) -> list[str]:
        return self.kazoo.get_children(zd.DELETE_TOPICS)

    def mark_topic_for_deletion(self, topic: str) -> None:
        try:
            self.kazoo.create(zd.delete_topic_path(topic), None)
        except NodeExistsError:
            pass

    # -- configs ------------------------------------------------------------------------------------------

    def entity_config(self, entity_type: zd.ConfigType, name: str) -> dict[str, str]:
        data, _ = self.get_data_and_version(zd.config_entity_path(entity_type, name))
        return zd.decode_entity_config(data)

    def all_entity_configs(self, entity_type: zd.ConfigType) -> dict[str, dict[str, str]]:
        """Every entity of the type by (sanitized) name with its config; for users also each
        ``<user>/clients/<client>`` (Kafka's ``fetchAllEntityConfigs`` and ``fetchAllChildEntityConfigs``)."""
        found: dict[str, dict[str, str]] = {}
        for name in self._children(f"{zd.CONFIG}/{entity_type.value}"):
            found[name] = self.entity_config(entity_type, name)
            if entity_type == zd.ConfigType.USER:
                for client in self._children(f"{zd.CONFIG}/{entity_type.value}/{name}/clients"):
                    found[f"{name}/clients/{client}"] = self.entity_config(entity_type, f"{name}/clients/{client}")
        return found

    def change_entity_config(self, entity_type: zd.ConfigType, name: str, config: dict[str, str]) -> None:
        """Write an entity's overrides, then the sequential notification every broker watches."""
        path = zd.config_entity_path(entity_type, name)
        data = zd.encode_entity_config(config)
        try:
            self.kazoo.set(path, data)
        except NoNodeError:
            self.create_recursive(path, data)
        self.create_recursive(f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}", zd.encode_config_change(entity_type, name), sequence=True)

    # -- ACLs (the ACL authorizer's store) -----------------------------------------------------------------

    def create_acl_paths(self) -> None:
        for path in zd.ACL_PATHS:
            self.create_recursive(path, None)

    def acl_znodes(self) -> dict[str, tuple[bytes | None, int]]:
        """Every resource's ACL znode in both stores: path -> (data, version) (Kafka's ``loadAllAcls``)."""
        found: dict[str, tuple[bytes | None, int]] = {}
        for store in zd.ACL_STORES.values():
            for resource_type in self._children(store):
                for name in self._children(f"{store}/{resource_type}"):
                    path = f"{store}/{resource_type}/{name}"
                    data, version = self.get_data_and_version(path)
                    if version != UNKNOWN_VERSION:
                        found[path] = (data, version)
        return found

    def _children(self, path: str) -> list[str]:
        try:
            return self.kazoo.get_children(path)
        except NoNodeError:
            return []

    def create_if_not_exists(self, path: str, data: bytes) -> tuple[bool, int]:
        """Kafka's ``createAclsForResourceIfNotExists``: (True, 0), or (False, UNKNOWN_VERSION) if another got there first."""
        try:
            self.create_recursive(path, data, exist_ok=False)
            return True, 0
        except NodeExistsError:
            return False, UNKNOWN_VERSION

    def conditional_delete(self, path: str, expected_version: int) -> bool:
        """Kafka's ``conditionalDelete``: gone (already or now) unless the znode moved on since ``expected_version``."""
        try:
            self.kazoo.delete(path, version=expected_version)
        except NoNodeError:
            pass
        except BadVersionError:
            return False
        return True

    def purge_obsolete_notifications(self, path: str, children: list[str], expiration_ms: int = zd.CHANGE_EXPIRATION_MS) -> None:
        """``ZkNodeChangeNotificationListener.purgeObsoleteNotifications``: delete the change notifications
        under ``path`` created more than ``expiration_ms`` ago (every broker's listener does; one another
        broker deleted first is skipped)."""
        now_ms = time.time() * 1000
        for child in children:
            try:
                _, stat = self.kazoo.get(f"{path}/{child}")
                if now_ms - stat.ctime > expiration_ms:
                    self.kazoo.delete(f"{path}/{child}")
            except NoNodeError:
                continue

    def create_acl_change_notification(self, store: str, data: bytes) -> None:
        """An ``acl_changes_<seq>`` under the change path of ``store`` (``LITERAL`` or ``PREFIXED``)."""
        self.create_recursive(f"{zd.ACL_CHANGES[store]}/{zd.ACL_CHANGE_PREFIX}", data, sequence=True)

    # -- producer ids -----------------------------------------------------------------------------------

    def new_producer_id_block(self, broker_id: int) -> zd.ProducerIdBlock:
        """``ZkProducerIdManager.getNewProducerIdBlock``: the block after the latest, written conditionally on
        the version read, again until no other broker got in between."""
        while True:
            data, version = self.get_data_and_version(zd.LATEST_PRODUCER_ID_BLOCK)
            first = zd.ProducerIdBlock.decode(data).last + 1 if data else 0
            if first > (1 << 63) - 1 - zd.PRODUCER_ID_BLOCK_SIZE:
                raise OverflowError("Have exhausted all producerIds.")
            block = zd.ProducerIdBlock(broker_id, first)
            if version == UNKNOWN_VERSION:
                try:
                    self.create_recursive(zd.LATEST_PRODUCER_ID_BLOCK, block.encode(), exist_ok=False)
                    return block
                except NodeExistsError:
                    continue
            ok, _ = self.conditional_update(zd.LATEST_PRODUCER_ID_BLOCK, block.encode(), version)
            if ok:
                return block


def _rolled_back(exc: Exception) -> bool:
    """kazoo reports the operations of a failed multi that did not fail themselves as RolledBackError."""
    return isinstance(exc, RolledBackError)


def _create_recursive(kazoo: KazooClient, path: str, data: bytes | None, *, ephemeral: bool = False, sequence: bool = False, exist_ok: bool = True) -> str:
    """Kafka's ``createRecursive``: parents are created with data null; an existing ``path`` is fine unless
    ``exist_ok`` is False (then NodeExistsError)."""
    try:
        return kazoo.create(path, data, ephemeral=ephemeral, sequence=sequence)
    except NoNodeError:
        parent = path.rsplit("/", 1)[0]
        if parent:
            _create_recursive(kazoo, parent, None)
        try:
            return kazoo.create(path, data, ephemeral=ephemeral, sequence=sequence)
        except NodeExistsError:
            if not exist_ok:
                raise
            return path
    except NodeExistsError:
        if not exist_ok:
            raise
        return path
