"""ApiVersions: the API ranges this broker serves, and nothing it does not, and its features (``broker/features.py``).

An ApiVersions request at a version we do not know is answered by the socket server in the v0 format with
UNSUPPORTED_VERSION and our ranges (KIP-511), so clients can downgrade.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.features import FinalizedFeatures, api_versions_features
from odradek.broker.network.request_context import ClientInformation
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.api_versions import ApiVersionDict, ApiVersionsRequest, ApiVersionsResponseDict

def handle(api_ranges: list[ApiVersionDict], features: FinalizedFeatures, request: Request[ApiVersionsRequest]) -> ApiVersionsResponseDict:
    """``api_ranges``: what the broker's handler table serves (``kafka_apis.API_RANGES``); ``features``:
    the broker's ``finalized_features`` (``features.FEATURES`` on a single node, what all brokers support in
    a ZooKeeper cluster)."""
    body = request.body
    version = request.header.api_version
    if version >= 3 and not ClientInformation(body.client_software_name, body.client_software_version).is_valid():
        return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": api_ranges}
    return {"error_code": ErrorCode.NONE, "api_keys": api_ranges, **api_versions_features(features, version)}
