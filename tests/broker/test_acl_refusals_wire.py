"""What a principal without permission is answered, compared on the wire with a real Kafka 3.9 running the
same AclAuthorizer: ``allow.everyone.if.no.acl.found=true`` (so the brokers' own requests and the
unrestricted resources work) and ACLs that refuse ``User:ANONYMOUS`` (every PLAINTEXT client) a topic, a group,
and ALTER and DESCRIBE on the cluster, and allow only reading another topic."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch

sys.path.insert(0, str(Path(__file__).parents[1] / "jvm"))
import kafka_jvm  # noqa: E402

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "allow.everyone.if.no.acl.found": "true"}
DENIED, READ_ONLY, GROUP = "refused-topic", "read-only-topic", "refused-group"
TOPIC_TYPE, GROUP_TYPE, CLUSTER_TYPE, LITERAL, ALL, READ, ALTER, DESCRIBE, DENY, ALLOW = 2, 3, 4, 3, 2, 3, 7, 8, 2, 3


def acl(resource_type: int, name: str, operation: int, permission: int, principal: str) -> dict:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": LITERAL, "principal": principal, "host": "*", "operation": operation, "permission_type": permission}


def prepare(bootstrap: str, connect) -> None:
    """The topics first (nothing restricts creating them yet), then the ACLs."""
    wire = connect(bootstrap)
    topics = [{"name": t, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []} for t in (DENIED, READ_ONLY)]
    assert {t.error_code for t in wire.call(ApiKey.CreateTopics, 4, {"topics": topics, "timeout_ms": 10000}).topics} == {ErrorCode.NONE}
    acls = [
        acl(TOPIC_TYPE, DENIED, ALL, DENY, "User:ANONYMOUS"),
        acl(GROUP_TYPE, GROUP, ALL, DENY, "User:ANONYMOUS"),
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
        kafka.stop()
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


REQUESTS: list[tuple[str, ApiKey, int, dict, Any]] = [
    ("Metadata naming the refused and the read-only topic", ApiKey.Metadata, 12, {"topics": [{"name": n, "topic_id": uuid.UUID(int=0)} for n in (DENIED, READ_ONLY)], "allow_auto_topic_creation": False, "include_topic_authorized_operations": True},
     lambda r: sorted((t.name, t.error_code, t.topic_authorized_operations) for t in r.topics)),
    ("Metadata of all topics", ApiKey.Metadata, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
     lambda r: sorted(t.name for t in r.topics if t.name in (DENIED, READ_ONLY))),
    ("Produce to the read-only topic", ApiKey.Produce, 9, produce_body(READ_ONLY), lambda r: [p.error_code for t in r.responses for p in t.partition_responses]),
    ("Produce to the refused topic", ApiKey.Produce, 9, produce_body(DENIED), lambda r: [p.error_code for t in r.responses for p in t.partition_responses]),
    ("Fetch from the refused topic", ApiKey.Fetch, 12, fetch_body(DENIED), lambda r: [(r.error_code, [p.error_code for t in r.responses for p in t.partitions])]),
    ("Fetch from the read-only topic", ApiKey.Fetch, 12, fetch_body(READ_ONLY), lambda r: [(r.error_code, [p.error_code for t in r.responses for p in t.partitions])]),
    ("ListOffsets of the refused topic", ApiKey.ListOffsets, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": DENIED, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
     lambda r: [p.error_code for t in r.topics for p in t.partitions]),
    ("FindCoordinator of the refused group", ApiKey.FindCoordinator, 4, {"key_type": 0, "coordinator_keys": [GROUP]}, lambda r: [(c.error_code, c.node_id) for c in r.coordinators]),
    ("JoinGroup of the refused group", ApiKey.JoinGroup, 9, {"group_id": GROUP, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "", "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}], "reason": None},
     lambda r: (r.error_code, r.generation_id, r.member_id)),
    ("OffsetCommit to the refused group", ApiKey.OffsetCommit, 8, {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None, "topics": [{"name": READ_ONLY, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
     lambda r: [p.error_code for t in r.topics for p in t.partitions]),
    ("OffsetCommit of the refused topic", ApiKey.OffsetCommit, 8, {"group_id": "allowed-group", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None, "topics": [{"name": DENIED, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
     lambda r: [p.error_code for t in r.topics for p in t.partitions]),
    ("DescribeGroups of the refused group", ApiKey.DescribeGroups, 5, {"groups": [GROUP], "include_authorized_operations": True}, lambda r: [(g.group_id, g.error_code) for g in r.groups]),
    ("DeleteTopics of the refused topic", ApiKey.DeleteTopics, 6, {"topics": [{"name": DENIED, "topic_id": uuid.UUID(int=0)}], "timeout_ms": 5000}, lambda r: [(t.name, t.error_code) for t in r.responses]),
    ("DescribeConfigs of the refused topic", ApiKey.DescribeConfigs, 4, {"resources": [{"resource_type": 2, "resource_name": DENIED, "configuration_keys": None}], "include_synonyms": False, "include_documentation": False},
     lambda r: [(x.error_code, x.error_message) for x in r.results]),
    ("OffsetFetch of the refused group", ApiKey.OffsetFetch, 8, {"groups": [{"group_id": GROUP, "topics": None}], "require_stable": False}, lambda r: [(g.group_id, g.error_code) for g in r.groups]),
    ("OffsetFetch of the refused topic", ApiKey.OffsetFetch, 8, {"groups": [{"group_id": "allowed-group", "topics": [{"name": DENIED, "partition_indexes": [0]}]}], "require_stable": False},
     lambda r: [(g.error_code, [(t.name, p.error_code) for t in g.topics for p in t.partitions]) for g in r.groups]),
    ("DeleteGroups of the refused group", ApiKey.DeleteGroups, 2, {"groups_names": [GROUP]}, lambda r: [(x.group_id, x.error_code) for x in r.results]),
    ("OffsetDelete of the refused group", ApiKey.OffsetDelete, 0, {"group_id": GROUP, "topics": [{"name": READ_ONLY, "partitions": [{"partition_index": 0}]}]}, lambda r: (r.error_code, len(r.topics))),
    ("CreatePartitions of the refused topic", ApiKey.CreatePartitions, 3, {"topics": [{"name": DENIED, "count": 2, "assignments": None}], "timeout_ms": 5000, "validate_only": True},
     lambda r: [(x.name, x.error_code, x.error_message) for x in r.results]),
    ("DeleteRecords of the refused topic", ApiKey.DeleteRecords, 2, {"topics": [{"name": DENIED, "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout_ms": 5000},
     lambda r: [(p.error_code, p.low_watermark) for t in r.topics for p in t.partitions]),
    ("DescribeProducers of the refused topic", ApiKey.DescribeProducers, 0, {"topics": [{"name": DENIED, "partition_indexes": [0]}]}, lambda r: [(p.error_code, p.error_message) for t in r.topics for p in t.partitions]),
    ("IncrementalAlterConfigs of the refused topic", ApiKey.IncrementalAlterConfigs, 1, {"resources": [{"resource_type": 2, "resource_name": DENIED, "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": True},
     lambda r: [(x.error_code, x.error_message) for x in r.responses]),
    ("DescribeAcls without DESCRIBE on the cluster", ApiKey.DescribeAcls, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
     lambda r: (r.error_code, len(r.resources))),
    ("CreateAcls without ALTER on the cluster", ApiKey.CreateAcls, 3, {"creations": [acl(TOPIC_TYPE, "x", READ, ALLOW, "User:x")]}, lambda r: [x.error_code for x in r.results]),
    ("DescribeCluster's authorized operations", ApiKey.DescribeCluster, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1}, lambda r: (r.error_code, r.cluster_authorized_operations)),
    ("ListGroups hides the refused group", ApiKey.ListGroups, 4, {"states_filter": []}, lambda r: (r.error_code, GROUP in [g.group_id for g in r.groups])),
]


@pytest.mark.parametrize("api,version,body,observed", [r[1:] for r in REQUESTS], ids=[r[0] for r in REQUESTS])
def test_refusals_are_kafkas(prepared, connect, api, version, body, observed) -> None:
    ours, theirs = prepared
    assert observed(connect(ours).call(api, version, body)) == observed(connect(theirs).call(api, version, body))
