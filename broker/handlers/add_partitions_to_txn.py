"""AddPartitionsToTxn: a transactional producer adds the partitions it is about to write to its transaction.

v0-v3 carry one transaction (from clients); v4+ a batch of them (from partition leaders, KIP-890 part 1),
each either added (a transactions v2 client's first write to the partition: the transaction becomes a v2
one) or, with ``verify_only``, checked: is the partition already in the transaction? Any
unknown partition fails the whole transaction: those partitions get UNKNOWN_TOPIC_OR_PARTITION and the
others OPERATION_NOT_ATTEMPTED. Otherwise every partition of a transaction gets the coordinator's one
answer (verification answers per partition). Before v2 PRODUCER_FENCED is INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from odradek.broker.coordinator.transaction.transaction_metadata import TV_2
from odradek.controller.metadata_image import INTERNAL_TOPICS, MetadataImage
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.protocol.message_types.add_partitions_to_txn import AddPartitionsToTxnPartitionResultDict, AddPartitionsToTxnRequest, AddPartitionsToTxnResponseDict, AddPartitionsToTxnTopicResultDict

FENCED_AS_INVALID_EPOCH_BELOW = 2
BATCHED_SINCE = 4

Results = dict[TopicPartition, ErrorCode]


def handle(metadata: MetadataImage, transaction_coordinator: TransactionCoordinator, authorization: Authorization, request: Request[AddPartitionsToTxnRequest]) -> AddPartitionsToTxnResponseDict | Awaitable[AddPartitionsToTxnResponseDict]:
    body = request.body
    version = request.header.api_version
    if version >= BATCHED_SINCE and not authorization.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results_by_transaction": []}  # batches come from brokers only
    if version < BATCHED_SINCE:
        transactions = [(body.v3_and_below_transactional_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch, False, body.v3_and_below_topics)]
    else:
        transactions = [(t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only, t.topics) for t in body.transactions]
    answers: list[tuple[str, Deferred[Results]]] = []
    for transactional_id, producer_id, producer_epoch, verify_only, topics in transactions:
        partitions = [(t.name, index) for t in topics for index in t.partitions]
        refused = _client_refusals(metadata, authorization, request, transactional_id, partitions) if version < BATCHED_SINCE else None
        if refused is not None:
            answers.append((transactional_id, Deferred.completed(refused)))
            continue
        answers.append((transactional_id, _one(metadata, transaction_coordinator, version, transactional_id, producer_id, producer_epoch, verify_only, partitions)))
    return CoordinatorRuntime.respond(_all_of([d for _, d in answers]), lambda results: _response(version, [t for t, _ in answers], results))


def _client_refusals(metadata: MetadataImage, authorization: Authorization, request: Request[AddPartitionsToTxnRequest], transactional_id: str, partitions: list[TopicPartition]) -> Results | None:
    """Kafka's checks of a client's (v0-v3) request: WRITE on the transactional id, then on every topic (an
    internal topic never passes); any refusal fails the whole transaction's request, the partitions that
    passed answered OPERATION_NOT_ATTEMPTED (or UNKNOWN_TOPIC_OR_PARTITION)."""
    if not authorization.authorize(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = authorization.filter_authorized(request, AclOperation.WRITE, ResourceType.TOPIC, {t for t, _ in partitions if t not in INTERNAL_TOPICS})
    if all(t in writable for t, _ in partitions):
        return None

    def error(tp: TopicPartition) -> ErrorCode:
        if tp[0] not in writable:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        known = tp[0] in metadata.topics and tp[1] in metadata.topics[tp[0]].partitions
        return ErrorCode.OPERATION_NOT_ATTEMPTED if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    return {tp: error(tp) for tp in partitions}


def _one(metadata: MetadataImage, coordinator: TransactionCoordinator, version: int, transactional_id: str, producer_id: int, producer_epoch: int, verify_only: bool, partitions: list[TopicPartition]) -> Deferred[Results]:
    unknown = [tp for tp in partitions if tp[0] not in metadata.topics or tp[1] not in metadata.topics[tp[0]].partitions]
    if unknown:
        return Deferred.completed({tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in partitions})
    if verify_only:
        return Deferred.completed(coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions))

    def per_partition(error: ErrorCode) -> Results:
        if error == ErrorCode.PRODUCER_FENCED and version < FENCED_AS_INVALID_EPOCH_BELOW:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        return dict.fromkeys(partitions, error)

    # A broker's add (v4+) is a transactions v2 client's implicit one (Kafka: TV_2 above v3).
    client_transaction_version = TV_2 if version >= BATCHED_SINCE else 0
    return coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions, client_transaction_version).then(per_partition)


def _all_of(deferreds: list[Deferred[Results]]) -> Deferred[list[Results]]:
    """One Deferred of every transaction's results, complete once the last of them is."""
    out: Deferred[list[Results]] = Deferred()
    remaining = [len(deferreds)]

    def one_done(_: Results) -> None:
        remaining[0] -= 1
        if remaining[0] == 0:
            out.complete([d.value for d in deferreds])

    if not deferreds:
        out.complete([])
    for deferred in deferreds:
        deferred.add_callback(one_done)
    return out


def _topic_results(results: Results) -> list[AddPartitionsToTxnTopicResultDict]:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResultDict]] = {}
    for (topic, index), error in results.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "partition_error_code": error})
    return [{"name": topic, "results_by_partition": partitions} for topic, partitions in by_topic.items()]


def _response(version: int, transactional_ids: list[str], results: list[Results]) -> AddPartitionsToTxnResponseDict:
    if version < BATCHED_SINCE:
        return {"results_by_topic_v3_and_below": _topic_results(results[0])}
    return {
        "error_code": ErrorCode.NONE,
        "results_by_transaction": [{"transactional_id": t, "topic_results": _topic_results(r)} for t, r in zip(transactional_ids, results)],
    }
