"""What clients learn about the cluster: ApiVersions, Metadata's brokers, controller, topics, ids, epochs."""

from __future__ import annotations

import time

from compat_client import Client, TopicSpec
from compat_observe import is_kafka_uuid, unique
from compat_targets import Target

KAFKA_39_API_VERSIONS = {
    "Produce": [0, 11],
    "Fetch": [0, 17],
    "ListOffsets": [0, 9],
    "Metadata": [0, 12],
    "LeaderAndIsr": [0, 7],
    "StopReplica": [0, 4],
    "UpdateMetadata": [0, 8],
    "ControlledShutdown": [0, 3],
    "OffsetCommit": [0, 9],
    "OffsetFetch": [0, 9],
    "FindCoordinator": [0, 6],
    "JoinGroup": [0, 9],
    "Heartbeat": [0, 4],
    "LeaveGroup": [0, 5],
    "SyncGroup": [0, 5],
    "DescribeGroups": [0, 5],
    "ListGroups": [0, 5],
    "SaslHandshake": [0, 1],
    "ApiVersions": [0, 4],
    "CreateTopics": [0, 7],
    "DeleteTopics": [0, 6],
    "DeleteRecords": [0, 2],
    "InitProducerId": [0, 5],
    "OffsetForLeaderEpoch": [0, 4],
    "AddPartitionsToTxn": [0, 5],
    "AddOffsetsToTxn": [0, 4],
    "EndTxn": [0, 4],
    "WriteTxnMarkers": [0, 1],
    "TxnOffsetCommit": [0, 4],
    "DescribeAcls": [0, 3],
    "CreateAcls": [0, 3],
    "DeleteAcls": [0, 3],
    "DescribeConfigs": [0, 4],
    "AlterConfigs": [0, 2],
    "AlterReplicaLogDirs": [0, 2],
    "DescribeLogDirs": [0, 4],
    "SaslAuthenticate": [0, 2],
    "CreatePartitions": [0, 3],
    "CreateDelegationToken": [0, 3],
    "RenewDelegationToken": [0, 2],
    "ExpireDelegationToken": [0, 2],
    "DescribeDelegationToken": [0, 3],
    "DeleteGroups": [0, 2],
    "ElectLeaders": [0, 2],
    "IncrementalAlterConfigs": [0, 1],
    "AlterPartitionReassignments": [0, 0],
    "ListPartitionReassignments": [0, 0],
    "OffsetDelete": [0, 0],
    "DescribeClientQuotas": [0, 1],
    "AlterClientQuotas": [0, 1],
    "DescribeUserScramCredentials": [0, 0],
    "AlterUserScramCredentials": [0, 0],
    "AlterPartition": [0, 3],
    "UpdateFeatures": [0, 1],
    "Envelope": [0, 0],
    "DescribeCluster": [0, 1],
    "DescribeProducers": [0, 0],
    "DescribeTransactions": [0, 0],
    "ListTransactions": [0, 1],
    "AllocateProducerIds": [0, 0],
    "ConsumerGroupHeartbeat": [0, 0],
    "ConsumerGroupDescribe": [0, 0],
}
"""Every API a Kafka 3.9.1 broker in ZooKeeper mode advertises, with its versions (its ApiVersions answer)."""


ODRADEK_BEYOND_3_9 = {"Produce": [0, 12], "EndTxn": [0, 5], "TxnOffsetCommit": [0, 5], "ConsumerGroupHeartbeat": [0, 1], "ConsumerGroupDescribe": [0, 1]}
"""Where odradek advertises more than Kafka 3.9 for these APIs: transactions v2 (KIP-890, Kafka 4.0), which
Kafka 4.x clients use when ``transaction.version`` 2 is finalized (issue 24; docs/transactions.md), and the
consumer group protocol's versions of Kafka 4.x (KIP-848; docs/protocol.md)."""


def advertised(client: Client) -> dict[str, list[int] | None]:
    from odradek.protocol.api import ApiKey

    versions = client.api_versions()
    return {name: list(versions[ApiKey[name]]) if ApiKey[name] in versions else None for name in KAFKA_39_API_VERSIONS}


def api_versions_up_to_3_9(target: Target, client: Client) -> dict:
    """Each range as far as Kafka 3.9's goes: the versions a 3.9 client can choose from."""
    return {name: None if r is None else [r[0], min(r[1], KAFKA_39_API_VERSIONS[name][1])] for name, r in advertised(client).items()}


def api_versions_beyond_3_9(target: Target, client: Client) -> dict:
    return {name: r for name, r in advertised(client).items() if r is not None and r[1] > KAFKA_39_API_VERSIONS[name][1]}


def test_api_versions(compat):
    compat.check(api_versions_up_to_3_9, KAFKA_39_API_VERSIONS)


def test_api_versions_odradek_serves_beyond_3_9(compat):
    assert compat.on_odradek(api_versions_beyond_3_9) == ODRADEK_BEYOND_3_9


def metadata_shape(target: Target, client: Client) -> dict:
    topic = unique("metadata")
    created = client.create_topics([TopicSpec(topic, partitions=3)])
    described = client.wait_for_topic(topic, 3)
    cluster = client.cluster()
    return {
        "created": created[topic],
        "brokers": sorted(cluster["brokers"]),
        "advertised_address_is_bootstrap": [f"{host}:{port}" == target.bootstrap for host, port in cluster["brokers"].values()],
        "controller": cluster["controller_id"],
        "cluster_id_is_uuid": is_kafka_uuid(cluster["cluster_id"]),
        "topic": {
            "error": described["error"],
            "partitions": {
                str(index): {"leader": p["leader"], "replicas": p["replicas"], "isr": p["isr"]}
                for index, p in sorted(described.get("partitions", {}).items())
            },
        },
        "unknown_topic": client.describe_topics([unique("absent")]).popitem()[1]["error"],
    }


LED_BY_BROKER0 = {"leader": 0, "replicas": [0], "isr": [0]}


def test_metadata_shape(compat):
    compat.check(
        metadata_shape,
        {
            "created": "NONE",
            "brokers": [0],  # broker.id=0, the one broker both targets run
            "advertised_address_is_bootstrap": [True],
            "controller": 0,  # ZooKeeper mode: the broker that won the controller election
            "cluster_id_is_uuid": True,
            "topic": {"error": "NONE", "partitions": {"0": LED_BY_BROKER0, "1": LED_BY_BROKER0, "2": LED_BY_BROKER0}},
            "unknown_topic": "UNKNOWN_TOPIC_OR_PARTITION",
        },
    )


def create_once_deleted(client: Client, spec: TopicSpec, timeout_s: float = 15) -> str:
    """CreateTopics for a topic just deleted, retried while the broker still answers TOPIC_ALREADY_EXISTS.

    In ZooKeeper mode DeleteTopics answers once the brokers' metadata caches dropped the topic, but the
    controller removes its ZooKeeper nodes a little later; until then CreateTopics answers
    TOPIC_ALREADY_EXISTS ("marked for deletion"), so users and Kafka's own tests retry.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        error = client.create_topics([spec])[spec.name]
        if error != "TOPIC_ALREADY_EXISTS" or time.monotonic() > deadline:
            return error
        time.sleep(0.2)


def topic_ids(target: Target, client: Client) -> dict:
    first, second = unique("ids-a"), unique("ids-b")
    client.create_topics([TopicSpec(first), TopicSpec(second)])
    client.wait_for_topic(first, 1)
    client.wait_for_topic(second, 1)
    before = client.topic_ids([first, second])
    deleted = client.delete_topics([first])
    recreated = create_once_deleted(client, TopicSpec(first))
    client.wait_for_topic(first, 1)
    after = client.topic_ids([first])
    return {
        "ids_are_uuids": [is_kafka_uuid(before[first]), is_kafka_uuid(before[second])],
        "distinct": before[first] != before[second],
        "deleted": deleted[first],
        "recreated": recreated,
        "recreated_topic_has_new_id": is_kafka_uuid(after[first]) and after[first] != before[first],
    }


def test_topic_ids(compat):
    compat.check(
        topic_ids,
        {"ids_are_uuids": [True, True], "distinct": True, "deleted": "NONE", "recreated": "NONE", "recreated_topic_has_new_id": True},
    )


def leader_epochs(target: Target, client: Client) -> dict:
    topic = client.new_topic("epochs", partitions=2)
    new = client.leader_epochs(topic)
    grown = client.create_partitions({topic: 3})
    client.wait_for_topic(topic, 3)
    return {"new_topic": {str(p): e for p, e in sorted(new.items())}, "grown": grown[topic], "after_create_partitions": {str(p): e for p, e in sorted(client.leader_epochs(topic).items())}}


def test_leader_epochs(compat):
    # A partition's first leader has epoch 0, and adding partitions does not move existing leaders.
    compat.check(leader_epochs, {"new_topic": {"0": 0, "1": 0}, "grown": "NONE", "after_create_partitions": {"0": 0, "1": 0, "2": 0}})
