"""ListConfigResources (KIP-1142; v0 is Kafka 3.9's ListClientMetricsResources): the config resources of the
types asked, as ``kafka-configs.sh --describe --entity-type groups`` without a name lists them.

As Kafka 4.4: groups that have configs, this broker as BROKER_LOGGER and BROKER, every topic, and the
client metrics resources (v0 asks for those alone; odradek has none: it serves no client metrics, KIP-714);
an empty list of types means all of them, a type outside them UNSUPPORTED_VERSION. Needs DESCRIBE_CONFIGS
on the cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation
from odradek.broker.authorizer.acl import ResourceType as AclResourceType
from odradek.broker.dynamic_config import DynamicBrokerConfig
from odradek.broker.handlers.describe_configs import ResourceType
from odradek.controller.metadata_image import MetadataImage
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.list_config_resources import ListConfigResourcesRequest, ListConfigResourcesResponseDict

LISTED = (ResourceType.GROUP, ResourceType.BROKER_LOGGER, ResourceType.BROKER, ResourceType.TOPIC, ResourceType.CLIENT_METRICS)
"""ListConfigResourcesRequest.supportedResourceTypes, in the order Kafka lists them."""


def handle(metadata: MetadataImage, dynamic_config: DynamicBrokerConfig, authorization: Authorization, request: Request[ListConfigResourcesRequest]) -> ListConfigResourcesResponseDict:
    if not authorization.authorize(request, AclOperation.DESCRIBE_CONFIGS, AclResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "config_resources": []}
    asked = [ResourceType.CLIENT_METRICS] if request.header.api_version == 0 else request.body.resource_types or list(LISTED)
    if any(t not in LISTED for t in asked):
        return {"error_code": ErrorCode.UNSUPPORTED_VERSION, "config_resources": []}
    own = str(dynamic_config.static.broker_id)
    names = {
        ResourceType.GROUP: list(metadata.group_configs),
        ResourceType.BROKER_LOGGER: [own],
        ResourceType.BROKER: [own],
        ResourceType.TOPIC: sorted(metadata.topics),
        ResourceType.CLIENT_METRICS: [],
    }
    return {"error_code": ErrorCode.NONE, "config_resources": [{"resource_name": n, "resource_type": t} for t in LISTED if t in asked for n in names[t]]}
