"""Produce: each partition's records to the replica manager, its results back as the response.

The checks and conversions (Kafka's LogValidator) are ``storage.log_validator``'s, the append order and the
waits the replica manager's. acks=0 gets no answer, and any error closes the connection instead (so the
client notices); acks=all is answered once the high watermark passes the appended batches.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.handlers import CLOSE_CONNECTION, internal_topics_allowed
from odradek.broker.replica_manager import AppendOutcome, PartitionAppend, ReplicaManager
from odradek.protocol.api import Request
from odradek.storage.producer_state import AppendOrigin


def handle(replica_manager: ReplicaManager, request: Request) -> Any:
    body = request.body
    appends = [PartitionAppend(t.name, pd.index, pd.records) for t in body.topic_data for pd in t.partition_data]
    outcome = replica_manager.append_records(
        appends,
        body.acks,
        body.timeout_ms,
        AppendOrigin.CLIENT,
        internal_topics_allowed=internal_topics_allowed(request),
        transactional_id=body.transactional_id,
        produce_version=request.header.api_version,
    )
    if body.acks == 0:
        return CLOSE_CONNECTION if outcome.failed else None
    if not outcome.pending:
        return _response(body, outcome)

    async def answer() -> dict:
        await outcome.completion()
        return _response(body, outcome)

    return answer()


def _response(body: Any, outcome: AppendOutcome) -> dict:
    """One entry per topic of the request, in its order (not merged by name)."""
    results = iter(outcome.results)
    responses = []
    for topic_data in body.topic_data:
        entries = []
        for pd in topic_data.partition_data:
            result = next(results)
            entry = {
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
        responses.append({"name": topic_data.name, "partition_responses": entries})
    return {"responses": responses}
