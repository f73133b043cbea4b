"""CPU per request, in-process by stage and through a socket from frame to answer.

What the broker spends on one produce or fetch request, measured as CPU time, so that other processes' load
on a shared machine disturbs it less than wall-clock figures:

* in-process, on the broker's event loop, by stage: the request's decode (``decode_request``), the handler
  through the handler table (replica manager, validator, log), and the response's encode
  (``encode_response``); each the best of ``ROUNDS`` rounds. The first rows are the historical ones (decode +
  handler, docs/performance.md compares them across trees).
* through a socket (issue 23 item 2, the per-request floor): a broker in its own process, one client
  sending a request and waiting for its answer, ``SOCKET_REQUESTS`` times; the broker process's CPU time
  (user + system, from /proc) per request: framing, decode, handler, encode, the syscalls and the event
  loop, everything from frame to answer. The best of ``SOCKET_ROUNDS`` rounds.
"""

from __future__ import annotations

import os
import socket
import struct
import tempfile
import time
from typing import Any, Callable

import anyio.from_thread
from run import Result

from odradek import Broker
from odradek.broker.kafka_apis import HANDLERS
from odradek.protocol.api import ApiKey, Request, decode_request, encode_request, encode_response
from odradek.protocol.records import Record, build_batch

ROUNDS = 40
SOCKET_REQUESTS = 3000
SOCKET_ROUNDS = 5
TOPIC = "bench"
SMALL = "small"
"""A topic holding one 1-record batch: what the small fetch reads."""
UNIT = "µs CPU (lower is better)"


def _decoded(api_key: int, version: int, body: dict) -> Callable[[], Request]:
    """A fresh decode of the request each call: an append patches its records in place."""
    frame = encode_request(api_key, version, 1, body)[4:]
    return lambda: decode_request(bytearray(frame))


def _cpu_us(fn: Callable[[], Any], calls: int) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, time.process_time() - started)
    return best / calls * 1e6


def _produce_body(topic: str, batch: bytes) -> dict:
    return {"acks": 1, "timeout_ms": 1000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}


def _fetch_body(topic: str) -> dict:
    return {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": "",
    }


def _create_body(*topics: str) -> dict:
    return {"topics": [{"name": t, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []} for t in topics], "timeout_ms": 5000}


ONE_RECORD = build_batch([Record(value=b"x" * 100)])
STAGED = {
    "1-record produce, acks=1 (v9)": (ApiKey.Produce, 9, _produce_body(TOPIC, ONE_RECORD)),
    "small fetch, one 1-record batch (v12)": (ApiKey.Fetch, 12, _fetch_body(SMALL)),
    "Metadata for no topic (v12)": (ApiKey.Metadata, 12, {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}),
    "ApiVersions (v3)": (ApiKey.ApiVersions, 3, {"client_software_name": "bench", "client_software_version": "1"}),
}


def in_process() -> list[Result]:
    fetch = _decoded(ApiKey.Fetch, 12, _fetch_body(TOPIC))
    small = _decoded(ApiKey.Produce, 9, _produce_body(TOPIC, build_batch([Record(value=b"x" * 100) for _ in range(100)])))
    large = _decoded(ApiKey.Produce, 9, _produce_body(TOPIC, build_batch([Record(value=b"x" * 10240) for _ in range(90)])))
    metadata = _decoded(*STAGED["Metadata for no topic (v12)"])
    create = _decoded(ApiKey.CreateTopics, 5, _create_body(TOPIC, SMALL))
    seed = _decoded(ApiKey.Produce, 9, _produce_body(SMALL, ONE_RECORD))
    with tempfile.TemporaryDirectory() as log_dir, Broker(log_dir=log_dir) as broker:
        server = broker.server

        async def set_up() -> None:
            await HANDLERS[ApiKey.CreateTopics].handle(server, create())
            HANDLERS[ApiKey.Produce].handle(server, seed())

        anyio.from_thread.run(set_up, token=broker._token)

        def on_loop(fn: Callable[[], Any], calls: int) -> float:
            return anyio.from_thread.run_sync(lambda: _cpu_us(fn, calls), token=broker._token)

        def one(api_key: int, request: Callable[[], Request]) -> Callable[[], Any]:
            handler = HANDLERS[api_key]
            return lambda: handler.handle(server, request())

        results = [
            Result("produce request, one batch of 100 x 100 B (decode + handler)", on_loop(one(ApiKey.Produce, small), 300), UNIT),
            Result("produce request, one batch of 90 x 10 KiB (decode + handler)", on_loop(one(ApiKey.Produce, large), 100), UNIT),
            Result("fetch request of up to 1 MiB (decode + handler)", on_loop(one(ApiKey.Fetch, fetch), 300), UNIT),
            Result("metadata request for no topic (decode + handler)", on_loop(one(ApiKey.Metadata, metadata), 1000), UNIT),
        ]
        for name, (api_key, version, body) in STAGED.items():
            frame = bytes(encode_request(api_key, version, 1, body)[4:])
            handler = HANDLERS[api_key]
            request = decode_request(bytearray(frame))
            answer = handler.handle(server, decode_request(bytearray(frame)))
            decode_us = on_loop(lambda: decode_request(bytearray(frame)), 1000)
            handle_us = on_loop(lambda: handler.handle(server, decode_request(bytearray(frame))), 1000) - decode_us
            encode_us = on_loop(lambda: encode_response(api_key, version, 1, answer), 1000)
            del request
            results += [
                Result(f"{name}: decode", decode_us, UNIT),
                Result(f"{name}: handler", handle_us, UNIT),
                Result(f"{name}: encode", encode_us, UNIT),
            ]
        return results


def _process_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _exchange(sock: socket.socket, frame: bytes) -> None:
    sock.sendall(frame)
    _answer(sock)


def _answer(sock: socket.socket) -> None:
    """Read one answer whole."""
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head)) or _closed()
    (size,) = struct.unpack(">i", head)
    while size:
        size -= len(sock.recv(size) or _closed())


def _closed() -> bytes:
    raise ConnectionError("broker closed the connection")


def through_socket() -> list[Result]:
    with tempfile.TemporaryDirectory() as log_dir, Broker(log_dir=log_dir, subprocess=True) as broker:
        with socket.create_connection((broker.host, broker.port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _exchange(sock, encode_request(ApiKey.CreateTopics, 5, 1, _create_body(TOPIC, SMALL)))
            _exchange(sock, encode_request(ApiKey.Produce, 9, 1, _produce_body(SMALL, ONE_RECORD)))
            results = []
            for name, (api_key, version, body) in STAGED.items():
                frame = encode_request(api_key, version, 1, body)
                for _ in range(200):
                    _exchange(sock, frame)
                best = float("inf")
                for _ in range(SOCKET_ROUNDS):
                    started = _process_cpu_s(broker.pid)
                    for _ in range(SOCKET_REQUESTS):
                        _exchange(sock, frame)
                    best = min(best, _process_cpu_s(broker.pid) - started)
                results.append(Result(f"{name}: frame to answer through a socket (broker process)", best / SOCKET_REQUESTS * 1e6, UNIT))
            return results


def run() -> list[Result]:
    return in_process() + through_socket()


if __name__ == "__main__":
    import sys

    stages = sys.argv[1:] or ["in_process", "through_socket"]
    for stage in stages:
        for result in globals()[stage]():
            print(f"{result.value:9.2f}  {result.name}")
