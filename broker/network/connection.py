"""One client connection's protocol state, sans-IO (in the spirit of h11's ``Connection``).

Bytes go in (``buffer()``/``received(n)``, or ``feed(data)``), events come out in arrival order: a decoded
request with its :class:`RequestContext` for the handlers, an answer the connection makes itself (the
KIP-511 ApiVersions fallback), or the end of the connection with its reason. Answers wait in ``outbox`` in
request order, at most ``queued.max.requests`` of them (the shell stops reading beyond); each request's bytes
stay charged to the memory pool (``queued.max.request.bytes``) until the shell releases them once handled.
No socket, no event loop: the shell (``socket_server.py``) moves the bytes, and tests feed them directly.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from odradek.broker.network.framing import FrameReader, FrameTooLarge
from odradek.broker.network.memory_pool import MemoryPool, Unbounded
from odradek.broker.network.request_context import ANONYMOUS, UNKNOWN_CLIENT, ClientInformation, KafkaPrincipal, RequestContext
from odradek.protocol.api import ApiKey, Request, UnknownApiKey, UnsupportedApiVersion, decode_request
from odradek.protocol.schema import DecodeError
from odradek.protocol.values import CodeEnum, TupleFields

if TYPE_CHECKING:  # the SASL modules are imported by SASL listeners' connections only
    from odradek.broker.security.sasl_authenticator import SaslServerAuthenticator, SaslSettings, Step

log = logging.getLogger("odradek.network")


if TYPE_CHECKING:  # a type for the checker only: creating a Protocol class costs ~0.13 M instructions a start
    class VersionRange(Protocol):
        # Read-only, so that frozen dataclasses (the handler table's entries) match.
        @property
        def min_version(self) -> int: ...
        @property
        def max_version(self) -> int: ...


class Endpoint(TupleFields):
    """The listener a connection came through, and the two ends of its socket."""

    listener_name: str
    security_protocol: str
    local_host: str
    local_port: int
    peer_host: str
    peer_port: int


class ConnectionState(CodeEnum):
    AUTHENTICATING = 0
    """A SASL listener's exchange (first or re-authentication): only its requests are served."""
    READY = 1
    """Requests are decoded and handed to the handlers."""
    CLOSED = 2
    """A protocol violation or the shell ended it: nothing more is read."""


class RequestReceived(TupleFields):
    """A request for the handlers. ``size`` bytes stay charged to the memory pool until ``release``."""

    request: Request
    size: int


class AnswerReady(TupleFields):
    """An answer the connection made itself (already a size-prefixed frame), to queue in order."""

    data: bytes
    size: int


class ConnectionEnded(TupleFields):
    """Close after what is queued is sent, and after ``answer`` if any, sent once ``delay_s`` has passed (a
    failed authentication); ``reason`` is for the log."""

    reason: str
    answer: bytes | None = None
    delay_s: float = 0.0
    authentication_failed: bool = False


Event = RequestReceived | AnswerReady | ConnectionEnded


class KafkaConnection:
    """The protocol side of one connection (Kafka's ``KafkaChannel`` without its transport)."""

    __slots__ = (
        "endpoint", "connection_id", "served", "reader", "pool", "outbox", "max_queued", "state", "_principal", "_client_information", "context",
        "sasl", "authenticator", "session_expires_at", "clock", "max_request_size", "_fallback", "decode_request",
    )

    def __init__(
        self,
        endpoint: Endpoint,
        index: int,
        served: Mapping[int, VersionRange],
        fallback: Any,
        *,
        max_request_size: int,
        max_queued: int,
        receive_buffer: bytearray | None = None,
        pool: MemoryPool | Unbounded,
        sasl: SaslSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        decode: Callable[[bytearray | memoryview], Request] = decode_request,
    ) -> None:
        """``served`` maps API keys to the versions the handlers serve; ``fallback(correlation_id)`` is the
        KIP-511 answer to an ApiVersions request at a version we do not serve; ``decode`` reads a frame (a
        front process's connection's frames may be its internal ones, broker/network/forwarded_produce.py)."""
        self.endpoint = endpoint
        self.connection_id = f"{endpoint.local_host}:{endpoint.local_port}-{endpoint.peer_host}:{endpoint.peer_port}-{index}"
        self.served = served
        self._fallback = fallback
        self.pool = pool
        self.max_request_size = max_request_size
        self.decode_request = decode
        self.reader = FrameReader(max_request_size, receive_buffer, pool)
        self.outbox: collections.deque[tuple[Any, Any]] = collections.deque()
        """(request, its result) in request order; an answer made here is (its frame, None)."""
        self.max_queued = max_queued
        self._principal: KafkaPrincipal = ANONYMOUS
        self._client_information: ClientInformation = UNKNOWN_CLIENT
        self.authenticator: SaslServerAuthenticator | None = None
        self.context = self._new_context()
        """Set on every request: one object until the principal or the client information changes."""
        self.sasl = sasl
        self.clock = clock
        self.session_expires_at: float | None = None
        """When a SASL session with a lifetime ends (``clock`` time): then only re-authentication is served."""
        self.state = ConnectionState.READY
        if sasl is not None:
            from odradek.broker.security.sasl_authenticator import SaslServerAuthenticator  # SASL listeners only

            self._authenticate(SaslServerAuthenticator(sasl))

    # -- bytes in --------------------------------------------------------------------------------------------

    @property
    def reading_frame(self) -> bool:
        """A request's size was read and charged: reading it on needs no more of the pool."""
        return self.reader.in_frame

    def buffer(self) -> memoryview:
        """Where the next received bytes go (``socket.recv_into``), then call ``received`` at once."""
        return self.reader.buffer()

    def received(self, n: int) -> list[Event]:
        if self.state is ConnectionState.CLOSED:
            return []
        try:
            frames = self.reader.received(n)
        except FrameTooLarge as exc:
            return [self._too_large(exc)]
        return self._events(frames)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Bytes received elsewhere (a TLS layer, tests)."""
        if self.state is ConnectionState.CLOSED:
            return []
        try:
            frames = self.reader.feed(data)
        except FrameTooLarge as exc:
            return [self._too_large(exc)]
        return self._events(frames)

    def whole_frame(self, frame: memoryview) -> Event | None:
        """A whole frame (without its size prefix) that came in one piece from elsewhere (a front process's
        channel): charged to the memory pool and decoded as ``received`` would, without the frame reader's
        copy. None when it must go through the reader instead, where it ends as it would: a frame begun there,
        the pool exhausted, a size the reader refuses, a connection not serving requests."""
        reader = self.reader
        size = len(frame)
        if self.state is not ConnectionState.READY or not reader.between_frames or self.pool.exhausted or size > reader.max_size:
            return None
        self.pool.allocate(size)
        return self._events([frame])[0]

    def _too_large(self, exc: FrameTooLarge) -> ConnectionEnded:
        if self.state is ConnectionState.AUTHENTICATING:
            return self._authentication_failed("Failing SASL authentication due to invalid receive size", None)
        return self._end(str(exc))

    def release(self, size: int) -> None:
        """A request's bytes are no longer needed (its handler returned)."""
        self.pool.release(size)

    def close(self) -> None:
        """The connection is gone: what an unfinished request holds of the pool goes back."""
        self.state = ConnectionState.CLOSED
        self.reader.close()

    # -- answers out -----------------------------------------------------------------------------------------

    @property
    def outbox_full(self) -> bool:
        return len(self.outbox) >= self.max_queued

    def queue(self, request: Any, result: Any) -> None:
        self.outbox.append((request, result))

    def take_answers(self) -> list[tuple[Any, Any]]:
        batch = list(self.outbox)
        self.outbox.clear()
        return batch

    # -- decoding --------------------------------------------------------------------------------------------

    def _events(self, frames: Sequence[bytearray | memoryview]) -> list[Event]:
        events: list[Event] = []
        for i, frame in enumerate(frames):
            event = self._decode(frame)
            events.append(event)
            if isinstance(event, ConnectionEnded):
                for rest in frames[i:]:
                    self.pool.release(len(rest))
                break
        return events

    def _decode(self, frame: bytearray | memoryview) -> Event:
        size = len(frame)
        authenticator = self.authenticator
        authenticating = self.state is ConnectionState.AUTHENTICATING
        if authenticating and authenticator is not None and authenticator.expects_raw_token:
            return self._authentication_step(authenticator.raw_token(bytes(frame)), size, None)
        try:
            request = self.decode_request(frame)
        except UnsupportedApiVersion as exc:
            if exc.api_key == ApiKey.ApiVersions:
                return AnswerReady(self._fallback(exc.correlation_id), size)
            return self._end(str(exc))
        except (UnknownApiKey, DecodeError) as exc:
            if authenticating and authenticator is not None:
                from odradek.broker.security.sasl_authenticator import SaslState

                if authenticator.state is SaslState.HANDSHAKE_OR_VERSIONS:
                    return self._authentication_step(authenticator.not_a_request(bytes(frame)), size, None)
            return self._end(str(exc) if isinstance(exc, UnknownApiKey) else f"malformed request: {exc}")
        header = request.header
        served = self.served.get(header.api_key)
        if served is None or not served.min_version <= header.api_version <= served.max_version:
            if header.api_key == ApiKey.ApiVersions:
                return AnswerReady(self._fallback(header.correlation_id), size)
            return self._end(f"unsupported {request.api.name} v{header.api_version}")
        if self.sasl is not None and not authenticating:
            previous = self.authenticator
            if header.api_key == ApiKey.SaslHandshake and previous is not None and previous.mechanism is not None and previous.client_supports_reauthentication:
                # KIP-368: a SaslHandshake on an authenticated connection begins its re-authentication (else
                # its handler answers ILLEGAL_SASL_STATE, as Kafka's KafkaApis does)
                from odradek.broker.security.sasl_authenticator import SaslServerAuthenticator

                authenticator = SaslServerAuthenticator(self.sasl, reauthenticating=(previous.mechanism, self.principal))
                self._authenticate(authenticator)
                authenticating = True
            elif self.session_expires_at is not None and self.clock() >= self.session_expires_at:
                return self._end(f"SASL session expired (connections.max.reauth.ms) and the client did not re-authenticate before {request.api.name}")
        if header.api_key == ApiKey.ApiVersions and header.api_version >= 3:
            client = ClientInformation(request.body.client_software_name, request.body.client_software_version)
            if client.is_valid():
                self.client_information = client
        if authenticating and authenticator is not None:
            return self._authentication_step(authenticator.request(request), size, request)
        return self._received(request, size)

    def _received(self, request: Request, size: int) -> RequestReceived:
        request.client_address = self.endpoint.peer_host
        request.context = self.context
        return RequestReceived(request, size)

    @property
    def principal(self) -> KafkaPrincipal:
        return self._principal

    @principal.setter
    def principal(self, principal: KafkaPrincipal) -> None:
        """Authenticated (a TLS certificate, a SASL exchange): the requests from now on carry it."""
        self._principal = principal
        self.context = self._new_context()

    @property
    def client_information(self) -> ClientInformation:
        return self._client_information

    @client_information.setter
    def client_information(self, client: ClientInformation) -> None:
        self._client_information = client
        self.context = self._new_context()

    def _new_context(self) -> RequestContext:
        endpoint = self.endpoint
        return RequestContext(
            self.connection_id,
            endpoint.peer_host,
            endpoint.peer_port,
            endpoint.listener_name,
            endpoint.security_protocol,
            self._principal,
            self._client_information,
            self.authenticator is not None and self.authenticator.complete and self.authenticator.token_authenticated,
        )

    def _authentication_step(self, step: Step, size: int, request: Request | None) -> Event:
        authenticator = self.authenticator
        assert authenticator is not None and self.sasl is not None
        from odradek.broker.security.sasl_authenticator import Failed, Serve

        if isinstance(step, Serve):
            assert request is not None
            return self._received(request, size)
        if isinstance(step, Failed):
            return self._authentication_failed(step.reason, step.answer)
        if authenticator.complete:
            self.principal = authenticator.principal
            lifetime = authenticator.session_lifetime_ms
            self.session_expires_at = None if lifetime is None else self.clock() + lifetime / 1000
            self.state = ConnectionState.READY
            self.reader.max_size = self.max_request_size
        return AnswerReady(step.data, size)

    def _authenticate(self, authenticator: SaslServerAuthenticator) -> None:
        """Begin an exchange: until it completes, frames are bounded by sasl.server.max.receive.size."""
        self.authenticator = authenticator
        self.state = ConnectionState.AUTHENTICATING
        self.reader.max_size = min(self.max_request_size, authenticator.settings.max_receive_size)

    def _authentication_failed(self, reason: str, answer: bytes | None) -> ConnectionEnded:
        assert self.authenticator is not None and self.sasl is not None
        self.state = ConnectionState.CLOSED
        again = "re-" if self.authenticator.reauthenticating else ""
        return ConnectionEnded(
            f"Failed {again}authentication with /{self.endpoint.peer_host} (channelId={self.connection_id}) ({reason})",
            answer,
            self.sasl.failed_delay_ms / 1000,
            authentication_failed=True,
        )

    def _end(self, reason: str) -> ConnectionEnded:
        self.state = ConnectionState.CLOSED
        return ConnectionEnded(reason)
