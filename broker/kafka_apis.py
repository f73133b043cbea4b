"""Request dispatch: one table from API key to handler and the versions it serves (Kafka's KafkaApis).

The table is also what ApiVersions advertises, so a version is listed only when its handler serves it.
A handler takes the server and the decoded request and returns the response body (a dict), an awaitable
of it (for waits: long-poll fetches, acks=all), ``None`` (acks=0: no response) or ``CLOSE_CONNECTION``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

from odradek.broker.handlers import CLOSE_CONNECTION  # noqa: F401  (re-exported for the socket server)
from odradek.broker.handlers import (
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
)
from odradek.protocol.api import APIS, ApiKey, Request, encode_response
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer

log = logging.getLogger("odradek.apis")

@dataclass(frozen=True)
class Handler:
    handle: Callable[["KafkaServer", Request], Any]
    min_version: int
    max_version: int


def _all(key: ApiKey, module: Any) -> Handler:
    """A handler serving every version Kafka 3.9 defines for the API."""
    api = APIS[key]
    return Handler(module.handle, api.min_version, api.max_version)


HANDLERS: dict[int, Handler] = {
    ApiKey.Produce: Handler(produce.handle, 0, 11),
    ApiKey.Fetch: _all(ApiKey.Fetch, fetch),
    ApiKey.ListOffsets: _all(ApiKey.ListOffsets, list_offsets),
    ApiKey.Metadata: _all(ApiKey.Metadata, metadata),
    ApiKey.ApiVersions: _all(ApiKey.ApiVersions, api_versions),
    ApiKey.CreateTopics: _all(ApiKey.CreateTopics, create_topics),
    ApiKey.InitProducerId: _all(ApiKey.InitProducerId, init_producer_id),
    ApiKey.OffsetForLeaderEpoch: _all(ApiKey.OffsetForLeaderEpoch, offset_for_leader_epoch),
    ApiKey.DeleteTopics: _all(ApiKey.DeleteTopics, delete_topics),
    ApiKey.DeleteRecords: _all(ApiKey.DeleteRecords, delete_records),
    ApiKey.DescribeConfigs: _all(ApiKey.DescribeConfigs, describe_configs),
    ApiKey.AlterConfigs: _all(ApiKey.AlterConfigs, alter_configs),
    ApiKey.DescribeLogDirs: _all(ApiKey.DescribeLogDirs, describe_log_dirs),
    ApiKey.CreatePartitions: _all(ApiKey.CreatePartitions, create_partitions),
    ApiKey.IncrementalAlterConfigs: _all(ApiKey.IncrementalAlterConfigs, incremental_alter_configs),
    ApiKey.DescribeCluster: _all(ApiKey.DescribeCluster, describe_cluster),
    ApiKey.DescribeProducers: _all(ApiKey.DescribeProducers, describe_producers),
    ApiKey.OffsetCommit: _all(ApiKey.OffsetCommit, offset_commit),
    ApiKey.OffsetFetch: _all(ApiKey.OffsetFetch, offset_fetch),
    ApiKey.FindCoordinator: _all(ApiKey.FindCoordinator, find_coordinator),
    ApiKey.JoinGroup: _all(ApiKey.JoinGroup, join_group),
    ApiKey.Heartbeat: _all(ApiKey.Heartbeat, heartbeat),
    ApiKey.LeaveGroup: _all(ApiKey.LeaveGroup, leave_group),
    ApiKey.SyncGroup: _all(ApiKey.SyncGroup, sync_group),
    ApiKey.DescribeGroups: _all(ApiKey.DescribeGroups, describe_groups),
    ApiKey.ListGroups: _all(ApiKey.ListGroups, list_groups),
    ApiKey.DeleteGroups: _all(ApiKey.DeleteGroups, delete_groups),
    ApiKey.OffsetDelete: _all(ApiKey.OffsetDelete, offset_delete),
    ApiKey.SaslHandshake: Handler(lambda server, request: sasl_handshake.handle(request), 0, 1),
    ApiKey.SaslAuthenticate: Handler(lambda server, request: sasl_authenticate.handle(request), 0, 2),
}


def metered(handle: Callable[["KafkaServer", Request], Any]) -> Callable[["KafkaServer", Request], Any]:
    """The handler, reporting to the broker's request metrics (broker/metrics.py) when it has them: one
    attribute test per request when it has not."""

    def handle_metered(server: "KafkaServer", request: Request) -> Any:
        metrics = server.metrics
        if metrics is None:
            return handle(server, request)
        return metrics.observe(handle, server, request)

    return handle_metered


HANDLERS = {key: replace(handler, handle=metered(handler.handle)) for key, handler in HANDLERS.items()}


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """KIP-511: an ApiVersions request at a version we do not know gets a v0 answer with our ranges."""
    data, _ = encode_response(
        ApiKey.ApiVersions, 0, correlation_id, {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": api_versions.api_ranges()}
    )
    return data


def error_response(request: Request, code: ErrorCode) -> dict | None:
    """The answer to a request whose handler failed unexpectedly, or None to close the connection.

    Kafka builds a per-API error answer (``AbstractRequest.getErrorResponse``). Here a response with a
    top-level ``ErrorCode`` at the request's version carries ``code`` there; other responses would need
    their per-partition entries rebuilt from the request, so the connection is closed instead, which
    clients treat as a retriable network error. (An error field that the version lacks must not be
    relied on: a Fetch v4 answer built from ``{"error_code": ...}`` would encode as an empty, error-free
    fetch.)
    """
    version = request.header.api_version
    if any(f.name == "ErrorCode" and version in f.versions for f in request.api.response.fields):
        return {"error_code": code}
    return None
