"""AddOffsetsToTxn: a transactional producer is about to commit a group's offsets in its transaction
(``sendOffsetsToTransaction``): the group's ``__consumer_offsets`` partition joins the transaction, so the
commit or abort marker reaches it too. Before v2 PRODUCER_FENCED is INVALID_PRODUCER_EPOCH."""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.config import BrokerConfig
from odradek.broker.coordinator.runtime import CoordinatorRuntime, partition_for
from odradek.broker.coordinator.group.group_coordinator import GROUP_METADATA_TOPIC
from odradek.broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from odradek.controller.metadata_image import MetadataImage
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponseDict

FENCED_AS_INVALID_EPOCH_BELOW = 2


def offsets_partition(metadata: MetadataImage, config: BrokerConfig, group_id: str) -> int:
    """The group's ``__consumer_offsets`` partition: by the topic's partition count, or the configured one
    before the topic exists (Kafka's groupMetadataTopicPartitionCount)."""
    topic = metadata.topics.get(GROUP_METADATA_TOPIC)
    count = len(topic.partitions) if topic is not None else config["offsets.topic.num.partitions"]
    return partition_for(group_id, count)


def handle(metadata: MetadataImage, config: BrokerConfig, transaction_coordinator: TransactionCoordinator, authorization: Authorization, request: Request[AddOffsetsToTxnRequest]) -> AddOffsetsToTxnResponseDict | Awaitable[AddOffsetsToTxnResponseDict]:
    body = request.body
    if not authorization.authorize(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return {"error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not authorization.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    version = request.header.api_version
    partition = (GROUP_METADATA_TOPIC, offsets_partition(metadata, config, body.group_id))

    def response(error: ErrorCode) -> AddOffsetsToTxnResponseDict:
        if error == ErrorCode.PRODUCER_FENCED and version < FENCED_AS_INVALID_EPOCH_BELOW:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        return {"error_code": error}

    added = transaction_coordinator.add_partitions(body.transactional_id, body.producer_id, body.producer_epoch, [partition])
    return CoordinatorRuntime.respond(added, response)
