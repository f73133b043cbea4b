"""UpdateFeatures (KIP-584, ``kafka-features.sh upgrade/downgrade``), as a Kafka 3.9 ZooKeeper-mode broker
answers it (``KafkaApis.handleUpdateFeatures``): ALTER on the cluster, then the active controller's only
(NOT_CONTROLLER elsewhere), then each update judged alone with INVALID_REQUEST and Kafka's message. A
ZooKeeper-mode Kafka supports no feature, so it refuses every update; odradek finalizes its features at fixed
levels (docs/protocol.md, Features), so an update asking for the level in force is answered NONE and any other
refused."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.features import FinalizedFeatures
from odradek.controller.metadata_support import MetadataSupport
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.update_features import UpdatableFeatureResultDict, UpdateFeaturesResponseDict

NOT_SUPPORTED = "Could not apply finalized feature update because the provided feature is not supported."
NOT_FINALIZED = "Can not delete non-existing finalized feature."


def handle(finalized_features: FinalizedFeatures, metadata_support: MetadataSupport, authorization: Authorization, request: Request[Any]) -> UpdateFeaturesResponseDict:
    if not authorization.authorize(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if not metadata_support.is_controller():
        return _refused(ErrorCode.NOT_CONTROLLER)
    results: list[UpdatableFeatureResultDict] = []
    for update in request.body.feature_updates:
        level = finalized_features.level(update.feature)
        supported = any(f.name == update.feature for f in finalized_features.features)
        if update.max_version_level < 1 and level == 0:
            error, message = ErrorCode.INVALID_REQUEST, NOT_FINALIZED
        elif not supported:
            error, message = ErrorCode.INVALID_REQUEST, NOT_SUPPORTED
        elif update.max_version_level == level:
            error, message = ErrorCode.NONE, None
        else:
            error, message = ErrorCode.INVALID_REQUEST, f"odradek finalizes {update.feature} at level {level}, which it does not change"
        results.append({"feature": update.feature, "error_code": error, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": results}


def _refused(code: ErrorCode) -> UpdateFeaturesResponseDict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": None, "results": []}
