"""The ZooKeeper-mode controller's decisions, without ZooKeeper or sockets (sans-IO).

:class:`ControllerContext` is what Kafka's ``ControllerContext`` caches from ZooKeeper: live brokers and
their epochs, topic ids, each partition's assignment, leader, ISR and the znode version of its state. The
functions below are Kafka 3.9's partition state machine rules (``PartitionStateMachine``,
``PartitionLeaderElectionAlgorithms``, ``ReplicaStateMachine``), and :class:`RequestBatch` turns their
outcome into the LeaderAndIsr, UpdateMetadata and StopReplica requests ``ControllerBrokerRequestBatch``
sends, at the versions a Kafka 3.9 controller uses with inter.broker.protocol.version 3.9.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from odradek.controller import zk_data as zd
from odradek.controller.metadata_image import PartitionState
from odradek.protocol.api import ApiKey
from odradek.protocol.kafka_uuid import Uuid, ZERO_UUID
from odradek.storage.topic_partition import TopicPartition


LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4
"""``ControllerChannelManager``'s versions for metadata version 3.4 and later (3.9's default)."""

NO_LEADER = -1
LEADER_DURING_DELETE = -2
"""``LeaderAndIsr.NoLeader`` and ``LeaderDuringDelete`` (what UpdateMetadata says of a topic being deleted)."""
RECOVERING = 1
"""``LeaderRecoveryState.RECOVERING``: the leader came from outside the ISR (unclean election)."""
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
NO_EPOCH = -1
"""StopReplica's leader epoch when the controller names none: the replica is stopped whatever its epoch."""


@dataclass(frozen=True)
class Leadership:
    """A partition's ``/state`` znode and its version (the partition epoch)."""

    state: zd.LeaderIsrAndControllerEpoch
    zk_version: int


@dataclass
class ControllerContext:
    controller_id: int
    epoch: int = 0
    epoch_zk_version: int = 0
    live_brokers: dict[int, zd.BrokerRegistration] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    topic_ids: dict[str, Uuid] = field(default_factory=dict)
    assignments: dict[TopicPartition, zd.ReplicaAssignment] = field(default_factory=dict)
    leadership: dict[TopicPartition, Leadership] = field(default_factory=dict)
    topics_being_deleted: set[str] = field(default_factory=set)
    shutting_down: set[int] = field(default_factory=set)
    """Brokers that asked for a controlled shutdown, until their registration goes: its elections pass them over."""
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)
    """Each live broker's replicas in a failed log directory (its LeaderAndIsr answers said KAFKA_STORAGE_ERROR)."""

    def is_online(self, replica: int, partition: TopicPartition) -> bool:
        """``isReplicaOnline`` with ``includeShuttingDownBrokers``: on a live broker (shutting down or not), and
        not in one of its failed log directories. Who hears of a partition's changes."""
        return replica in self.live_brokers and partition not in self.replicas_on_offline_dirs.get(replica, ())

    def live_replicas(self, partition: TopicPartition) -> list[int]:
        return [r for r in self.assignments[partition].replicas if self.is_online(r, partition)]

    def live_broker_ids(self) -> set[int]:
        """Kafka's ``liveBrokerIds``: registered and not shutting down. Only these may join an ISR or be
        elected; a broker in controlled shutdown still hears of its partitions until it is gone."""
        return set(self.live_brokers) - self.shutting_down

    def is_replica_online(self, replica: int, partition: TopicPartition) -> bool:
        """Kafka's ``isReplicaOnline``: online (:meth:`is_online`) and its broker not shutting down. What the
        elections may choose, and what the metadata does not call offline."""
        return replica not in self.shutting_down and self.is_online(replica, partition)

    def electable_replicas(self, partition: TopicPartition) -> list[int]:
        return [r for r in self.assignments[partition].replicas if self.is_replica_online(r, partition)]

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.assignments if tp[0] == topic)

    def partitions_on(self, broker: int) -> list[TopicPartition]:
        return sorted(tp for tp, a in self.assignments.items() if broker in a.replicas)

    def partitions_led_by(self, brokers: set[int]) -> list[TopicPartition]:
        return sorted(tp for tp, lead in self.leadership.items() if lead.state.leader in brokers)

    def offline_partitions(self) -> list[TopicPartition]:
        """Partitions with no state yet (new) or with no live leader, outside topics being deleted."""
        return sorted(
            tp for tp in self.assignments
            if tp[0] not in self.topics_being_deleted
            and (tp not in self.leadership or not self.is_online(self.leadership[tp].state.leader, tp))
        )

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_of(topic):
            self.assignments.pop(tp, None)
            self.leadership.pop(tp, None)
        self.topic_ids.pop(topic, None)
        self.topics_being_deleted.discard(topic)


# -- the partition state machine's rules ----------------------------------------------------------------------


def initial_leadership(live_replicas: list[int], controller_epoch: int) -> zd.LeaderIsrAndControllerEpoch | None:
    """A new partition: the first live replica leads, every live replica is in the ISR; none live, no state."""
    if not live_replicas:
        return None
    return zd.LeaderIsrAndControllerEpoch(live_replicas[0], 0, tuple(live_replicas), controller_epoch)


def offline_election(
    assignment: tuple[int, ...], current: zd.LeaderIsrAndControllerEpoch, live: set[int], unclean: bool, controller_epoch: int
) -> zd.LeaderIsrAndControllerEpoch | None:
    """``offlinePartitionLeaderElection``: the first live ISR member in assignment order; with unclean
    election allowed, else the first live replica (its ISR just itself, and RECOVERING). Bumps the epoch."""
    leader = next((r for r in assignment if r in live and r in current.isr), None)
    if leader is not None:
        return replace(current, leader=leader, leader_epoch=current.leader_epoch + 1, isr=tuple(r for r in current.isr if r in live), controller_epoch=controller_epoch)
    if unclean and (leader := next((r for r in assignment if r in live), None)) is not None:
        return replace(current, leader=leader, leader_epoch=current.leader_epoch + 1, isr=(leader,), controller_epoch=controller_epoch, leader_recovery_state=RECOVERING)
    return None


def controlled_shutdown_election(
    assignment: tuple[int, ...], current: zd.LeaderIsrAndControllerEpoch, live: set[int], shutting_down: set[int], controller_epoch: int
) -> zd.LeaderIsrAndControllerEpoch | None:
    """``controlledShutdownPartitionLeaderElection``: the first assigned replica that is live, in the ISR and
    not shutting down leads; the ISR loses the brokers shutting down. Bumps the epoch; None when no one can."""
    leader = next((r for r in assignment if r in live and r in current.isr and r not in shutting_down), None)
    if leader is None:
        return None
    isr = tuple(r for r in current.isr if r not in shutting_down)
    return replace(current, leader=leader, leader_epoch=current.leader_epoch + 1, isr=isr, controller_epoch=controller_epoch)


def preferred_replica_can_lead(assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int]) -> bool:
    """``preferredReplicaPartitionLeaderElection`` finds a leader: the first assigned replica is live and in sync."""
    return bool(assignment) and assignment[0] in live and assignment[0] in isr


def preferred_election(assignment: tuple[int, ...], current: zd.LeaderIsrAndControllerEpoch, live: set[int], controller_epoch: int) -> zd.LeaderIsrAndControllerEpoch | None:
    """The first assigned replica leads, if it can and does not already; the ISR stays, the epoch moves on."""
    if assignment and assignment[0] != current.leader and preferred_replica_can_lead(assignment, current.isr, live):
        return replace(current, leader=assignment[0], leader_epoch=current.leader_epoch + 1, controller_epoch=controller_epoch)
    return None


def imbalanced_partitions(ctx: ControllerContext, imbalance_percentage: int) -> list[TopicPartition]:
    """``checkAndTriggerAutoLeaderRebalance``: per preferred broker, the partitions it does not lead, when
    they are more than ``leader.imbalance.per.broker.percentage`` of those it should (and it can lead them)."""
    by_preferred: dict[int, list[TopicPartition]] = {}
    for partition, assignment in ctx.assignments.items():
        if partition[0] not in ctx.topics_being_deleted and assignment.replicas:
            by_preferred.setdefault(assignment.replicas[0], []).append(partition)
    live = ctx.live_broker_ids()
    candidates: list[TopicPartition] = []
    for preferred, partitions in sorted(by_preferred.items()):
        led_elsewhere = [p for p in partitions if p in ctx.leadership and ctx.leadership[p].state.leader != preferred]
        if len(led_elsewhere) / len(partitions) > imbalance_percentage / 100:
            candidates += [p for p in led_elsewhere if preferred_replica_can_lead(ctx.assignments[p].replicas, ctx.leadership[p].state.isr, live)]
    return sorted(candidates)


def without_replica(current: zd.LeaderIsrAndControllerEpoch, replica: int, controller_epoch: int) -> zd.LeaderIsrAndControllerEpoch | None:
    """``ReplicaStateMachine``'s OfflineReplica: the replica leaves the ISR (not the last member, which stays
    to tell who had the data) and, if it led, the partition has no leader. None when it was not in the ISR."""
    if replica not in current.isr:
        return None
    leader = NO_LEADER if current.leader == replica else current.leader
    isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != replica)
    return replace(current, leader=leader, leader_epoch=current.leader_epoch + 1, isr=isr, controller_epoch=controller_epoch)


# -- the requests ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ControlRequest:
    """One request for one broker, its body in odradek's protocol dicts."""

    broker_id: int
    api_key: int
    version: int
    body: dict[str, Any]


@dataclass
class RequestBatch:
    """``ControllerBrokerRequestBatch``: state changes gathered during one event, sent together at its end."""

    context: ControllerContext
    leader_and_isr: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)
    """Broker -> partition -> is_new."""
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    stop_replica: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)
    """Broker -> partition -> delete_partition."""

    def add_leader_and_isr(self, brokers: Iterable[int], partition: TopicPartition, *, is_new: bool = False) -> None:
        for broker in brokers:
            if broker >= 0:
                partitions = self.leader_and_isr.setdefault(broker, {})
                partitions[partition] = partitions.get(partition, False) or is_new
        self.add_update_metadata(self.context.live_brokers, [partition])

    def add_update_metadata(self, brokers: Iterable[int], partitions: Iterable[TopicPartition] = ()) -> None:
        self.update_metadata_brokers.update(b for b in brokers if b >= 0)
        self.update_metadata_partitions.update(p for p in partitions if p in self.context.leadership)

    def add_stop_replica(self, brokers: Iterable[int], partition: TopicPartition, *, delete: bool) -> None:
        for broker in brokers:
            partitions = self.stop_replica.setdefault(broker, {})
            partitions[partition] = partitions.get(partition, False) or delete

    def requests(self, inter_broker_listener: str) -> list[ControlRequest]:
        """Every gathered request, for live brokers only: LeaderAndIsr, then UpdateMetadata, then StopReplica
        (Kafka's order), and clear the batch."""
        ctx = self.context
        out: list[ControlRequest] = []
        for broker, partitions in sorted(self.leader_and_isr.items()):
            if broker in ctx.live_brokers:
                out.append(ControlRequest(broker, ApiKey.LeaderAndIsr, LEADER_AND_ISR_VERSION, self._leader_and_isr_body(broker, partitions, inter_broker_listener)))
        live_brokers = [self._live_broker(b) for b in sorted(ctx.live_brokers.values(), key=lambda b: b.broker_id)]
        topic_states = self._update_metadata_topics()
        for broker in sorted(self.update_metadata_brokers & set(ctx.live_brokers)):
            out.append(ControlRequest(broker, ApiKey.UpdateMetadata, UPDATE_METADATA_VERSION, {
                **self._header(broker), "type": 0, "topic_states": topic_states, "live_brokers": live_brokers,
            }))
        for broker, partitions in sorted(self.stop_replica.items()):
            if broker in ctx.live_brokers:
                by_topic: dict[str, list[dict[str, Any]]] = {}
                for (topic, p), delete in sorted(partitions.items()):
                    epoch = LEADER_DURING_DELETE if topic in ctx.topics_being_deleted else ctx.leadership[(topic, p)].state.leader_epoch if (topic, p) in ctx.leadership else -1
                    by_topic.setdefault(topic, []).append({"partition_index": p, "leader_epoch": epoch, "delete_partition": delete})
                out.append(ControlRequest(broker, ApiKey.StopReplica, STOP_REPLICA_VERSION, {
                    **self._header(broker), "topic_states": [{"topic_name": t, "partition_states": ps} for t, ps in by_topic.items()],
                }))
        self.leader_and_isr.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()
        self.stop_replica.clear()
        return out

    def _header(self, broker: int) -> dict[str, Any]:
        ctx = self.context
        return {"controller_id": ctx.controller_id, "is_k_raft_controller": False, "controller_epoch": ctx.epoch, "broker_epoch": ctx.broker_epochs.get(broker, -1)}

    def _leader_and_isr_body(self, broker: int, partitions: dict[TopicPartition, bool], listener: str) -> dict[str, Any]:
        ctx = self.context
        by_topic: dict[str, list[dict[str, Any]]] = {}
        leaders: set[int] = set()
        for (topic, p), is_new in sorted(partitions.items()):
            lead = ctx.leadership[(topic, p)]
            assignment = ctx.assignments[(topic, p)]
            leaders.add(lead.state.leader)
            by_topic.setdefault(topic, []).append({
                "partition_index": p,
                "controller_epoch": lead.state.controller_epoch,
                "leader": lead.state.leader,
                "leader_epoch": lead.state.leader_epoch,
                "isr": list(lead.state.isr),
                "partition_epoch": lead.zk_version,
                "replicas": list(assignment.replicas),
                "adding_replicas": list(assignment.adding),
                "removing_replicas": list(assignment.removing),
                "is_new": is_new,
                "leader_recovery_state": lead.state.leader_recovery_state,
            })
        live_leaders = []
        for leader in sorted(leaders):
            registration = ctx.live_brokers.get(leader)
            endpoint = registration.endpoint(listener) if registration else None
            if endpoint is not None:
                live_leaders.append({"broker_id": leader, "host_name": endpoint.host, "port": endpoint.port})
        return {
            **self._header(broker),
            "type": 0,
            "topic_states": [{"topic_name": t, "topic_id": ctx.topic_ids.get(t, ZERO_UUID), "partition_states": ps} for t, ps in by_topic.items()],
            "live_leaders": live_leaders,
        }

    def _update_metadata_topics(self) -> list[dict[str, Any]]:
        ctx = self.context
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for topic, p in sorted(self.update_metadata_partitions):
            state = ctx.leadership[(topic, p)]
            replicas = ctx.assignments[(topic, p)].replicas
            leader = LEADER_DURING_DELETE if topic in ctx.topics_being_deleted else state.state.leader
            by_topic.setdefault(topic, []).append({
                "partition_index": p,
                "controller_epoch": state.state.controller_epoch,
                "leader": leader,
                "leader_epoch": state.state.leader_epoch,
                "isr": list(state.state.isr),
                "zk_version": state.zk_version,
                "replicas": list(replicas),
                "offline_replicas": [r for r in replicas if not ctx.is_replica_online(r, (topic, p))],
            })
        return [{"topic_name": t, "topic_id": ctx.topic_ids.get(t, ZERO_UUID), "partition_states": ps} for t, ps in by_topic.items()]

    @staticmethod
    def _live_broker(broker: zd.BrokerRegistration) -> dict[str, Any]:
        return {
            "id": broker.broker_id,
            "endpoints": [
                {"port": e.port, "host": e.host or "", "listener": e.listener, "security_protocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0)}
                for e in broker.endpoints
            ],
            "rack": broker.rack,
        }


# -- what a broker reads of them -------------------------------------------------------------------------------


def leader_and_isr_states(body: Any) -> dict[TopicPartition, tuple[Uuid, PartitionState]]:
    """Each partition's state: ungrouped before v2, by topic from v2 (with the topic id from v5)."""
    found: dict[TopicPartition, tuple[Uuid, PartitionState]] = {}
    grouped = [(t.topic_name, t.topic_id or ZERO_UUID, s) for t in body.topic_states or () for s in t.partition_states]
    for name, topic_id, s in [(s.topic_name, ZERO_UUID, s) for s in body.ungrouped_partition_states or ()] + grouped:
        found[(name, s.partition_index)] = (topic_id, PartitionState(
            s.leader, s.leader_epoch, list(s.isr), list(s.replicas), s.partition_epoch,
            list(s.adding_replicas or ()), list(s.removing_replicas or ()),
        ))
    return found


def stop_replica_states(body: Any) -> dict[TopicPartition, tuple[int, bool]]:
    """(leader epoch, delete) of each partition, in every version's layout."""
    found: dict[TopicPartition, tuple[int, bool]] = {}
    for p in body.ungrouped_partitions or ():
        found[(p.topic_name, p.partition_index)] = (NO_EPOCH, body.delete_partitions)
    for t in body.topics or ():
        for index in t.partition_indexes:
            found[(t.name, index)] = (NO_EPOCH, body.delete_partitions)
    for t in body.topic_states or ():
        for s in t.partition_states:
            found[(t.topic_name, s.partition_index)] = (s.leader_epoch, s.delete_partition)
    return found
