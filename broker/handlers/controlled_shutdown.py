"""ControlledShutdown (API key 7, v0-3): a stopping broker asks the active ZooKeeper-mode controller to move
its leaderships first (:meth:`odradek.controller.zk_controller.ZkController.controlled_shutdown`, answered
from the controller's event thread; the request waits without blocking the event loop). Only brokers send it
(CLUSTER_ACTION). A broker that is not the active controller, or one without ZooKeeper, answers
NOT_CONTROLLER, and the stopping broker tries again.
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
    from odradek.protocol.message_types.controlled_shutdown import ControlledShutdownRequest, ControlledShutdownResponseDict


def handle(metadata_support: MetadataSupport, authorization: Authorization, request: Request[ControlledShutdownRequest]) -> ControlledShutdownResponseDict | Awaitable[ControlledShutdownResponseDict]:
    if not authorization.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    controller = metadata_support.controller_for_brokers()
    if controller is None:
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    return asyncio.wrap_future(controller.controlled_shutdown(request.body.broker_id, request.body.broker_epoch))
