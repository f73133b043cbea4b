"""TxnOffsetCommit: a transactional producer commits a consumer group's offsets inside its transaction
(``sendOffsetsToTransaction``, after AddOffsetsToTxn). The group coordinator writes them as the
producer's transactional batch and keeps them pending until the COMMIT marker reaches
``__consumer_offsets`` (dropped on ABORT).

First, as Kafka 3.9's leaders do (KIP-890 part 1, ``transaction.partition.verification.enable``), the
transaction coordinator verifies that the group's offsets partition is in the producer's transaction
(asked over the inter-broker listener when it is another broker); a
failure answers every partition with the error (translated as an offset commit's store error). Partitions of unknown topics are
UNKNOWN_TOPIC_OR_PARTITION and not stored. Before v2 COORDINATOR_LOAD_IN_PROGRESS is answered as
COORDINATOR_NOT_AVAILABLE, which 0.11-2.0 clients expect.

v5 is a transactions v2 client's (KIP-890 part 2), which sends no AddOffsetsToTxn: the group's offsets
partition is added to the transaction here instead of verified, whatever the verification setting.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.coordinator.runtime import CoordinatorRuntime
from odradek.broker.coordinator.group.group_coordinator import GROUP_METADATA_TOPIC
from odradek.broker.coordinator.group.group_metadata_manager import STORE_OFFSETS_ERRORS
from odradek.broker.coordinator.group.group_metadata_records import OffsetAndMetadata
from odradek.broker.coordinator.coordinators import AskCoordinator
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.broker.coordinator.transaction.transaction_verification import ADDS_PARTITION_SINCE_TXN_OFFSET_COMMIT
from odradek.controller.metadata_image import MetadataImage
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.protocol.message_types.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponseDict, TxnOffsetCommitResponsePartitionDict

LOAD_IN_PROGRESS_KNOWN_SINCE = 2
ABORTABLE_KNOWN_SINCE = 4


def handle(group_coordinator: CoordinatorRuntime, metadata: MetadataImage, replica_manager: ReplicaManager, authorization: Authorization, request: Request[TxnOffsetCommitRequest]) -> TxnOffsetCommitResponseDict | Awaitable[TxnOffsetCommitResponseDict]:
    """Needs WRITE on the transactional id, READ on the group and READ on each topic, as Kafka."""
    body = request.body
    version = request.header.api_version
    refusal = None
    if not authorization.authorize(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        refusal = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not authorization.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        refusal = ErrorCode.GROUP_AUTHORIZATION_FAILED
    if refusal is not None:
        return {"topics": [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": refusal} for p in t.partitions]} for t in body.topics]}
    readable = authorization.filter_authorized(request, AclOperation.READ, ResourceType.TOPIC, {t.name for t in body.topics})
    runtime = group_coordinator
    group = runtime.coordinator
    order: list[TopicPartition] = []
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    now = group.clock()
    for topic in body.topics:
        known = metadata.topics.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            order.append(tp)
            if topic.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if known is None or p.partition_index not in known.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            metadata_text = p.committed_metadata if p.committed_metadata is not None else ""
            offsets[tp] = OffsetAndMetadata(offset=p.committed_offset, leader_epoch=p.committed_leader_epoch, metadata=metadata_text, commit_timestamp=now)

    def response(results: dict[TopicPartition, ErrorCode]) -> TxnOffsetCommitResponseDict:
        merged = {**errors, **results}
        topics: dict[str, list[TxnOffsetCommitResponsePartitionDict]] = {}
        for name, index in dict.fromkeys(order):
            error = merged[(name, index)]
            if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and version < LOAD_IN_PROGRESS_KNOWN_SINCE:
                error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            topics.setdefault(name, []).append({"partition_index": index, "error_code": error})
        return {"topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}

    if not offsets:
        return response({})

    def commit(verified: ErrorCode) -> TxnOffsetCommitResponseDict | Awaitable[TxnOffsetCommitResponseDict]:
        if verified != ErrorCode.NONE:
            return response(dict.fromkeys(offsets, STORE_OFFSETS_ERRORS.get(verified, verified)))
        committed = group.commit_transactional_offsets(
            body.group_id, body.producer_id, body.producer_epoch, body.member_id, body.group_instance_id, body.generation_id, offsets
        )
        return runtime.respond(committed, response)

    verified = _verify(replica_manager, runtime.partition_for(body.group_id), body, abortable_known=version >= ABORTABLE_KNOWN_SINCE, add=version >= ADDS_PARTITION_SINCE_TXN_OFFSET_COMMIT)
    if not isinstance(verified, AskCoordinator):
        return commit(verified)

    async def commit_once_verified() -> TxnOffsetCommitResponseDict:
        answer = commit(await verified.answer())
        return await answer if inspect.isawaitable(answer) else answer

    return commit_once_verified()


def _verify(replica_manager: ReplicaManager, offsets_partition: int, body: TxnOffsetCommitRequest, *, abortable_known: bool, add: bool) -> ErrorCode | AskCoordinator:
    """The transaction coordinator's verdict on the group's offsets partition being in the transaction
    (NONE when ``transaction.partition.verification.enable`` is off), or how to ask it on another broker;
    with ``add`` (v5), the partition is added rather than verified."""
    verifier = replica_manager.transaction_verifier
    if verifier is None or not (add or verifier.verification_enabled):
        return ErrorCode.NONE
    try:
        partition = replica_manager.get_partition(GROUP_METADATA_TOPIC, offsets_partition)
    except KafkaError as exc:
        return exc.code
    return verifier.error_for(body.transactional_id, partition, body.producer_id, body.producer_epoch, abortable_known=abortable_known, add=add)
