"""Codecs compiled by several threads at once encode as one thread's do.

The broker encodes on its event loop while a ZooKeeper-mode controller's channel encodes on a thread of its
own; whichever first meets a message version compiles it. Two compilations at once once shared constant
names, and an encoder compared a ``dict_keys`` with an int."""

from __future__ import annotations

import sys
import threading

import pytest

from odradek.protocol.api import APIS
from odradek.broker.coordinator.group.group_metadata_records import GROUP_METADATA_VALUE_VERSION
from odradek.protocol.messages.coordinator_records import GROUP_METADATA_VALUE, TRANSACTION_LOG_VALUE
from odradek.protocol.schema import Message, decode, encode

THREADS = 8


def fresh_messages() -> list:
    """Every API's request message, with no version compiled yet."""
    messages = [api.request for api in APIS.values()]
    for message in messages:
        object.__setattr__(message, "_cache", {})
    return messages


def default_frames(messages: list) -> dict[tuple[str, int], bytes]:
    """Each message's every version encoded from an empty body (every field at its default)."""
    return {(m.name, v): bytes(encode(m, v, {})) for m in messages for v in m.versions()}


def test_concurrent_first_compilations_encode_as_sequential_ones() -> None:
    expected = default_frames(fresh_messages())
    for _ in range(3):
        messages = fresh_messages()
        results: list[dict | BaseException] = []
        start = threading.Barrier(THREADS)

        def compile_all(order: int) -> None:
            start.wait()
            try:
                # Each thread walks the messages from another starting point, so first compilations collide.
                shifted = messages[order * len(messages) // THREADS:] + messages[: order * len(messages) // THREADS]
                results.append(default_frames(shifted))
            except BaseException as exc:  # reported below, with what the thread was doing
                results.append(exc)

        threads = [threading.Thread(target=compile_all, args=(i,)) for i in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [r for r in results if isinstance(r, BaseException)] == []
        assert all(r == expected for r in results)
        assert all(decode(m, v, expected[m.name, v])[0] is not None for m in messages for v in m.versions())


TRANSACTION_VALUE = {
    "producer_id": 7, "producer_epoch": 3, "transaction_timeout_ms": 60000, "transaction_status": 1,
    "transaction_partitions": [{"topic": "t", "partition_ids": [0, 2]}],
    "transaction_last_update_timestamp_ms": 5, "transaction_start_timestamp_ms": 4,
}
GROUP_VALUE = {
    "protocol_type": "consumer", "generation": 2, "protocol": "range", "leader": "m", "current_state_timestamp": 5,
    "members": [{
        "member_id": "m", "group_instance_id": None, "client_id": "c", "client_host": "/127.0.0.1",
        "rebalance_timeout": 300000, "session_timeout": 10000, "subscription": b"s", "assignment": b"a",
    }],
}


@pytest.mark.parametrize(
    "record, version, value",
    [(TRANSACTION_LOG_VALUE, 0, TRANSACTION_VALUE), (GROUP_METADATA_VALUE, GROUP_METADATA_VALUE_VERSION, GROUP_VALUE)],
    ids=["transaction-log-value", "group-metadata-value"],
)
def test_a_coordinator_record_loaded_on_a_thread_while_requests_compile(record: Message, version: int, value: dict) -> None:
    """After a restart a coordinator decodes its topic on a loading thread while the event loop compiles the
    codecs of reconnecting clients' requests; both then serve (the value's codec is the one the coordinator
    writes with). Before the compilations were one at a time, the transaction value's nested PartitionsSchema
    once checked another struct's field names ("has no field 'partition_ids', 'topic' ... (fields: name,
    partitions)") and InitProducerId failed with UNKNOWN_SERVER_ERROR; beside a group metadata load the
    requests' own codecs came out wrong (a MetadataRequest encoded differently, "object of type 'int' has no
    len()") and aiokafka's SyncGroup after a restart was answered UNKNOWN_SERVER_ERROR (compat-tests/
    test_restarts.py in full runs at 52ae895)."""
    expected = encode(record, version, value)
    requests = fresh_messages()
    request_frames = {m.name: bytes(encode(m, m.versions()[-1], {})) for m in requests}
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads interleave within a compilation, as on a loaded machine
    try:
        for round_ in range(50):
            for message in requests + [record]:
                object.__setattr__(message, "_cache", {})
            start = threading.Barrier(2)
            failures: list[BaseException] = []
            compiled = requests[round_ % len(requests) : round_ % len(requests) + 6]

            def load() -> None:
                start.wait()
                try:
                    decode(record, version, expected)
                except BaseException as exc:  # reported below
                    failures.append(exc)

            def serve() -> None:
                start.wait()
                try:
                    for message in compiled:
                        encode(message, message.versions()[-1], {})
                except BaseException as exc:  # reported below
                    failures.append(exc)

            threads = [threading.Thread(target=load), threading.Thread(target=serve)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert failures == []
            assert encode(record, version, value) == expected, f"round {round_}"
            assert {m.name: bytes(encode(m, m.versions()[-1], {})) for m in compiled} == {m.name: request_frames[m.name] for m in compiled}, f"round {round_}"
    finally:
        sys.setswitchinterval(switch_interval)
