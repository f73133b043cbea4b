"""Request dispatch: one table from API key to handler, the versions it serves and the services it needs
(Kafka's KafkaApis).

The table is also what ApiVersions advertises, so a version is listed only when its handler serves it.
A handler is a function of the services it declares (``needs``: names of the broker's services, such as
``replica_manager`` or ``metadata``) and the decoded request; it receives those and nothing else, so what a
handler can reach is written here, once. It returns the response body (a dict), an awaitable of it (for
waits: long-poll fetches, acks=all), ``None`` (acks=0: no response) or ``CLOSE_CONNECTION``.
"""

from __future__ import annotations

import importlib
import logging
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable

from odradek.broker.handlers import CLOSE_CONNECTION  # noqa: F401  (re-exported for the socket server)
from odradek.broker.handlers import api_versions
from odradek.protocol.api import APIS, ApiKey, Request, encode_response
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.api_versions import ApiVersionDict

log = logging.getLogger("odradek.apis")

def metered(handle: Callable[[Any, Request], Any]) -> Callable[[Any, Request], Any]:
    """The handler, reporting to the broker's request metrics (broker/metrics.py) when it has them: one
    attribute test per request when it has not."""

    def handle_metered(server: Any, request: Request) -> Any:
        metrics = server.metrics
        if metrics is None:
            return handle(server, request)
        return metrics.observe(handle, server, request)

    return handle_metered


def bind(serve: Callable[..., Any], needs: tuple[str, ...]) -> Callable[[Any, Request], Any]:
    """``serve`` called with the named services of the broker, then the request. They are looked up on the
    broker at each request (one ``attrgetter`` call): some, such as the metadata image, are replaced while
    it runs."""
    if not needs:
        return lambda server, request: serve(request)
    if len(needs) == 1:
        service = attrgetter(needs[0])
        return lambda server, request: serve(service(server), request)
    services = attrgetter(*needs)
    return lambda server, request: serve(*services(server), request)


HANDLERS_PACKAGE = "odradek.broker.handlers"


class Handler:
    def __init__(self, module: str, min_version: int, max_version: int, needs: tuple[str, ...] = (), serve: Callable[..., Any] | None = None) -> None:
        self.module = module
        """The handler's module in :data:`HANDLERS_PACKAGE`, whose ``handle`` takes the declared services, in
        order, then the request. It is imported at the API's first request: a broker imports only the handlers
        (and what they need: ZooKeeper mode's, the transactions', ...) of the APIs its clients use, which keeps
        a single node's start-up short (docs/performance.md)."""
        self.min_version = min_version
        self.max_version = max_version
        self.needs = needs
        """The names of the broker's services the handler is handed, in order."""
        self.serve = serve
        """The function that serves the API, when it is not the module's ``handle`` (ApiVersions': this table)."""
        self.handle: Callable[[Any, Request], Any] = self._first_request
        """What the socket server calls with the broker and the request: the services bound, metrics kept."""

    def served_by(self) -> Callable[..., Any]:
        return self.serve or importlib.import_module(f"{HANDLERS_PACKAGE}.{self.module}").handle

    def _first_request(self, server: Any, request: Request) -> Any:
        handle = metered(bind(self.served_by(), self.needs))
        self.handle = handle
        return handle(server, request)


def _all(key: ApiKey, module: str, *needs: str, serve: Callable[..., Any] | None = None) -> Handler:
    """A handler serving every version Kafka 3.9 defines for the API. Not the versions declared: those
    include what Kafka 4.4 adds (Produce 12-13, ...), served only once a handler lists them explicitly."""
    served = APIS[key].kafka_3_9
    assert served.high is not None, f"{key.name}: Kafka 3.9 does not define it; list its served versions"
    return Handler(module, served.low, served.high, needs, serve)


ALTER_CONFIGS = ("metadata", "dynamic_config", "broker_defaults", "metadata_support", "authorization")
"""What AlterConfigs and IncrementalAlterConfigs need (``alter_configs.alter``)."""


SHARE_STATE = ("coordinators", "metadata", "authorization")
"""What the share-state RPCs need (``share_group_state.handle``, one module for the five): the share coordinator, the topics."""


TXN_V2_PRODUCE, TXN_V2_END_TXN, TXN_V2_TXN_OFFSET_COMMIT, TXN_V2_ADD_PARTITIONS_TO_TXN = 12, 5, 5, 5
"""Transactions v2 (KIP-890 part 2, ``transaction.version`` 2 in broker/features.py): Produce and
TxnOffsetCommit that add their partition to the transaction, EndTxn that bumps the epoch, and
AddPartitionsToTxn with TRANSACTION_ABORTABLE between brokers. Produce 13 and TxnOffsetCommit 6 (topic ids)
are not served."""

HANDLERS: dict[int, Handler] = {
    ApiKey.Produce: Handler("produce", 0, TXN_V2_PRODUCE, ("replica_manager", "authorization", "quotas")),
    ApiKey.Fetch: _all(ApiKey.Fetch, "fetch", "replica_manager", "fetch_sessions", "config", "authorization", "quotas"),
    ApiKey.ListOffsets: _all(ApiKey.ListOffsets, "list_offsets", "replica_manager", "authorization"),
    ApiKey.Metadata: _all(ApiKey.Metadata, "metadata", "metadata", "config", "auto_create_topic", "authorization"),
    ApiKey.ApiVersions: _all(ApiKey.ApiVersions, "api_versions", "finalized_features", serve=lambda features, request: api_versions.handle(API_RANGES, features, request)),
    ApiKey.CreateTopics: _all(ApiKey.CreateTopics, "create_topics", "metadata", "config", "metadata_support", "create_topic", "replica_manager", "dynamic_config", "broker_defaults", "authorization", "quotas", "background"),
    ApiKey.InitProducerId: _all(ApiKey.InitProducerId, "init_producer_id", "coordinators", "next_producer_id", "authorization"),
    ApiKey.OffsetForLeaderEpoch: _all(ApiKey.OffsetForLeaderEpoch, "offset_for_leader_epoch", "replica_manager", "authorization"),
    ApiKey.DeleteTopics: _all(ApiKey.DeleteTopics, "delete_topics", "metadata", "config", "metadata_support", "authorization", "quotas"),
    ApiKey.DeleteRecords: _all(ApiKey.DeleteRecords, "delete_records", "metadata", "replica_manager", "authorization"),
    ApiKey.DescribeConfigs: _all(ApiKey.DescribeConfigs, "describe_configs", "metadata", "dynamic_config", "broker_defaults", "authorization"),
    ApiKey.AlterConfigs: _all(ApiKey.AlterConfigs, "alter_configs", *ALTER_CONFIGS),
    ApiKey.ListConfigResources: Handler("list_config_resources", 0, 1, ("metadata", "dynamic_config", "authorization")),
    ApiKey.DescribeLogDirs: _all(ApiKey.DescribeLogDirs, "describe_log_dirs", "replica_manager", "authorization"),
    ApiKey.AlterReplicaLogDirs: _all(ApiKey.AlterReplicaLogDirs, "alter_replica_log_dirs", "replica_manager", "authorization"),
    ApiKey.UpdateFeatures: _all(ApiKey.UpdateFeatures, "update_features", "finalized_features", "metadata_support", "authorization"),
    ApiKey.Envelope: _all(ApiKey.Envelope, "envelope"),
    ApiKey.CreatePartitions: _all(ApiKey.CreatePartitions, "create_partitions", "metadata_support", "replica_manager", "authorization", "quotas"),
    ApiKey.IncrementalAlterConfigs: _all(ApiKey.IncrementalAlterConfigs, "incremental_alter_configs", *ALTER_CONFIGS),
    ApiKey.DescribeCluster: _all(ApiKey.DescribeCluster, "describe_cluster", "metadata", "authorization"),
    ApiKey.DescribeProducers: _all(ApiKey.DescribeProducers, "describe_producers", "metadata", "replica_manager", "authorization"),
    ApiKey.OffsetCommit: _all(ApiKey.OffsetCommit, "offset_commit", "group_coordinator", "metadata", "authorization"),
    ApiKey.OffsetFetch: _all(ApiKey.OffsetFetch, "offset_fetch", "group_coordinator", "authorization"),
    ApiKey.FindCoordinator: _all(ApiKey.FindCoordinator, "find_coordinator", "coordinators", "authorization"),
    ApiKey.JoinGroup: _all(ApiKey.JoinGroup, "join_group", "group_coordinator", "authorization"),
    ApiKey.Heartbeat: _all(ApiKey.Heartbeat, "heartbeat", "group_coordinator", "authorization"),
    ApiKey.LeaveGroup: _all(ApiKey.LeaveGroup, "leave_group", "group_coordinator", "authorization"),
    ApiKey.SyncGroup: _all(ApiKey.SyncGroup, "sync_group", "group_coordinator", "authorization"),
    ApiKey.DescribeGroups: _all(ApiKey.DescribeGroups, "describe_groups", "group_coordinator", "authorization"),
    ApiKey.ListGroups: Handler("list_groups", 0, 5, ("group_coordinator", "built_share_groups", "authorization")),
    ApiKey.DeleteGroups: _all(ApiKey.DeleteGroups, "delete_groups", "group_coordinator", "built_share_groups", "authorization"),
    ApiKey.OffsetDelete: _all(ApiKey.OffsetDelete, "offset_delete", "group_coordinator", "metadata", "authorization"),
    ApiKey.ConsumerGroupHeartbeat: Handler("consumer_group_heartbeat", 0, 1, ("group_coordinator", "authorization")),
    ApiKey.ConsumerGroupDescribe: Handler("consumer_group_describe", 0, 1, ("group_coordinator", "authorization")),
    ApiKey.SaslHandshake: Handler("sasl_handshake", 0, 1),
    ApiKey.SaslAuthenticate: Handler("sasl_authenticate", 0, 2),
    ApiKey.DescribeAcls: _all(ApiKey.DescribeAcls, "describe_acls", "authorization"),
    ApiKey.CreateAcls: _all(ApiKey.CreateAcls, "create_acls", "authorization", "metadata_support"),
    ApiKey.DeleteAcls: _all(ApiKey.DeleteAcls, "delete_acls", "authorization", "metadata_support"),
    ApiKey.DescribeClientQuotas: _all(ApiKey.DescribeClientQuotas, "describe_client_quotas", "authorization", "client_quotas"),
    ApiKey.AlterClientQuotas: _all(ApiKey.AlterClientQuotas, "alter_client_quotas", "authorization", "client_quotas", "metadata_support"),
    ApiKey.AlterUserScramCredentials: _all(ApiKey.AlterUserScramCredentials, "alter_user_scram_credentials", "credentials", "metadata_support", "authorization"),
    ApiKey.DescribeUserScramCredentials: _all(ApiKey.DescribeUserScramCredentials, "describe_user_scram_credentials", "credentials", "authorization"),
    **{
        key: _all(key, "delegation_tokens", "delegation_tokens", "metadata_support", "authorization")
        for key in (ApiKey.CreateDelegationToken, ApiKey.RenewDelegationToken, ApiKey.ExpireDelegationToken, ApiKey.DescribeDelegationToken)
    },
    ApiKey.AddPartitionsToTxn: Handler("add_partitions_to_txn", 0, TXN_V2_ADD_PARTITIONS_TO_TXN, ("metadata", "transaction_coordinator", "authorization")),
    ApiKey.AddOffsetsToTxn: _all(ApiKey.AddOffsetsToTxn, "add_offsets_to_txn", "metadata", "config", "transaction_coordinator", "authorization"),
    ApiKey.EndTxn: Handler("end_txn", 0, TXN_V2_END_TXN, ("transaction_coordinator", "authorization")),
    ApiKey.WriteTxnMarkers: _all(ApiKey.WriteTxnMarkers, "write_txn_markers", "marker_writer", "authorization"),
    ApiKey.TxnOffsetCommit: Handler("txn_offset_commit", 0, TXN_V2_TXN_OFFSET_COMMIT, ("group_coordinator", "metadata", "replica_manager", "authorization")),
    ApiKey.DescribeTransactions: _all(ApiKey.DescribeTransactions, "describe_transactions", "transaction_coordinator", "authorization"),
    ApiKey.ListTransactions: _all(ApiKey.ListTransactions, "list_transactions", "transaction_coordinator", "authorization"),
    ApiKey.AlterPartition: _all(ApiKey.AlterPartition, "alter_partition", "metadata_support", "authorization"),
    ApiKey.AllocateProducerIds: _all(ApiKey.AllocateProducerIds, "allocate_producer_ids", "metadata_support", "authorization"),
    ApiKey.ControlledShutdown: _all(ApiKey.ControlledShutdown, "controlled_shutdown", "metadata_support", "authorization"),
    ApiKey.AlterPartitionReassignments: _all(ApiKey.AlterPartitionReassignments, "alter_partition_reassignments", "metadata_support", "authorization"),
    ApiKey.ListPartitionReassignments: _all(ApiKey.ListPartitionReassignments, "list_partition_reassignments", "metadata_support", "authorization"),
    ApiKey.ElectLeaders: _all(ApiKey.ElectLeaders, "elect_leaders", "metadata_support", "metadata", "authorization"),
    ApiKey.LeaderAndIsr: _all(ApiKey.LeaderAndIsr, "leader_and_isr", "metadata_support", "coordinators", "broker_id", "authorization"),
    ApiKey.StopReplica: _all(ApiKey.StopReplica, "stop_replica", "metadata_support", "authorization"),
    ApiKey.UpdateMetadata: _all(ApiKey.UpdateMetadata, "update_metadata", "metadata_support", "authorization"),
    ApiKey.ShareGroupHeartbeat: Handler("share_group_heartbeat", 1, 1, ("share_groups", "authorization")),
    ApiKey.ShareGroupDescribe: Handler("share_group_describe", 1, 1, ("share_groups", "replica_manager", "authorization")),
    ApiKey.ShareFetch: Handler("share_fetch", 1, 2, ("share_partitions", "authorization")),
    ApiKey.ShareAcknowledge: Handler("share_acknowledge", 1, 2, ("share_partitions", "authorization")),
    ApiKey.InitializeShareGroupState: Handler("share_group_state", 0, 0, SHARE_STATE),
    ApiKey.ReadShareGroupState: Handler("share_group_state", 0, 0, SHARE_STATE),
    ApiKey.WriteShareGroupState: Handler("share_group_state", 0, 1, SHARE_STATE),
    ApiKey.DeleteShareGroupState: Handler("share_group_state", 0, 0, SHARE_STATE),
    ApiKey.ReadShareGroupStateSummary: Handler("share_group_state", 0, 1, SHARE_STATE),
    ApiKey.DescribeShareGroupOffsets: Handler("describe_share_group_offsets", 0, 1, ("share_groups", "share_partitions", "partition_metadata_client", "authorization")),
    ApiKey.AlterShareGroupOffsets: Handler("alter_share_group_offsets", 0, 0, ("share_groups", "share_partitions", "authorization")),
    ApiKey.DeleteShareGroupOffsets: Handler("delete_share_group_offsets", 0, 0, ("share_groups", "share_partitions", "authorization")),
}


API_RANGES: list[ApiVersionDict] = [{"api_key": key, "min_version": h.min_version, "max_version": h.max_version} for key, h in sorted(HANDLERS.items())]
"""What ApiVersions advertises: the table above, and nothing it does not serve."""


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """KIP-511: an ApiVersions request at a version we do not know gets a v0 answer with our ranges."""
    data, _ = encode_response(
        ApiKey.ApiVersions, 0, correlation_id, {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": API_RANGES}
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
