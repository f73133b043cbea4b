"""AlterPartition (API key 56, v0-3): a partition leader's ISR change, judged and written by the active
ZooKeeper-mode controller (:meth:`odradek.controller.zk_controller.ZkController.alter_partition`, answered
from the controller's event thread; the request waits for it without blocking the event loop). Only brokers
send it (CLUSTER_ACTION). A broker that is not the active controller, or one without ZooKeeper, answers
NOT_CONTROLLER, and the leader asks again wherever the controller is.
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
    from odradek.protocol.message_types.alter_partition import AlterPartitionRequest, AlterPartitionResponseDict


def handle(metadata_support: MetadataSupport, authorization: Authorization, request: Request[AlterPartitionRequest]) -> AlterPartitionResponseDict | Awaitable[AlterPartitionResponseDict]:
    if not authorization.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "topics": []}
    controller = metadata_support.controller_for_brokers()
    if controller is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
    return asyncio.wrap_future(controller.alter_partition(request.body, request.header.api_version))
