"""Codecs compiled by several threads at once encode as one thread's do.

The broker encodes on its event loop while a ZooKeeper-mode controller's channel encodes on a thread of its
own; whichever first meets a message version compiles it. Two compilations at once once shared constant
names, and an encoder compared a ``dict_keys`` with an int."""

from __future__ import annotations

import sys
import threading

from odradek.protocol.api import APIS
from odradek.protocol.messages.coordinator_records import TRANSACTION_LOG_VALUE
from odradek.protocol.schema import decode, encode

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


def test_a_transaction_log_value_loaded_on_a_thread_while_requests_compile_encodes_its_partitions() -> None:
    """After a restart the transaction coordinator decodes ``__transaction_state`` on a loading thread while the
    event loop compiles the codecs of reconnecting clients' requests; the value's codec is then the one the
    coordinator writes with (an open transaction moved to PrepareAbort). Before the compilations were one at
    a time its nested PartitionsSchema once checked another struct's field names ("has no field 'partition_ids',
    'topic' ... (fields: name, partitions)") and InitProducerId failed with UNKNOWN_SERVER_ERROR."""
    value = {
        "producer_id": 7, "producer_epoch": 3, "transaction_timeout_ms": 60000, "transaction_status": 1,
        "transaction_partitions": [{"topic": "t", "partition_ids": [0, 2]}],
        "transaction_last_update_timestamp_ms": 5, "transaction_start_timestamp_ms": 4,
    }
    expected = encode(TRANSACTION_LOG_VALUE, 0, value)
    requests = fresh_messages()
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads interleave within a compilation, as on a loaded machine
    try:
        for round_ in range(50):
            for message in requests + [TRANSACTION_LOG_VALUE]:
                object.__setattr__(message, "_cache", {})
            start = threading.Barrier(2)
            failures: list[BaseException] = []

            def load() -> None:
                start.wait()
                try:
                    decode(TRANSACTION_LOG_VALUE, 0, expected)
                except BaseException as exc:  # reported below
                    failures.append(exc)

            def serve(first: int = round_ % len(requests)) -> None:
                start.wait()
                for message in requests[first : first + 6]:
                    encode(message, message.versions()[-1], {})

            threads = [threading.Thread(target=load), threading.Thread(target=serve)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert failures == []
            assert encode(TRANSACTION_LOG_VALUE, 0, value) == expected, f"round {round_}"
    finally:
        sys.setswitchinterval(switch_interval)
