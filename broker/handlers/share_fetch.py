"""ShareFetch (KIP-932): a share group member's fetch, in its share session. Acknowledgements it carries
are applied first; then each partition of the session hands the member what it can acquire, with the
ranges acquired (``AcquiredRecords``): the records sent are whole batches as stored, slices of the
segment files sent with sendfile as a Fetch answer's are, and the consumer delivers only the acquired
offsets. A fetch that acquires nothing waits up to ``MaxWaitMs`` for records to arrive
or become available again.

Epoch 0 opens the session with the request's partitions (all answered); later epochs add partitions and
forget others (``ForgottenTopicsData``), and only partitions with records, an error or acknowledgements
are answered. Epoch -1 closes the session: it may only acknowledge, and the member's records go back.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.handlers.share_acknowledgements import acknowledge, topic_error, topic_responses, when_done
from odradek.broker.share.share_partition_manager import FINAL_EPOCH, INITIAL_EPOCH, PartitionAnswer, SharePartitionManager
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.share_fetch import ShareFetchRequest

RECORD_LIMIT = 1
"""ShareAcquireMode (v2+): 0 batch-optimized (whole batches, MaxRecords a soft limit), 1 record-limit."""


def handle(share_partitions: SharePartitionManager, authorization: Authorization, request: Request[ShareFetchRequest]) -> Any:
    body = request.body
    version = request.header.api_version
    manager = share_partitions
    group, member, epoch = body.group_id, body.member_id, body.share_session_epoch
    if not group or not member:
        return {"error_code": ErrorCode.INVALID_REQUEST, "error_message": "GroupId and MemberId must be set.", "responses": []}
    if not authorization.authorize(request, AclOperation.READ, ResourceType.GROUP, group):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "responses": []}
    requested = [(t.topic_id, p.partition_index) for t in body.topics for p in t.partitions]
    forgotten = [(t.topic_id, index) for t in body.forgotten_topics_data for index in t.partitions]
    if epoch == FINAL_EPOCH and any(not p.acknowledgement_batches for t in body.topics for p in t.partitions):
        return {"error_code": ErrorCode.INVALID_REQUEST, "error_message": "A final share fetch request may only acknowledge.", "responses": []}
    error, session = manager.open_session(group, member, epoch, [] if epoch == FINAL_EPOCH else requested, forgotten)
    if session is None:
        return {"error_code": error, "responses": []}
    session.connection_id = request.context.connection_id if request.context is not None else None
    outcomes = acknowledge(manager, authorization, request, group, member)
    lock_ms = manager.group_config(group).lock_duration_ms
    if epoch == FINAL_EPOCH:
        manager.close_session(session)
        return when_done(list(outcomes.values()), lambda: _response(lock_ms, [PartitionAnswer(t, i, acknowledge_error=d.value, acknowledged=True) for (t, i), d in outcomes.items()]))

    refused = {tp: e for tp in session.partitions if (e := topic_error(manager, authorization, request, tp[0])) is not None}
    readable = [tp for tp in session.partitions if tp not in refused]
    max_records = body.max_records if version >= 1 and body.max_records > 0 else 500
    strict = version >= 2 and body.share_acquire_mode == RECORD_LIMIT
    full = epoch == INITIAL_EPOCH

    def answer(answers: list[PartitionAnswer]) -> dict:
        found = {(a.topic_id, a.partition): a for a in answers}
        for tp, e in refused.items():
            found[tp] = PartitionAnswer(*tp, error=e)
        for tp, d in outcomes.items():
            a = found.setdefault(tp, PartitionAnswer(*tp))
            a.acknowledge_error, a.acknowledged = d.value, True
        shown = [a for a in found.values() if full or a.acquired or a.error or a.acknowledged]
        return _response(lock_ms, shown)

    answers = manager.fetch(group, member, readable, body.max_bytes, max_records, strict)
    if any(a.acquired for a in answers) or body.max_wait_ms <= 0 or not readable:
        return when_done(list(outcomes.values()), lambda: answer(answers))

    async def long_poll() -> dict:
        deadline = time.monotonic() + body.max_wait_ms / 1000
        result = answers
        while not any(a.acquired for a in result) and (left := deadline - time.monotonic()) > 0:
            await manager.wait_for_records(readable, left)
            result = manager.fetch(group, member, readable, body.max_bytes, max_records, strict)
        done = when_done(list(outcomes.values()), lambda: answer(result))
        return done if isinstance(done, dict) else await done

    return long_poll()


def _response(lock_ms: int, answers: list[PartitionAnswer]) -> dict:
    return {"error_code": ErrorCode.NONE, "acquisition_lock_timeout_ms": lock_ms, "responses": topic_responses(answers, with_records=True)}
