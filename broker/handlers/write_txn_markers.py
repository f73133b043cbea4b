"""WriteTxnMarkers: a transaction coordinator asks this broker, as the partitions' leader, to write the
COMMIT or ABORT markers of a producer's transaction (``broker/coordinator/transaction/transaction_markers.py`` writes them; the
local coordinator uses the same writer directly). One error per partition, grouped by producer id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.coordinator.transaction.transaction_coordinator import TxnMarkerEntry
from odradek.broker.coordinator.transaction.transaction_markers import MarkerWriter
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.write_txn_markers import WritableTxnMarkerPartitionResultDict, WritableTxnMarkerResultDict, WriteTxnMarkersRequest, WriteTxnMarkersResponseDict


def handle(marker_writer: MarkerWriter, authorization: Authorization, request: Request[WriteTxnMarkersRequest]) -> WriteTxnMarkersResponseDict | Awaitable[WriteTxnMarkersResponseDict]:
    markers = request.body.markers  # transaction_result: True for COMMIT, False for ABORT
    if not authorization.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):  # only brokers send markers
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {"markers": [{"producer_id": m.producer_id, "topics": [{"name": t.name, "partitions": [{"partition_index": i, "error_code": refused} for i in t.partition_indexes]} for t in m.topics]} for m in markers]}
    entries = [
        TxnMarkerEntry(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result, frozenset((t.name, i) for t in m.topics for i in t.partition_indexes))
        for m in markers
    ]

    async def answer() -> WriteTxnMarkersResponseDict:
        results = await marker_writer.write(entries)
        out: list[WritableTxnMarkerResultDict] = []
        for marker, errors in zip(markers, results):
            by_topic: dict[str, list[WritableTxnMarkerPartitionResultDict]] = {}
            for (topic, index), error in sorted(errors.items()):
                by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": error})
            out.append({"producer_id": marker.producer_id, "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]})
        return {"markers": out}

    return answer()
