"""The embedded single-node controller: odradek's default, with no ZooKeeper.

It does what Kafka's controller does for a cluster of one: validates and assigns topics, elects the
broker leader of every partition with a leader epoch, keeps topic configs, allocates producer-id blocks,
and tells the broker about every change through the :class:`MetadataListener` interface (the
LeaderAndIsr/UpdateMetadata/StopReplica path that the ZooKeeper controller drives over the wire).
Its state lives in one JSON file in the first log directory, replaced atomically on every change, as
ZooKeeper's znodes would hold it.

It is the single-node mode's :class:`MetadataSupport`: every change is in the image when the call returns
(so nothing waits for the metadata to show it), and the requests a ZooKeeper controller exchanges with other
brokers are answered as by a broker no controller leads.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, TypeVar

from odradek.controller.metadata_image import (
    BrokerInfo,
    MetadataImage,
    PartitionState,
    TopicInfo,
    topic_name_error,
    unify_collision_chars,
)
from odradek.controller.metadata_support import MetadataSupport, PartitionErrors
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.kafka_uuid import Uuid, random_uuid
from odradek.storage.checkpoints import write_atomically
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.controller.metadata_image import MetadataListener
    from odradek.controller.metadata_support import ControllerForBrokers

    # Imported by the requests that need them (elections, reassignments, another controller's LeaderAndIsr),
    # not by every single node's start-up.
    from odradek.controller.leader_election import ElectionError, ElectionType
    from odradek.controller.reassignment import ApiError
    from odradek.controller.zk_data import ReplicaAssignment
    from odradek.protocol.message_types.alter_configs import AlterConfigsResponseDict

STATE_FILE = "odradek-controller.json"
PRODUCER_ID_BLOCK_SIZE = 1000
MAX_RECORDS_PER_USER_OP = 10_000
"""Kafka's KRaft controller bound on the metadata records one request may produce (a topic record, one per
partition, one per config): beyond it the request is refused whole with POLICY_VIOLATION. ZooKeeper-mode
Kafka has no bound and runs out of heap on a count like 2^31-1 (UNKNOWN_SERVER_ERROR)."""
EXCESSIVELY_LARGE = "Unable to perform excessively large batch operation."

T = TypeVar("T")


def check_batch_size(records: int) -> None:
    """Refuse, as Kafka's controller does, a request that would write more than MAX_RECORDS_PER_USER_OP records."""
    if records > MAX_RECORDS_PER_USER_OP:
        raise KafkaError(ErrorCode.POLICY_VIOLATION, EXCESSIVELY_LARGE)


def _put(configs: dict[str, dict[str, str]], key: str, props: dict[str, str]) -> None:
    """An entity without configs has no entry, as ZooKeeper deletes an empty config znode's content."""
    if props:
        configs[key] = dict(props)
    else:
        configs.pop(key, None)


def new_cluster_id() -> str:
    """Kafka's cluster ids: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(random_uuid().bytes).rstrip(b"=").decode()


class EmbeddedController(MetadataSupport):
    def __init__(
        self,
        broker: BrokerInfo,
        state_dir: Path,
        listener: MetadataListener,
        cluster_id: str | None = None,
        *,
        log_dirs: Sequence[Path] = (),
        internal_topic_configs: Mapping[str, dict[str, str]] | None = None,
    ) -> None:
        """With no state file yet, the state is what ``log_dirs`` hold (see log_dir_discovery): nothing for a
        new broker, the cluster id and topics for directories a ZooKeeper-mode Kafka wrote."""
        super().__init__()
        self.broker = broker
        self.path = state_dir / STATE_FILE
        self.listener = listener
        self.next_producer_id = 0
        state = json.loads(self.path.read_text()) if self.path.exists() else None
        if state is None:
            dirs = list(log_dirs) or [state_dir]
            topics: dict[str, TopicInfo] = {}
            max_producer_id = -1
            if any(d.is_dir() and os.listdir(d) for d in dirs):  # a new directory (every test's first start) holds nothing
                from odradek.controller.log_dir_discovery import recover_metadata

                recovered = recover_metadata(dirs, broker.node_id, internal_topic_configs or {})
                cluster_id, topics, max_producer_id = cluster_id or recovered.cluster_id, recovered.topics, recovered.max_producer_id
            self._image = MetadataImage(cluster_id or new_cluster_id(), broker.node_id, {broker.node_id: broker}, topics)
            # The block after the one the highest producer id came from, as Kafka's next block from ZooKeeper.
            self.next_producer_id = -(-(max_producer_id + 1) // PRODUCER_ID_BLOCK_SIZE) * PRODUCER_ID_BLOCK_SIZE
            self._save()
        else:
            self._image = MetadataImage(state["cluster_id"], broker.node_id, {broker.node_id: broker})
            self.next_producer_id = state.get("next_producer_id", 0)
            self.image.broker_configs = state.get("broker_configs", {})
            self.image.acl_znodes = state.get("acl_znodes", {})
            self.image.entity_configs = state.get("entity_configs", {})
            self.image.group_configs = state.get("group_configs", {})
            for name, t in state["topics"].items():
                partitions = {int(p): PartitionState(**ps) for p, ps in t["partitions"].items()}
                self.image.topics[name] = TopicInfo(name, Uuid(t["topic_id"]), partitions, t.get("configs", {}))

    @property
    def image(self) -> MetadataImage:
        return self._image

    def startup(self) -> None:
        """Hand this broker its partitions again, as a restarted ZooKeeper-mode controller does.

        Kafka's controller finds each partition's recorded leader alive again (it is this broker), so it
        elects no one and bumps no leader epoch: it sends LeaderAndIsr with the state it has. Only a
        partition whose recorded leader is another broker (a directory moved between brokers) is re-elected
        here, with a new epoch.
        """
        changed = False
        for topic in self.image.topics.values():
            for state in topic.partitions.values():
                if state.leader != self.broker.node_id or state.isr != [self.broker.node_id]:
                    state.leader = self.broker.node_id
                    state.leader_epoch += 1
                    state.partition_epoch += 1
                    state.isr = [self.broker.node_id]
                    changed = True
        if changed:
            self._save()
        for topic in self.image.topics.values():
            self.listener.on_partitions_changed(topic, sorted(topic.partitions))

    # -- persistence ------------------------------------------------------------------------------------

    def _commit(self, undo: Callable[[], object]) -> None:
        """Persist a change already applied to the image; if it cannot be written (a full disk), ``undo`` it
        so that the image stays what the file says, and answer KAFKA_STORAGE_ERROR."""
        try:
            self._save()
        except OSError as exc:
            undo()
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Failed to write the cluster metadata: {exc}") from None

    def _save(self) -> None:
        state = {
            "version": 1,
            "cluster_id": self.image.cluster_id,
            "next_producer_id": self.next_producer_id,
            "broker_configs": self.image.broker_configs,
            "acl_znodes": self.image.acl_znodes,
            "entity_configs": self.image.entity_configs,
            "group_configs": self.image.group_configs,
            "topics": {
                t.name: {
                    "topic_id": str(t.topic_id),
                    "configs": t.configs,
                    # vars, not dataclasses.asdict: json reads the state at once, so asdict's deep copy was
                    # waste, 0.25 s of the event loop per commit at 9,000 partitions.
                    "partitions": {str(p): vars(s) for p, s in sorted(t.partitions.items())},
                }
                for t in self.image.topics.values()
            },
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Compact, so that json's C encoder runs (``indent`` selects the pure-Python one): every commit rewrites
        # the whole image on the event loop, ~300 ms at 7,000 partitions indented, ~40 ms compact.
        write_atomically(self.path, json.dumps(state, sort_keys=True, separators=(",", ":")).encode())

    # -- topics -----------------------------------------------------------------------------------------

    def validate_new_topic(self, name: str, num_partitions: int, replication_factor: int, assignments: dict[int, list[int]] | None) -> None:
        """Kafka's checks for CreateTopics, in Kafka's order, raising the error it answers with."""
        reason = topic_name_error(name)
        if reason:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        if name in self.image.topics or name in self.creating:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        collision = unify_collision_chars(name)
        for other in self.image.topics:
            if unify_collision_chars(other) == collision:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {other}")
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.")
            self._validate_assignments(assignments, 0)
            return
        if num_partitions < 1 and num_partitions != -1 or num_partitions == 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        if replication_factor < 1 and replication_factor != -1 or replication_factor == 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default value.")
        if replication_factor > len(self.image.brokers):
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, f"Replication factor: {replication_factor} larger than available brokers: {len(self.image.brokers)}.")

    def _validate_assignments(self, assignments: dict[int, list[int]], first: int) -> None:
        if sorted(assignments) != list(range(first, first + len(assignments))):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions should be a consecutive 0-based integer sequence")
        sizes = {len(r) for r in assignments.values()}
        for replicas in assignments.values():
            if not replicas:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Replica assignment must not be empty")
            if len(set(replicas)) != len(replicas):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate brokers not allowed in replica assignment: {replicas}")
            unknown = [b for b in replicas if b not in self.image.brokers]
            if unknown:
                raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"Unknown broker(s) in replica assignment: {unknown}")
        if len(sizes) > 1:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas")

    def assign_replicas(self, num_partitions: int, replication_factor: int, first_partition: int = 0) -> dict[int, list[int]]:
        """Kafka's rack-unaware assignment: partition i starts at broker i mod n, replica j at (i + j) mod n."""
        brokers = sorted(self.image.brokers)
        n = len(brokers)
        return {
            first_partition + i: [brokers[(first_partition + i + j) % n] for j in range(replication_factor)]
            for i in range(num_partitions)
        }

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
        """Validate, assign and publish a topic, all or nothing: if its partitions cannot all be made, the
        ones made are deleted again and the topic does not exist. ``topic_id`` is the id a validate-only
        call chose, for logs made in advance."""
        self.validate_new_topic(name, num_partitions, replication_factor, assignments)
        if not assignments:
            partitions = default_partitions if num_partitions == -1 else num_partitions
            rf = default_replication_factor if replication_factor == -1 else replication_factor
            if rf > len(self.image.brokers):
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, f"Replication factor: {rf} larger than available brokers: {len(self.image.brokers)}.")
            check_batch_size(1 + partitions + len(configs or {}))
            assignments = self.assign_replicas(partitions, rf)
        check_batch_size(1 + len(assignments) + len(configs or {}))
        topic = TopicInfo(
            name,
            topic_id or random_uuid(),
            {p: PartitionState(replicas[0], 0, list(replicas), list(replicas)) for p, replicas in assignments.items()},
            dict(configs or {}),
        )
        if validate_only:
            return topic
        self.image.topics[name] = topic
        self._commit(lambda: self.image.topics.pop(name))
        try:
            self.listener.on_partitions_changed(topic, sorted(topic.partitions))
        except Exception:
            del self.image.topics[name]
            self._commit(lambda: self.image.topics.__setitem__(name, topic))
            self.listener.on_topic_deleted(topic)
            raise
        return topic

    def delete_topic(self, name: str) -> TopicInfo:
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        del self.image.topics[name]
        self._commit(lambda: self.image.topics.__setitem__(name, topic))
        self.listener.on_topic_deleted(topic)
        return topic

    def plan_partitions(self, name: str, count: int, assignments: list[list[int]] | None) -> TopicInfo:
        """Validate CreatePartitions and assign the new partitions, changing nothing: the topic with only
        its new partitions, as :meth:`create_partitions` will add them."""
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if assignments is not None:
            # Kafka (ZkAdminManager.createPartitions) checks the brokers named before anything else.
            unknown = sorted({b for replicas in assignments for b in replicas} - set(self.image.brokers))
            if unknown:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
        current = len(topic.partitions)
        if count < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        check_batch_size(count - current)
        rf = len(topic.partitions[0].replicas)
        if assignments is not None:
            if len(assignments) != count - current:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Increasing the number of partitions by {count - current} but {len(assignments)} assignments provided.")
            new = {current + i: list(r) for i, r in enumerate(assignments)}
            self._validate_assignments(new, current)
            if any(len(r) != rf for r in new.values()):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Inconsistent replication factor between partitions, partition 0 has {rf} while partitions [{current}] have replication factors [{len(next(iter(new.values())))}], respectively.")
        else:
            new = self.assign_replicas(count - current, rf, current)
        states = {p: PartitionState(replicas[0], 0, list(replicas), list(replicas)) for p, replicas in new.items()}
        return TopicInfo(name, topic.topic_id, states, topic.configs)

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None) -> list[int]:
        new = self.plan_partitions(name, count, assignments).partitions
        topic = self.image.topics[name]
        topic.partitions.update(new)
        self._commit(lambda: [topic.partitions.pop(p) for p in new])
        self.listener.on_partitions_changed(topic, sorted(new))
        return sorted(new)

    # -- configs: the embedded controller is its own ConfigWrites, each change made as it is set -----------------

    def config_writes(self) -> EmbeddedController:
        return self

    def written(self, answer: AlterConfigsResponseDict) -> AlterConfigsResponseDict:
        return answer

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self.image.topics[name]
        old, topic.configs = topic.configs, dict(configs)
        self._commit(lambda: setattr(topic, "configs", old))
        self.listener.on_topic_configs_changed(topic)

    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of a broker (its id) or of the cluster default (``<default>``)."""
        self._replace(self.image.broker_configs, entity, configs)
        self.listener.on_broker_configs_changed(entity)

    def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        self._replace(self.image.group_configs, group, configs)

    def _replace(self, configs: dict[str, dict[str, str]], key: str, props: dict[str, str]) -> None:
        """Replace one entity's configs, committed (undone if the file cannot be written)."""
        old = configs.get(key, {})
        _put(configs, key, props)
        self._commit(lambda: _put(configs, key, old))

    # -- ACLs (the authorizer's AclStore) -----------------------------------------------------------------

    def acl_znodes(self) -> dict[str, dict]:
        return dict(self.image.acl_znodes)

    def update_acl_znode(self, path: str, update: Callable[[dict | None], dict | None]) -> dict | None:
        """Write (or with None delete) one ACL znode's JSON, ``update`` of the current (no other writer here)."""
        old = self.image.acl_znodes.get(path)
        data = update(old)
        self._put_acl_znode(path, data)
        self._commit(lambda: self._put_acl_znode(path, old))
        return data

    def follow_changes(self, on_change: Callable[..., None]) -> None:
        """Nothing to follow: no other broker writes this broker's ACLs."""

    def _put_acl_znode(self, path: str, data: dict | None) -> None:
        if data is None:
            self.image.acl_znodes.pop(path, None)
        else:
            self.image.acl_znodes[path] = data

    # -- client quota configs (the quotas' EntityConfigStore) -------------------------------------------

    def set_entity_config(self, path: str, props: dict[str, str]) -> None:
        """Replace one entity's configs; an entity left without any has no entry (as ZooKeeper's empty znode)."""
        self._replace(self.image.entity_configs, path, props)

    # -- producer ids -----------------------------------------------------------------------------------

    def allocate_producer_ids(self, count: int = PRODUCER_ID_BLOCK_SIZE) -> range:
        """A block of producer ids (AllocateProducerIds / ZooKeeper's /latest_producer_id_block)."""
        start = self.next_producer_id
        self.next_producer_id += count
        self._commit(lambda: setattr(self, "next_producer_id", start))
        return range(start, start + count)

    # -- the rest of the MetadataSupport of a single node ------------------------------------------------------

    async def controlled_shutdown(self) -> None:
        """No other broker could take over its leaderships."""

    def shutdown(self) -> None:
        """Every change is on disk when it is made: nothing to finish."""

    def is_controller(self) -> bool:
        return True

    def controller_for_brokers(self) -> ControllerForBrokers | None:
        """None: no other broker has this one as its controller."""
        return None

    async def admin_call(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Right here, on the event loop: the only thread that may change the image."""
        return call(*args, **kwargs)

    def makes_logs_before_publishing(self) -> bool:
        """Yes: publishing then only finds them (they are made off the event loop, see broker/replication/new_logs.py)."""
        return True

    async def until_led(self, partitions: Mapping[str, Iterable[int]], timeout_s: float) -> set[str]:
        """None: a topic is published with its leaders."""
        return set()

    async def until_gone(self, topics: Iterable[str], timeout_s: float) -> set[str]:
        return set()

    async def elect_leaders(self, partitions: set[TopicPartition], election_type: ElectionType, timeout_s: float) -> dict[TopicPartition, ElectionError]:
        """The election rules' triage over the image; a partition left to elect has no other replica that
        could lead."""
        from odradek.controller import leader_election

        states = {(t.name, p): s for t in self.image.topics.values() for p, s in t.partitions.items()}
        electable, answered = leader_election.triage(
            partitions, election_type, {tp: tuple(s.replicas) for tp, s in states.items()}, {tp: s.leader for tp, s in states.items()}, set(self.image.brokers), set()
        )
        return {**answered, **{p: leader_election.failed(p, election_type) for p in electable}}

    async def alter_partition_reassignments(self, targets: dict[TopicPartition, tuple[int, ...] | None]) -> dict[TopicPartition, ApiError] | ApiError:
        """As a one-broker Kafka cluster answers (:func:`single_node_answers`)."""
        from odradek.controller.reassignment import single_node_answers
        from odradek.controller.zk_data import ReplicaAssignment

        assignments = {(t.name, p): ReplicaAssignment(tuple(s.replicas)) for t in self.image.topics.values() for p, s in t.partitions.items()}
        return single_node_answers(assignments, self.image.brokers, targets)

    async def list_partition_reassignments(self, partitions: list[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment] | ApiError:
        """None: a reassignment here completes at once."""
        return {}

    def leader_and_isr(self, body: Any) -> tuple[ErrorCode, PartitionErrors]:
        """Any controller but its own is a stale one."""
        from odradek.controller.zk_controller_state import leader_and_isr_states

        return ErrorCode.STALE_CONTROLLER_EPOCH, dict.fromkeys(leader_and_isr_states(body), ErrorCode.STALE_CONTROLLER_EPOCH)

    def stop_replica(self, body: Any) -> tuple[ErrorCode, PartitionErrors]:
        """As Kafka's stale answer, no partition named."""
        return ErrorCode.STALE_CONTROLLER_EPOCH, {}

    def update_metadata(self, body: Any) -> ErrorCode:
        return ErrorCode.STALE_CONTROLLER_EPOCH
