"""Every API the broker can decode, by API key (generated; see ``odradek.tools.gen_messages``)."""

import enum

from odradek.protocol.messages import (
    produce,
    fetch,
    list_offsets,
    metadata,
    leader_and_isr,
    stop_replica,
    update_metadata,
    controlled_shutdown,
    offset_commit,
    offset_fetch,
    find_coordinator,
    join_group,
    heartbeat,
    leave_group,
    sync_group,
    describe_groups,
    list_groups,
    sasl_handshake,
    api_versions,
    create_topics,
    delete_topics,
    delete_records,
    init_producer_id,
    offset_for_leader_epoch,
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    write_txn_markers,
    txn_offset_commit,
    describe_acls,
    create_acls,
    delete_acls,
    describe_configs,
    alter_configs,
    alter_replica_log_dirs,
    describe_log_dirs,
    sasl_authenticate,
    create_partitions,
    create_delegation_token,
    renew_delegation_token,
    expire_delegation_token,
    describe_delegation_token,
    delete_groups,
    elect_leaders,
    incremental_alter_configs,
    alter_partition_reassignments,
    list_partition_reassignments,
    offset_delete,
    describe_client_quotas,
    alter_client_quotas,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    describe_quorum,
    alter_partition,
    update_features,
    envelope,
    describe_cluster,
    describe_producers,
    unregister_broker,
    describe_transactions,
    list_transactions,
    allocate_producer_ids,
    consumer_group_heartbeat,
    consumer_group_describe,
    get_telemetry_subscriptions,
    push_telemetry,
    list_config_resources,
    describe_topic_partitions,
    share_group_heartbeat,
    share_group_describe,
    share_fetch,
    share_acknowledge,
    add_raft_voter,
    remove_raft_voter,
    initialize_share_group_state,
    read_share_group_state,
    write_share_group_state,
    delete_share_group_state,
    read_share_group_state_summary,
    streams_group_heartbeat,
    streams_group_describe,
    describe_share_group_offsets,
    alter_share_group_offsets,
    delete_share_group_offsets,
    streams_group_topology_description_update,
    unregister_controller,
)

MODULES = {
    0: produce,
    1: fetch,
    2: list_offsets,
    3: metadata,
    4: leader_and_isr,
    5: stop_replica,
    6: update_metadata,
    7: controlled_shutdown,
    8: offset_commit,
    9: offset_fetch,
    10: find_coordinator,
    11: join_group,
    12: heartbeat,
    13: leave_group,
    14: sync_group,
    15: describe_groups,
    16: list_groups,
    17: sasl_handshake,
    18: api_versions,
    19: create_topics,
    20: delete_topics,
    21: delete_records,
    22: init_producer_id,
    23: offset_for_leader_epoch,
    24: add_partitions_to_txn,
    25: add_offsets_to_txn,
    26: end_txn,
    27: write_txn_markers,
    28: txn_offset_commit,
    29: describe_acls,
    30: create_acls,
    31: delete_acls,
    32: describe_configs,
    33: alter_configs,
    34: alter_replica_log_dirs,
    35: describe_log_dirs,
    36: sasl_authenticate,
    37: create_partitions,
    38: create_delegation_token,
    39: renew_delegation_token,
    40: expire_delegation_token,
    41: describe_delegation_token,
    42: delete_groups,
    43: elect_leaders,
    44: incremental_alter_configs,
    45: alter_partition_reassignments,
    46: list_partition_reassignments,
    47: offset_delete,
    48: describe_client_quotas,
    49: alter_client_quotas,
    50: describe_user_scram_credentials,
    51: alter_user_scram_credentials,
    55: describe_quorum,
    56: alter_partition,
    57: update_features,
    58: envelope,
    60: describe_cluster,
    61: describe_producers,
    64: unregister_broker,
    65: describe_transactions,
    66: list_transactions,
    67: allocate_producer_ids,
    68: consumer_group_heartbeat,
    69: consumer_group_describe,
    71: get_telemetry_subscriptions,
    72: push_telemetry,
    74: list_config_resources,
    75: describe_topic_partitions,
    76: share_group_heartbeat,
    77: share_group_describe,
    78: share_fetch,
    79: share_acknowledge,
    80: add_raft_voter,
    81: remove_raft_voter,
    83: initialize_share_group_state,
    84: read_share_group_state,
    85: write_share_group_state,
    86: delete_share_group_state,
    87: read_share_group_state_summary,
    88: streams_group_heartbeat,
    89: streams_group_describe,
    90: describe_share_group_offsets,
    91: alter_share_group_offsets,
    92: delete_share_group_offsets,
    93: streams_group_topology_description_update,
    94: unregister_controller,
}


class ApiKey(enum.IntEnum):
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
