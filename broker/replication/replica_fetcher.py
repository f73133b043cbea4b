"""A follower's replication from its leader (Kafka's ``ReplicaFetcherThread`` on ``AbstractFetcherThread``,
and ``AbstractFetcherManager``).

A :class:`ReplicaFetcher` serves the partitions this broker follows on one leader: it sends Fetch with its
broker id (``replica_id``, ReplicaState from v15), each partition's current leader epoch and the epoch of the
last batch it has (``last_fetched_epoch``, KIP-595 truncation on fetch, which Kafka uses from IBP 2.7), and
appends what comes as the leader wrote it (offsets and epochs kept, no client validation), then takes the
leader's high watermark and log start offset. Its fetches are incremental, in a fetch session with the
leader (KIP-227, :mod:`~odradek.broker.replication.fetch_session_handler`) as Kafka's followers' are: each
names only the partitions whose position changed, and the leader answers only those with news.

A follower never truncates to its high watermark alone when its log has leader epochs (KIP-101/KIP-279): the
leader answers a fetch whose last epoch diverges from its own history with ``diverging_epoch``, and the
follower cuts its log where the two histories part (:func:`truncation_offset`); where the leader names
an epoch the follower does not know, the follower cuts to its own earlier epoch's end and the next fetch
asks again. Only a log without epochs (old message format) truncates to its high watermark. Kafka 3.9 sends
no OffsetForLeaderEpoch from followers: that was the way before inter-broker protocol 2.7.

Partitions that fail (an error the leader answers, a dropped connection) are delayed by
``replica.fetch.backoff.ms`` and tried again; a fenced epoch or a local storage failure marks them failed
until the next LeaderAndIsr adds them again, as Kafka does.

The fetcher reaches each log only through its :class:`~odradek.broker.replication.partition.Partition` (Kafka's fetcher
calls ``Partition.appendRecordsToFollowerOrFutureReplica`` and ``truncateTo``): the partition tells the
broker's waits that its offsets moved and the log directory failure channel of an I/O error.
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping

import anyio

from odradek.broker.network.kafka_client import BrokerConnection, Node, ResponseError
from odradek.broker.replication.fetch_session_handler import FIRST_SESSION_VERSION, FetchSessionHandler, PartitionRequest
from odradek.broker.replication.partition import Partition
from odradek.broker.replication.replication_quota import UNBOUNDED, ReplicationQuota
from odradek.broker.security.client import PLAINTEXT, ClientSecurity
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.kafka_uuid import Uuid, ZERO_UUID
from odradek.storage.leader_epoch import UNDEFINED_EPOCH_OFFSET
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.protocol.message_types.fetch import FetchRequestDict, FetchResponse, FetchTopicDict, ForgottenTopicDict, PartitionData
    from odradek.protocol.message_types.list_offsets import ListOffsetsRequestDict, ListOffsetsResponse

log = logging.getLogger("odradek.replica_fetcher")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
SESSIONLESS_EPOCH = -1
"""Fetch session epoch of a full fetch outside any session (Kafka's ``FetchMetadata.FINAL_EPOCH``)."""
SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR})
"""Answers about the session itself: the next fetch opens a new one, without waiting."""
INTER_BROKER_FETCH_VERSION = 16
"""Kafka 3.9's inter-broker Fetch version (``MetadataVersion.fetchRequestVersion``); v17 only adds the
KRaft directory id."""


@dataclass(frozen=True)
class FetcherConfig:
    """The broker settings a fetcher sends with (Kafka's defaults); :meth:`from_broker_config` takes them
    from the broker's configuration, by the keys :data:`SETTING_KEYS` names."""

    broker_id: int
    broker_epoch: int = -1
    max_wait_ms: int = 500
    """``replica.fetch.wait.max.ms``"""
    min_bytes: int = 1
    """``replica.fetch.min.bytes``"""
    max_bytes: int = 10485760
    """``replica.fetch.response.max.bytes``"""
    partition_max_bytes: int = 1048576
    """``replica.fetch.max.bytes``"""
    backoff_ms: int = 1000
    """``replica.fetch.backoff.ms``"""
    socket_timeout_ms: int = 30000
    """``replica.socket.timeout.ms``: how long a connection attempt or a request may take (a fetch is given
    ``replica.fetch.wait.max.ms`` more, the time the leader may hold it)."""
    security: ClientSecurity = PLAINTEXT
    """How fetchers connect: the inter-broker listener's TLS and SASL (Kafka's fetchers use its channel builder)."""

    @classmethod
    def from_broker_config(cls, broker_id: int, config: Mapping[str, Any]) -> "FetcherConfig":
        return cls(broker_id, **{name: config[key] for name, key in SETTING_KEYS.items()})

    @property
    def request_timeout_s(self) -> float:
        return self.socket_timeout_ms / 1000


SETTING_KEYS: dict[str, str] = {
    "max_wait_ms": "replica.fetch.wait.max.ms",
    "min_bytes": "replica.fetch.min.bytes",
    "max_bytes": "replica.fetch.response.max.bytes",
    "partition_max_bytes": "replica.fetch.max.bytes",
    "backoff_ms": "replica.fetch.backoff.ms",
    "socket_timeout_ms": "replica.socket.timeout.ms",
}
"""Each :class:`FetcherConfig` field's broker configuration key."""


class FetchState(enum.Enum):
    TRUNCATING = "Truncating"
    FETCHING = "Fetching"


@dataclass(frozen=True)
class InitialFetchState:
    """What LeaderAndIsr hands the fetcher for one followed partition."""

    topic_id: Uuid | None
    leader: Node
    current_leader_epoch: int
    init_offset: int


@dataclass(frozen=True)
class PartitionFetchState:
    """Kafka's ``PartitionFetchState``: where the follower fetches next, in which epoch, and whether it must
    truncate first."""

    topic_id: Uuid | None
    fetch_offset: int
    lag: int | None
    current_leader_epoch: int
    state: FetchState
    last_fetched_epoch: int | None
    delayed_until: float = 0.0

    def delayed(self, now: float) -> bool:
        return now < self.delayed_until

    def ready_for_fetch(self, now: float) -> bool:
        return self.state is FetchState.FETCHING and not self.delayed(now)

    def truncating(self, now: float) -> bool:
        return self.state is FetchState.TRUNCATING and not self.delayed(now)


def truncation_offset(local: Partition, leader_epoch: int, leader_end_offset: int) -> int:
    """Where the follower's log must be cut, given the leader's diverging (epoch, end offset) (Kafka's
    ``getOffsetTruncationState``): both logs agree up to the end of the largest epoch they share. A leader
    epoch the follower does not know cuts only to the follower's earlier epoch, and the next fetch asks again;
    a follower with no epoch that old cuts at the leader's offset."""
    replica_end = local.log_end_offset
    follower_epoch, follower_end = local.last_offset_for_leader_epoch(leader_epoch)
    if follower_end == UNDEFINED_EPOCH_OFFSET:
        return min(leader_end_offset, replica_end)
    if follower_epoch != leader_epoch:
        return min(follower_end, replica_end)
    return min(follower_end, leader_end_offset, replica_end)


def initial_fetch_offset(local: Partition) -> int:
    """Where a new follower starts (Kafka's ``ReplicaManager.initialFetchOffset``): its log end when its log
    has epochs (the leader will say where they diverge), else its high watermark."""
    return local.log_end_offset if local.latest_epoch is not None else local.high_watermark


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Which of a leader's fetchers serves the partition (Kafka's ``getFetcherId``, with Java's string hash)."""
    h = 0
    for unit in topic.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    mixed = (31 * h + partition) & 0xFFFFFFFF
    signed = mixed - (1 << 32) if mixed & 0x80000000 else mixed
    return (signed & 0x7FFFFFFF if signed == -(1 << 31) else abs(signed)) % num_fetchers


class ReplicaFetcher:
    """The partitions this broker follows on one leader, fetched in one loop (Kafka's fetcher thread)."""

    def __init__(
        self, leader: Node, fetcher_index: int, config: FetcherConfig, partition: Callable[[TopicPartition], Partition], quota: ReplicationQuota | None = None,
    ) -> None:
        self.leader = leader
        self.fetcher_index = fetcher_index
        self.config = config
        self.partition = partition
        """The follower's partition, the one way to its log."""
        self.quota = quota if quota is not None else ReplicationQuota(config.broker_id)
        """The broker's follower quota (KIP-73), shared by its fetchers."""
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        """In fetch order: a partition just served or delayed goes to the end, so none starves."""
        self.failed: set[TopicPartition] = set()
        self.session = FetchSessionHandler()
        """The incremental fetch session with the leader (KIP-227), as Kafka's followers fetch."""
        self._changed = anyio.Event()
        self._cancel: anyio.CancelScope | None = None

    # -- partitions -------------------------------------------------------------------------------------

    def add_partitions(self, initial: dict[TopicPartition, InitialFetchState]) -> None:
        """Follow these partitions (Kafka's ``addPartitions``): a partition already followed in the same
        leader epoch keeps its state; otherwise it starts fetching at ``init_offset`` with its log's last
        epoch, or truncating when its log has no epochs."""
        for tp, start in initial.items():
            self.failed.discard(tp)
            current = self.partitions.pop(tp, None)
            if current is not None and current.current_leader_epoch == start.current_leader_epoch:
                self.partitions[tp] = current
                continue
            last_epoch = self.partition(tp).latest_epoch
            state = FetchState.FETCHING if last_epoch is not None else FetchState.TRUNCATING
            self.partitions[tp] = PartitionFetchState(start.topic_id, start.init_offset, None, start.current_leader_epoch, state, last_epoch)
        self._wake()

    def remove_partitions(self, tps: set[TopicPartition]) -> dict[TopicPartition, PartitionFetchState]:
        return {tp: state for tp in tps if (state := self.partitions.pop(tp, None)) is not None}

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _update(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        self.partitions.pop(tp, None)
        self.partitions[tp] = state

    def _delay(self, tps: set[TopicPartition]) -> None:
        now = time.monotonic()
        for tp in tps:
            state = self.partitions.get(tp)
            if state is not None and not state.delayed(now):
                self._update(tp, replace(state, delayed_until=now + self.config.backoff_ms / 1000))

    def _mark_failed(self, tp: TopicPartition) -> None:
        log.warning("Partition %s-%d marked as failed", *tp)
        self.failed.add(tp)
        self.partitions.pop(tp, None)

    # -- the loop ---------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Fetch until :meth:`shutdown`: connect, truncate what must be truncated, fetch; a lost connection
        delays every partition and reconnects."""
        with anyio.CancelScope() as self._cancel:
            while True:
                async with anyio.create_task_group() as tg:
                    try:
                        connection = await BrokerConnection.connect(
                            self.leader.host, self.leader.port, tg, client_id=f"broker-{self.config.broker_id}-fetcher-{self.fetcher_index}", request_timeout_s=self.config.request_timeout_s,
                            security=self.config.security,
                        )
                    except (OSError, TimeoutError, KafkaError, ResponseError) as exc:
                        log.info("Fetcher %d cannot reach leader %d at %s:%d: %s", self.fetcher_index, self.leader.node_id, self.leader.host, self.leader.port, exc)
                        await anyio.sleep(self.config.backoff_ms / 1000)
                        tg.cancel_scope.cancel()
                        continue
                    try:
                        while not connection.closed:
                            await self.do_work(connection)
                    finally:
                        await connection.close()
                        tg.cancel_scope.cancel()

    def shutdown(self) -> None:
        if self._cancel is not None:
            self._cancel.cancel()

    async def do_work(self, connection: BrokerConnection) -> None:
        self._maybe_truncate()
        await self._maybe_fetch(connection)

    # -- truncation -------------------------------------------------------------------------------------

    def _maybe_truncate(self) -> None:
        """Partitions whose log has no leader epochs (old message format) truncate to their fetch offset,
        the high watermark; with epochs a follower fetches at once and the leader says where to cut (Kafka
        3.9 truncates on fetch: OffsetForLeaderEpoch is for inter-broker protocols before 2.7)."""
        now = time.monotonic()
        for tp, state in list(self.partitions.items()):
            if state.truncating(now):
                self._after_truncation({tp: self._truncate(tp, state.fetch_offset)})

    def _truncate_on_fetch_response(self, diverging: dict[TopicPartition, tuple[int, int]]) -> None:
        """Cut each log where the leader's ``diverging_epoch`` (epoch, end offset) says it parts (Kafka's
        ``truncateOnFetchResponse``)."""
        done: dict[TopicPartition, int | None] = {}
        for tp, (epoch, end_offset) in diverging.items():
            state = self.partitions.get(tp)
            if state is None:
                continue
            offset = truncation_offset(self.partition(tp), epoch, end_offset)
            log.info("Truncating partition %s-%d to %d due to leader epoch and offset (%d, %d)", *tp, offset, epoch, end_offset)
            done[tp] = self._truncate(tp, offset)
        self._after_truncation(done)

    def _truncate(self, tp: TopicPartition, offset: int) -> int | None:
        partition = self.partition(tp)
        if offset < partition.high_watermark:
            log.warning("Truncating %s-%d to offset %d below high watermark %d", *tp, offset, partition.high_watermark)
        try:
            partition.truncate_to(offset)
        except KafkaError:
            log.exception("Failed to truncate %s-%d at offset %d", *tp, offset)
            self._mark_failed(tp)
            return None
        return offset

    def _after_truncation(self, truncations: dict[TopicPartition, int | None]) -> None:
        """Kafka's ``updateFetchOffsetAndMaybeMarkTruncationComplete`` (truncation on fetch: always fetching next)."""
        for tp, offset in truncations.items():
            state = self.partitions.get(tp)
            if offset is None or state is None:
                continue
            self.partitions[tp] = replace(state, fetch_offset=offset, state=FetchState.FETCHING, last_fetched_epoch=self.partition(tp).latest_epoch)

    def _on_fenced(self, tp: TopicPartition, request_epoch: int) -> bool:
        """The leader has a newer epoch: if ours is still the one we asked with, wait for LeaderAndIsr
        (failed); otherwise retry later (True)."""
        state = self.partitions.get(tp)
        if state is None:
            return False
        if request_epoch == state.current_leader_epoch:
            log.info("Partition %s-%d has an older epoch (%d) than the current leader. Will await the new LeaderAndIsr state before resuming fetching.", *tp, state.current_leader_epoch)
            self._mark_failed(tp)
            return False
        return True

    # -- fetch ------------------------------------------------------------------------------------------

    def _build_fetch(self, version: int) -> tuple[FetchRequestDict, dict[TopicPartition, tuple[int, int]]]:
        """The request body and, per partition fetched (in the session, whether the request names it or
        not), the (fetch offset, leader epoch) it asks with."""
        now = time.monotonic()
        sent: dict[TopicPartition, tuple[int, int]] = {}
        wanted: dict[TopicPartition, PartitionRequest] = {}
        for tp, state in self.partitions.items():
            if not state.ready_for_fetch(now):
                continue
            try:
                local = self.partition(tp)
                log_start = local.log_start_offset
            except (KeyError, OSError):  # gone with its log directory
                self._mark_failed(tp)
                continue
            if self._throttled(tp, local, state):
                continue
            wanted[tp] = (
                state.topic_id or ZERO_UUID,
                {
                    "partition": tp[1],
                    "current_leader_epoch": state.current_leader_epoch,
                    "fetch_offset": state.fetch_offset,
                    "last_fetched_epoch": -1 if state.last_fetched_epoch is None else state.last_fetched_epoch,
                    "log_start_offset": log_start,
                    "partition_max_bytes": self.config.partition_max_bytes,
                },
            )
            sent[tp] = (state.fetch_offset, state.current_leader_epoch)
        if version >= FIRST_SESSION_VERSION and wanted:
            fetch = self.session.build(wanted, version)
            session_id, epoch, to_send, to_forget = fetch.session_id, fetch.epoch, fetch.to_send, fetch.to_forget
        else:
            session_id, epoch, to_send, to_forget = 0, SESSIONLESS_EPOCH, wanted, {}
        topics: dict[str, FetchTopicDict] = {}
        for tp, (topic_id, request) in to_send.items():
            topics.setdefault(tp[0], {"topic": tp[0], "topic_id": topic_id, "partitions": []})["partitions"].append(request)
        forgotten: dict[str, ForgottenTopicDict] = {}
        for tp, topic_id in to_forget.items():
            forgotten.setdefault(tp[0], {"topic": tp[0], "topic_id": topic_id, "partitions": []})["partitions"].append(tp[1])
        body: FetchRequestDict = {
            "replica_id": self.config.broker_id,
            "replica_state": {"replica_id": self.config.broker_id, "replica_epoch": self.config.broker_epoch},
            "max_wait_ms": self.config.max_wait_ms,
            "min_bytes": self.config.min_bytes,
            "max_bytes": self.config.max_bytes,
            "isolation_level": 0,
            "session_id": session_id,
            "session_epoch": epoch,
            "topics": list(topics.values()),
            "forgotten_topics_data": list(forgotten.values()),
            "rack_id": "",
        }
        return body, sent

    def _throttled(self, tp: TopicPartition, local: Partition, state: PartitionFetchState) -> bool:
        """Kafka's ``shouldFollowerThrottle``: a replica not in sync (its lag unknown or above 0), on a partition
        the topic throttles here, is left out of the fetch while the follower quota is exceeded."""
        quota = self.quota
        return (
            quota.bound < UNBOUNDED
            and not (state.lag is not None and state.lag <= 0)
            and quota.throttles(local.config.follower_replication_throttled_replicas, tp[1])
            and quota.exceeded(int(time.time() * 1000))
        )

    async def _maybe_fetch(self, connection: BrokerConnection) -> None:
        version = min(connection.version_for(ApiKey.Fetch), INTER_BROKER_FETCH_VERSION)
        if version >= 13 and any(s.topic_id in (None, ZERO_UUID) for s in self.partitions.values()):
            version = 12  # Kafka's rule: topic ids only when every partition has one
        body, sent = self._build_fetch(version)
        if not sent:
            with anyio.move_on_after(self.config.backoff_ms / 1000):
                await self._changed.wait()
            return
        names = {state.topic_id: tp[0] for tp, state in self.partitions.items()}
        try:
            response: FetchResponse = await connection.send(ApiKey.Fetch, version, body, timeout_s=self.config.request_timeout_s + self.config.max_wait_ms / 1000)
        except (OSError, TimeoutError, KafkaError) as exc:
            log.warning("Error in response for fetch request to leader %d: %s", self.leader.node_id, exc)
            self.session.handle_error()
            self._delay(set(self.partitions))
            await anyio.sleep(self.config.backoff_ms / 1000)
            return
        in_session = body["session_epoch"] != SESSIONLESS_EPOCH
        if in_session and not self.session.handle_response(response.error_code, response.session_id) and response.error_code in SESSION_ERRORS:
            # Kafka's fetcher reads nothing of the answer and fetches again at once, in full.
            log.info("Leader %d was unable to process the fetch request with (sessionId=%d, epoch=%d): %s", self.leader.node_id, body["session_id"], body["session_epoch"], ErrorCode(response.error_code).name)
            return
        if response.error_code != ErrorCode.NONE:
            log.warning("Fetch to leader %d answered %s", self.leader.node_id, ErrorCode(response.error_code).name)
            self._delay(set(sent))
            return
        errors: set[TopicPartition] = set()
        diverging: dict[TopicPartition, tuple[int, int]] = {}
        out_of_range: dict[TopicPartition, int] = {}
        for topic in response.responses:
            name = topic.topic if version < 13 else names.get(topic.topic_id)
            if name is None:
                continue  # a topic id the request did not carry: nothing of it was asked
            for p in topic.partitions:
                tp = (name, p.partition_index)
                state = self.partitions.get(tp)
                asked = sent.get(tp)
                if state is None or asked is None or asked[0] != state.fetch_offset or not state.ready_for_fetch(time.monotonic()):
                    continue  # removed, truncated or re-added while the fetch was out
                self._process(tp, state, asked[1], p, errors, diverging, out_of_range)
        if diverging:
            self._truncate_on_fetch_response(diverging)
        for tp, asked_epoch in out_of_range.items():
            if not await self._handle_out_of_range(connection, tp, asked_epoch):
                errors.add(tp)
        self._delay(errors)

    def _process(self, tp: TopicPartition, state: PartitionFetchState, asked_epoch: int, data: PartitionData, errors: set[TopicPartition], diverging: dict[TopicPartition, tuple[int, int]], out_of_range: dict[TopicPartition, int]) -> None:
        error = data.error_code
        if error == ErrorCode.NONE:
            epoch_end = getattr(data, "diverging_epoch", None)
            if epoch_end is not None and epoch_end.epoch >= 0 and epoch_end.end_offset >= 0:
                # Truncate first; the watermarks are taken from the next fetch, after the cut.
                diverging[tp] = (epoch_end.epoch, epoch_end.end_offset)
                return
            try:
                self._append(tp, state, data)
            except KafkaError as exc:
                if exc.code == ErrorCode.KAFKA_STORAGE_ERROR:  # the partition told the log directory failure channel
                    log.error("Error while processing data for partition %s-%d at offset %d: %s", *tp, state.fetch_offset, exc)
                    self._mark_failed(tp)
                else:  # a corrupt batch: tried again at the next fetch
                    log.error("Found invalid messages during fetch for partition %s-%d offset %d: %s", *tp, state.fetch_offset, exc)
                    errors.add(tp)
            except Exception:
                log.exception("Unexpected error occurred while processing data for partition %s-%d at offset %d", *tp, state.fetch_offset)
                self._mark_failed(tp)
        elif error == ErrorCode.OFFSET_OUT_OF_RANGE:
            out_of_range[tp] = asked_epoch
        elif error == ErrorCode.FENCED_LEADER_EPOCH:
            if self._on_fenced(tp, asked_epoch):
                errors.add(tp)
        else:
            log.debug("Error for partition %s-%d from leader %d: %s", *tp, self.leader.node_id, ErrorCode(error).name if error in ErrorCode._value2member_map_ else error)
            errors.add(tp)

    async def _handle_out_of_range(self, connection: BrokerConnection, tp: TopicPartition, asked_epoch: int) -> bool:
        """Kafka's ``handleOutOfRangeError``: start again where the leader's log allows; False to retry later."""
        try:
            state = self.partitions.get(tp)
            if state is not None:
                self._update(tp, await self._fetch_offset_and_truncate(connection, tp, state))
            return True
        except KafkaError as exc:
            if exc.code == ErrorCode.FENCED_LEADER_EPOCH:
                return not self._on_fenced(tp, asked_epoch)
            log.info("Could not fetch offset for %s-%d due to error: %s", *tp, exc)
            return False
        except (OSError, TimeoutError) as exc:
            log.error("Error getting offset for partition %s-%d: %s", *tp, exc)
            return False

    async def _fetch_offset_and_truncate(self, connection: BrokerConnection, tp: TopicPartition, state: PartitionFetchState) -> PartitionFetchState:
        """Kafka's ``fetchOffsetAndTruncate``: a follower ahead of the leader's end (after an unclean
        election) cuts to it; one behind the leader's start starts empty there; otherwise fetch from the
        follower's end."""
        local = self.partition(tp)
        replica_end = local.log_end_offset
        leader_end = await self._list_offset(connection, tp, state.current_leader_epoch, LATEST_TIMESTAMP)
        if leader_end < replica_end:
            log.warning("Reset fetch offset for partition %s-%d from %d to current leader's latest offset %d", *tp, replica_end, leader_end)
            local.truncate_to(leader_end)
            return replace(state, fetch_offset=leader_end, lag=0, state=FetchState.FETCHING, last_fetched_epoch=local.latest_epoch)
        leader_start = await self._list_offset(connection, tp, state.current_leader_epoch, EARLIEST_TIMESTAMP)
        offset = max(leader_start, replica_end)
        if leader_start > replica_end:
            log.warning("Truncate fully and reset fetch offset for partition %s-%d from %d to the current leader's start offset %d", *tp, replica_end, leader_start)
            local.truncate_fully_and_start_at(leader_start)
        return replace(state, fetch_offset=offset, lag=leader_end - offset, state=FetchState.FETCHING, last_fetched_epoch=local.latest_epoch)

    async def _list_offset(self, connection: BrokerConnection, tp: TopicPartition, current_leader_epoch: int, timestamp: int) -> int:
        body: ListOffsetsRequestDict = {
            "replica_id": self.config.broker_id,
            "isolation_level": 0,
            "topics": [{"name": tp[0], "partitions": [{"partition_index": tp[1], "current_leader_epoch": current_leader_epoch, "timestamp": timestamp, "max_num_offsets": 1}]}],
        }
        response: ListOffsetsResponse = await connection.request(ApiKey.ListOffsets, body)
        answer = response.topics[0].partitions[0]
        if answer.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(answer.error_code))
        return answer.offset

    def _append(self, tp: TopicPartition, state: PartitionFetchState, data: PartitionData) -> None:
        """Kafka's ``processPartitionData``: append at the LEO, then take the leader's watermarks."""
        local = self.partition(tp)
        if state.fetch_offset != local.log_end_offset:
            raise RuntimeError(f"Offset mismatch for partition {tp[0]}-{tp[1]}: fetched offset = {state.fetch_offset}, log end offset = {local.log_end_offset}.")
        records = data.records
        info = local.append_records_to_follower(records) if records is not None and len(records) else None
        if info is not None and self.quota.throttles(local.config.follower_replication_throttled_replicas, tp[1]):
            self.quota.record(len(records), int(time.time() * 1000))  # type: ignore[arg-type]
        local.update_follower_high_watermark(data.high_watermark, data.log_start_offset)
        next_offset = info.last_offset + 1 if info is not None else state.fetch_offset
        lag = max(0, data.high_watermark - next_offset)
        if info is not None or state.lag is None:
            last_epoch = local.latest_epoch if info is not None else state.last_fetched_epoch
            self._update(tp, replace(state, fetch_offset=next_offset, lag=lag, state=FetchState.FETCHING, last_fetched_epoch=last_epoch))


@dataclass
class ReplicaFetcherManager:
    """The broker's fetchers: ``num.replica.fetchers`` per leader, a partition always on the same one
    (Kafka's ``AbstractFetcherManager``). Fetchers run in ``task_group``; one left without partitions stops."""

    config: FetcherConfig
    num_fetchers: int
    partition: Callable[[TopicPartition], Partition]
    task_group: Any
    quota: ReplicationQuota | None = None
    """The follower quota (KIP-73) every fetcher of the broker counts against."""
    fetchers: dict[tuple[int, int], ReplicaFetcher] = field(default_factory=dict)

    def add_fetcher_for_partitions(self, initial: dict[TopicPartition, InitialFetchState]) -> None:
        by_fetcher: dict[tuple[Node, int], dict[TopicPartition, InitialFetchState]] = {}
        for tp, start in initial.items():
            by_fetcher.setdefault((start.leader, fetcher_id(tp[0], tp[1], self.num_fetchers)), {})[tp] = start
        for (leader, index), partitions in by_fetcher.items():
            key = (leader.node_id, index)
            fetcher = self.fetchers.get(key)
            if fetcher is not None and fetcher.leader != leader:  # the leader moved to another endpoint
                fetcher.shutdown()
                fetcher = None
            if fetcher is None:
                fetcher = self.fetchers[key] = ReplicaFetcher(leader, index, self.config, self.partition, self.quota)
                self.task_group.start_soon(fetcher.run)
            fetcher.add_partitions(partitions)

    def remove_fetcher_for_partitions(self, tps: set[TopicPartition]) -> dict[TopicPartition, PartitionFetchState]:
        removed: dict[TopicPartition, PartitionFetchState] = {}
        for fetcher in self.fetchers.values():
            removed.update(fetcher.remove_partitions(tps))
            fetcher.failed -= tps
        self.shutdown_idle_fetchers()
        return removed

    def shutdown_idle_fetchers(self) -> None:
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                fetcher.shutdown()
                del self.fetchers[key]

    def close_all(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.shutdown()
        self.fetchers.clear()
