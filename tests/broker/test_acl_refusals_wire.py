"""What a principal without permission is answered, compared on the wire with a real Kafka 3.9 running the
same AclAuthorizer: ``allow.everyone.if.no.acl.found=true`` (so the brokers' own requests and the
unrestricted resources work) and ACLs that refuse ``User:ANONYMOUS`` (every PLAINTEXT client) a topic (and
every ``refused-`` topic, existing or not), a group, a transactional id, and ALTER and DESCRIBE on the
cluster, and allow only reading another topic. As the cluster then has ACLs, no other operation on it is
allowed by their absence either: CLUSTER_ACTION, IDEMPOTENT_WRITE, CREATE, DESCRIBE_CONFIGS and
ALTER_CONFIGS on the cluster are refused too. Both run a one-partition transaction log, to start cheaply.

Every API odradek serves (``HANDLERS``) has a case here, or is in :data:`UNAUTHORIZED` with the reason."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from odradek import Broker
from odradek.broker.kafka_apis import HANDLERS
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch

sys.path.insert(0, str(Path(__file__).parents[1] / "jvm"))
import kafka_jvm  # noqa: E402

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "allow.everyone.if.no.acl.found": "true", "transaction.state.log.num.partitions": "1"}
DENIED, READ_ONLY, GROUP, TXN, LISTED_TXN = "refused-topic", "read-only-topic", "refused-group", "refused-txn", "listed-txn"
MISSING = "refused-missing-topic"
"""Refused by a prefixed ACL on ``refused-`` topics, and never created."""
TOPIC_TYPE, GROUP_TYPE, CLUSTER_TYPE, TXN_TYPE, LITERAL, PREFIXED, ALL, READ, ALTER, DESCRIBE, DENY, ALLOW = 2, 3, 4, 5, 3, 4, 2, 3, 7, 8, 2, 3


def acl(resource_type: int, name: str, operation: int, permission: int, principal: str, pattern: int = LITERAL) -> dict:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern, "principal": principal, "host": "*", "operation": operation, "permission_type": permission}


def init_transactional_id(wire, transactional_id: str) -> None:
    """Gives the id a producer, as a client does: FindCoordinator (which creates the transaction log) until the
    coordinator is known, then InitProducerId while it loads (bounded retries)."""
    body = {"transactional_id": transactional_id, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    find = {"key_type": 1, "coordinator_keys": [transactional_id]}
    deadline = time.monotonic() + 30
    while (error := wire.call(ApiKey.FindCoordinator, 4, find).coordinators[0].error_code) != ErrorCode.NONE and time.monotonic() < deadline:
        time.sleep(0.2)
    while (error := wire.call(ApiKey.InitProducerId, 4, body).error_code) != ErrorCode.NONE and time.monotonic() < deadline:
        assert error in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)
        time.sleep(0.2)
    assert error == ErrorCode.NONE


def prepare(bootstrap: str, connect) -> None:
    """The topics and two transactional ids' producers first (nothing restricts them yet), then the ACLs."""
    wire = connect(bootstrap)
    topics = [{"name": t, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []} for t in (DENIED, READ_ONLY)]
    assert {t.error_code for t in wire.call(ApiKey.CreateTopics, 4, {"topics": topics, "timeout_ms": 10000}).topics} == {ErrorCode.NONE}
    for transactional_id in (TXN, LISTED_TXN):
        init_transactional_id(wire, transactional_id)
    acls = [
        acl(TOPIC_TYPE, DENIED, ALL, DENY, "User:ANONYMOUS"),
        acl(TOPIC_TYPE, "refused-", ALL, DENY, "User:ANONYMOUS", PREFIXED),
        acl(GROUP_TYPE, GROUP, ALL, DENY, "User:ANONYMOUS"),
        acl(TXN_TYPE, TXN, ALL, DENY, "User:ANONYMOUS"),
        acl(TOPIC_TYPE, READ_ONLY, READ, ALLOW, "User:*"),
        acl(TOPIC_TYPE, READ_ONLY, DESCRIBE, ALLOW, "User:*"),
    ]
    assert {r.error_code for r in wire.call(ApiKey.CreateAcls, 3, {"creations": acls}).results} == {ErrorCode.NONE}
    # Last, as it takes away ALTER on the cluster that creating ACLs needs:
    cluster = [acl(CLUSTER_TYPE, "kafka-cluster", op, DENY, "User:ANONYMOUS") for op in (ALTER, DESCRIBE)]
    assert {r.error_code for r in wire.call(ApiKey.CreateAcls, 3, {"creations": cluster}).results} == {ErrorCode.NONE}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    root = tmp_path_factory.mktemp("acl-refusals")
    try:
        zookeeper = kafka_jvm.ZooKeeper(root / "zookeeper").start()
    except kafka_jvm.JvmUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    kafka = kafka_jvm.KafkaBroker(root / "kafka", zookeeper.connect, settings=AUTHORIZER)
    try:
        kafka.start()
        with Broker(log_dir=root / "odradek", subprocess=True, config={"broker.id": "0", **kafka_jvm.BROKER_SETTINGS, **AUTHORIZER}) as ours:
            yield ours.bootstrap, kafka.bootstrap
    finally:
        # Killed: its controlled shutdown would ask its own controller, be refused CLUSTER_ACTION here and
        # retry for ~10 s; its logs are thrown away.
        kafka.kill()
        zookeeper.stop()


@pytest.fixture(scope="module")
def prepared(brokers) -> tuple[str, str]:
    from tests.conftest import Wire

    opened: list = []

    def connect(bootstrap: str):
        opened.append(Wire(bootstrap))
        return opened[-1]

    for bootstrap in brokers:
        prepare(bootstrap, connect)
    for wire in opened:
        wire.close()
    return brokers


def fetch_body(topic: str) -> dict:
    partition = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
    return {"replica_id": -1, "max_wait_ms": 10, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [partition]}], "forgotten_topics_data": [], "rack_id": ""}


def produce_body(topic: str) -> dict:
    return {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": build_batch([Record(value=b"v")])}]}]}


def error_codes(response: Any) -> list[int]:
    """Every ``error_code`` of a response, in the order the response carries them."""
    if isinstance(response, dict):
        return [c for k, v in response.items() for c in ([v] if k == "error_code" else error_codes(v))]
    if isinstance(response, list):
        return [c for item in response for c in error_codes(item)]
    return []


def partitions(topic: str, *indexes: int, **fields: Any) -> dict:
    return {"name": topic, "partitions": [{"partition_index": i, **fields} for i in indexes]}


def txn_offset_commit_body(transactional_id: str, group: str, topic: str) -> dict:
    return {"transactional_id": transactional_id, "group_id": group, "producer_id": 1, "producer_epoch": 0, "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [partitions(topic, 0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")]}


def topic_refusals(topic: str, whose: str) -> list[tuple[str, ApiKey, int, dict, Any]]:
    """The requests naming one topic the client may not touch: the same answers whether it exists or not."""
    return [
        (f"Produce to {whose}", ApiKey.Produce, 9, produce_body(topic), lambda r: [p.error_code for t in r.responses for p in t.partition_responses]),
        (f"Fetch from {whose}", ApiKey.Fetch, 12, fetch_body(topic), lambda r: [(r.error_code, [(p.error_code, p.high_watermark, p.aborted_transactions) for t in r.responses for p in t.partitions])]),
        (f"ListOffsets of {whose}", ApiKey.ListOffsets, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
         lambda r: [p.error_code for t in r.topics for p in t.partitions]),
        (f"OffsetCommit of {whose}", ApiKey.OffsetCommit, 8, {"group_id": "allowed-group", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
         lambda r: [p.error_code for t in r.topics for p in t.partitions]),
        (f"DeleteTopics of {whose}", ApiKey.DeleteTopics, 6, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}], "timeout_ms": 5000}, lambda r: [(t.name, t.error_code) for t in r.responses]),
        (f"DescribeConfigs of {whose}", ApiKey.DescribeConfigs, 4, {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": None}], "include_synonyms": False, "include_documentation": False},
         lambda r: [(x.error_code, x.error_message) for x in r.results]),
        (f"OffsetFetch of {whose}", ApiKey.OffsetFetch, 8, {"groups": [{"group_id": "allowed-group", "topics": [{"name": topic, "partition_indexes": [0]}]}], "require_stable": False},
         lambda r: [(g.error_code, [(t.name, p.error_code) for t in g.topics for p in t.partitions]) for g in r.groups]),
        (f"CreatePartitions of {whose}", ApiKey.CreatePartitions, 3, {"topics": [{"name": topic, "count": 2, "assignments": None}], "timeout_ms": 5000, "validate_only": True},
         lambda r: [(x.name, x.error_code, x.error_message) for x in r.results]),
        (f"DeleteRecords of {whose}", ApiKey.DeleteRecords, 2, {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout_ms": 5000},
         lambda r: [(p.error_code, p.low_watermark) for t in r.topics for p in t.partitions]),
        (f"DescribeProducers of {whose}", ApiKey.DescribeProducers, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]}, lambda r: [(p.error_code, p.error_message) for t in r.topics for p in t.partitions]),
        (f"IncrementalAlterConfigs of {whose}", ApiKey.IncrementalAlterConfigs, 1, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": True},
         lambda r: [(x.error_code, x.error_message) for x in r.responses]),
        (f"CreateTopics of {whose}", ApiKey.CreateTopics, 7, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000, "validate_only": True},
         lambda r: [(t.name, t.error_code, t.error_message, t.topic_config_error_code, t.num_partitions, t.configs) for t in r.topics]),
        (f"OffsetForLeaderEpoch of {whose}", ApiKey.OffsetForLeaderEpoch, 4, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
         lambda r: [(t.topic, p.error_code, p.end_offset) for t in r.topics for p in t.partitions]),
        (f"AlterConfigs of {whose}", ApiKey.AlterConfigs, 2, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [{"name": "retention.ms", "value": "1000"}]}], "validate_only": True},
         lambda r: [(x.resource_name, x.error_code, x.error_message) for x in r.responses]),
        (f"TxnOffsetCommit of {whose}", ApiKey.TxnOffsetCommit, 3, txn_offset_commit_body("allowed-txn", "allowed-group", topic), lambda r: [(t.name, p.error_code) for t in r.topics for p in t.partitions]),
    ]


REQUESTS: list[tuple[str, ApiKey, int, dict, Any]] = [
    ("Metadata naming the refused, a refused missing and the read-only topic", ApiKey.Metadata, 12, {"topics": [{"name": n, "topic_id": uuid.UUID(int=0)} for n in (DENIED, MISSING, READ_ONLY)], "allow_auto_topic_creation": False, "include_topic_authorized_operations": True},
     lambda r: sorted((t.name, t.error_code, t.topic_authorized_operations) for t in r.topics)),
    ("Metadata of all topics", ApiKey.Metadata, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
     lambda r: sorted(t.name for t in r.topics if t.name in (DENIED, READ_ONLY))),
    ("Produce to the read-only topic", ApiKey.Produce, 9, produce_body(READ_ONLY), lambda r: [p.error_code for t in r.responses for p in t.partition_responses]),
    ("Fetch from the read-only topic", ApiKey.Fetch, 12, fetch_body(READ_ONLY), lambda r: [(r.error_code, [p.error_code for t in r.responses for p in t.partitions])]),
    ("FindCoordinator of the refused group", ApiKey.FindCoordinator, 4, {"key_type": 0, "coordinator_keys": [GROUP]}, lambda r: [(c.error_code, c.error_message, c.node_id) for c in r.coordinators]),
    ("JoinGroup of the refused group", ApiKey.JoinGroup, 9, {"group_id": GROUP, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "", "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}], "reason": None},
     lambda r: (r.error_code, r.generation_id, r.member_id)),
    ("OffsetCommit to the refused group", ApiKey.OffsetCommit, 8, {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None, "topics": [{"name": READ_ONLY, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
     lambda r: [p.error_code for t in r.topics for p in t.partitions]),
    ("DescribeGroups of the refused group", ApiKey.DescribeGroups, 5, {"groups": [GROUP], "include_authorized_operations": True}, lambda r: [(g.group_id, g.error_code) for g in r.groups]),
    ("OffsetFetch of the refused group", ApiKey.OffsetFetch, 8, {"groups": [{"group_id": GROUP, "topics": None}], "require_stable": False}, lambda r: [(g.group_id, g.error_code) for g in r.groups]),
    ("DeleteGroups of the refused group", ApiKey.DeleteGroups, 2, {"groups_names": [GROUP]}, lambda r: [(x.group_id, x.error_code) for x in r.results]),
    ("OffsetDelete of the refused group", ApiKey.OffsetDelete, 0, {"group_id": GROUP, "topics": [{"name": READ_ONLY, "partitions": [{"partition_index": 0}]}]}, lambda r: (r.error_code, len(r.topics))),
    ("DescribeAcls without DESCRIBE on the cluster", ApiKey.DescribeAcls, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
     lambda r: (r.error_code, len(r.resources))),
    ("CreateAcls without ALTER on the cluster", ApiKey.CreateAcls, 3, {"creations": [acl(TOPIC_TYPE, "x", READ, ALLOW, "User:x")]}, lambda r: [x.error_code for x in r.results]),
    ("DescribeCluster's authorized operations", ApiKey.DescribeCluster, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1}, lambda r: (r.error_code, r.cluster_authorized_operations)),
    ("ListGroups hides the refused group", ApiKey.ListGroups, 4, {"states_filter": []}, lambda r: (r.error_code, GROUP in [g.group_id for g in r.groups])),
    ("CreateTopics of a new topic: CREATE on it, as it has no ACLs", ApiKey.CreateTopics, 7, {"topics": [{"name": "new-topic", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000, "validate_only": True},
     lambda r: [(t.name, t.topic_id, t.error_code, t.num_partitions) for t in r.topics]),
    ("OffsetForLeaderEpoch as a follower without CLUSTER_ACTION", ApiKey.OffsetForLeaderEpoch, 4, {"replica_id": 0, "topics": [{"topic": READ_ONLY, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
     lambda r: [(t.topic, p.error_code, p.end_offset) for t in r.topics for p in t.partitions]),
    ("AlterConfigs of the broker without ALTER_CONFIGS on the cluster", ApiKey.AlterConfigs, 2, {"resources": [{"resource_type": 4, "resource_name": "0", "configs": [{"name": "log.cleaner.threads", "value": "2"}]}], "validate_only": True},
     lambda r: [(x.resource_name, x.error_code, x.error_message) for x in r.responses]),
    ("DescribeLogDirs without DESCRIBE on the cluster", ApiKey.DescribeLogDirs, 4, {"topics": None}, lambda r: (r.error_code, len(r.results))),
    ("SyncGroup of the refused group", ApiKey.SyncGroup, 5, {"group_id": GROUP, "generation_id": 1, "member_id": "m", "protocol_type": "consumer", "protocol_name": "range", "assignments": []},
     lambda r: (r.error_code, r.assignment)),
    ("Heartbeat of the refused group", ApiKey.Heartbeat, 4, {"group_id": GROUP, "generation_id": 1, "member_id": "m"}, lambda r: r.error_code),
    ("LeaveGroup of the refused group", ApiKey.LeaveGroup, 5, {"group_id": GROUP, "members": [{"member_id": "m", "group_instance_id": None, "reason": None}]}, lambda r: (r.error_code, len(r.members))),
    ("DeleteAcls without ALTER on the cluster", ApiKey.DeleteAcls, 3, {"filters": [{"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]},
     lambda r: [(x.error_code, len(x.matching_acls)) for x in r.filter_results]),
    ("DescribeClientQuotas without DESCRIBE_CONFIGS on the cluster", ApiKey.DescribeClientQuotas, 1, {"components": [], "strict": False}, lambda r: (r.error_code, r.error_message, r.entries)),
    ("AlterClientQuotas without ALTER_CONFIGS on the cluster", ApiKey.AlterClientQuotas, 1, {"entries": [{"entity": [{"entity_type": "user", "entity_name": "u"}], "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}], "validate_only": True},
     lambda r: [(x.error_code, x.error_message, [(e.entity_type, e.entity_name) for e in x.entity]) for x in r.entries]),
    ("AlterUserScramCredentials without ALTER on the cluster", ApiKey.AlterUserScramCredentials, 0, {"deletions": [{"name": "u", "mechanism": 1}], "upsertions": []}, lambda r: [(x.user, x.error_code) for x in r.results]),
    ("DescribeUserScramCredentials without DESCRIBE on the cluster", ApiKey.DescribeUserScramCredentials, 0, {"users": [{"name": "u"}]},
     lambda r: (r.error_code, r.error_message, [(x.user, x.error_code, x.error_message, x.credential_infos) for x in r.results])),
    ("InitProducerId of the refused transactional id", ApiKey.InitProducerId, 4, {"transactional_id": TXN, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}, lambda r: (r.error_code, r.producer_id)),
    # Allowed, by WRITE on any topic (those without ACLs); only whether it is refused is compared, as Kafka's broker cannot
    # hand out the id: its own AllocateProducerIds to its controller (as ANONYMOUS) is refused CLUSTER_ACTION here.
    ("InitProducerId of an idempotent producer without IDEMPOTENT_WRITE", ApiKey.InitProducerId, 4, {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
     lambda r: r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ("AddPartitionsToTxn v3 of the refused transactional id", ApiKey.AddPartitionsToTxn, 3, {"v3_and_below_transactional_id": TXN, "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": READ_ONLY, "partitions": [0]}]}, error_codes),
    ("AddPartitionsToTxn v3 of the refused topic", ApiKey.AddPartitionsToTxn, 3, {"v3_and_below_transactional_id": "allowed-txn", "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": DENIED, "partitions": [0]}, {"name": READ_ONLY, "partitions": [0]}]},
     lambda r: sorted((t.name, p.partition_error_code) for t in r.results_by_topic_v3_and_below for p in t.results_by_partition)),
    ("AddPartitionsToTxn v4 without CLUSTER_ACTION", ApiKey.AddPartitionsToTxn, 4, {"transactions": [{"transactional_id": "allowed-txn", "producer_id": 1, "producer_epoch": 0, "verify_only": True, "topics": [{"name": READ_ONLY, "partitions": [0]}]}]}, error_codes),
    ("AddOffsetsToTxn of the refused transactional id", ApiKey.AddOffsetsToTxn, 3, {"transactional_id": TXN, "producer_id": 1, "producer_epoch": 0, "group_id": "allowed-group"}, error_codes),
    ("AddOffsetsToTxn of the refused group", ApiKey.AddOffsetsToTxn, 3, {"transactional_id": "allowed-txn", "producer_id": 1, "producer_epoch": 0, "group_id": GROUP}, error_codes),
    ("EndTxn of the refused transactional id", ApiKey.EndTxn, 3, {"transactional_id": TXN, "producer_id": 1, "producer_epoch": 0, "committed": True}, error_codes),
    ("WriteTxnMarkers without CLUSTER_ACTION", ApiKey.WriteTxnMarkers, 1, {"markers": [{"producer_id": 1, "producer_epoch": 0, "transaction_result": True, "topics": [{"name": READ_ONLY, "partition_indexes": [0]}], "coordinator_epoch": 0}]},
     lambda r: [(m.producer_id, [(t.name, p.partition_index, p.error_code) for t in m.topics for p in t.partitions]) for m in r.markers]),
    ("TxnOffsetCommit of the refused transactional id", ApiKey.TxnOffsetCommit, 3, txn_offset_commit_body(TXN, "allowed-group", READ_ONLY), error_codes),
    ("TxnOffsetCommit of the refused group", ApiKey.TxnOffsetCommit, 3, txn_offset_commit_body("allowed-txn", GROUP, READ_ONLY), error_codes),
    ("DescribeTransactions of the refused transactional id hides its producer", ApiKey.DescribeTransactions, 0, {"transactional_ids": [TXN]}, lambda r: [dict(s) for s in r.transaction_states]),
    ("DescribeTransactions of an unknown transactional id", ApiKey.DescribeTransactions, 0, {"transactional_ids": ["unknown-txn"]}, lambda r: [dict(s) for s in r.transaction_states]),
    ("ListTransactions hides the refused transactional id", ApiKey.ListTransactions, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
     lambda r: (r.error_code, [(s.transactional_id, s.transaction_state) for s in r.transaction_states])),
    ("AlterPartition without CLUSTER_ACTION", ApiKey.AlterPartition, 3, {"broker_id": 0, "broker_epoch": -1, "topics": []}, lambda r: (r.error_code, r.topics)),
    ("AllocateProducerIds without CLUSTER_ACTION", ApiKey.AllocateProducerIds, 0, {"broker_id": 0, "broker_epoch": -1}, lambda r: (r.error_code, r.producer_id_start, r.producer_id_len)),
    ("ControlledShutdown without CLUSTER_ACTION", ApiKey.ControlledShutdown, 3, {"broker_id": 0, "broker_epoch": -1}, lambda r: (r.error_code, r.remaining_partitions)),
    ("LeaderAndIsr without CLUSTER_ACTION", ApiKey.LeaderAndIsr, 7, {"controller_id": 0, "controller_epoch": 1, "broker_epoch": -1, "live_leaders": [],
     "topic_states": [{"topic_name": READ_ONLY, "topic_id": uuid.UUID(int=1), "partition_states": [{"partition_index": 0, "controller_epoch": 1, "leader": 0, "leader_epoch": 9, "isr": [0], "partition_epoch": 9, "replicas": [0]}]}]},
     lambda r: (r.error_code, [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partition_errors]) for t in r.topics])),
    ("StopReplica without CLUSTER_ACTION", ApiKey.StopReplica, 4, {"controller_id": 0, "controller_epoch": 1, "broker_epoch": -1,
     "topic_states": [{"topic_name": READ_ONLY, "partition_states": [{"partition_index": 0, "leader_epoch": 9, "delete_partition": True}]}]},
     lambda r: (r.error_code, [(p.topic_name, p.partition_index, p.error_code) for p in r.partition_errors])),
    ("UpdateMetadata without CLUSTER_ACTION", ApiKey.UpdateMetadata, 8, {"controller_id": 0, "controller_epoch": 1, "broker_epoch": -1, "topic_states": [], "live_brokers": []}, error_codes),
    ("AlterPartitionReassignments without ALTER on the cluster", ApiKey.AlterPartitionReassignments, 0, {"timeout_ms": 5000, "topics": [{"name": READ_ONLY, "partitions": [{"partition_index": 0, "replicas": [0]}]}]},
     lambda r: (r.error_code, [(t.name, p.partition_index, p.error_code) for t in r.responses for p in t.partitions])),
    ("ListPartitionReassignments without DESCRIBE on the cluster", ApiKey.ListPartitionReassignments, 0, {"timeout_ms": 5000, "topics": None}, lambda r: (r.error_code, r.topics)),
    ("ElectLeaders without ALTER on the cluster", ApiKey.ElectLeaders, 2, {"election_type": 0, "topic_partitions": [{"topic": READ_ONLY, "partitions": [0]}], "timeout_ms": 5000},
     lambda r: (r.error_code, [(t.topic, p.partition_id, p.error_code) for t in r.replica_election_results for p in t.partition_result])),
    ("UpdateFeatures without ALTER on the cluster", ApiKey.UpdateFeatures, 1, {"timeout_ms": 5000, "feature_updates": [{"feature": "f", "max_version_level": 1, "upgrade_type": 1}], "validate_only": True},
     lambda r: (r.error_code, r.results)),
    ("AlterReplicaLogDirs without ALTER on the cluster", ApiKey.AlterReplicaLogDirs, 1, {"dirs": [{"path": "/nowhere", "topics": [{"name": READ_ONLY, "partitions": [0]}]}]},
     lambda r: [(t.topic_name, p.partition_index, p.error_code) for t in r.results for p in t.partitions]),
    # Token requests on a PLAINTEXT listener are refused before any ACL is asked (the ACL rules for tokens,
    # CREATE_TOKENS and DESCRIBE_TOKENS, need a SASL login: tests/e2e/test_delegation_tokens.py)
    ("CreateDelegationToken on a PLAINTEXT listener", ApiKey.CreateDelegationToken, 3,
     {"owner_principal_type": "User", "owner_principal_name": "bob", "renewers": [], "max_lifetime_ms": -1},
     lambda r: (r.error_code, r.principal_type, r.principal_name, r.token_requester_principal_name, r.token_id, r.max_timestamp_ms)),
    ("RenewDelegationToken on a PLAINTEXT listener", ApiKey.RenewDelegationToken, 2, {"hmac": b"x", "renew_period_ms": 1000}, lambda r: (r.error_code, r.expiry_timestamp_ms)),
    ("ExpireDelegationToken on a PLAINTEXT listener", ApiKey.ExpireDelegationToken, 2, {"hmac": b"x", "expiry_time_period_ms": -1}, lambda r: (r.error_code, r.expiry_timestamp_ms)),
    ("DescribeDelegationToken on a PLAINTEXT listener", ApiKey.DescribeDelegationToken, 3, {"owners": None}, lambda r: (r.error_code, r.tokens)),
] + topic_refusals(DENIED, "the refused topic") + topic_refusals(MISSING, "a refused topic that does not exist")

UNAUTHORIZED: dict[ApiKey, str] = {
    ApiKey.ApiVersions: "answered before and without authentication, to every client (KafkaApis authorizes nothing in it)",
    ApiKey.SaslHandshake: "part of authenticating, before there is a principal to authorize",
    ApiKey.SaslAuthenticate: "part of authenticating, before there is a principal to authorize",
    ApiKey.Envelope: "the connection is closed before any ACL is asked: forwarding is not enabled (Kafka's handleEnvelope)",
}
"""The APIs odradek serves that Kafka's ZooKeeper-mode broker answers without asking the authorizer."""


SOME_TOPIC_ID = uuid.UUID("99ddb536-4124-453b-beaf-cdd1ad017e96")
"""The share-state RPCs (only brokers send them) are refused before their topic is looked at."""
KAFKA_4_REQUESTS = [
    ("ConsumerGroupHeartbeat of the refused group", ApiKey.ConsumerGroupHeartbeat, 1,
     {"group_id": GROUP, "member_id": "m", "member_epoch": 0, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [READ_ONLY], "topic_partitions": []}, lambda r: r.error_code, ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ("ConsumerGroupHeartbeat subscribing to the refused topic", ApiKey.ConsumerGroupHeartbeat, 1,
     {"group_id": "allowed-group", "member_id": "m", "member_epoch": 0, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [READ_ONLY, DENIED], "topic_partitions": []},
     lambda r: r.error_code, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("ConsumerGroupDescribe of the refused group", ApiKey.ConsumerGroupDescribe, 1, {"group_ids": [GROUP], "include_authorized_operations": False},
     lambda r: [(g.group_id, g.error_code) for g in r.groups], [(GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED)]),
    ("ShareGroupHeartbeat of the refused group", ApiKey.ShareGroupHeartbeat, 1, {"group_id": GROUP, "member_id": "m", "member_epoch": 0, "subscribed_topic_names": [READ_ONLY]},
     lambda r: r.error_code, ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ("ShareGroupHeartbeat subscribing to the refused topic", ApiKey.ShareGroupHeartbeat, 1,
     {"group_id": "allowed-group", "member_id": "m", "member_epoch": 0, "subscribed_topic_names": [READ_ONLY, DENIED]}, lambda r: r.error_code, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("ShareGroupDescribe of the refused group", ApiKey.ShareGroupDescribe, 1, {"group_ids": [GROUP], "include_authorized_operations": False},
     lambda r: [(g.group_id, g.error_code) for g in r.groups], [(GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED)]),
    ("ShareFetch of the refused group", ApiKey.ShareFetch, 1,
     {"group_id": GROUP, "member_id": "m", "share_session_epoch": 0, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1024, "max_records": 10, "batch_size": 10, "topics": [], "forgotten_topics_data": []},
     lambda r: r.error_code, ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ("ShareAcknowledge of the refused group", ApiKey.ShareAcknowledge, 1, {"group_id": GROUP, "member_id": "m", "share_session_epoch": 1, "topics": []},
     lambda r: r.error_code, ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ("DescribeShareGroupOffsets of the refused group", ApiKey.DescribeShareGroupOffsets, 0, {"groups": [{"group_id": GROUP, "topics": None}]},
     lambda r: [(g.group_id, g.error_code) for g in r.groups], [(GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED)]),
    ("AlterShareGroupOffsets of the refused group", ApiKey.AlterShareGroupOffsets, 0, {"group_id": GROUP, "topics": [{"topic_name": READ_ONLY, "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
     lambda r: (r.error_code, r.responses), (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])),
    ("DescribeConfigs of the refused group's GROUP resource", ApiKey.DescribeConfigs, 4,
     {"resources": [{"resource_type": 32, "resource_name": GROUP, "configuration_keys": None}], "include_synonyms": False, "include_documentation": False},
     lambda r: [(c.resource_name, c.error_code) for c in r.results], [(GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED)]),
    ("ListConfigResources without DESCRIBE_CONFIGS on the cluster", ApiKey.ListConfigResources, 1, {"resource_types": [32]},
     lambda r: (r.error_code, r.config_resources), (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])),
    ("DeleteShareGroupOffsets of the refused group", ApiKey.DeleteShareGroupOffsets, 0, {"group_id": GROUP, "topics": [{"topic_name": READ_ONLY}]},
     lambda r: (r.error_code, r.responses), (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])),
    *[(f"{api.name} without CLUSTER_ACTION", api, version, {"group_id": "allowed-group", "topics": [{"topic_id": SOME_TOPIC_ID, "partitions": [partition]}]},
       lambda r: [(p.partition, p.error_code, p.error_message) for t in r.results for p in t.partitions],
       [(0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED.message)])
      for api, version, partition in [
          (ApiKey.InitializeShareGroupState, 0, {"partition": 0, "state_epoch": 0, "start_offset": 0}),
          (ApiKey.ReadShareGroupState, 0, {"partition": 0, "leader_epoch": 0}),
          (ApiKey.WriteShareGroupState, 1, {"partition": 0, "state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "delivery_complete_count": -1, "state_batches": []}),
          (ApiKey.DeleteShareGroupState, 0, {"partition": 0}),
          (ApiKey.ReadShareGroupStateSummary, 1, {"partition": 0, "leader_epoch": 0}),
      ]],
]
"""APIs Kafka 3.9 does not serve in ZooKeeper mode (the consumer group protocol, share groups): odradek alone,
answered as Kafka 4.4's KafkaApis refuses them (READ on the group, DESCRIBE on each subscribed topic; DESCRIBE
on a described group; DELETE on a group whose share offsets are deleted; CLUSTER_ACTION for the share-state
RPCs, every partition answered CLUSTER_AUTHORIZATION_FAILED)."""


@pytest.mark.parametrize("api,version,body,observed,expected", [r[1:] for r in KAFKA_4_REQUESTS], ids=[r[0] for r in KAFKA_4_REQUESTS])
def test_kafka_4_refusals(prepared, connect, api, version, body, observed, expected) -> None:
    ours, _ = prepared
    assert observed(connect(ours).call(api, version, body)) == expected


def test_every_served_api_has_a_refusal_case() -> None:
    """An API added to the handler table without a case here (or a reason it has none) fails this."""
    covered = {r[1] for r in REQUESTS} | {r[1] for r in KAFKA_4_REQUESTS} | set(UNAUTHORIZED)
    assert sorted(ApiKey(k).name for k in HANDLERS if k not in covered) == []
    assert set(UNAUTHORIZED) <= set(HANDLERS)


@pytest.mark.parametrize("api,version,body,observed", [r[1:] for r in REQUESTS], ids=[r[0] for r in REQUESTS])
def test_refusals_are_kafkas(prepared, connect, api, version, body, observed) -> None:
    ours, theirs = prepared
    assert observed(connect(ours).call(api, version, body)) == observed(connect(theirs).call(api, version, body))


def test_describing_every_users_scram_credentials_refused_is_answered(prepared, connect) -> None:
    """Kafka never answers this (its refusal repeats the error per user named and trips over the null list:
    compat-tests/README.md); odradek refuses it with no results."""
    ours, _ = prepared
    response = connect(ours).call(ApiKey.DescribeUserScramCredentials, 0, {"users": None})
    assert (response.error_code, response.results) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
