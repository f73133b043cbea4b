"""The partitions this broker hosts: the one door to them and their logs (Kafka's ReplicaManager).

Appends (:meth:`ReplicaManager.append_records`), fetches (:meth:`~ReplicaManager.fetch_messages`), offset
lookups, record deletion, producer and log-directory descriptions, and the leader/follower changes the
controller makes all go through here; handlers translate requests into these calls and never touch a log.

Handlers run on the event loop without awaiting for their synchronous part, so appends happen in the order
requests arrived. What must wait — a fetch for ``min_bytes``, an acks=all produce for the high watermark —
waits in the :class:`~odradek.broker.replication.purgatory.Purgatory`, woken when an append or a high-watermark move
changes its partition. A client batch too large to validate on the event loop is validated on a worker
thread and appended in the background; later appends to its partition wait their turn behind it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal

import anyio

from odradek.broker.coordinator.coordinators import AskCoordinator
from odradek.broker.replication.partition import LogReadInfo, Partition
from odradek.broker.replication.purgatory import DelayedFetch, Purgatory
from odradek.broker.replication.replication_quota import UNBOUNDED, ReplicationQuota
from odradek.controller.metadata_image import INTERNAL_TOPICS, MetadataImage, PartitionState, TopicInfo
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.kafka_uuid import Uuid
from odradek.protocol.record_batch import UnsupportedCompressionTypeError
from odradek.protocol.values import plain_init
from odradek.storage.file_records import FileSlice
from odradek.storage.indexes import CorruptTransactionIndexError
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager
from odradek.storage.log_validator import CheckedBatches, Prechecked, RecordValidationError, ValidationResult, WalkElsewhere, check_batches, validate_records
from odradek.storage.producer_state import AppendOrigin, ProducerStateEntry
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from odradek.broker.coordinator.transaction.transaction_verification import TransactionVerifier
    from odradek.broker.network.kafka_client import Node
    from odradek.broker.replication.log_dir_failure import LogDirFailureChannel
    from odradek.broker.replication.replica_alter_log_dirs import ReplicaAlterLogDirs
    from odradek.broker.replication.fetch_session import FetchPartition
    from odradek.broker.replication.alter_partition_manager import AlterPartitionManager
    from odradek.broker.replication.replica_fetcher import FetcherConfig, ReplicaFetcherManager
    from odradek.broker.replication.replica_selector import ReplicaView
    from odradek.protocol.message_types.produce import BatchIndexAndErrorMessageDict
    from odradek.storage.transaction_index import AbortedTxn

log = logging.getLogger("odradek.replica_manager")

VALID_ACKS = (-1, 0, 1)
LONG_MAX = 2**63 - 1


@plain_init
class FetchRecords:
    """A records placeholder for a response: the file slices to send with sendfile, and their total length."""

    __slots__ = ("slices", "length")

    def __init__(self, slices: tuple[FileSlice, ...] = (), length: int = 0) -> None:
        self.slices = slices
        self.length = length


# -- what the replica manager answers -----------------------------------------------------------------------


@plain_init
class PartitionResponse:
    """One partition's outcome of an append, as the produce response carries it (Kafka's
    ProduceResponse.PartitionResponse). The coordinators see less: ``coordinator.runtime.AppendResult``,
    committed or not."""

    __slots__ = ("error", "base_offset", "log_append_time_ms", "log_start_offset", "error_message", "record_errors")

    def __init__(self, error: ErrorCode = ErrorCode.NONE, base_offset: int = -1, log_append_time_ms: int = -1, log_start_offset: int = -1, error_message: str | None = None, record_errors: list[BatchIndexAndErrorMessageDict] | None = None) -> None:
        self.error = error
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.error_message = error_message
        self.record_errors = record_errors
        """Set only for records the validator refused one by one: Kafka fills the message for those alone."""


@plain_init
class PartitionAppend:
    """One partition's records in an append."""

    __slots__ = ("topic", "index", "records", "prechecked")

    def __init__(self, topic: str, index: int, records: Any, prechecked: Prechecked | None = None) -> None:
        self.topic = topic
        self.index = index
        self.records = records
        self.prechecked = prechecked
        """What a front process found of the records' header, CRC and walk (docs/multicore.md, step 2)."""


@plain_init
class FetchParams:
    """A fetch's limits (Kafka's FetchParams), decided by the handler from the request and its version."""

    __slots__ = ("replica_id", "max_wait_ms", "min_bytes", "max_bytes", "isolation", "hard_limit", "magic", "fetch_only_leader", "client_rack", "listener")

    def __init__(
        self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int, isolation: int, hard_limit: bool, magic: int | None,
        fetch_only_leader: bool = True, client_rack: str | None = None, listener: str | None = None,
    ) -> None:
        self.replica_id = replica_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.isolation = isolation
        self.hard_limit = hard_limit
        """Fetch v0-v2: no partition returns more than its limit, not even a first batch (KIP-74 came with v3)."""
        self.magic = magic
        """The message format old fetch versions read (down-conversion), or None: batches as stored."""
        self.fetch_only_leader = fetch_only_leader
        """Only a leader serves the fetch: a follower's, or a consumer's before v11; from v11 any replica serves a
        consumer (KIP-392, Kafka's ``FetchParams.fetchOnlyLeader``)."""
        self.client_rack = client_rack
        """A v11+ consumer's rack (Kafka's ``ClientMetadata``, "" when it names none), which the leader's replica
        selector goes by; None for other fetches."""
        self.listener = listener
        """The listener the fetch came through: the preferred replica must be reachable on it."""


class PartitionRead:
    """One partition's part of a fetch (Kafka's FetchPartitionData)."""

    __slots__ = ("request", "error", "high_watermark", "last_stable_offset", "log_start_offset", "records", "length", "aborted_transactions", "diverging_epoch", "preferred_read_replica")

    def __init__(self, request: FetchPartition, error: int = ErrorCode.NONE, high_watermark: int = -1, last_stable_offset: int = -1, log_start_offset: int = -1, records: Any = None, length: int = 0, aborted_transactions: list[AbortedTxn] | None = None, diverging_epoch: tuple[int, int] | None = None) -> None:
        self.request = request
        self.error = error
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.records = records
        self.length = length
        self.aborted_transactions = aborted_transactions if aborted_transactions is not None else []
        self.diverging_epoch = diverging_epoch
        """(epoch, end offset) where the fetcher's log parts from this one (KIP-595): it truncates there first."""
        self.preferred_read_replica = -1
        """The replica the leader's selector sends the consumer to (KIP-392), read instead of the records; -1: none."""


class PartitionSize:
    __slots__ = ("topic", "index", "size", "offset_lag", "is_future")

    def __init__(self, topic: str, index: int, size: int, offset_lag: int, is_future: bool = False) -> None:
        self.topic = topic
        self.index = index
        self.size = size
        self.offset_lag = offset_lag
        self.is_future = is_future
        """A copy being moved here from another log directory (AlterReplicaLogDirs)."""


class LogDirDescription:
    """One log directory as DescribeLogDirs reports it (Kafka's ``ReplicaManager.describeLogDirs``)."""

    __slots__ = ("path", "error", "partitions", "total_bytes", "usable_bytes")

    def __init__(self, path: Path, error: ErrorCode = ErrorCode.NONE, partitions: list[PartitionSize] | None = None, total_bytes: int = -1, usable_bytes: int = -1) -> None:
        self.path = path
        self.error = error
        self.partitions = partitions if partitions is not None else []
        self.total_bytes = total_bytes
        self.usable_bytes = usable_bytes


class ReplicaManager:
    def __init__(
        self, broker_id: int, log_manager: LogManager, broker_defaults: dict[str, str], *, fetcher_config: "Callable[[], FetcherConfig] | None" = None,
        num_replica_fetchers: int = 1, replica_lag_time_max_ms: int = 30000, quota_window: tuple[int, int] = (11, 1),
    ) -> None:
        """``quota_window``: the replication quotas' sample count and window seconds (``replication.quota.window.*``)."""
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.broker_defaults = broker_defaults
        self.partitions: dict[TopicPartition, Partition] = {}
        self.by_topic_id: dict[Uuid, str] = {}
        self.purgatory = Purgatory()
        self.append_turns: dict[TopicPartition, anyio.Event] = {}
        """The partitions an append finishing in the background is yet to append to, each with the event it
        sets when done: a later append to such a partition waits for it, so appends keep the order requests
        arrived in (a pipelining idempotent producer's sequence numbers depend on it)."""
        self.background: TaskGroup | None = None
        """The network's task group, for appends that finish after their request's synchronous part; set
        once the broker serves (read it as :attr:`tasks`)."""
        self.make_transaction_verifier: Callable[[], TransactionVerifier] | None = None
        """Makes the check of a transactional produce with the transaction coordinator
        (``transaction.partition.verification.enable``), at the first one: see :attr:`transaction_verifier`."""
        self._transaction_verifier: TransactionVerifier | None = None
        self.leader_node: Callable[[int], Node | None] = lambda broker_id: None
        """A live broker's inter-broker endpoint (the metadata's), or None: where a follower fetches from."""
        self.leader_quota = ReplicationQuota(broker_id, *quota_window)
        """What this broker sends throttled followers out of the ISR (KIP-73, broker/replication/replication_quota.py)."""
        self.follower_quota = ReplicationQuota(broker_id, *quota_window)
        """What this broker fetches for its throttled replicas while they are not in sync."""
        self.replica_selector: Callable[[str, ReplicaView, list[ReplicaView]], ReplicaView] | None = None
        """``replica.selector.class``'s choice of a replica for a v11+ consumer (KIP-392); None: the one it asked."""
        self.metadata: Callable[[], MetadataImage | None] = lambda: None
        """The cluster's metadata (every topic, whichever brokers host it), or None before there is any: what
        answers for a partition or topic id this broker does not host."""
        self.fetcher_config = fetcher_config
        """Makes the fetchers' settings (Kafka's defaults without it) when this broker first follows a leader:
        a single node never does, nor imports the fetchers and the inter-broker client."""
        self.num_replica_fetchers = num_replica_fetchers
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._fetchers: ReplicaFetcherManager | None = None
        self.alter_partition_manager: AlterPartitionManager | None = None
        """Where leaders send ISR changes (cluster mode); None under the embedded single-node controller."""
        self.log_dir_failure: LogDirFailureChannel | None = None
        """Where I/O errors on logs go in cluster mode (a failed log directory goes offline, the last one
        halts the broker); None on a single node, which answers KAFKA_STORAGE_ERROR and goes on."""
        self.offline_partitions: set[TopicPartition] = set()
        """Partitions whose log directory failed (Kafka's ``HostedPartition.Offline``): KAFKA_STORAGE_ERROR."""
        self.alter_log_dirs: ReplicaAlterLogDirs | None = None
        """Replicas being moved between this broker's log directories: made by the first move (:meth:`_move`),
        so a broker that moves none does not import its module."""
        self.on_log_dir_offline: Callable[[], None] = lambda: None
        """Tells the controller a log directory went offline (``/log_dir_event_notification``)."""

    @property
    def transaction_verifier(self) -> "TransactionVerifier | None":
        """Checks a transactional produce with the transaction coordinator; None when the broker does not."""
        if self._transaction_verifier is None and self.make_transaction_verifier is not None:
            self._transaction_verifier = self.make_transaction_verifier()
        return self._transaction_verifier

    # -- metadata from the controller ---------------------------------------------------------------------

    def log_config(self, topic: TopicInfo) -> LogConfig:
        return LogConfig.from_props(topic.configs, self.broker_defaults)

    def become_leader_or_follower(self, topic: TopicInfo, partitions: list[int]) -> None:
        """LeaderAndIsr: a new leader stops fetching and starts its epoch; a follower of a new leader epoch
        fetches afresh from its leader (Kafka's ``makeLeaders``/``makeFollowers``). A follower whose leader
        is not a live broker keeps its log and its old state, as Kafka's."""
        config = self.log_config(topic)
        self.by_topic_id[topic.topic_id] = topic.name
        followers: dict[TopicPartition, Node] = {}
        for index in partitions:
            state = PartitionState(**vars(topic.partitions[index]))
            key = (topic.name, index)
            partition = self.partitions.get(key)
            is_new = partition is None
            if partition is None:
                log_ = self.log_manager.get_or_create_log(topic.name, index, config, topic.topic_id)
                partition = Partition(
                    topic.name, index, topic.topic_id, log_, state, self.broker_id, self._on_offsets_moved,
                    replica_lag_time_max_ms=self.replica_lag_time_max_ms, is_alive=lambda broker_id: self.leader_node(broker_id) is not None,
                    alter_partition=self.alter_partition_manager.submit if self.alter_partition_manager is not None else None,
                    on_storage_error=self.storage_error,
                )
                self.partitions[key] = partition
                if self.log_manager.future_log(*key) is not None:  # a move a stop interrupted goes on
                    self._move(key)
            if state.leader == self.broker_id:
                self._stop_fetching({key})
                partition.become_leader(state, is_new, int(time.time() * 1000))
            elif (leader := self.leader_node(state.leader)) is None:
                log.error("Cannot follow %s-%d: its leader %d is not a live broker", topic.name, index, state.leader)
            elif partition.become_follower(state, is_new):
                followers[key] = leader
        if followers:
            self._make_followers(followers)

    def storage_error(self, tp: TopicPartition, message: str, exc: OSError) -> None:
        """An I/O error on the log of ``tp`` (Kafka's ``maybeAddOfflineLogDir``)."""
        partition = self.partitions.get(tp)
        if self.log_dir_failure is not None and partition is not None:
            self.log_dir_failure.maybe_add_offline_log_dir(partition.log.dir.parent, message, exc)

    @property
    def tasks(self) -> TaskGroup:
        """The network's task group, for work no request waits for. Work is started there only once the
        broker serves: before that it is a programming error, not something to skip."""
        if self.background is None:
            raise RuntimeError("background work started before the broker serves")
        return self.background

    def take_log_dir_offline(self, log_dir: Path) -> None:
        """Kafka's ``handleLogDirFailure``, after the failing request's own stack unwound: the directory's
        partitions stop fetching and go offline, its logs close, and the controller hears of it."""
        self.tasks.start_soon(self._handle_log_dir_failure, log_dir)

    async def _handle_log_dir_failure(self, log_dir: Path) -> None:
        offline = {key for key, partition in self.partitions.items() if partition.log.dir.parent.resolve() == log_dir}
        self._stop_fetching(offline)
        for key in sorted(offline):
            del self.partitions[key]
            self.offline_partitions.add(key)
            self.purgatory.check_and_complete(key)
        await anyio.to_thread.run_sync(self.log_manager.handle_log_dir_failure, log_dir)  # closing logs on a failing disk may hang
        log.error("Broker %d stopped fetcher for partitions %s and stopped moving logs for partitions because they are in the failed log directory %s.",
                  self.broker_id, ",".join(f"{t}-{p}" for t, p in sorted(offline)), log_dir)
        self.on_log_dir_offline()

    def start_isr_changes(self, manager: AlterPartitionManager) -> None:
        """Cluster mode: leaders send their ISR changes through ``manager``, and every
        ``replica.lag.time.max.ms`` / 2 each leader checks for followers fallen out of sync (Kafka's
        isr-expiration task)."""
        self.alter_partition_manager = manager
        for partition in self.partitions.values():
            partition.alter_partition = manager.submit
        self.tasks.start_soon(self._isr_expiration)

    async def _isr_expiration(self) -> None:
        while True:
            await anyio.sleep(self.replica_lag_time_max_ms / 2000)
            now_ms = int(time.time() * 1000)
            for partition in list(self.partitions.values()):
                partition.maybe_shrink_isr(now_ms)

    def _make_followers(self, leaders: dict[TopicPartition, Node]) -> None:
        """Stop the partitions' fetchers first (their position is taken afresh), answer what waits on them,
        then fetch each from its leader."""
        self._stop_fetching(set(leaders))
        for key in leaders:
            self.purgatory.check_and_complete(key)
        from odradek.broker.replication.replica_fetcher import FetcherConfig, InitialFetchState, ReplicaFetcherManager, initial_fetch_offset

        if self._fetchers is None:
            config = self.fetcher_config() if self.fetcher_config is not None else FetcherConfig(self.broker_id)
            self._fetchers = ReplicaFetcherManager(config, self.num_replica_fetchers, self.partitions.__getitem__, self.tasks, self.follower_quota)
        self._fetchers.add_fetcher_for_partitions(
            {key: InitialFetchState(self.partitions[key].topic_id, leader, self.partitions[key].leader_epoch, initial_fetch_offset(self.partitions[key])) for key, leader in leaders.items()}
        )

    def _stop_fetching(self, keys: set[TopicPartition]) -> None:
        if self._fetchers is not None:
            self._fetchers.remove_fetcher_for_partitions(keys)

    def update_configs(self, topic: TopicInfo) -> None:
        """New topic configs reach the open logs and those opened later."""
        self.log_manager.set_topic_config(topic.name, self.log_config(topic))

    def stop_replicas(self, topic: TopicInfo, delete: bool) -> None:
        """Stop serving the named partitions; the topic id is forgotten once none of its partitions is left
        (a reassignment stops some replicas of a topic whose others this broker keeps serving)."""
        self._stop_fetching({(topic.name, index) for index in topic.partitions})
        for index in list(topic.partitions):
            partition = self.partitions.pop((topic.name, index), None)
            self._stop_moving((topic.name, index))
            if partition is not None:
                self.purgatory.check_and_complete((topic.name, index))
            if delete:  # also a replica stopped by an earlier StopReplica (Kafka's controller stops, then deletes)
                self.log_manager.delete_log(topic.name, index)
        if not any(name == topic.name for name, _ in self.partitions):
            self.by_topic_id.pop(topic.topic_id, None)

    # -- lookups ------------------------------------------------------------------------------------------

    def get_partition(self, topic: str, index: int) -> Partition:
        """Kafka's ``getPartitionOrException``: a partition this broker does not host is NOT_LEADER_OR_FOLLOWER
        while the metadata has it (a client with older metadata, a replica moved away), else unknown."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            if (topic, index) in self.offline_partitions:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Partition {topic}-{index} is in an offline log directory")
            if self._metadata_partition(topic, index) is not None:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return partition

    def current_leader(self, topic: str, index: int) -> tuple[int, int]:
        """(leader id, leader epoch) of a partition as this broker knows them, -1 for unknown: its own replica's
        view, else the metadata's. Kafka's ``KafkaApis.getCurrentLeader``, what a refused Produce or Fetch
        tells the client (KIP-951)."""
        partition = self.partitions.get((topic, index))
        if partition is not None:
            return partition.state.leader, partition.state.leader_epoch
        state = self._metadata_partition(topic, index)
        return (state.leader, state.leader_epoch) if state is not None else (-1, -1)

    def topic_name(self, topic_id: Uuid) -> str | None:
        """The name of a topic id (Fetch v13+): a hosted topic's, else the metadata's (Kafka resolves ids with its
        metadata cache, so a partition moved away is NOT_LEADER_OR_FOLLOWER, not an unknown id)."""
        name = self.by_topic_id.get(topic_id)
        if name is None and (image := self.metadata()) is not None and (topic := image.topic_by_id(topic_id)) is not None:
            name = topic.name
        return name

    def _metadata_partition(self, topic: str, index: int) -> PartitionState | None:
        image = self.metadata()
        info = image.topics.get(topic) if image is not None else None
        return info.partitions.get(index) if info is not None else None

    def get_log(self, topic: str, index: int) -> Log:
        """The partition's log, read as a whole (Kafka's ``ReplicaManager.getLog``): a coordinator loading
        its state reads it from start to end."""
        return self.get_partition(topic, index).log

    def leader_partition(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        partition = self.get_partition(topic, index)
        partition.check_leader(current_leader_epoch)
        return partition

    # -- append -------------------------------------------------------------------------------------------

    def append_records(
        self,
        appends: list[PartitionAppend],
        required_acks: int,
        timeout_ms: int,
        origin: AppendOrigin,
        *,
        internal_topics_allowed: bool = False,
        transactional_id: str | None = None,
        produce_version: int | None = None,
    ) -> "AppendOutcome":
        """Validate (``storage.log_validator``) and append each partition's records in order, on the event
        loop until a batch must be validated on a worker thread or a partition still has an append finishing
        in the background; from there on in a background task. :meth:`AppendOutcome.completion` waits for
        the background and, for acks=all, the high watermark."""
        run = AppendOutcome(self, appends, required_acks, timeout_ms, origin, internal_topics_allowed, transactional_id, produce_version)
        for index in range(len(appends)):
            checked = run.append_inline(index)
            if checked is not True:
                run.finish_in_background(index, checked)
                break
        return run

    # -- fetch --------------------------------------------------------------------------------------------

    def fetch_messages(self, params: FetchParams, partitions: list[FetchPartition]) -> Any:
        """The fetch's reads, or (a long poll: too few bytes yet, ``max_wait_ms`` > 0) a future of them, read
        again whenever something the fetch can see changed, until ``min_bytes`` arrive or the wait is over
        (``purgatory.DelayedFetch``). Reads from the purgatory do not update a follower's fetch state (Kafka's
        ``updateFetchState = !readFromPurgatory``): its fetch reported its position when it arrived."""
        reads = self._read(params, partitions)
        # Answered at once, as Kafka's: no wait asked, enough bytes, an error, or a preferred read replica named.
        if params.max_wait_ms <= 0 or sum(r.length for r in reads) >= params.min_bytes or any(r.error or r.preferred_read_replica >= 0 for r in reads) or not reads:
            return reads
        # Kafka's DelayedFetch, watching from now on: no append after this read goes unseen.
        keys = [(r.request.topic, r.request.partition) for r in reads if r.request.topic is not None]
        return DelayedFetch(
            self.purgatory, keys, lambda: self._read(params, partitions, update_fetch_state=False), lambda: self._fetchable(params, partitions),
            params.min_bytes, params.max_wait_ms,
        ).future

    def _fetchable(self, params: FetchParams, partitions: list[FetchPartition]) -> list[object]:
        """What a read of ``partitions`` depends on, without reading: each partition as hosted (gone, or
        another one), its leadership and epoch, its log start and how far the fetch may read. A read gives
        the same answer as long as this does not change."""
        seen: list[object] = []
        get = self.partitions.get
        for fp in partitions:
            partition = get((fp.topic, fp.partition))  # type: ignore[arg-type]
            if partition is None:
                seen.append(None)
                continue
            log_ = partition.log
            seen += (partition, partition.state.leader, partition.state.leader_epoch, log_.log_start_offset, partition.fetch_upper_bound(params.replica_id, params.isolation))
        return seen

    def _read(self, params: FetchParams, partitions: list[FetchPartition], update_fetch_state: bool = True) -> list[PartitionRead]:
        """Each partition's read within the fetch's byte budget: the first partition with data returns at
        least one whole batch, however large (KIP-74), unless the fetch version has a hard limit. A
        follower's read tells the leader its position unless ``update_fetch_state`` is False."""
        budget = params.max_bytes
        min_one = not params.hard_limit
        now_ms = int(time.time() * 1000)
        reads = []
        for fp in partitions:
            read = PartitionRead(fp)
            reads.append(read)
            try:
                if fp.topic is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
                if params.fetch_only_leader:
                    partition = self.leader_partition(fp.topic, fp.partition, fp.current_leader_epoch)
                else:
                    partition = self.get_partition(fp.topic, fp.partition)
                    partition.check_epoch(fp.current_leader_epoch)
                    if params.client_rack is not None and self.replica_selector is not None and partition.is_leader:
                        read.preferred_read_replica = self._preferred_read_replica(partition, params, fp.fetch_offset, now_ms)
                        if read.preferred_read_replica >= 0:  # not read: the consumer is to read it there
                            log_ = partition.log
                            read.high_watermark, read.last_stable_offset, read.log_start_offset = log_.high_watermark, log_.last_stable_offset, log_.log_start_offset
                            continue
                info = partition.read_records(
                    fp.fetch_offset, min(fp.max_bytes, budget), params.replica_id, params.isolation, min_one, fp.last_fetched_epoch, fp.log_start_offset, now_ms,
                    update_fetch_state,
                )
                read.high_watermark, read.last_stable_offset, read.log_start_offset = info.high_watermark, info.last_stable_offset, info.log_start_offset
                read.diverging_epoch = info.diverging_epoch
                size = info.data.size
                if size > 0 and params.replica_id >= 0 and self._leader_throttles(partition, params.replica_id, now_ms):
                    size = 0  # Kafka's checkFetchDataInfo: the throttled follower gets no records this time
                if size > 0:
                    read.aborted_transactions = info.aborted_transactions
                    if params.magic is None:
                        read.records, read.length = FetchRecords(info.data.slices, size), size
                    else:
                        read.records = _down_convert(partition, info, params.magic, fp.fetch_offset)
                        read.length = len(read.records)
                    budget = max(0, budget - size)
                    min_one = False
            except KafkaError as exc:  # OFFSET_OUT_OF_RANGE among them
                read.error = exc.code
                read.high_watermark = read.last_stable_offset = read.log_start_offset = -1
            except CorruptTransactionIndexError:  # Kafka's read throws; the partition answers UNKNOWN_SERVER_ERROR
                read.error = ErrorCode.UNKNOWN_SERVER_ERROR
                read.high_watermark = read.last_stable_offset = read.log_start_offset = -1
        return reads

    def _leader_throttles(self, partition: Partition, replica_id: int, now_ms: int) -> bool:
        """Kafka's ``shouldLeaderThrottle``: a follower out of the ISR, on a partition the topic throttles here,
        while the leader quota is exceeded."""
        quota = self.leader_quota
        return (
            quota.bound < UNBOUNDED
            and replica_id not in partition.isr
            and quota.throttles(partition.config.leader_replication_throttled_replicas, partition.index)
            and quota.exceeded(now_ms)
        )

    def record_leader_replication(self, reads: list[PartitionRead]) -> None:
        """Count what a follower's fetch answer carries of throttled partitions against the leader quota (as
        Kafka's KafkaApis does once the answer is made)."""
        quota = self.leader_quota
        size = 0
        for read in reads:
            if read.length and (partition := self.partitions.get((read.request.topic, read.request.partition))) is not None:  # type: ignore[arg-type]
                if quota.throttles(partition.config.leader_replication_throttled_replicas, partition.index):
                    size += read.length
        if size:
            quota.record(size, int(time.time() * 1000))

    def _preferred_read_replica(self, partition: Partition, params: FetchParams, fetch_offset: int, now_ms: int) -> int:
        """Kafka's ``findPreferredReadReplica``: the selector chooses among the leader and the in-sync followers
        that hold ``fetch_offset``, each with the rack of its endpoint on the consumer's listener; -1 when it
        chooses the leader (never named in the answer) or a replica without such an endpoint."""
        from odradek.broker.replication.replica_selector import ReplicaView  # only where replica.selector.class is set

        assert self.replica_selector is not None and params.client_rack is not None
        image = self.metadata()

        def rack(broker_id: int) -> str | None:
            broker = image.brokers.get(broker_id) if image is not None else None
            return broker.rack if broker is not None and broker.endpoint(params.listener) is not None else None

        isr = partition.isr
        replicas = [
            ReplicaView(broker_id, rack(broker_id), state.log_end_offset, now_ms - state.last_caught_up_time_ms)
            for broker_id, state in partition.followers.items()
            if broker_id in isr and state.log_end_offset >= fetch_offset and state.log_start_offset <= fetch_offset
        ]
        leader = ReplicaView(self.broker_id, rack(self.broker_id), partition.log.log_end_offset, 0)
        replicas.append(leader)
        chosen = self.replica_selector(params.client_rack, leader, replicas)
        return chosen.broker_id if chosen is not leader and chosen.rack is not None else -1

    # -- offsets, deletion, descriptions ------------------------------------------------------------------

    def fetch_offset_for_timestamp(self, topic: str, index: int, timestamp: int, isolation: int, replica_id: int, current_leader_epoch: int) -> tuple[int, int, int]:
        """ListOffsets: (timestamp, offset, leader epoch) of the leader's partition."""
        return self.leader_partition(topic, index, current_leader_epoch).fetch_offset_for_timestamp(timestamp, isolation, replica_id)

    def last_offset_for_leader_epoch(self, topic: str, index: int, leader_epoch: int, current_leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= requested, the offset where it ended); (-1, -1) if unknown."""
        return self.leader_partition(topic, index, current_leader_epoch).last_offset_for_leader_epoch(leader_epoch)

    def delete_records(self, topic: str, index: int, offset: int) -> int:
        """DeleteRecords: the partition's new low watermark; never on an internal topic."""
        if topic in INTERNAL_TOPICS:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot delete records of internal topic {topic}")
        return self.leader_partition(topic, index).delete_records_on_leader(offset)

    def active_producers(self, topic: str, index: int) -> list[tuple[int, ProducerStateEntry]]:
        """DescribeProducers: the leader's producer states, in the order Kafka lists them."""
        return self.leader_partition(topic, index).active_producers()

    def describe_log_dirs(self, wanted: set[TopicPartition] | None) -> list[LogDirDescription]:
        """Every configured log directory (absolute), an unreadable one with KAFKA_STORAGE_ERROR; its
        partitions (``wanted`` ones, or all), their size and how far the LEO is behind the high watermark."""
        by_dir: dict[Path, list[PartitionSize]] = {}
        for log_ in sorted(self.log_manager.all_logs(), key=lambda l: (l.topic, l.partition)):
            if wanted is None or (log_.topic, log_.partition) in wanted:
                by_dir.setdefault(log_.dir.parent.absolute(), []).append(
                    PartitionSize(log_.topic, log_.partition, log_.size_in_bytes, max(log_.high_watermark - log_.log_end_offset, 0))
                )
        for future in self.log_manager.future_logs():  # Kafka: the future's lag is behind the current log's end
            if wanted is None or (future.topic, future.partition) in wanted:
                current = self.log_manager.get_log(future.topic, future.partition)
                lag = current.log_end_offset - future.log_end_offset if current is not None else -1
                by_dir.setdefault(future.dir.parent.absolute(), []).append(PartitionSize(future.topic, future.partition, future.size_in_bytes, lag, is_future=True))
        described = []
        for log_dir in (d.absolute() for d in self.log_manager.log_dirs):
            if self.log_dir_failure is not None and self.log_dir_failure.is_offline(log_dir):
                described.append(LogDirDescription(log_dir, ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            try:
                import shutil  # here: with bz2 and lzma, which it imports, a few ms of every start

                usage = shutil.disk_usage(log_dir)
            except OSError:
                described.append(LogDirDescription(log_dir, ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            described.append(LogDirDescription(log_dir, ErrorCode.NONE, by_dir.get(log_dir, []), min(usage.total, LONG_MAX), min(usage.free, LONG_MAX)))
        return described

    def alter_replica_log_dir(self, topic: str, index: int, path: str) -> ErrorCode:
        """AlterReplicaLogDirs for one partition (Kafka's ``ReplicaManager.alterReplicaLogDirs``): the
        destination must be a configured, online log directory; a move to another directory under way is
        given up for the new one; a replica not hosted yet is made there later (REPLICA_NOT_AVAILABLE now);
        else its records are copied into a future log there, which then replaces it."""
        from odradek.storage.log import log_future_dir_name

        if len(log_future_dir_name(topic, index)) > 255:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        log_dir = self.log_manager.log_dir(path)
        if log_dir is None:
            log.warning("Unable to alter log dir for %s-%d: Log dir %s is not found in the config.", topic, index, path)
            return ErrorCode.LOG_DIR_NOT_FOUND
        if log_dir not in self.log_manager.live_log_dirs:
            return ErrorCode.KAFKA_STORAGE_ERROR
        key = (topic, index)
        if key in self.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        partition = self.partitions.get(key)
        future = self.log_manager.future_log(topic, index)
        if partition is not None and future is not None and future.dir.parent != log_dir:
            self._stop_moving(key)
            self.log_manager.remove_future_log(topic, index)
        self.log_manager.maybe_update_preferred_log_dir(topic, index, log_dir)
        if partition is None:
            # Kafka's getPartitionOrException: NOT_LEADER_OR_FOLLOWER, answered REPLICA_NOT_AVAILABLE here, for a
            # partition of the metadata; unknown otherwise
            return ErrorCode.REPLICA_NOT_AVAILABLE if self._metadata_partition(topic, index) is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if partition.log.dir.parent == log_dir:
            log.info("Current log directory %s is same as requested log dir %s. Skipping future replica creation.", log_dir, path)
            return ErrorCode.NONE
        if self.log_manager.future_log(topic, index) is None:
            self.log_manager.create_future_log(topic, index, log_dir)
            self._move(key)
        return ErrorCode.NONE

    def _move(self, key: TopicPartition) -> None:
        """Copy ``key``'s log into its future log, in the background, until it replaces it."""
        if self.alter_log_dirs is None:
            from odradek.broker.replication.replica_alter_log_dirs import ReplicaAlterLogDirs

            self.alter_log_dirs = ReplicaAlterLogDirs(self.log_manager, self.partitions, lambda: self.background)
        self.alter_log_dirs.add(key)

    def _stop_moving(self, key: TopicPartition) -> None:
        if self.alter_log_dirs is not None:
            self.alter_log_dirs.remove(key)

    # -- waits --------------------------------------------------------------------------------------------

    def _on_offsets_moved(self, partition: Partition) -> None:
        self.purgatory.check_and_complete((partition.topic, partition.index))

    async def wait_for_replicas(self, partition: Partition, offset: int, timeout_s: float) -> ErrorCode:
        """acks=all (Kafka's DelayedProduce): wait until the high watermark passes ``offset``, or the partition
        is no longer led here; the append's outcome (:meth:`Partition.check_enough_replicas_reach_offset`),
        REQUEST_TIMED_OUT on timeout or once the partition is gone."""
        key = (partition.topic, partition.index)
        if await self.purgatory.wait_until(
            key, lambda: partition.check_enough_replicas_reach_offset(offset)[0], lambda: self.partitions.get(key) is not partition, timeout_s
        ):
            return partition.check_enough_replicas_reach_offset(offset)[1]
        return ErrorCode.REQUEST_TIMED_OUT


def _down_convert(partition: Partition, info: LogReadInfo, magic: int, fetch_offset: int) -> bytes:
    """Old fetch versions get the stored batches rewritten in their magic, as Kafka's ``RecordsUtil.downConvert``."""
    if not partition.config.message_downconversion_enable:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "Down-conversion of fetched records is disabled")
    from odradek.protocol import legacy_records  # the message formats before v2, only for clients that fetch them

    try:
        return legacy_records.down_convert(info.data.read(), magic, first_offset=fetch_offset)
    except UnsupportedCompressionTypeError as exc:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc)) from None


class AppendOutcome:
    """One append request's run: each partition validated and appended in order, and the results so far.

    ``failed`` tells whether any partition was refused (an acks=0 producer is told by a closed connection) or,
    once :meth:`completion` returned, failed waiting for its replicas.
    """

    def __init__(self, replicas: ReplicaManager, appends: list[PartitionAppend], required_acks: int, timeout_ms: int, origin: AppendOrigin, internal_topics_allowed: bool, transactional_id: str | None, produce_version: int | None) -> None:
        self.replicas = replicas
        self.appends = appends
        self.required_acks = required_acks
        self.timeout_ms = timeout_ms
        self.origin = origin
        self.internal_topics_allowed = internal_topics_allowed
        self.transactional_id = transactional_id
        self.produce_version = produce_version
        self.now_ms = int(time.time() * 1000)
        self.results = [PartitionResponse() for _ in appends]
        self.failed = False
        self._waits: list[tuple[Partition, int, PartitionResponse]] = []
        self._done: anyio.Event | None = None
        self._verdicts: dict[TopicPartition, ErrorCode] = {}
        """What another broker's transaction coordinator answered of a partition (transaction verification)."""

    async def completion(self) -> None:
        """Wait for the appends finishing in the background, then (acks=all) until the high watermark has
        passed each batch's last offset, or mark REQUEST_TIMED_OUT where it has not within the timeout."""
        if self._done is not None:
            await self._done.wait()
        if not self._waits:
            return
        deadline = time.monotonic() + max(self.timeout_ms, 0) / 1000
        for partition, last_offset, result in self._waits:
            remaining = deadline - time.monotonic()
            result.error = await self.replicas.wait_for_replicas(partition, last_offset + 1, max(remaining, 0))
            if result.error != ErrorCode.NONE:
                self.failed = True

    @property
    def pending(self) -> bool:
        """Whether :meth:`completion` has anything to wait for."""
        return self._done is not None or bool(self._waits)

    def append_inline(self, index: int) -> "_Checked | None | Literal[True]":
        """Append one partition's records on the event loop: True when done (or refused); otherwise what the
        background has to go on from (None: the partition waits for an earlier append's turn)."""
        append = self.appends[index]
        if (append.topic, append.index) in self.replicas.append_turns:
            return None
        try:
            partition, checked = self._check(append)
            try:
                walked = checked.walk_inline() if checked.needs_walk else None
            except WalkElsewhere:
                return partition, checked
            self._append(partition, validate_records(checked, walked), self.results[index])
        except KafkaError as exc:
            self._refuse(append, self.results[index], exc)
        except AskCoordinator:
            return None  # the background asks, then checks again
        return True

    def finish_in_background(self, start: int, first: "_Checked | None") -> None:
        """Append the partitions from ``start`` on in a background task (each once any earlier append to it
        is done), validating large batches on a worker thread. The task runs to its end even if the client
        goes away, so no turn stays taken. acks=0 gets no answer, so a refusal found there is only logged,
        where Kafka closes the connection."""
        turns = self.replicas.append_turns
        queued = []
        for index in range(start, len(self.appends)):
            append = self.appends[index]
            key = (append.topic, append.index)
            previous, turns[key] = turns.get(key), anyio.Event()
            queued.append((index, previous, turns[key]))
        self._done = done = anyio.Event()

        async def run() -> None:
            ready = first
            try:
                for index, previous, mine in queued:
                    append, result = self.appends[index], self.results[index]
                    try:
                        if previous is not None:
                            await previous.wait()
                        partition, checked = ready if ready is not None else await self._check_verified(append, [self.appends[i] for i, _, _ in queued if i > index])
                        try:
                            validated = validate_records(checked, checked.walk_inline() if checked.needs_walk else None)
                        except WalkElsewhere:
                            # The rest of LogValidator's work too: a rebuild into the topic's codec
                            # decodes and re-encodes every record.
                            validated = await anyio.to_thread.run_sync(lambda: validate_records(checked, checked.walk()))
                        self._append(partition, validated, result)
                    except KafkaError as exc:
                        self._refuse(append, result, exc)
                    except Exception:
                        log.exception("Append to %s-%d failed", append.topic, append.index)
                        self._refuse(append, result, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR))
                    finally:
                        ready = None
                        _end_turn(turns, (append.topic, append.index), mine)
            finally:
                for index, _, mine in queued:
                    _end_turn(turns, (self.appends[index].topic, self.appends[index].index), mine)
                done.set()

        self.replicas.tasks.start_soon(run)

    async def _check_verified(self, append: PartitionAppend, later: list[PartitionAppend]) -> "_Checked":
        """:meth:`_check`, first asking the transaction coordinator on another broker when it must be asked;
        the ``later`` partitions that need asking too are asked at the same time (one request per
        coordinator, as Kafka verifies a produce request's partitions), their answers kept for their turn."""
        try:
            return self._check(append)
        except AskCoordinator as ask:
            asks = {(append.topic, append.index): ask}
            for other in later:
                key = (other.topic, other.index)
                if key in asks or key in self._verdicts:
                    continue
                try:
                    self._check(other)
                except AskCoordinator as more:
                    asks[key] = more
                except Exception:
                    pass  # refused (or logged) when its turn comes, not held against this partition
            self._verdicts.update(zip(asks, await AskCoordinator.answers(list(asks.values()))))
            return self._check(append)

    def _check(self, append: PartitionAppend) -> "_Checked":
        """Everything checked before a batch's records are read: the request, the partition, the batch
        header, CRC and size."""
        if self.required_acks not in VALID_ACKS:
            raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS)
        partition = self.replicas.leader_partition(append.topic, append.index)
        if append.topic in INTERNAL_TOPICS and self.origin is AppendOrigin.CLIENT and not self.internal_topics_allowed:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {append.topic}")
        checked = check_batches(append.records, partition.config, self.origin, self.now_ms, f"{partition.topic}-{partition.index}", self.produce_version, append.prechecked)
        if self.transactional_id is not None and (verifier := self.replicas.transaction_verifier) is not None:
            assert self.produce_version is not None, "a transactional append comes with its produce request's version"
            verifier.verify(self.transactional_id, partition, checked.validated.batches, self.produce_version, self._verdicts.get((append.topic, append.index)))
        return partition, checked

    def _append(self, partition: Partition, validated: ValidationResult, result: PartitionResponse) -> None:
        info = partition.append_records_to_leader(validated, self.required_acks, self.now_ms)
        result.base_offset = info.first_offset
        # The log's answer: for a duplicate of one of the producer's last batches, its original time.
        result.log_append_time_ms = info.log_append_time
        result.log_start_offset = info.log_start_offset  # Kafka's answer too: the log's at the append
        if self.required_acks == -1:
            done, error = partition.check_enough_replicas_reach_offset(info.last_offset + 1)
            if not done:
                self._waits.append((partition, info.last_offset, result))
            result.error = error

    def _refuse(self, append: PartitionAppend, result: PartitionResponse, exc: KafkaError) -> None:
        self.failed = True
        result.error = exc.code
        if isinstance(exc, RecordValidationError):
            # Kafka fills error_message only for these (ReplicaManager's hasCustomErrorMessage); the
            # other refusals' reasons go to the log.
            result.error_message = exc.message
            result.record_errors = exc.record_errors
        else:
            log.debug("Append to %s-%d refused: %s", append.topic, append.index, exc)


_Checked = tuple[Partition, CheckedBatches]
"""A partition and its batches past the checks that read no record."""


def _end_turn(turns: dict[TopicPartition, anyio.Event], key: TopicPartition, mine: anyio.Event) -> None:
    if turns.get(key) is mine:
        del turns[key]
    mine.set()
