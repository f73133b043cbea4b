"""Produce: each partition's records to the replica manager, its results back as the response.

The checks and conversions (Kafka's LogValidator) are ``storage.log_validator``'s, the append order and the
waits the replica manager's. acks=0 gets no answer, and any error closes the connection instead (so the
client notices); acks=all is answered once the high watermark passes the appended batches.

Authorization is Kafka's: transactional records need WRITE on the transactional id (else every partition
is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and each topic needs WRITE (else its partitions
get TOPIC_AUTHORIZATION_FAILED and are not appended).

The records' bytes count against the client's ``producer_byte_rate``: a client over it gets the throttle time
in the answer and its connection is not read for that long (KIP-219). Kafka 3.9 does the same at every
version: before v6, whose clients do not throttle themselves, the answer is not held back either (only the
muted connection slows such a client down).
"""

from __future__ import annotations

import itertools
import time
from typing import TYPE_CHECKING, Awaitable, Iterator


from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.handlers import CLOSE_CONNECTION, CloseConnection, internal_topics_allowed, leader_hints
from odradek.broker.network.forwarded_produce import ForwardedProduce
from odradek.broker.quotas import ClientQuotas
from odradek.broker.replication.replica_manager import AppendOutcome, PartitionAppend, PartitionResponse, ReplicaManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import ATTRIBUTES_OFFSET, HEADER_SIZE, MAGIC_OFFSET, TRANSACTIONAL_FLAG
from odradek.storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from odradek.protocol.message_types.produce import PartitionProduceResponseDict, ProduceRequest, ProduceResponseDict, TopicProduceData, TopicProduceResponseDict


def handle(
    replica_manager: ReplicaManager, authorization: Authorization, quotas: ClientQuotas, request: Request[ProduceRequest]
) -> ProduceResponseDict | Awaitable[ProduceResponseDict] | CloseConnection | None:
    # The request's fields are read once: each read of a decoded field is a Python call.
    body = request.body
    topic_data, acks, transactional_id = body.topic_data, body.acks, body.transactional_id
    # A produce a front process decoded and checked (docs/multicore.md, step 2) comes with its appends.
    requested = body.appends if type(body) is ForwardedProduce else [PartitionAppend(t.name, pd.index, pd.records) for t in topic_data for pd in t.partition_data]
    throttle_ms = _record_bytes(quotas, request, requested) if quotas.entities else 0  # no quota: no sum, no clock read
    if has_transactional_records(requested) and (
        transactional_id is None or not authorization.authorize(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
    ):
        return CLOSE_CONNECTION if acks == 0 else _refused(topic_data, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable: set[str] | None = None  # None: every topic (no authorizer: no set of the names, no copy of it)
    appends = requested
    if authorization.authorizer is not None:
        names = {a.topic for a in requested}
        writable = authorization.filter_authorized(request, AclOperation.WRITE, ResourceType.TOPIC, names)
        if len(writable) < len(names):
            appends = [a for a in requested if a.topic in writable]
    outcome = replica_manager.append_records(
        appends,
        acks,
        body.timeout_ms,
        AppendOrigin.CLIENT,
        internal_topics_allowed=internal_topics_allowed(request),
        transactional_id=transactional_id,
        produce_version=request.header.api_version,
    )
    if acks == 0:
        return CLOSE_CONNECTION if outcome.failed or len(appends) < len(requested) else None
    if not outcome.pending:
        return _response(replica_manager, request, outcome, writable, throttle_ms)

    async def answer() -> ProduceResponseDict:
        await outcome.completion()
        return _response(replica_manager, request, outcome, writable, throttle_ms)

    return answer()


def _record_bytes(quotas: ClientQuotas, request: Request, appends: list[PartitionAppend]) -> int:
    """Charge the request's record bytes to the client's producer quota (Kafka charges the whole request's
    size; the header and field overhead left out here are a few dozen bytes). Asked only when some quota
    is configured."""
    size = 0
    for append in appends:
        if append.records is not None:
            size += len(append.records)
    return quotas.record_produce(request, size, time.monotonic())


def has_transactional_records(appends: list[PartitionAppend]) -> bool:
    """Kafka's ``RequestUtils.hasTransactionalRecords``: the first batch of some partition is transactional
    (its header read as is: a malformed one is refused by validation, partition by partition)."""
    for append in appends:
        records = append.records
        # The flag read from the attributes' low byte (big-endian int16): a whole header parse per
        # partition cost more than the rest of this check.
        if records is not None and len(records) >= HEADER_SIZE and records[MAGIC_OFFSET] >= 2 and records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG:
            return True
    return False


def _refused(topic_data: list[TopicProduceData], error: ErrorCode) -> ProduceResponseDict:
    return _entries(topic_data, itertools.repeat(PartitionResponse(error)), None)


_TOPIC_REFUSED = PartitionResponse(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
"""The result of a partition of a topic the client may not write (read only: one for all answers)."""


def _response(replica_manager: ReplicaManager, request: Request[ProduceRequest], outcome: AppendOutcome, writable: set[str] | None, throttle_ms: int) -> ProduceResponseDict:
    response = _entries(request.body.topic_data, iter(outcome.results), writable)
    response["throttle_time_ms"] = throttle_ms
    if outcome.failed and request.header.api_version >= leader_hints.PRODUCE_VERSION:
        hinted = [(t["name"], e["index"], e) for t in response["responses"] for e in t["partition_responses"] if e["error_code"] in leader_hints.PRODUCE_ERRORS]
        if hinted:
            leader_hints.add(replica_manager, request, response, hinted)
    return response


def _entries(topic_data: list[TopicProduceData], results: Iterator[PartitionResponse], writable: set[str] | None) -> ProduceResponseDict:
    """One entry per topic of the request, in its order (not merged by name): ``results`` gives the results
    of the partitions of the ``writable`` topics (all when None) in turn, the others are refused
    TOPIC_AUTHORIZATION_FAILED. (An iterator rather than a function per partition: a Python call fewer each.)"""
    responses: list[TopicProduceResponseDict] = []
    for topic in topic_data:
        name = topic.name
        refused = writable is not None and name not in writable
        entries: list[PartitionProduceResponseDict] = []
        for pd in topic.partition_data:
            result = _TOPIC_REFUSED if refused else next(results)
            entry: PartitionProduceResponseDict = {
                "index": pd.index,
                "error_code": result.error,
                "base_offset": result.base_offset,
                "log_append_time_ms": result.log_append_time_ms,
                "log_start_offset": result.log_start_offset,
            }
            if result.record_errors is not None:
                entry["error_message"] = result.error_message
                entry["record_errors"] = result.record_errors
            entries.append(entry)
        responses.append({"name": name, "partition_responses": entries})
    return {"responses": responses}
