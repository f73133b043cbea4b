"""Kafka 4.4's own traffic reads with odradek's declarations, to the last byte, both ways.

The declarations of the versions and APIs Kafka 4.4 adds (Produce 12-13, ConsumerGroupHeartbeat 1, the share
APIs, ...) are generated from 4.4's specs merged with 3.9's (tools/gen_messages.py) and checked against the
specs; this checks them against what Kafka 4.4 itself writes. A proxy sits between a real Kafka 4.4 node and
everything that talks to it (the Java client 4.4, Kafka 4.4's tools, and the node's own inter-broker calls:
the node advertises the proxy); every request and every answer passing through is decoded with the version
it was sent at, must leave no byte unread, and must encode back to the same bytes.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import kafka44_jvm
import pytest
from kafka_jvm import free_port

from odradek.protocol.api import APIS, ApiKey, decode_request, decode_response, encode_request, encode_response, peek_header

TOPIC = "wire44"
GROUP_TOPIC = "wire44-group"  # the Java probe reads keys and values, which the perf test leaves null


@dataclass
class Exchange:
    api_key: int
    version: int
    request: bytes
    response: bytes | None = None


@dataclass
class RecordingProxy:
    """Forwards a listening port to ``target``, pairing each request frame with its answer, per connection."""

    target: tuple[str, int]
    port: int
    exchanges: list[Exchange] = field(default_factory=list)
    listener: socket.socket | None = None

    def start(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()

    def _accept(self) -> None:
        assert self.listener is not None
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            pending: dict[int, Exchange] = {}
            threading.Thread(target=self._pump, args=(client, upstream, pending, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, pending, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, pending: dict[int, Exchange], requests: bool) -> None:
        buffered = bytearray()
        try:
            while data := source.recv(1 << 16):
                buffered += data
                while len(buffered) >= 4 and len(buffered) >= 4 + (size := int.from_bytes(buffered[:4], "big")):
                    self._frame(bytes(buffered[4 : 4 + size]), pending, requests)
                    del buffered[: 4 + size]
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def _frame(self, frame: bytes, pending: dict[int, Exchange], requests: bool) -> None:
        if requests:
            api_key, version, correlation_id = peek_header(frame)
            exchange = Exchange(api_key, version, frame)
            pending[correlation_id] = exchange
            self.exchanges.append(exchange)
        elif (exchange_ := pending.pop(int.from_bytes(frame[:4], "big"), None)) is not None:
            exchange_.response = frame


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory, java44: kafka44_jvm.JavaPrograms) -> Iterator[list[Exchange]]:
    """What passed between Kafka 4.4 and its clients while they produced, consumed in a consumer group
    (``group.protocol=consumer``) and a share group, ran a transaction and described it all."""
    port, proxy_port = free_port(), free_port()
    settings = {**kafka44_jvm.SINGLE_NODE_SETTINGS, "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"}
    node = kafka44_jvm.KRaftNode(Path(tmp_path_factory.mktemp("kafka44-wire")), 1, kafka44_jvm.new_cluster_id(), port, free_port(), settings=settings)
    proxy = RecordingProxy(("127.0.0.1", port), proxy_port)
    proxy.start()
    try:
        node.start()
        bootstrap = f"127.0.0.1:{proxy_port}"
        tools = [
            ("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", TOPIC, "--partitions", "2"),
            ("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", GROUP_TOPIC, "--partitions", "2"),
            ("kafka-producer-perf-test", "--topic", TOPIC, "--num-records", "200", "--record-size", "50", "--throughput", "-1",
             "--transactional-id", "wire44-txn", "--transaction-duration-ms", "100", "--bootstrap-server", bootstrap),
            # the share consumer needs share.auto.offset.reset=earliest to see what is already there
            ("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "groups", "--entity-name", "wire44-share",
             "--add-config", "share.auto.offset.reset=earliest"),
            ("kafka-console-share-consumer", "--bootstrap-server", bootstrap, "--topic", TOPIC, "--group", "wire44-share", "--max-messages", "5",
             "--timeout-ms", "20000"),
            ("kafka-share-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "wire44-share"),
            ("kafka-features", "--bootstrap-server", bootstrap, "describe"),
            ("kafka-transactions", "--bootstrap-server", bootstrap, "describe", "--transactional-id", "wire44-txn"),
        ]
        for tool, *args in tools[:3]:
            done = kafka44_jvm.run_tool(tool, *args)
            assert done.returncode == 0, f"{tool}: {done.stdout}\n{done.stderr}"
        probe = java44.run("Client44Probe", "roundtrip", bootstrap, GROUP_TOPIC, "20", "wire44-group", "consumer", lasting=True)
        assert probe.returncode == 0, probe.stdout + probe.stderr
        assert json.loads(probe.stdout.splitlines()[-1])["step"], probe.stdout
        for tool, *args in tools[3:]:
            done = kafka44_jvm.run_tool(tool, *args)
            assert done.returncode == 0, f"{tool}: {done.stdout}\n{done.stderr}"
        yield proxy.exchanges
    finally:
        node.stop()
        proxy.close()


def test_every_request_and_answer_decodes_and_encodes_back_alike(traffic: list[Exchange]) -> None:
    problems = []
    for exchange in traffic:
        name = f"{APIS[exchange.api_key].name} v{exchange.version}"
        request = decode_request(exchange.request)
        header = request.header
        rebuilt = encode_request(header.api_key, header.api_version, header.correlation_id, request.body, client_id=header.client_id)
        # Kafka reads a request's fields and ignores what follows; librdkafka's Metadata carries three bytes more
        # (tests/protocol/test_golden.py). None is ours, but on a shared machine a librdkafka client of another
        # test may still be retrying the port this proxy now holds.
        sent = exchange.request[: len(rebuilt) - 4] if (header.client_id or "").startswith("rdkafka") else exchange.request
        if rebuilt[4:] != sent:
            problems.append(f"{name} request from {header.client_id}: not written back alike")
        if exchange.response is None:
            continue
        correlation_id, body = decode_response(exchange.api_key, exchange.version, exchange.response)  # every byte, or DecodeError
        answer, splices = encode_response(exchange.api_key, exchange.version, correlation_id, body)
        if not splices and answer[4:] != exchange.response:
            problems.append(f"{name} response: not written back alike")
    assert problems == []


def test_the_traffic_holds_the_versions_and_apis_kafka_4_4_added(traffic: list[Exchange]) -> None:
    """Otherwise the test above proves little: the clients must have used what 3.9 does not define."""
    seen = {(e.api_key, e.version) for e in traffic if e.response is not None}
    above_3_9 = {(APIS[k].name, v) for k, v in seen if APIS[k].kafka_3_9.high is None or v > APIS[k].kafka_3_9.high}
    wanted = {
        ("ConsumerGroupHeartbeat", 1),
        ("ShareGroupHeartbeat", 1),
        ("EndTxn", 5),
    }
    assert wanted <= above_3_9, sorted(above_3_9)
    assert any(name == "Produce" and v >= 12 for name, v in above_3_9), sorted(above_3_9)
    assert any(name == "ShareFetch" for name, _ in above_3_9), sorted(above_3_9)
    assert ApiKey.ApiVersions in {k for k, _ in seen}
