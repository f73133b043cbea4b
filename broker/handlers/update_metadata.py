"""UpdateMetadata (API key 6, v0-8): the controller's view of brokers and partitions, which a ZooKeeper-mode
broker keeps in its metadata cache (:meth:`odradek.controller.metadata_support.MetadataSupport.update_metadata`).
Only brokers send it (CLUSTER_ACTION).

A single-node broker (no ``zookeeper.connect``) follows only its embedded controller: any other controller
is answered STALE_CONTROLLER_EPOCH, as a deposed one would be.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.controller.metadata_support import MetadataSupport
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.update_metadata import UpdateMetadataRequest, UpdateMetadataResponseDict


def handle(metadata_support: MetadataSupport, authorization: Authorization, request: Request[UpdateMetadataRequest]) -> UpdateMetadataResponseDict:
    if not authorization.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    return {"error_code": metadata_support.update_metadata(request.body)}
