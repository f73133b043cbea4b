"""CPU per request through the handler table, in-process: request decode + handler, no network.

What the broker spends on one produce or fetch request above the socket (the handler, the replica manager,
the log validator and the log), measured as process CPU time, so that other processes' load on a shared
machine disturbs it less than wall-clock figures. The figure is the best of ``ROUNDS`` rounds.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any, Callable

import anyio.from_thread
from run import Result

from odradek import Broker
from odradek.broker.kafka_apis import HANDLERS
from odradek.protocol.api import ApiKey, Request, decode_request, encode_request
from odradek.protocol.records import Record, build_batch

ROUNDS = 40
TOPIC = "bench"


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


def _produce(batch: bytes) -> Callable[[], Request]:
    return _decoded(ApiKey.Produce, 9, {"acks": 1, "timeout_ms": 1000, "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})


def run() -> list[Result]:
    fetch = _decoded(ApiKey.Fetch, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": "",
    })
    small = _produce(build_batch([Record(value=b"x" * 100) for _ in range(100)]))
    large = _produce(build_batch([Record(value=b"x" * 10240) for _ in range(90)]))
    metadata = _decoded(ApiKey.Metadata, 12, {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    create = _decoded(ApiKey.CreateTopics, 5, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 5000})
    with tempfile.TemporaryDirectory() as log_dir, Broker(log_dir=log_dir) as broker:
        server = broker.server

        async def create_topic() -> None:
            await HANDLERS[ApiKey.CreateTopics].handle(server, create())

        anyio.from_thread.run(create_topic, token=broker._token)

        def on_loop(fn: Callable[[], Any], calls: int) -> float:
            return anyio.from_thread.run_sync(lambda: _cpu_us(fn, calls), token=broker._token)

        def one(api_key: int, request: Callable[[], Request]) -> Callable[[], Any]:
            handler = HANDLERS[api_key]
            return lambda: handler.handle(server, request())

        return [
            Result("produce request, one batch of 100 x 100 B (decode + handler)", on_loop(one(ApiKey.Produce, small), 300), "µs CPU (lower is better)"),
            Result("produce request, one batch of 90 x 10 KiB (decode + handler)", on_loop(one(ApiKey.Produce, large), 100), "µs CPU (lower is better)"),
            Result("fetch request of up to 1 MiB (decode + handler)", on_loop(one(ApiKey.Fetch, fetch), 300), "µs CPU (lower is better)"),
            Result("metadata request for no topic (decode + handler)", on_loop(one(ApiKey.Metadata, metadata), 1000), "µs CPU (lower is better)"),
        ]


if __name__ == "__main__":
    for result in run():
        print(result)
