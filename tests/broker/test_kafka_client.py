"""odradek's own Kafka client (broker/network/kafka_client.py) against odradek and against the real Kafka: bootstrap,
ApiVersions negotiation, pipelined requests, timeouts, coordinator lookup, and a broker closing the connection."""

from __future__ import annotations

import uuid

import anyio
import pytest

from odradek import Broker
from odradek.broker.network.kafka_client import CoordinatorType, DisconnectedError, KafkaClient, UnsupportedVersionError, our_versions
from odradek.protocol.api import APIS, ApiKey
from odradek.protocol.errors import ErrorCode


@pytest.fixture(scope="module")
def odradek():
    with Broker(config={"broker.id": "0", "group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


@pytest.fixture(params=["odradek", "kafka"])
def bootstrap(request) -> str:
    """Each test runs against both."""
    return request.getfixturevalue("odradek" if request.param == "odradek" else "real_kafka").bootstrap


def run(test):
    return anyio.run(test)


def create_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"kafka-client-{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        async with KafkaClient(bootstrap) as client:
            body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}], "timeout_ms": 10000}
            result = (await client.request(ApiKey.CreateTopics, body)).topics[0]
            assert result.error_code == ErrorCode.NONE, result

    run(create)
    return name


FETCH_BY_NAME = 12
"""The last Fetch version naming topics (v13 on names them by id)."""


def fetch_body(topic: str, max_wait_ms: int) -> dict:
    """A Fetch at the end of an empty partition: the broker holds it for max_wait_ms."""
    partition = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024, "current_leader_epoch": -1, "log_start_offset": -1}
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1024, "isolation_level": 0, "topics": [{"topic": topic, "partitions": [partition]}]}


def test_bootstrap_finds_the_broker_and_the_cluster(bootstrap):
    async def test() -> None:
        async with KafkaClient(f"127.0.0.1:1,{bootstrap}") as client:  # the first address refuses: the next is tried
            host, port = bootstrap.rsplit(":", 1)
            assert [(n.node_id, n.host, n.port) for n in client.nodes.values()] == [(0, host, int(port))]
            assert client.controller_id == 0 and client.cluster_id
            described = await client.request(ApiKey.DescribeCluster, {"include_cluster_authorized_operations": False}, node_id=0)
            assert described.cluster_id == client.cluster_id

    run(test)


def test_versions_are_negotiated(bootstrap):
    async def test() -> None:
        async with KafkaClient(bootstrap) as client:
            connection = await client.connection(0)
            answer = await connection.send(ApiKey.ApiVersions, 3, {"client_software_name": "test", "client_software_version": "1"})
            theirs = {k.api_key: k.max_version for k in answer.api_keys}
            assert {k: r.stop - 1 for k, r in connection.api_versions.items()} == theirs
            for api in (ApiKey.Produce, ApiKey.Fetch, ApiKey.Metadata, ApiKey.ListOffsets):
                assert connection.version_for(api) == min(theirs[api], our_versions(api).stop - 1)
            unserved = next(key for key in APIS if key not in theirs)
            with pytest.raises(UnsupportedVersionError):
                connection.version_for(unserved)

    run(test)


def test_requests_are_pipelined_and_answered_in_order(bootstrap):
    topic = create_topic(bootstrap)

    async def test() -> None:
        async with KafkaClient(bootstrap) as client:
            connection = await client.connection(0)
            answers: dict[int, object] = {}

            async def ask(i: int) -> None:
                if i == 0:
                    answers[i] = await connection.send(ApiKey.Fetch, FETCH_BY_NAME, fetch_body(topic, 1000))
                else:
                    answers[i] = await connection.request(ApiKey.Metadata, {"topics": [{"name": f"{topic}-{i}"}], "allow_auto_topic_creation": False})

            async with anyio.create_task_group() as tg:
                for i in range(12):
                    tg.start_soon(ask, i)
                    await anyio.sleep(0.01)
                await anyio.sleep(0.2)
                assert connection.in_flight == 12  # all sent while the broker still holds the first
            fetched = answers[0].responses[0].partitions[0]
            assert (fetched.error_code, fetched.high_watermark) == (ErrorCode.NONE, 0)
            assert [answers[i].topics[0].name for i in range(1, 12)] == [f"{topic}-{i}" for i in range(1, 12)]

    run(test)


def test_a_request_timeout_closes_the_connection_and_the_next_request_reconnects(bootstrap):
    topic = create_topic(bootstrap)

    async def test() -> None:
        async with KafkaClient(bootstrap, request_timeout_s=0.5) as client:
            connection = await client.connection(0)
            outcomes: dict[str, type] = {}

            async def ask(name: str, api: int, version: int, body: dict, timeout_s: float | None) -> None:
                try:
                    await connection.send(api, version, body, timeout_s=timeout_s)
                    outcomes[name] = type(None)
                except (TimeoutError, DisconnectedError) as exc:
                    outcomes[name] = type(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, "held", ApiKey.Fetch, FETCH_BY_NAME, fetch_body(topic, 3000), None)
                await anyio.sleep(0.05)
                tg.start_soon(ask, "behind", ApiKey.Metadata, 12, {"topics": []}, 10)
            assert outcomes == {"held": TimeoutError, "behind": DisconnectedError}
            assert connection.closed
            answer = await client.request(ApiKey.Metadata, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}, node_id=0)
            assert answer.topics[0].error_code == ErrorCode.NONE

    run(test)


def test_a_broker_that_closes_the_connection(bootstrap):
    """A request for an API the broker does not serve makes Kafka close the connection without an answer:
    every request in flight fails, and nothing waits for the timeout."""

    async def test() -> None:
        async with KafkaClient(bootstrap) as client:
            connection = await client.connection(0)
            unserved = next(key for key in APIS if key not in connection.api_versions)
            with anyio.fail_after(5):
                with pytest.raises(DisconnectedError):
                    await connection.send(unserved, APIS[unserved].min_version, {})
            assert connection.closed
            with pytest.raises(DisconnectedError):
                await connection.request(ApiKey.Metadata, {"topics": []})

    run(test)


@pytest.mark.parametrize("answer", [b"", b"\x00\x00\x00\x03abc", b"\x00\x00\x00\x08\x00\x00\x00\x01\xff\xff\xff\xff"])
def test_a_server_that_is_no_broker(answer):
    """Something listening that is no broker: it closes at once, or answers ApiVersions with bytes that are not
    an answer (too short; a negative array length). The client fails cleanly, without waiting for a timeout."""

    async def test() -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)

        async def serve(stream) -> None:
            await stream.receive()
            if answer:
                await stream.send(answer)
            await stream.aclose()

        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, serve)
            with anyio.fail_after(5), pytest.raises(DisconnectedError):
                async with KafkaClient(f"127.0.0.1:{port}"):
                    pass
            tg.cancel_scope.cancel()

    run(test)


def test_find_coordinator(bootstrap):
    async def test() -> None:
        async with KafkaClient(bootstrap) as client:
            group = await client.find_coordinator(f"group-{uuid.uuid4().hex[:8]}", timeout_s=30)
            assert group.node_id == 0
            described = await client.coordinator_request("some-group", ApiKey.DescribeGroups, {"groups": ["some-group"]})
            assert described.groups[0].group_state == "Dead"
            # The first ask creates __transaction_state (COORDINATOR_NOT_AVAILABLE meanwhile, which the client
            # asks again); then the only broker coordinates.
            assert (await client.find_coordinator("some-transaction", CoordinatorType.TRANSACTION, timeout_s=30)).node_id == 0

    run(test)
