"""Codecs compiled by several threads at once encode as one thread's do.

The broker encodes on its event loop while a ZooKeeper-mode controller's channel encodes on a thread of its
own; whichever first meets a message version compiles it. Two compilations at once once shared constant
names, and an encoder compared a ``dict_keys`` with an int."""

from __future__ import annotations

import threading

from odradek.protocol.api import APIS
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
