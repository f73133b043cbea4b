"""A TCP proxy in front of a broker that loses Produce responses, for the idempotent producer's retries.

A producer retries a batch whose response it never got; only the broker can tell that the batch is
already in the log (same producer id, epoch and sequence) and must answer as if it had just appended it,
without appending it again. To make a real client retry, the proxy forwards a Produce request to the
broker and then, instead of passing on the response, closes the client's connection. Metadata answers are
rewritten to name the proxy as the broker, so that every connection the client opens goes through it.
The proxy reads only request headers and Metadata responses (with odradek's protocol codecs, which are
Kafka's wire format); everything else passes through untouched.
"""

from __future__ import annotations

import socket
import struct
import threading

from odradek.protocol.api import ApiKey, decode_response, encode_response, peek_header

_SIZE = struct.Struct(">i")


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    return _read_exact(sock, _SIZE.unpack(head)[0])


class ResponseDroppingProxy:
    """Listens on a free loopback port; drops the first ``drops`` responses to Produce requests with acks."""

    def __init__(self, upstream: str, drops: int = 1) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.drops_left = drops
        self.dropped = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name="compat-proxy").start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            broker = socket.create_connection(self.upstream)
            with self._lock:
                self._sockets += [client, broker]
            inflight: dict[int, tuple[int, int]] = {}
            threading.Thread(target=self._requests, args=(client, broker, inflight), daemon=True).start()
            threading.Thread(target=self._responses, args=(broker, client, inflight), daemon=True).start()

    def _requests(self, client: socket.socket, broker: socket.socket, inflight: dict[int, tuple[int, int]]) -> None:
        try:
            while (frame := _read_frame(client)) is not None:
                api_key, api_version, correlation_id = peek_header(frame)
                inflight[correlation_id] = (api_key, api_version)
                broker.sendall(_SIZE.pack(len(frame)) + frame)
        except OSError:
            pass
        self._close(client, broker)

    def _responses(self, broker: socket.socket, client: socket.socket, inflight: dict[int, tuple[int, int]]) -> None:
        try:
            while (frame := _read_frame(broker)) is not None:
                correlation_id = _SIZE.unpack_from(frame)[0]
                api_key, api_version = inflight.pop(correlation_id)
                if api_key == ApiKey.Produce and self._take_drop():
                    break  # the broker appended; the client never hears so, and retries
                if api_key == ApiKey.Metadata:
                    client.sendall(self._through_proxy(api_version, frame))
                else:
                    client.sendall(_SIZE.pack(len(frame)) + frame)
        except OSError:
            pass
        self._close(client, broker)

    def _take_drop(self) -> bool:
        with self._lock:
            if self.drops_left <= 0:
                return False
            self.drops_left -= 1
            self.dropped += 1
            return True

    def _through_proxy(self, api_version: int, frame: bytes) -> bytes:
        correlation_id, body = decode_response(ApiKey.Metadata, api_version, frame)
        host, port = self.address.rsplit(":", 1)
        for broker in body["brokers"]:
            broker["host"], broker["port"] = host, int(port)
        data, _ = encode_response(ApiKey.Metadata, api_version, correlation_id, body)
        return data

    def _close(self, *sockets: socket.socket) -> None:
        """Shut down first: that sends the FIN at once and wakes the other pump blocked reading the socket."""
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            self._close(*self._sockets)
