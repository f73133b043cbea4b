"""One ``__consumer_offsets`` partition's groups and their persistence (Kafka's ``GroupMetadataManager``).

The cache of groups and their offsets, kept in step with the partition's records: loading replays them
(offset commits, group metadata, tombstones; transactional offset commits stay pending until their
producer's COMMIT marker, and an ABORT drops them), writes turn state into records (offset commits, a
group's metadata, tombstones), and a timer expires offsets past their retention. Membership and
rebalances are the protocol's (:mod:`odradek.broker.coordinator.group.group_coordinator`), which resumes the groups loaded
and is told when one is removed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Protocol

from odradek.broker.coordinator.coordinators import GROUP_METADATA_TOPIC as GROUP_METADATA_TOPIC  # re-exported
from odradek.broker.coordinator.runtime import AppendResult, CoordinatorResult, Producer, Record, ShardContext
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.group.group import CommitRecord, Group, GroupState
from odradek.broker.coordinator.group.group_config import GroupConfig
from odradek.broker.coordinator.group.group_metadata_records import (
    GroupMetadataKey,
    GroupRecord,
    OffsetAndMetadata,
    OffsetKey,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
    read_group_value,
    read_key,
    read_offset_value,
)
from odradek.protocol.errors import ErrorCode
from odradek.storage.topic_partition import TopicPartition

log = logging.getLogger("odradek.group_coordinator")

OFFSET_EXPIRATION_TIMER = ("expire-offsets",)

# How an offsets-topic append error is reported to the client (Kafka's GroupMetadataManager mappings).
STORE_GROUP_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}
STORE_OFFSETS_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


class GroupListener(Protocol):
    """What the protocol does when the cache loses a group (its timers go), and which topics a consumer
    group (KIP-848) under a group's id subscribes to (their offsets do not expire)."""

    def on_group_removed(self, group: Group) -> None: ...

    def consumer_group_topics(self, group_id: str) -> set[str]: ...


@dataclass
class _Loading:
    """The partition's state while its records replay: the later record of a key wins."""

    offsets: dict[str, dict[TopicPartition, CommitRecord]] = field(default_factory=dict)
    pending: dict[int, dict[str, dict[TopicPartition, CommitRecord]]] = field(default_factory=dict)
    """Transactional offset commits by producer id, then group: applied by a COMMIT marker."""
    groups: dict[str, GroupRecord] = field(default_factory=dict)


class GroupMetadataManager:
    def __init__(self, context: ShardContext, config: GroupConfig, listener: GroupListener) -> None:
        self.context = context
        self.config = config
        self.clock = context.clock
        self.listener = listener
        self.groups: dict[str, Group] = {}
        self.open_groups_for_producer: dict[int, set[str]] = {}
        """Groups with transactional offsets pending per producer id: a marker completes them."""
        self._loading: _Loading | None = _Loading()

    @property
    def partition(self) -> int:
        return self.context.partition

    # -- loading --------------------------------------------------------------------------------------------

    def replay(self, offset: int, producer: Producer | None, key_bytes: bytes, value: bytes | None) -> None:
        loading = self._loading
        assert loading is not None, "records replay only while the partition loads"
        key = read_key(key_bytes)
        if isinstance(key, OffsetKey):
            if producer is None:
                target = loading.offsets.setdefault(key.group, {})
            else:
                target = loading.pending.setdefault(producer.producer_id, {}).setdefault(key.group, {})
            tp = (key.topic, key.partition)
            if value is None:
                target.pop(tp, None)
            else:
                target[tp] = CommitRecord(offset, read_offset_value(value))
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                loading.groups.pop(key.group, None)
            else:
                loading.groups[key.group] = read_group_value(value)

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> None:
        loading = self._loading
        if loading is None:
            self.complete_pending_txn_offsets(producer_id, committed)
            return
        pending = loading.pending.pop(producer_id, {})
        if committed:
            for group_id, offsets in pending.items():
                group_offsets = loading.offsets.setdefault(group_id, {})
                for tp, record in offsets.items():
                    current = group_offsets.get(tp)
                    if current is None or current.older_than(record):
                        group_offsets[tp] = record

    def finish_loading(self) -> list[Group]:
        """Make the replayed records the cache; the groups loaded, for the protocol to resume."""
        loading = self._loading
        assert loading is not None
        self._loading = None
        pending_by_group: dict[str, dict[int, dict[TopicPartition, CommitRecord]]] = {}
        for producer_id, by_group in loading.pending.items():
            for group_id, offsets in by_group.items():
                pending_by_group.setdefault(group_id, {})[producer_id] = offsets
                self.open_groups_for_producer.setdefault(producer_id, set()).add(group_id)
        loaded = []
        for group_id in loading.groups.keys() | loading.offsets.keys() | pending_by_group.keys():
            record = loading.groups.get(group_id)
            group = Group.loaded(group_id, record, self.clock) if record is not None else Group(group_id, GroupState.EMPTY, self.clock)
            group.offsets.update(loading.offsets.get(group_id, {}))
            group.pending_txn_offset_commits.update(pending_by_group.get(group_id, {}))
            if record is None and not group.has_offsets:
                continue  # every offset of a group without metadata was deleted
            if self.add_group(group) is group:
                loaded.append(group)
        if loaded:
            log.info("Loaded %d groups from %s-%d", len(loaded), GROUP_METADATA_TOPIC, self.partition)
        return loaded

    # -- the cache ------------------------------------------------------------------------------------------

    def add_group(self, group: Group) -> Group:
        return self.groups.setdefault(group.group_id, group)

    def is_current(self, group: Group) -> bool:
        return self.groups.get(group.group_id) is group and not group.is_(GroupState.DEAD)

    def forget_group(self, group: Group) -> None:
        del self.groups[group.group_id]
        for groups in self.open_groups_for_producer.values():
            groups.discard(group.group_id)
        self.listener.on_group_removed(group)

    # -- writes ---------------------------------------------------------------------------------------------

    def store_offsets(self, group: Group, offsets: dict[TopicPartition, OffsetAndMetadata], producer: Producer | None = None) -> CoordinatorResult[dict[TopicPartition, ErrorCode]]:
        """Offset commits as one batch (transactional for ``producer``: TxnOffsetCommit); pending in the
        group until appended, then cached (a transaction's, once its COMMIT marker is written)."""
        limit = self.config.offset_metadata_max_bytes
        valid = {tp: o for tp, o in offsets.items() if len(o.metadata) <= limit}
        if not valid:
            return CoordinatorResult.of({tp: ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in offsets})
        group_id = group.group_id
        records: list[Record] = [(offset_commit_key(group_id, tp[0], tp[1]), offset_commit_value(o)) for tp, o in valid.items()]
        if producer is None:
            group.prepare_offset_commit(valid)
        else:
            self.open_groups_for_producer.setdefault(producer.producer_id, set()).add(group_id)
            group.prepare_txn_offset_commit(producer.producer_id, valid)

        def appended(result: AppendResult) -> dict[TopicPartition, ErrorCode]:
            if not group.is_(GroupState.DEAD):
                for tp, o in valid.items():
                    if producer is not None:
                        if result.error == ErrorCode.NONE:
                            group.on_txn_offset_commit_append(producer.producer_id, tp, CommitRecord(result.base_offset, o))
                        else:
                            group.fail_pending_txn_offset_commit(producer.producer_id, tp)
                    elif result.error == ErrorCode.NONE:
                        group.on_offset_commit_append(tp, CommitRecord(result.base_offset, o))
                    else:
                        group.fail_pending_offset_write(tp, o)
            error = STORE_OFFSETS_ERRORS.get(result.error, result.error)
            if error != ErrorCode.NONE:
                log.debug("Offset commit for group %s failed when appending to the log: %s", group_id, result.error.name)
            return {tp: error if tp in valid else ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in offsets}

        return CoordinatorResult(records, appended, producer)

    def store_group(self, group: Group, assignment: dict[str, bytes]) -> Deferred[ErrorCode]:
        """The group's metadata with ``assignment``; completes with the client's error for the append."""
        records: list[Record] = [(group_metadata_key(group.group_id), group_metadata_value(group.record(assignment)))]
        return self.context.write(CoordinatorResult(records, lambda r: STORE_GROUP_ERRORS.get(r.error, r.error)))

    def complete_pending_txn_offsets(self, producer_id: int, committed: bool) -> None:
        """A producer's COMMIT or ABORT marker is written to this partition: its offset commits of every
        group here become the groups' offsets, or are dropped."""
        for group_id in self.open_groups_for_producer.pop(producer_id, set()):
            group = self.groups.get(group_id)
            if group is not None and not group.is_(GroupState.DEAD):
                group.complete_pending_txn_offset_commit(producer_id, committed)

    def cleanup_group_metadata(self, groups: list[Group], selector: Callable[[Group], dict[TopicPartition, OffsetAndMetadata]]) -> int:
        """Remove offsets (and groups that end up Empty without offsets) and write their tombstones. The
        tombstones are written without waiting: if one is lost, the next expiry pass writes it again."""
        removed_total = 0
        for group in groups:
            removed = selector(group)
            if group.is_(GroupState.EMPTY) and not group.has_offsets:
                log.info("Group %s transitioned to Dead in generation %d", group.group_id, group.generation_id)
                group.transition_to(GroupState.DEAD)
            tombstones: list[Record] = [(offset_commit_key(group.group_id, tp[0], tp[1]), None) for tp in removed]
            if group.is_(GroupState.DEAD) and self.groups.get(group.group_id) is group:
                self.forget_group(group)
                # A group with generation 0 only ever stored offsets: it has no metadata record to delete.
                if group.generation_id > 0:
                    tombstones.append((group_metadata_key(group.group_id), None))
            if tombstones:
                self.context.write(CoordinatorResult(tombstones, lambda r: r.error))
                removed_total += len(removed)
        return removed_total

    def handle_deleted_partitions(self, partitions: list[TopicPartition]) -> int:
        """A deleted topic's offsets go from every group, with tombstones."""
        return self.cleanup_group_metadata(list(self.groups.values()), lambda g: g.remove_offsets(partitions))

    # -- expiry -----------------------------------------------------------------------------------------------

    def schedule_offset_expiration(self) -> None:
        def expire() -> None:
            self.schedule_offset_expiration()
            self.expire_offsets()

        self.context.timers.schedule(OFFSET_EXPIRATION_TIMER, self.config.offsets_retention_check_interval_ms, expire)

    def expire_offsets(self) -> int:
        now = self.clock()
        removed = self.cleanup_group_metadata(list(self.groups.values()), lambda g: g.remove_expired_offsets(now, self.config.offsets_retention_ms, self.listener.consumer_group_topics(g.group_id)))
        if removed:
            log.info("Removed %d expired offsets in %d milliseconds.", removed, self.clock() - now)
        return removed
