"""The ZooKeeper-mode controller (Kafka 3.9's ``KafkaController``): elected through ``/controller``, it keeps
every partition's leader and ISR in ZooKeeper and tells brokers with LeaderAndIsr, UpdateMetadata and
StopReplica.

Every broker runs one; the one whose ``/controller`` znode stands is active. As Kafka's, it works off one
event queue on its own thread: ZooKeeper watches (``/controller``, ``/brokers/ids``, ``/brokers/topics`` and
each topic, ``/admin/delete_topics``) only enqueue events, and the thread processes them one at a time, so
no two decisions interleave and nothing here runs on a broker's event loop. The rules themselves are in
:mod:`odradek.controller.zk_controller_state` (no I/O); this module reads and writes ZooKeeper around them
and hands the resulting requests to the injected :class:`ControllerChannel` (the broker's
inter-broker client: the controller layer itself opens no sockets).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from odradek.controller import alter_partition_judge, leader_election
from odradek.controller import zk_data as zd
from odradek.controller.leader_election import ElectionResult, ElectionType
from odradek.controller.reassignment_manager import ReassignmentManager, Targets
from odradek.controller.zk_client import ControllerMovedError, ZkClient
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.controller.zk_controller_state import (
    ControllerContext,
    ControlRequest,
    Leadership,
    RequestBatch,
    controlled_shutdown_election,
    TopicPartition,
    imbalanced_partitions,
    initial_leadership,
    offline_election,
    preferred_election,
    without_replica,
)

if TYPE_CHECKING:
    from odradek.protocol.message_types.allocate_producer_ids import AllocateProducerIdsResponseDict
    from odradek.protocol.message_types.alter_partition import AlterPartitionResponseDict
    from odradek.protocol.message_types.controlled_shutdown import ControlledShutdownResponseDict

log = logging.getLogger(__name__)


class ControllerChannel(Protocol):
    """Kafka's ``ControllerChannelManager``: requests to each broker in order, answers not awaited here."""

    def send(self, broker: zd.BrokerRegistration, request: ControlRequest) -> None: ...

    def remove_broker(self, broker_id: int) -> None: ...


@dataclass(frozen=True)
class Event:
    """One entry of the controller's queue (Kafka's ``ControllerEvent``)."""

    kind: str
    topic: str = ""
    request: Any = None
    """What a request event carries: (body, version, future of the answer)."""


ELECT = "elect"
BROKERS_CHANGED = "brokers"
TOPICS_CHANGED = "topics"
TOPIC_CHANGED = "topic"
TOPIC_DELETION = "delete-topics"
PREFERRED_ELECTION = "preferred-replica-election"
AUTO_LEADER_REBALANCE = "auto-leader-rebalance"
ISR_CHANGED = "isr-change-notification"
ALTER_PARTITION = "alter-partition"
CONTROLLED_SHUTDOWN = "controlled-shutdown"
ALTER_REASSIGNMENTS = "alter-partition-reassignments"
LIST_REASSIGNMENTS = "list-partition-reassignments"
ZK_REASSIGNMENT = "zk-partition-reassignment"
ELECT_LEADERS = "elect-leaders"
ALLOCATE_PRODUCER_IDS = "allocate-producer-ids"
LOG_DIR_EVENT = "log-dir-event-notification"
LEADER_AND_ISR_RESPONSE = "leader-and-isr-response"
_STOP = "stop"
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
FIRST_BALANCE_CHECK_S = 5.0
"""Kafka's ``onControllerFailover`` schedules the first leader balance check 5 s after the election, the next
ones every ``leader.imbalance.check.interval.seconds``: a new controller puts right what it inherits."""


@dataclass(frozen=True)
class LeaderBalance:
    """``auto.leader.rebalance.enable``, ``leader.imbalance.per.broker.percentage`` and
    ``leader.imbalance.check.interval.seconds`` (Kafka's defaults)."""

    enable: bool = True
    percentage: int = 10
    check_interval_s: float = 300.0


class ZkController:
    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        channel: ControllerChannel,
        *,
        inter_broker_listener: str = "PLAINTEXT",
        unclean_leader_election: bool = False,
        delete_topic_enable: bool = True,
        leader_balance: LeaderBalance = LeaderBalance(),
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.channel = channel
        self.inter_broker_listener = inter_broker_listener
        self.unclean_leader_election = unclean_leader_election
        self.delete_topic_enable = delete_topic_enable
        self.leader_balance = leader_balance
        self._next_balance_check = 0.0
        """When (monotonic) the active controller next checks the leader balance."""
        self.context = ControllerContext(broker_id)
        self.active = False
        self.active_controller_id = -1
        self.on_activity: Callable[[], None] = lambda: None
        """Called (on the controller thread) after each event: lets tests and the broker wait for progress."""
        self._queue: queue.Queue[Event] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"controller-event-thread-{broker_id}", daemon=True)
        self._topic_watches: set[str] = set()
        self.reassignments = ReassignmentManager(self)

    # -- lifecycle -------------------------------------------------------------------------------------------

    def startup(self) -> None:
        self._thread.start()
        DataWatch(self.zk.kazoo, zd.CONTROLLER, self._controller_changed)
        ChildrenWatch(self.zk.kazoo, zd.BROKER_IDS, lambda _: self._enqueue(Event(BROKERS_CHANGED)))
        ChildrenWatch(self.zk.kazoo, zd.BROKER_TOPICS, lambda _: self._enqueue(Event(TOPICS_CHANGED)))
        ChildrenWatch(self.zk.kazoo, zd.DELETE_TOPICS, lambda _: self._enqueue(Event(TOPIC_DELETION)))
        ChildrenWatch(self.zk.kazoo, zd.ISR_CHANGE_NOTIFICATION, lambda children: self._enqueue(Event(ISR_CHANGED)) if children else None)
        ChildrenWatch(self.zk.kazoo, zd.LOG_DIR_EVENT_NOTIFICATION, lambda children: self._enqueue(Event(LOG_DIR_EVENT)) if children else None)
        DataWatch(self.zk.kazoo, zd.PREFERRED_REPLICA_ELECTION, lambda data, stat: self._enqueue(Event(PREFERRED_ELECTION)) if data is not None else None)
        # Kafka acts on the legacy reassignment znode when it is created (not on its own rewrites of it)
        DataWatch(self.zk.kazoo, zd.REASSIGN_PARTITIONS, lambda data, stat: self._enqueue(Event(ZK_REASSIGNMENT)) if stat is not None and stat.version == 0 else None)
        self.zk.on_new_session(lambda: self._enqueue(Event(ELECT)))

    def shutdown(self) -> None:
        self._queue.put(Event(_STOP))
        self._thread.join(30)
        if self.active:
            self.zk.resign_controller(self.broker_id)
        self.active = False

    def _controller_changed(self, data: bytes | None, stat: object) -> None:
        self.active_controller_id = -1 if data is None else zd.ControllerRegistration.decode(data).broker_id
        if data is None or self.active_controller_id != self.broker_id:
            self._enqueue(Event(ELECT))

    def _enqueue(self, event: Event) -> None:
        self._queue.put(event)

    def _run(self) -> None:
        handlers = {
            ELECT: self._elect,
            BROKERS_CHANGED: self._brokers_changed,
            TOPICS_CHANGED: self._topics_changed,
            TOPIC_CHANGED: self._topic_changed,
            TOPIC_DELETION: self._topic_deletion,
            PREFERRED_ELECTION: self._preferred_replica_election,
            AUTO_LEADER_REBALANCE: self._auto_leader_rebalance,
            ISR_CHANGED: self._isr_changed,
            ALTER_PARTITION: self._alter_partition,
            CONTROLLED_SHUTDOWN: self._controlled_shutdown,
            ALTER_REASSIGNMENTS: lambda event: self.reassignments.alter(*event.request),
            LIST_REASSIGNMENTS: lambda event: self.reassignments.list_reassignments(*event.request),
            ZK_REASSIGNMENT: lambda _: self.reassignments.on_zk_reassignment(),
            ELECT_LEADERS: self._elect_leaders,
            ALLOCATE_PRODUCER_IDS: self._allocate_producer_ids,
            LOG_DIR_EVENT: self._log_dir_event,
            LEADER_AND_ISR_RESPONSE: self._leader_and_isr_response,
        }
        while True:
            balancing = self.active and self.leader_balance.enable
            try:
                event = self._queue.get(timeout=max(0.0, self._next_balance_check - time.monotonic()) if balancing else None)
            except queue.Empty:
                event = Event(AUTO_LEADER_REBALANCE)
            if event.kind == _STOP:
                return
            try:
                if event.kind in (ELECT, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS, ALTER_PARTITION, CONTROLLED_SHUTDOWN, ELECT_LEADERS, ALLOCATE_PRODUCER_IDS) or self.active:
                    handlers[event.kind](event)
            except ControllerMovedError:
                log.info("controller %d: the controller moved; resigning", self.broker_id)
                self.active = False
            except Exception:
                log.exception("controller %d: %s failed", self.broker_id, event)
            self.on_activity()

    def _send(self, batch: RequestBatch) -> None:
        for request in batch.requests(self.inter_broker_listener):
            broker = self.context.live_brokers.get(request.broker_id)
            if broker is not None:
                self.channel.send(broker, request)

    # -- election and failover ---------------------------------------------------------------------------------

    def _elect(self, _: Event) -> None:
        current = self.zk.controller_id()
        if current is not None:
            self.active_controller_id = current
            if current != self.broker_id and self.active:
                self.active = False  # another broker leads now
            return
        try:
            epoch, version = self.zk.register_controller_and_increment_epoch(self.broker_id)
        except ControllerMovedError:
            self.active_controller_id = self.zk.controller_id() or -1
            return
        self.active_controller_id = self.broker_id
        try:
            self._on_failover(epoch, version)
        except ControllerMovedError:
            raise
        except Exception:
            # Kafka's triggerControllerMove: give the election up so that it runs again, here or elsewhere.
            log.exception("controller %d: failover at epoch %d failed; resigning", self.broker_id, epoch)
            self.active = False
            self.zk.resign_controller(self.broker_id)

    def _on_failover(self, epoch: int, epoch_zk_version: int) -> None:
        """``onControllerFailover``: read everything, tell every broker, then elect what has no live leader.
        ``active`` turns true once that is done (what other threads read of the controller is then whole)."""
        ctx = self.context = ControllerContext(self.broker_id, epoch, epoch_zk_version)
        self._next_balance_check = time.monotonic() + FIRST_BALANCE_CHECK_S
        # as Kafka: stale log dir events go, the LeaderAndIsr sent to every broker below finds offline replicas
        self.zk.delete_log_dir_event_notifications(self.zk.log_dir_event_notifications(), epoch_zk_version)
        for broker_id, (registration, broker_epoch) in self.zk.broker_registrations().items():
            ctx.live_brokers[broker_id] = registration
            ctx.broker_epochs[broker_id] = broker_epoch
        for topic in self.zk.topics():
            self._load_topic(topic)
        ctx.topics_being_deleted.update(t for t in self.zk.topics_marked_for_deletion() if t in ctx.topic_ids)
        batch = RequestBatch(ctx)
        batch.add_update_metadata(ctx.live_brokers)
        for partition in sorted(ctx.leadership):
            batch.add_leader_and_isr(ctx.live_replicas(partition), partition)
        self._elect_offline_partitions(batch)
        # Kafka's replica state machine starts up with the replicas on brokers that are not live offline.
        self._replicas_offline(batch, {r for a in ctx.assignments.values() for r in a.replicas} - set(ctx.live_brokers))
        self._send(batch)
        log.info("broker %d is the controller, epoch %d", self.broker_id, epoch)
        self.reassignments.resume()
        self._topic_deletion(Event(TOPIC_DELETION))
        self._preferred_replica_election(Event(PREFERRED_ELECTION))
        self._isr_changed(Event(ISR_CHANGED))
        self.active = True

    def _load_topic(self, topic: str) -> list[TopicPartition]:
        """Read a topic's assignment and partition states into the context; answers its partitions new to it."""
        found = self.zk.topic_assignment(topic)
        if found is None:
            return []
        assignment, _ = found
        ctx = self.context
        if assignment.topic_id is not None:
            ctx.topic_ids[topic] = assignment.topic_id
        added = []
        for p, replicas in sorted(assignment.partitions.items()):
            if (topic, p) not in ctx.assignments:
                added.append((topic, p))
            ctx.assignments[(topic, p)] = replicas
            state = self.zk.partition_state(topic, p)
            if state is not None:
                ctx.leadership[(topic, p)] = Leadership(*state)
        if topic not in self._topic_watches:
            self._topic_watches.add(topic)
            DataWatch(self.zk.kazoo, zd.topic_path(topic), self._topic_watcher(topic))
        return added

    def _topic_watcher(self, topic: str) -> Callable[[bytes | None, object], bool | None]:
        """A topic's data watch (two parameters: kazoo passes a third, the event, to a callback that takes one)."""

        def watch(data: bytes | None, stat: object) -> bool | None:
            if stat is None:  # gone (a znode holding null has a stat)
                self._topic_watches.discard(topic)
                return False  # the topic is gone: stop watching it
            self._enqueue(Event(TOPIC_CHANGED, topic))
            return None

        return watch

    # -- partitions --------------------------------------------------------------------------------------------

    def _elect_offline_partitions(self, batch: RequestBatch) -> None:
        """``triggerOnlinePartitionStateChange``: new partitions get their first leader, offline ones the
        first live ISR member; each goes to its live replicas in a LeaderAndIsr."""
        ctx = self.context
        for topic, p in ctx.offline_partitions():
            partition = (topic, p)
            live = set(ctx.electable_replicas(partition))
            current = ctx.leadership.get(partition)
            if current is None:
                state = initial_leadership(ctx.electable_replicas(partition), ctx.epoch)
                if state is None or not self.zk.create_partition_state_fenced(topic, p, state, ctx.epoch_zk_version):
                    continue
                ctx.leadership[partition] = Leadership(state, 0)
                batch.add_leader_and_isr(state.isr, partition, is_new=True)
                continue
            elected = offline_election(ctx.assignments[partition].replicas, current.state, live, self._unclean_allowed(partition, current.state, live), ctx.epoch)
            if elected is not None and self._write(partition, elected):
                batch.add_leader_and_isr(ctx.live_replicas(partition), partition)

    def _unclean_allowed(self, partition: TopicPartition, state: zd.LeaderIsrAndControllerEpoch, live: set[int]) -> bool:
        """``collectUncleanLeaderElectionState``: with no live ISR member, the topic's
        ``unclean.leader.election.enable`` (read from ZooKeeper then), else the broker's, decides."""
        if any(r in live for r in state.isr):
            return False
        override = self.zk.entity_config(zd.ConfigType.TOPIC, partition[0]).get(UNCLEAN_LEADER_ELECTION_ENABLE)
        return self.unclean_leader_election if override is None else override.strip().lower() == "true"

    def _write(self, partition: TopicPartition, state: zd.LeaderIsrAndControllerEpoch) -> bool:
        """Write a partition's new state at the version last read; on a conflict, re-read it and skip."""
        ctx = self.context
        version = self.zk.update_partition_state_fenced(*partition, state, ctx.leadership[partition].zk_version, ctx.epoch_zk_version)
        if version is None:
            fresh = self.zk.partition_state(*partition)
            if fresh is not None:
                ctx.leadership[partition] = Leadership(*fresh)
            return False
        ctx.leadership[partition] = Leadership(state, version)
        return True

    # -- brokers -------------------------------------------------------------------------------------------------

    def _brokers_changed(self, _: Event) -> None:
        """``BrokerChange``: brokers gone (or re-registered with a new epoch) fail over; new ones start."""
        ctx = self.context
        now = self.zk.broker_registrations()
        bounced = {b for b, (_, epoch) in now.items() if b in ctx.broker_epochs and ctx.broker_epochs[b] != epoch}
        dead = (set(ctx.live_brokers) - set(now)) | bounced
        new = (set(now) - set(ctx.live_brokers)) | bounced
        if dead:
            self._on_broker_failure(dead)
        if new:
            for b in new:
                ctx.live_brokers[b], ctx.broker_epochs[b] = now[b]
                ctx.replicas_on_offline_dirs.pop(b, None)
            self._on_broker_startup(new)

    def _on_broker_failure(self, dead: set[int]) -> None:
        ctx = self.context
        for b in dead:
            ctx.live_brokers.pop(b, None)
            ctx.shutting_down.discard(b)
            ctx.broker_epochs.pop(b, None)
            ctx.replicas_on_offline_dirs.pop(b, None)
            self.channel.remove_broker(b)
        batch = RequestBatch(ctx)
        self._elect_offline_partitions(batch)
        self._replicas_offline(batch, dead)
        batch.add_update_metadata(ctx.live_brokers)
        self._send(batch)

    def _replicas_offline(self, batch: RequestBatch, dead: set[int]) -> None:
        """Kafka's OfflineReplica transition for every replica of the dead brokers."""
        for broker in sorted(dead):
            for partition in self.context.partitions_on(broker):
                self._replica_offline(batch, broker, partition)

    def _replica_offline(self, batch: RequestBatch, broker: int, partition: TopicPartition) -> None:
        """Kafka's OfflineReplica transition: the replica leaves the ISR (a partition it led gets no leader;
        the last ISR member stays, to say who had the data), the other live replicas hear of it."""
        ctx = self.context
        lead = ctx.leadership.get(partition)
        if lead is None or partition[0] in ctx.topics_being_deleted:
            return
        changed = without_replica(lead.state, broker, ctx.epoch)
        if changed is not None and self._write(partition, changed):
            batch.add_leader_and_isr(ctx.live_replicas(partition), partition)

    # -- log directory failures ------------------------------------------------------------------------------------

    def _log_dir_event(self, _: Event) -> None:
        """``LogDirEventNotification``: each named live broker is asked, with a LeaderAndIsr for every replica
        it holds, which of them it still serves (Kafka's ``onBrokerLogDirFailure``: the OnlineReplica
        transition); the notifications then go."""
        names = self.zk.log_dir_event_notifications()
        if not names:
            return
        ctx = self.context
        try:
            batch = RequestBatch(ctx)
            for broker in sorted(self.zk.brokers_from_log_dir_events(names) & set(ctx.live_brokers)):
                log.info("controller %d: broker %d reported a failed log directory", self.broker_id, broker)
                for partition in ctx.partitions_on(broker):
                    if partition in ctx.leadership and partition[0] not in ctx.topics_being_deleted:
                        batch.add_leader_and_isr([broker], partition)
            self._send(batch)
        finally:
            self.zk.delete_log_dir_event_notifications(names, ctx.epoch_zk_version)

    def on_response(self, request: ControlRequest, response: Any) -> None:
        """What a broker answered (called by the channel): a LeaderAndIsr answer goes to the event queue."""
        if request.api_key == ApiKey.LeaderAndIsr:
            self._enqueue(Event(LEADER_AND_ISR_RESPONSE, request=(request.broker_id, response)))

    def _leader_and_isr_response(self, event: Event) -> None:
        """Kafka's ``handleLeaderAndIsrResponse``: partitions answered KAFKA_STORAGE_ERROR are in a failed log
        directory of that broker, those answered NONE are not; replicas newly found offline go offline
        (``onReplicasBecomeOffline``: other leaders, out of the ISRs, listed as offline replicas)."""
        broker, response = event.request
        ctx = self.context
        if broker not in ctx.live_brokers or response.error_code != ErrorCode.NONE:
            return
        names = {topic_id: name for name, topic_id in ctx.topic_ids.items()}
        offline: set[TopicPartition] = set()
        online: set[TopicPartition] = set()
        for topic in response.topics or ():
            for p in topic.partition_errors:
                partition = (names.get(topic.topic_id, ""), p.partition_index)
                if p.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                    offline.add(partition)
                elif p.error_code == ErrorCode.NONE:
                    online.add(partition)
        before = ctx.replicas_on_offline_dirs.get(broker, set())
        ctx.replicas_on_offline_dirs[broker] = now = (before | offline) - online
        newly = sorted(p for p in now - before if p in ctx.assignments)
        if not newly:
            return
        log.info("controller %d: replicas of broker %d offline: %s", self.broker_id, broker, newly)
        batch = RequestBatch(ctx)
        self._elect_offline_partitions(batch)
        for partition in newly:
            batch.add_stop_replica([broker], partition, delete=False)
            self._replica_offline(batch, broker, partition)
        batch.add_update_metadata(ctx.live_brokers)
        self._send(batch)

    def _on_broker_startup(self, new: set[int]) -> None:
        ctx = self.context
        batch = RequestBatch(ctx)
        batch.add_update_metadata(set(ctx.live_brokers) - new)
        self._send(batch)
        batch.add_update_metadata(new, ctx.leadership)
        self._send(batch)
        for broker in sorted(new):
            for partition in ctx.partitions_on(broker):
                if partition in ctx.leadership:
                    batch.add_leader_and_isr([broker], partition)
        self._elect_offline_partitions(batch)
        self._send(batch)

    # -- topics ----------------------------------------------------------------------------------------------------

    def _topics_changed(self, _: Event) -> None:
        ctx = self.context
        topics = set(self.zk.topics())
        for gone in set(ctx.topic_ids) - topics:
            ctx.remove_topic(gone)
        added: list[TopicPartition] = []
        for topic in sorted(topics - {t for t, _ in ctx.assignments}):
            added += self._load_topic(topic)
        self._on_new_partitions(added)

    def _topic_changed(self, event: Event) -> None:
        """A topic's assignment changed: partitions added by CreatePartitions come online."""
        if event.topic in self.context.topics_being_deleted:
            return
        self._on_new_partitions(self._load_topic(event.topic))

    def _on_new_partitions(self, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        batch = RequestBatch(self.context)
        self._elect_offline_partitions(batch)
        self._send(batch)

    def _topic_deletion(self, _: Event) -> None:
        """``TopicDeletion``: replicas stop and delete their logs, every broker forgets the topic, the znodes
        go. (Kafka waits for each replica's StopReplica answer and keeps a deletion with an offline replica
        pending; here the znodes go once the requests are sent.)"""
        ctx = self.context
        marked = self.zk.topics_marked_for_deletion()
        for topic in sorted(marked):
            if topic not in ctx.topic_ids and not any(t == topic for t, _ in ctx.assignments):
                self.zk.delete_topic_znodes(topic)  # nothing to delete but the mark
                continue
            if not self.delete_topic_enable:
                continue
            ctx.topics_being_deleted.add(topic)
            batch = RequestBatch(ctx)
            batch.add_update_metadata(ctx.live_brokers, ctx.partitions_of(topic))
            for partition in ctx.partitions_of(topic):
                batch.add_stop_replica(ctx.live_replicas(partition), partition, delete=True)
            self._send(batch)
            self.zk.delete_topic_znodes(topic)
            ctx.remove_topic(topic)

    # -- preferred leaders ------------------------------------------------------------------------------------

    def _preferred_replica_election(self, _: Event) -> None:
        """``/admin/preferred_replica_election``: hand the named partitions back to their preferred replica
        where it can lead, then delete the request."""
        partitions = self.zk.preferred_replica_election()
        if partitions is None:
            return
        known = [p for p in partitions if p in self.context.assignments and p[0] not in self.context.topics_being_deleted]
        self._elect_preferred(known)
        self.zk.delete_preferred_replica_election(self.context.epoch_zk_version)

    def _auto_leader_rebalance(self, _: Event) -> None:
        """``checkAndTriggerAutoLeaderRebalance``, every ``leader.imbalance.check.interval.seconds``."""
        self._next_balance_check = time.monotonic() + self.leader_balance.check_interval_s
        self._elect_preferred(imbalanced_partitions(self.context, self.leader_balance.percentage))

    def _elect_preferred(self, partitions: list[TopicPartition]) -> None:
        self._elect_partitions(partitions, ElectionType.PREFERRED)

    def _elect_partitions(self, partitions: list[TopicPartition], election_type: ElectionType) -> dict[TopicPartition, ElectionResult]:
        """Kafka's ``onReplicaElection``: each partition's leader chosen from the state ZooKeeper holds now
        (PREFERRED: the first assigned replica, live and in sync, the ISR unchanged; UNCLEAN: the first live
        ISR member, else the first live replica), written at the version read (re-read and chosen again on
        a conflict) and sent to its live replicas. Answers each partition's new leader or why none."""
        ctx = self.context
        live = ctx.live_broker_ids()
        batch = RequestBatch(ctx)
        results: dict[TopicPartition, ElectionResult] = {}
        for partition in partitions:
            while partition not in results:
                fresh = self.zk.partition_state(*partition)
                if fresh is None:
                    results[partition] = leader_election.failed(partition, election_type)
                    break
                ctx.leadership[partition] = Leadership(*fresh)
                replicas = ctx.assignments[partition].replicas
                if election_type == ElectionType.PREFERRED:
                    elected = preferred_election(replicas, fresh[0], live, ctx.epoch)
                else:
                    elected = offline_election(replicas, fresh[0], live, True, ctx.epoch)
                if elected is None:
                    results[partition] = leader_election.failed(partition, election_type)
                elif self._write(partition, elected):
                    batch.add_leader_and_isr(ctx.live_replicas(partition), partition)
                    results[partition] = elected.leader
        self._send(batch)
        return results

    def elect_leaders(self, partitions: set[TopicPartition], election_type: ElectionType) -> "Future[dict[TopicPartition, ElectionResult]]":
        """An ElectLeaders request's partitions, elected on the event thread (Kafka's ``ReplicaLeaderElection``
        triggered by the admin client): each partition's new leader, or its error."""
        answer: Future[dict[TopicPartition, ElectionResult]] = Future()
        self._enqueue(Event(ELECT_LEADERS, request=(partitions, election_type, answer)))
        return answer

    def _elect_leaders(self, event: Event) -> None:
        """``processReplicaLeaderElection``: NOT_CONTROLLER unless active; unknown partitions, those of topics
        being deleted and those led as the election would have them answered; the others elected."""
        partitions, election_type, answer = event.request
        ctx = self.context
        if not self.active:
            answer.set_result({p: leader_election.NOT_CONTROLLER for p in partitions})
            return
        try:
            leaders = {p: lead.state.leader for p, lead in ctx.leadership.items()}
            assignments = {p: a.replicas for p, a in ctx.assignments.items()}
            electable, answered = leader_election.triage(partitions, election_type, assignments, leaders, set(ctx.live_brokers), ctx.topics_being_deleted)
            results = {**answered, **self._elect_partitions(electable, election_type)}
        except ControllerMovedError:  # moved half-way: NOT_CONTROLLER, as Kafka answers the elections its move preempts
            # (one it was processing Kafka leaves unanswered until the client's timeout)
            answer.set_result({p: leader_election.NOT_CONTROLLER for p in partitions})
            raise
        except Exception:  # Kafka's partition state machine answers each partition with the error
            answer.set_result({p: leader_election.ElectionError(ErrorCode.UNKNOWN_SERVER_ERROR) for p in partitions})
            raise
        answer.set_result(results)

    # -- partition reassignment (the steps: controller/reassignment_manager.py) -----------------------------------

    def alter_partition_reassignments(self, targets: Targets) -> "Future[Any]":
        """An AlterPartitionReassignments request, answered from the event thread: each partition's ApiError,
        or one ApiError (NOT_CONTROLLER) for the whole request."""
        answer: Future[Any] = Future()
        self._enqueue(Event(ALTER_REASSIGNMENTS, request=(targets, answer)))
        return answer

    def list_partition_reassignments(self, partitions: list[TopicPartition] | None) -> "Future[Any]":
        """A ListPartitionReassignments request (None: every partition), answered from the event thread."""
        answer: Future[Any] = Future()
        self._enqueue(Event(LIST_REASSIGNMENTS, request=(partitions, answer)))
        return answer

    # -- ISR changes ------------------------------------------------------------------------------------------

    def alter_partition(self, body: Any, version: int) -> "Future[AlterPartitionResponseDict]":
        """A leader's AlterPartition request, answered from the event thread (Kafka's AlterPartitionReceived)."""
        answer: Future[AlterPartitionResponseDict] = Future()
        self._enqueue(Event(ALTER_PARTITION, request=(body, version, answer)))
        return answer

    def _alter_partition(self, event: Event) -> None:
        body, version, answer = event.request
        if not self.active:
            answer.set_result({"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []})
            return
        try:
            result = alter_partition_judge.process(self.context, body, version, self._write, self._update_metadata)
            answer.set_result(result)
        except BaseException:
            answer.set_result({"throttle_time_ms": 0, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "topics": []})
            raise
        # after the answer, as Kafka: an ISR that now holds every target replica completes a reassignment
        self.reassignments.on_isr_change((t["topic_name"], p["partition_index"]) for t in result["topics"] for p in t["partitions"] if p["error_code"] == ErrorCode.NONE)

    # -- producer ids -------------------------------------------------------------------------------------------

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> "Future[AllocateProducerIdsResponseDict]":
        """A broker's AllocateProducerIds, answered from the event thread. Kafka 3.9's own brokers ask the
        controller for their blocks (odradek's take them from ZooKeeper themselves, as Kafka before 3.0 did:
        both go through the same conditional write of ``/latest_producer_id_block``)."""
        answer: Future[AllocateProducerIdsResponseDict] = Future()
        self._enqueue(Event(ALLOCATE_PRODUCER_IDS, request=(broker_id, broker_epoch, answer)))
        return answer

    def _allocate_producer_ids(self, event: Event) -> None:
        """Kafka's ``processAllocateProducerIds``: only for a live broker at its current epoch."""
        broker_id, broker_epoch, answer = event.request
        refused = {"throttle_time_ms": 0, "producer_id_start": 0, "producer_id_len": 0}
        if not self.active:
            answer.set_result({**refused, "error_code": ErrorCode.NOT_CONTROLLER})
            return
        epoch = self.context.broker_epochs.get(broker_id) if broker_id in self.context.live_brokers else None
        if epoch is None:
            answer.set_result({**refused, "error_code": ErrorCode.BROKER_ID_NOT_REGISTERED})
            return
        if epoch != broker_epoch:
            answer.set_result({**refused, "error_code": ErrorCode.STALE_BROKER_EPOCH})
            return
        try:
            block = self.zk.new_producer_id_block(broker_id)
        except BaseException:
            answer.set_result({**refused, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR})
            raise
        answer.set_result({"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id_start": block.first, "producer_id_len": block.size})

    # -- controlled shutdown ------------------------------------------------------------------------------------

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> "Future[ControlledShutdownResponseDict]":
        """A stopping broker's ControlledShutdown, answered from the event thread."""
        answer: Future[ControlledShutdownResponseDict] = Future()
        self._enqueue(Event(CONTROLLED_SHUTDOWN, request=(broker_id, broker_epoch, answer)))
        return answer

    def _controlled_shutdown(self, event: Event) -> None:
        """Kafka's ``doControlledShutdown``: the replicated partitions the broker leads get a new leader among
        the other live ISR members, it leaves the ISR of those it follows (and stops fetching them); the
        answer lists the replicated partitions it still leads."""
        broker_id, broker_epoch, answer = event.request
        ctx = self.context
        if not self.active:
            answer.set_result({"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []})
            return
        if broker_id not in ctx.live_brokers:
            answer.set_result({"error_code": ErrorCode.BROKER_NOT_AVAILABLE, "remaining_partitions": []})
            return
        if broker_epoch != -1 and ctx.broker_epochs.get(broker_id, -1) > broker_epoch:
            answer.set_result({"error_code": ErrorCode.STALE_BROKER_EPOCH, "remaining_partitions": []})
            return
        try:
            ctx.shutting_down.add(broker_id)
            live = set(ctx.live_brokers)
            batch = RequestBatch(ctx)
            for partition in ctx.partitions_on(broker_id):
                lead = ctx.leadership.get(partition)
                replicas = ctx.assignments[partition].replicas
                if lead is None or len(replicas) <= 1 or partition[0] in ctx.topics_being_deleted:
                    continue
                if lead.state.leader == broker_id:  # every live replica hears, the stopping one becomes a follower
                    changed = controlled_shutdown_election(replicas, lead.state, live, ctx.shutting_down, ctx.epoch)
                    recipients = ctx.live_replicas(partition)
                else:  # Kafka's OfflineReplica: it stops fetching, the others hear of the smaller ISR
                    batch.add_stop_replica([broker_id], partition, delete=False)
                    changed = without_replica(lead.state, broker_id, ctx.epoch)
                    recipients = [r for r in ctx.live_replicas(partition) if r != broker_id]
                if changed is not None and self._write(partition, changed):
                    batch.add_leader_and_isr(recipients, partition)
            self._send(batch)
            remaining = [tp for tp in ctx.partitions_led_by({broker_id}) if len(ctx.assignments[tp].replicas) > 1]
            answer.set_result({"error_code": ErrorCode.NONE, "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining]})
        except BaseException:
            answer.set_result({"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "remaining_partitions": []})
            raise

    def _update_metadata(self, partitions: list[TopicPartition]) -> None:
        batch = RequestBatch(self.context)
        batch.add_update_metadata(self.context.live_brokers, partitions)
        self._send(batch)

    def _isr_changed(self, _: Event) -> None:
        """``IsrChangeNotification`` (brokers before AlterPartition): re-read the named partitions' states,
        tell every live broker, and delete the notifications."""
        names = self.zk.isr_change_notifications()
        if not names:
            return
        ctx = self.context
        try:
            changed = []
            for partition in self.zk.isr_change_partitions(names):
                fresh = self.zk.partition_state(*partition) if partition in ctx.assignments else None
                if fresh is not None:
                    ctx.leadership[partition] = Leadership(*fresh)
                    changed.append(partition)
            batch = RequestBatch(ctx)
            batch.add_update_metadata(ctx.live_brokers, changed)
            self._send(batch)
        finally:
            self.zk.delete_isr_change_notifications(names, ctx.epoch_zk_version)
