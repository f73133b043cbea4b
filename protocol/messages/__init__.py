"""Every API the broker can decode, by API key (generated; see ``odradek.tools.gen_messages``).

What the broker reads of every API as it starts (its versions, listeners, whether its response carries a
throttle time) is declared here; each API's messages are in its own module, imported at first use
(``odradek.protocol.api``), so that a broker starting does not build ninety APIs' codecs it may never use.
"""

import importlib
from types import ModuleType

from odradek.protocol.values import CodeEnum


class Declaration:
    """An API as the broker reads it at start (a class with slots: a NamedTuple costs ~1 M instructions to
    create at import, docs/performance.md "Start-up")."""

    __slots__ = ("module", "name", "versions", "kafka_3_9", "listeners", "throttled")

    def __init__(self, module: str, name: str, versions: str, kafka_3_9: str | None, listeners: tuple[str, ...], throttled: bool) -> None:
        self.module = module
        self.name = name
        self.versions = versions
        """The request's valid versions (as its module's ``REQUEST``)."""
        self.kafka_3_9 = kafka_3_9
        self.listeners = listeners
        self.throttled = throttled
        """Its response carries ThrottleTimeMs."""


def module(api_key: int) -> ModuleType:
    """The API's messages (imported now if not yet)."""
    return importlib.import_module(f"odradek.protocol.messages.{DECLARATIONS[api_key].module}")


def __getattr__(name: str) -> dict[int, ModuleType]:
    """``MODULES``, every API's module by key, imports them all: for tools and tests that read every API."""
    if name == "MODULES":
        return {key: module(key) for key in DECLARATIONS}
    raise AttributeError(name)


DECLARATIONS = {
    0: Declaration('produce', 'Produce', '0-13', '0-11', ('zkBroker', 'broker'), True),
    1: Declaration('fetch', 'Fetch', '0-18', '0-17', ('zkBroker', 'broker', 'controller'), True),
    2: Declaration('list_offsets', 'ListOffsets', '0-11', '0-9', ('zkBroker', 'broker'), True),
    3: Declaration('metadata', 'Metadata', '0-13', '0-12', ('zkBroker', 'broker'), True),
    4: Declaration('leader_and_isr', 'LeaderAndIsr', '0-7', '0-7', ('zkBroker',), False),
    5: Declaration('stop_replica', 'StopReplica', '0-4', '0-4', ('zkBroker',), False),
    6: Declaration('update_metadata', 'UpdateMetadata', '0-8', '0-8', ('zkBroker',), False),
    7: Declaration('controlled_shutdown', 'ControlledShutdown', '0-3', '0-3', ('zkBroker', 'controller'), False),
    8: Declaration('offset_commit', 'OffsetCommit', '0-10', '0-9', ('zkBroker', 'broker'), True),
    9: Declaration('offset_fetch', 'OffsetFetch', '0-10', '0-9', ('zkBroker', 'broker'), True),
    10: Declaration('find_coordinator', 'FindCoordinator', '0-6', '0-6', ('zkBroker', 'broker'), True),
    11: Declaration('join_group', 'JoinGroup', '0-9', '0-9', ('zkBroker', 'broker'), True),
    12: Declaration('heartbeat', 'Heartbeat', '0-4', '0-4', ('zkBroker', 'broker'), True),
    13: Declaration('leave_group', 'LeaveGroup', '0-5', '0-5', ('zkBroker', 'broker'), True),
    14: Declaration('sync_group', 'SyncGroup', '0-5', '0-5', ('zkBroker', 'broker'), True),
    15: Declaration('describe_groups', 'DescribeGroups', '0-6', '0-5', ('zkBroker', 'broker'), True),
    16: Declaration('list_groups', 'ListGroups', '0-5', '0-5', ('zkBroker', 'broker'), True),
    17: Declaration('sasl_handshake', 'SaslHandshake', '0-1', '0-1', ('zkBroker', 'broker', 'controller'), False),
    18: Declaration('api_versions', 'ApiVersions', '0-5', '0-4', ('zkBroker', 'broker', 'controller'), True),
    19: Declaration('create_topics', 'CreateTopics', '0-7', '0-7', ('zkBroker', 'broker', 'controller'), True),
    20: Declaration('delete_topics', 'DeleteTopics', '0-6', '0-6', ('zkBroker', 'broker', 'controller'), True),
    21: Declaration('delete_records', 'DeleteRecords', '0-2', '0-2', ('zkBroker', 'broker'), True),
    22: Declaration('init_producer_id', 'InitProducerId', '0-5', '0-5', ('zkBroker', 'broker'), True),
    23: Declaration('offset_for_leader_epoch', 'OffsetForLeaderEpoch', '0-4', '0-4', ('zkBroker', 'broker'), True),
    24: Declaration('add_partitions_to_txn', 'AddPartitionsToTxn', '0-5', '0-5', ('zkBroker', 'broker'), True),
    25: Declaration('add_offsets_to_txn', 'AddOffsetsToTxn', '0-4', '0-4', ('zkBroker', 'broker'), True),
    26: Declaration('end_txn', 'EndTxn', '0-5', '0-4', ('zkBroker', 'broker'), True),
    27: Declaration('write_txn_markers', 'WriteTxnMarkers', '0-2', '0-1', ('zkBroker', 'broker'), False),
    28: Declaration('txn_offset_commit', 'TxnOffsetCommit', '0-6', '0-4', ('zkBroker', 'broker'), True),
    29: Declaration('describe_acls', 'DescribeAcls', '0-3', '0-3', ('zkBroker', 'broker', 'controller'), True),
    30: Declaration('create_acls', 'CreateAcls', '0-3', '0-3', ('zkBroker', 'broker', 'controller'), True),
    31: Declaration('delete_acls', 'DeleteAcls', '0-3', '0-3', ('zkBroker', 'broker', 'controller'), True),
    32: Declaration('describe_configs', 'DescribeConfigs', '0-4', '0-4', ('zkBroker', 'broker', 'controller'), True),
    33: Declaration('alter_configs', 'AlterConfigs', '0-2', '0-2', ('zkBroker', 'broker', 'controller'), True),
    34: Declaration('alter_replica_log_dirs', 'AlterReplicaLogDirs', '0-2', '0-2', ('zkBroker', 'broker'), True),
    35: Declaration('describe_log_dirs', 'DescribeLogDirs', '0-5', '0-4', ('zkBroker', 'broker'), True),
    36: Declaration('sasl_authenticate', 'SaslAuthenticate', '0-2', '0-2', ('zkBroker', 'broker', 'controller'), False),
    37: Declaration('create_partitions', 'CreatePartitions', '0-3', '0-3', ('zkBroker', 'broker', 'controller'), True),
    38: Declaration('create_delegation_token', 'CreateDelegationToken', '0-3', '0-3', ('zkBroker', 'broker', 'controller'), True),
    39: Declaration('renew_delegation_token', 'RenewDelegationToken', '0-2', '0-2', ('zkBroker', 'broker', 'controller'), True),
    40: Declaration('expire_delegation_token', 'ExpireDelegationToken', '0-2', '0-2', ('zkBroker', 'broker', 'controller'), True),
    41: Declaration('describe_delegation_token', 'DescribeDelegationToken', '0-3', '0-3', ('zkBroker', 'broker', 'controller'), True),
    42: Declaration('delete_groups', 'DeleteGroups', '0-3', '0-2', ('zkBroker', 'broker'), True),
    43: Declaration('elect_leaders', 'ElectLeaders', '0-2', '0-2', ('zkBroker', 'broker', 'controller'), True),
    44: Declaration('incremental_alter_configs', 'IncrementalAlterConfigs', '0-1', '0-1', ('zkBroker', 'broker', 'controller'), True),
    45: Declaration('alter_partition_reassignments', 'AlterPartitionReassignments', '0-1', '0', ('broker', 'controller', 'zkBroker'), True),
    46: Declaration('list_partition_reassignments', 'ListPartitionReassignments', '0', '0', ('broker', 'controller', 'zkBroker'), True),
    47: Declaration('offset_delete', 'OffsetDelete', '0', '0', ('zkBroker', 'broker'), True),
    48: Declaration('describe_client_quotas', 'DescribeClientQuotas', '0-1', '0-1', ('zkBroker', 'broker'), True),
    49: Declaration('alter_client_quotas', 'AlterClientQuotas', '0-1', '0-1', ('zkBroker', 'broker', 'controller'), True),
    50: Declaration('describe_user_scram_credentials', 'DescribeUserScramCredentials', '0', '0', ('zkBroker', 'broker', 'controller'), True),
    51: Declaration('alter_user_scram_credentials', 'AlterUserScramCredentials', '0', '0', ('zkBroker', 'broker', 'controller'), True),
    55: Declaration('describe_quorum', 'DescribeQuorum', '0-2', '0-2', ('broker', 'controller'), False),
    56: Declaration('alter_partition', 'AlterPartition', '0-3', '0-3', ('zkBroker', 'controller'), True),
    57: Declaration('update_features', 'UpdateFeatures', '0-2', '0-1', ('zkBroker', 'broker', 'controller'), True),
    58: Declaration('envelope', 'Envelope', '0', '0', ('controller', 'zkBroker'), False),
    60: Declaration('describe_cluster', 'DescribeCluster', '0-2', '0-1', ('zkBroker', 'broker', 'controller'), True),
    61: Declaration('describe_producers', 'DescribeProducers', '0', '0', ('zkBroker', 'broker'), True),
    64: Declaration('unregister_broker', 'UnregisterBroker', '0', '0', ('broker', 'controller'), True),
    65: Declaration('describe_transactions', 'DescribeTransactions', '0', '0', ('zkBroker', 'broker'), True),
    66: Declaration('list_transactions', 'ListTransactions', '0-2', '0-1', ('zkBroker', 'broker'), True),
    67: Declaration('allocate_producer_ids', 'AllocateProducerIds', '0', '0', ('zkBroker', 'controller'), True),
    68: Declaration('consumer_group_heartbeat', 'ConsumerGroupHeartbeat', '0-1', '0', ('zkBroker', 'broker'), True),
    69: Declaration('consumer_group_describe', 'ConsumerGroupDescribe', '0-1', '0', ('zkBroker', 'broker'), True),
    71: Declaration('get_telemetry_subscriptions', 'GetTelemetrySubscriptions', '0', '0', ('broker',), True),
    72: Declaration('push_telemetry', 'PushTelemetry', '0', '0', ('broker',), True),
    74: Declaration('list_config_resources', 'ListConfigResources', '0-1', '0', ('broker',), True),
    75: Declaration('describe_topic_partitions', 'DescribeTopicPartitions', '0', '0', ('broker',), True),
    76: Declaration('share_group_heartbeat', 'ShareGroupHeartbeat', '1', None, ('broker',), True),
    77: Declaration('share_group_describe', 'ShareGroupDescribe', '1', None, ('broker',), True),
    78: Declaration('share_fetch', 'ShareFetch', '1-2', None, ('broker',), True),
    79: Declaration('share_acknowledge', 'ShareAcknowledge', '1-2', None, ('broker',), True),
    80: Declaration('add_raft_voter', 'AddRaftVoter', '0-1', '0', ('controller', 'broker'), True),
    81: Declaration('remove_raft_voter', 'RemoveRaftVoter', '0', '0', ('controller', 'broker'), True),
    83: Declaration('initialize_share_group_state', 'InitializeShareGroupState', '0', None, ('broker',), False),
    84: Declaration('read_share_group_state', 'ReadShareGroupState', '0', None, ('broker',), False),
    85: Declaration('write_share_group_state', 'WriteShareGroupState', '0-1', None, ('broker',), False),
    86: Declaration('delete_share_group_state', 'DeleteShareGroupState', '0', None, ('broker',), False),
    87: Declaration('read_share_group_state_summary', 'ReadShareGroupStateSummary', '0-1', None, ('broker',), False),
    88: Declaration('streams_group_heartbeat', 'StreamsGroupHeartbeat', '0-1', None, ('broker',), True),
    89: Declaration('streams_group_describe', 'StreamsGroupDescribe', '0-1', None, ('broker',), True),
    90: Declaration('describe_share_group_offsets', 'DescribeShareGroupOffsets', '0-1', None, ('broker',), True),
    91: Declaration('alter_share_group_offsets', 'AlterShareGroupOffsets', '0', None, ('broker',), True),
    92: Declaration('delete_share_group_offsets', 'DeleteShareGroupOffsets', '0', None, ('broker',), True),
    93: Declaration('streams_group_topology_description_update', 'StreamsGroupTopologyDescriptionUpdate', '0', None, ('broker',), True),
    94: Declaration('unregister_controller', 'UnregisterController', '0', None, ('broker', 'controller'), True),
}


class ApiKey(CodeEnum):
    """Every API key the broker can decode, named as Kafka names them (``ApiKey.Produce == 0``)."""

    Produce = 0
    Fetch = 1
    ListOffsets = 2
    Metadata = 3
    LeaderAndIsr = 4
    StopReplica = 5
    UpdateMetadata = 6
    ControlledShutdown = 7
    OffsetCommit = 8
    OffsetFetch = 9
    FindCoordinator = 10
    JoinGroup = 11
    Heartbeat = 12
    LeaveGroup = 13
    SyncGroup = 14
    DescribeGroups = 15
    ListGroups = 16
    SaslHandshake = 17
    ApiVersions = 18
    CreateTopics = 19
    DeleteTopics = 20
    DeleteRecords = 21
    InitProducerId = 22
    OffsetForLeaderEpoch = 23
    AddPartitionsToTxn = 24
    AddOffsetsToTxn = 25
    EndTxn = 26
    WriteTxnMarkers = 27
    TxnOffsetCommit = 28
    DescribeAcls = 29
    CreateAcls = 30
    DeleteAcls = 31
    DescribeConfigs = 32
    AlterConfigs = 33
    AlterReplicaLogDirs = 34
    DescribeLogDirs = 35
    SaslAuthenticate = 36
    CreatePartitions = 37
    CreateDelegationToken = 38
    RenewDelegationToken = 39
    ExpireDelegationToken = 40
    DescribeDelegationToken = 41
    DeleteGroups = 42
    ElectLeaders = 43
    IncrementalAlterConfigs = 44
    AlterPartitionReassignments = 45
    ListPartitionReassignments = 46
    OffsetDelete = 47
    DescribeClientQuotas = 48
    AlterClientQuotas = 49
    DescribeUserScramCredentials = 50
    AlterUserScramCredentials = 51
    DescribeQuorum = 55
    AlterPartition = 56
    UpdateFeatures = 57
    Envelope = 58
    DescribeCluster = 60
    DescribeProducers = 61
    UnregisterBroker = 64
    DescribeTransactions = 65
    ListTransactions = 66
    AllocateProducerIds = 67
    ConsumerGroupHeartbeat = 68
    ConsumerGroupDescribe = 69
    GetTelemetrySubscriptions = 71
    PushTelemetry = 72
    ListConfigResources = 74
    DescribeTopicPartitions = 75
    ShareGroupHeartbeat = 76
    ShareGroupDescribe = 77
    ShareFetch = 78
    ShareAcknowledge = 79
    AddRaftVoter = 80
    RemoveRaftVoter = 81
    InitializeShareGroupState = 83
    ReadShareGroupState = 84
    WriteShareGroupState = 85
    DeleteShareGroupState = 86
    ReadShareGroupStateSummary = 87
    StreamsGroupHeartbeat = 88
    StreamsGroupDescribe = 89
    DescribeShareGroupOffsets = 90
    AlterShareGroupOffsets = 91
    DeleteShareGroupOffsets = 92
    StreamsGroupTopologyDescriptionUpdate = 93
    UnregisterController = 94
