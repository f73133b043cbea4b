"""AllocateProducerIds (API key 67, v0): a broker's request for a block of producer ids, answered by the active
ZooKeeper-mode controller (:meth:`odradek.controller.zk_controller.ZkController.allocate_producer_ids`, from
the controller's event thread; the request waits for it without blocking the event loop). Kafka 3.9's
brokers in ZooKeeper mode send it instead of writing ``/latest_producer_id_block`` themselves, so without it
a Kafka broker in an odradek-led cluster cannot answer InitProducerId. Only brokers send it (CLUSTER_ACTION).
A broker that is not the active controller, or one without ZooKeeper, answers NOT_CONTROLLER.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.controller.metadata_support import MetadataSupport
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.allocate_producer_ids import AllocateProducerIdsRequest, AllocateProducerIdsResponseDict


def refused(code: ErrorCode) -> AllocateProducerIdsResponseDict:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id_start": 0, "producer_id_len": 0}


def handle(metadata_support: MetadataSupport, authorization: Authorization, request: Request[AllocateProducerIdsRequest]) -> AllocateProducerIdsResponseDict | Awaitable[AllocateProducerIdsResponseDict]:
    if not authorization.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = metadata_support.controller_for_brokers()
    if controller is None:
        return refused(ErrorCode.NOT_CONTROLLER)
    return asyncio.wrap_future(controller.allocate_producer_ids(request.body.broker_id, request.body.broker_epoch))
