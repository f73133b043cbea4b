"""Fetch: the request's partitions (by topic name, v0-12, or topic id, v13+) and its incremental fetch
session (KIP-227, v7+) translated into a replica manager fetch; its reads into the response.

The reads' rules are the replica manager's: ``max_bytes`` across the response and ``partition_max_bytes``
per partition, but the first partition with data returns at least one whole batch even if it is larger
(KIP-74, v3+); a fetch inside a batch returns that whole batch (the client skips the records before its
offset); long polling until ``min_bytes`` arrive or ``max_wait_ms`` passes, woken by appends. Followers
(replica id ≥ 0) read up to the log end offset and tell the leader their position. Records are slices of
segment files, sent with sendfile.

Authorization is Kafka's: a consumer needs READ on each topic, a follower CLUSTER_ACTION on the cluster;
a partition refused is answered TOPIC_AUTHORIZATION_FAILED (after the others) and not read.

A consumer's ``consumer_byte_rate`` bounds an answer to what the quota window allows, and an answer that
takes it over the rate is sent empty with the throttle time, its connection then not read for that long
(KIP-219), as Kafka's at every version (before v8 too, whose clients do not throttle themselves: Kafka 3.9
does not hold their answer back either).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Awaitable


from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.config import BrokerConfig
from odradek.broker.handlers import leader_hints
from odradek.broker.network.request_context import listener_name
from odradek.broker.replication.fetch_session import FetchContext, FetchPartition, FetchSessionCache, PartitionKey, PartitionOutcome
from odradek.broker.quotas import ClientQuotas
from odradek.broker.replication.replica_manager import FetchParams, PartitionRead, ReplicaManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid
from odradek.protocol.record_batch import NegativeTimestampError

if TYPE_CHECKING:
    from odradek.protocol.message_types.fetch import FetchableTopicResponseDict, FetchRequest, FetchResponseDict, PartitionDataDict

log = logging.getLogger("odradek.apis")

READ_COMMITTED = 1
_LOOKUP_ERRORS = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED})
"""A consumer's partitions Kafka's KafkaApis sets aside before reading (not authorized, or the topic or
partition is not in its metadata): answered after the partitions it read, whatever the request's order."""
_MAGIC_FOR_VERSION = {0: 0, 1: 0, 2: 1, 3: 1}
"""Fetch v0-v3 read message sets of magic 0 (v0-v1) or 1 (v2-v3): the only versions that copy records."""


def handle(replica_manager: ReplicaManager, fetch_sessions: FetchSessionCache, config: BrokerConfig, authorization: Authorization, quotas: ClientQuotas, request: Request[FetchRequest]) -> FetchResponseDict | Awaitable[FetchResponseDict]:
    body = request.body
    version = request.header.api_version
    uses_ids = version >= 13
    replica_id = body.replica_state.replica_id if version >= 15 else body.replica_id
    is_follower = replica_id >= 0
    now_ms = int(time.time() * 1000)

    requested = []
    key_topic: str | Uuid  # a session's partitions are keyed by topic id from v13, by name before
    for topic in body.topics:
        topic_id = topic.topic_id  # each decoded-field read is a Python call: each read once
        if uses_ids:
            name, key_topic = replica_manager.topic_name(topic_id), topic_id
        else:
            name = key_topic = topic.topic
        for p in topic.partitions:
            index = p.partition
            # Kafka's FetchRequest reads any negative current leader epoch as none given (``optionalEpoch``).
            epoch = p.current_leader_epoch
            requested.append(
                FetchPartition((key_topic, index), name, topic_id, index, p.fetch_offset, p.partition_max_bytes, epoch if epoch >= 0 else -1, p.log_start_offset, p.last_fetched_epoch)
            )
    forgotten: list[PartitionKey] = []
    for forgotten_topic in body.forgotten_topics_data:
        key_topic = forgotten_topic.topic_id if uses_ids else forgotten_topic.topic
        forgotten.extend((key_topic, p) for p in forgotten_topic.partitions)

    if version >= 7:
        context = fetch_sessions.new_context(body.session_id, body.session_epoch, requested, forgotten, is_follower, now_ms)
    else:
        context = FetchContext(requested=requested)
    if context.error != ErrorCode.NONE:
        return {"error_code": context.error, "session_id": 0, "responses": []}

    isolation = body.isolation_level if version >= 4 else 0
    # From v11 a consumer names its rack and any replica may serve it (KIP-392, Kafka's ClientMetadata).
    from_any_replica = version >= 11 and not is_follower
    # A follower is charged nothing; a consumer only when some client quota is configured (asked once).
    charged = not is_follower and quotas.entities
    params = FetchParams(
        replica_id=replica_id,
        max_wait_ms=body.max_wait_ms,
        min_bytes=body.min_bytes,
        max_bytes=min(body.max_bytes if version >= 3 else 2**31 - 1, config["fetch.max.bytes"], _quota_max_bytes(quotas, request) if charged else 2**31 - 1),
        isolation=isolation,
        hard_limit=version <= 2,
        magic=_MAGIC_FOR_VERSION.get(version),
        fetch_only_leader=not from_any_replica,
        client_rack=body.rack_id if from_any_replica else None,
        listener=listener_name(request) if from_any_replica else None,
    )
    to_read, denied = _authorized(authorization, request, context.partitions(replica_manager.topic_name if uses_ids else None), is_follower)
    try:
        reads = replica_manager.fetch_messages(params, to_read) if to_read else []
    except NegativeTimestampError as exc:
        return _failed(request, exc)
    read_committed = isolation == READ_COMMITTED
    if isinstance(reads, list):
        throttle_ms = _charge(quotas, request, reads) if charged else 0
        if throttle_ms == 0:
            return _respond(replica_manager, request, fetch_sessions, context, reads + denied, version, is_follower, read_committed, now_ms)
        return _throttled(context, throttle_ms)

    async def after_wait() -> FetchResponseDict:
        try:
            done = await reads
        except NegativeTimestampError as exc:
            return _failed(request, exc)
        throttle_ms = _charge(quotas, request, done) if not is_follower and quotas.entities else 0  # (a quota set meanwhile counts)
        if throttle_ms == 0:
            return _respond(replica_manager, request, fetch_sessions, context, done + denied, version, is_follower, read_committed, int(time.time() * 1000))
        return _throttled(context, throttle_ms)

    return after_wait()


def _failed(request: Request[FetchRequest], exc: Exception) -> FetchResponseDict:
    """Kafka's answer to a fetch its KafkaApis fails on (``FetchRequest.getErrorResponse``):
    UNKNOWN_SERVER_ERROR at the top and, before v13, on every partition asked for, without records or
    offsets. So fails an old version's fetch (v0-v3) that must down-convert a record with a negative
    timestamp, which Kafka's MemoryRecordsBuilder refuses to write."""
    header, body = request.header, request.body
    log.error("Unexpected error handling Fetch v%d (client %s): %s", header.api_version, header.client_id, exc)
    code = ErrorCode.UNKNOWN_SERVER_ERROR
    topics: list[FetchableTopicResponseDict] = []
    if header.api_version < 13:
        topics = [{"topic": t.topic, "topic_id": t.topic_id, "partitions": [{"partition_index": p.partition, "error_code": code, "high_watermark": -1, "records": b""} for p in t.partitions]} for t in body.topics]
    return {"error_code": code, "session_id": body.session_id, "responses": topics}


def _quota_max_bytes(quotas: ClientQuotas, request: Request) -> int:
    bound = quotas.fetch_max_bytes(request)
    return 2**31 - 1 if bound is None else bound


def _charge(quotas: ClientQuotas, request: Request, reads: list[PartitionRead]) -> int:
    """The answer's record bytes against the consumer's quota (Kafka counts the whole answer's size); asked
    only when some client quota is configured."""
    return quotas.record_fetch(request, sum(r.length for r in reads), time.monotonic())


def _throttled(context: FetchContext, throttle_ms: int) -> FetchResponseDict:
    """Kafka's ``getThrottledResponse``: no partitions, the session left as it was (a new one not created)."""
    session_id = context.session.session_id if context.incremental and context.session is not None else 0
    return {"error_code": ErrorCode.NONE, "session_id": session_id, "responses": [], "throttle_time_ms": throttle_ms}


def _authorized(authorization: Authorization, request: Request, partitions: list[FetchPartition], is_follower: bool) -> tuple[list[FetchPartition], list[PartitionRead]]:
    """The partitions to read, and the refused ones answered TOPIC_AUTHORIZATION_FAILED (without an
    authorizer: all of them, at the cost of one attribute test)."""
    if authorization.authorizer is None:
        return partitions, []
    if is_follower:
        if authorization.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return partitions, []
        return [], [PartitionRead(fp, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for fp in partitions]
    readable = authorization.filter_authorized(request, AclOperation.READ, ResourceType.TOPIC, {fp.topic for fp in partitions if fp.topic is not None})
    denied = [fp for fp in partitions if fp.topic is not None and fp.topic not in readable]
    if not denied:
        return partitions, []
    return [fp for fp in partitions if fp.topic is None or fp.topic in readable], [PartitionRead(fp, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for fp in denied]


def _respond(replica_manager: ReplicaManager, request: Request[FetchRequest], fetch_sessions: FetchSessionCache, context: FetchContext, reads: list[PartitionRead], version: int, is_follower: bool, read_committed: bool, now_ms: int) -> FetchResponseDict:
    if is_follower:
        replica_manager.record_leader_replication(reads)
    # One loop rather than comprehensions (each a Python call): the outcomes, the reads by key, and whether a
    # partition could not be looked up.
    outcomes: dict[PartitionKey, PartitionOutcome] = {}
    by_key: dict[PartitionKey, PartitionRead] = {}
    lookup_failed = False
    for r in reads:
        key = r.request.key
        outcomes[key] = PartitionOutcome(r.error, r.high_watermark, r.last_stable_offset, r.log_start_offset, r.length, r.preferred_read_replica, r.diverging_epoch is not None)
        by_key[key] = r
        lookup_failed = lookup_failed or r.error in _LOOKUP_ERRORS
    if version >= 7:
        session_id, included = fetch_sessions.finish(context, outcomes, is_follower, now_ms)
    else:
        session_id, included = 0, [r.request.key for r in reads]
    if not is_follower and lookup_failed:
        # Kafka answers a consumer's partitions it cannot look up after the others (KafkaApis' "erroneous").
        included = [k for k in included if by_key[k].error not in _LOOKUP_ERRORS] + [k for k in included if by_key[k].error in _LOOKUP_ERRORS]
    topics: list[FetchableTopicResponseDict] = []
    hinted: list[tuple[str, int, PartitionDataDict]] = []
    last_topic = object()
    for key in included:
        r = by_key[key]
        fp = r.request
        if fp.key[0] != last_topic:
            topics.append({"topic": fp.topic or "", "topic_id": fp.topic_id, "partitions": []})
            last_topic = fp.key[0]
        entry: PartitionDataDict = {
            "partition_index": fp.partition,
            "error_code": r.error,
            "high_watermark": r.high_watermark,
            "last_stable_offset": r.last_stable_offset,
            "log_start_offset": r.log_start_offset,
            # Kafka lists aborted transactions only for READ_COMMITTED; a partition it refuses before
            # reading (KafkaApis' "erroneous") carries the field's default, an empty list.
            "aborted_transactions": [{"producer_id": t.producer_id, "first_offset": t.first_offset} for t in r.aborted_transactions]
            if read_committed or r.error == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else None,
            "preferred_read_replica": r.preferred_read_replica,
            "records": r.records if r.records is not None else b"",
        }
        if r.diverging_epoch is not None:
            entry["diverging_epoch"] = {"epoch": r.diverging_epoch[0], "end_offset": r.diverging_epoch[1]}
        topics[-1]["partitions"].append(entry)
        if r.error in leader_hints.FETCH_ERRORS and version >= leader_hints.FETCH_VERSION and fp.topic is not None:
            hinted.append((fp.topic, fp.partition, entry))
    response: FetchResponseDict = {"error_code": ErrorCode.NONE, "session_id": session_id, "responses": topics}
    if hinted:
        leader_hints.add(replica_manager, request, response, hinted)
    return response
