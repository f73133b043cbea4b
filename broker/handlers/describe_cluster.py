"""DescribeCluster (KIP-700): brokers, controller id and cluster id, as the Admin client's describeCluster reads them.

A broker serves the BROKER endpoint type (v1+); asking it for the CONTROLLER type is MISMATCHED_ENDPOINT_TYPE
and an unknown type UNSUPPORTED_ENDPOINT_TYPE, as Kafka's ``AuthHelper.computeDescribeClusterResponse``.
The cluster's authorized operations, when asked for, come from the authorizer (all of them without one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.network.request_context import listener_name
from odradek.controller.metadata_image import MetadataImage
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.values import CodeEnum

if TYPE_CHECKING:
    from odradek.protocol.message_types.describe_cluster import DescribeClusterRequest, DescribeClusterResponseDict


class EndpointType(CodeEnum):
    UNKNOWN = 0
    BROKER = 1
    CONTROLLER = 2


def handle(metadata: MetadataImage, authorization: Authorization, request: Request[DescribeClusterRequest]) -> DescribeClusterResponseDict:
    body = request.body
    if body.endpoint_type != EndpointType.BROKER:
        if body.endpoint_type == EndpointType.CONTROLLER:
            return {
                "error_code": ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                "error_message": "The request was sent to an endpoint of type broker, but we wanted an endpoint of type controller",
                "cluster_id": "",
            }
        return {"error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "error_message": f"Unsupported endpoint type {body.endpoint_type}", "cluster_id": ""}
    image = metadata
    return {
        "error_code": ErrorCode.NONE,
        "endpoint_type": EndpointType.BROKER,
        "cluster_id": image.cluster_id,
        "controller_id": image.controller_id,
        "brokers": [
            {"broker_id": b.node_id, "host": endpoint[0], "port": endpoint[1], "rack": b.rack}
            for b in sorted(image.brokers.values(), key=lambda b: b.node_id)
            if (endpoint := b.endpoint(listener_name(request))) is not None
        ],
        "cluster_authorized_operations": authorization.cluster_authorized_operations(request, body.include_cluster_authorized_operations),
    }
