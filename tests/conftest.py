"""Shared by every test directory: a bare protocol connection for wire-level tests."""

from __future__ import annotations

import itertools
import socket
import struct
from typing import Any, Callable, Iterator

import pytest

from odradek.protocol.api import ApiKey, decode_response, encode_request


class Wire:
    """A bare Kafka protocol connection to a real broker: one request, one response, checked correlation."""

    def __init__(self, bootstrap: str, client_id: str = "wire-test") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation = itertools.count(1)
        self.client_id = client_id

    def call(self, api: ApiKey, version: int, body: dict) -> Any:
        correlation_id = next(self.correlation)
        self.sock.sendall(encode_request(api, version, correlation_id, body, client_id=self.client_id))
        size = struct.unpack(">i", self.read_exactly(4))[0]
        got, response = decode_response(api, version, self.read_exactly(size))
        assert got == correlation_id
        return response

    def read_exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "broker closed the connection"
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def connect() -> Iterator[Callable[..., Wire]]:
    """``connect(bootstrap)`` opens a :class:`Wire`; all are closed after the test."""
    opened: list[Wire] = []

    def open_(bootstrap: str, client_id: str = "wire-test") -> Wire:
        wire = Wire(bootstrap, client_id)
        opened.append(wire)
        return wire

    yield open_
    for wire in opened:
        wire.close()
