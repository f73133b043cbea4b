"""A Kafka client on odradek's own protocol layer (Kafka's ``NetworkClient``), for the admin command line and,
later, replica fetchers.

:class:`BrokerConnection` is one connection to one broker: requests are pipelined (sent without waiting for
earlier answers) and matched to their answers by correlation id, which Kafka returns in the order the
requests came; ApiVersions runs first, and each request goes at the highest version both sides know.
:class:`KafkaClient` bootstraps from a list of addresses with Metadata, then keeps one connection per
broker and finds group and transaction coordinators with FindCoordinator.

As Kafka's client does, a request that is not answered within its timeout closes its connection (the
answers after it could no longer be matched), failing every other request in flight on it, and a broker
that closes the connection fails them all with :class:`DisconnectedError`; the next request reconnects.
"""

from __future__ import annotations

import collections
import itertools
import logging
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from odradek.broker.security.client import PLAINTEXT, ClientSecurity
from odradek.protocol.api import APIS, ApiKey, decode_response, encode_request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.schema import Container, DecodeError
from odradek.protocol.values import CodeEnum

if TYPE_CHECKING:
    from odradek.broker.security.sasl_client import SaslClient
    from odradek.protocol.message_types.find_coordinator import FindCoordinatorRequestDict, FindCoordinatorResponse
    from odradek.protocol.message_types.metadata import MetadataRequestDict, MetadataRequestTopicDict

log = logging.getLogger(__name__)

DEFAULT_REQUEST_TIMEOUT_S = 30.0
"""Kafka's request.timeout.ms default."""
CLIENT_SOFTWARE_NAME = "odradek"
_SIZE = struct.Struct(">i")


def our_versions(api_key: int) -> range:
    """The versions odradek's own requests are written for: Kafka 3.9's, or, for an API Kafka added later,
    every version declared. Not every version declared: those include what Kafka 4.4 adds to 3.9's APIs."""
    api = APIS[api_key]
    known = api.kafka_3_9.high is not None and api.kafka_3_9.high >= api.kafka_3_9.low  # empty (1-0): added later
    versions = api.kafka_3_9 if known else api.request.valid
    assert versions.high is not None
    return range(versions.low, versions.high + 1)


class DisconnectedError(ConnectionError):
    """The connection closed (or could not be opened) before the answer came (Kafka's DisconnectException)."""


class UnsupportedVersionError(Exception):
    """The broker and odradek know no common version of an API (Kafka's UnsupportedVersionException)."""


class ResponseError(Exception):
    """An answer carried an error code where the caller needs success."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = code
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        super().__init__(f"{name}: {message}" if message else name)


class AuthenticationError(ResponseError):
    """The broker refused this client's SASL authentication (Kafka's SaslAuthenticationException): the
    connection is closed, and trying again with the same credentials is refused again."""


AUTHENTICATION_RETRY_BACKOFF_S = 1.0
"""How long the broker's own connections wait before logging in again after a refusal: Kafka's
``reconnect.backoff.max.ms``, where its exponential reconnect backoff settles for a broker that keeps
refusing (each retry costs both sides a SCRAM key derivation and logs the refusal)."""


def retry_backoff_s(error: BaseException, backoff_s: float) -> float:
    """The wait before trying again after ``error``: ``backoff_s``, or longer after a refused login."""
    return max(backoff_s, AUTHENTICATION_RETRY_BACKOFF_S) if isinstance(error, AuthenticationError) else backoff_s


class CoordinatorType(CodeEnum):
    """FindCoordinator's key types."""

    GROUP = 0
    TRANSACTION = 1


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int


@dataclass
class _InFlight:
    correlation_id: int
    api_key: int
    version: int
    done: anyio.Event = field(default_factory=anyio.Event)
    response: Container | None = None
    error: BaseException | None = None


class BrokerConnection:
    """One connection to one broker; open it with :meth:`connect` inside a task group that outlives it."""

    def __init__(self, stream: anyio.abc.ByteStream, address: str, client_id: str, request_timeout_s: float) -> None:
        self.address = address
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.api_versions: dict[int, range] = {}
        """The broker's versions of each API it serves, from its ApiVersions answer."""
        self._stream = stream
        self._receive = BufferedByteReceiveStream(stream)
        self._send_lock = anyio.Lock()
        self._correlation_ids = itertools.count(1)
        self._in_flight: collections.deque[_InFlight] = collections.deque()
        self._closed: BaseException | None = None

    @classmethod
    async def connect(cls, host: str, port: int, task_group: anyio.abc.TaskGroup, *, client_id: str = CLIENT_SOFTWARE_NAME, request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, security: ClientSecurity = PLAINTEXT) -> "BrokerConnection":
        """Open the connection (over TLS and authenticated with SASL as ``security`` says), start reading
        answers, and learn the broker's API versions."""
        address = f"{host}:{port}"
        try:
            with anyio.fail_after(request_timeout_s):
                stream: anyio.abc.ByteStream
                if security.ssl_context is None:
                    stream = await anyio.connect_tcp(host, port)
                else:
                    # no TLS closing handshake: closing must not read while the answer reader does (as Kafka's clients)
                    stream = await anyio.connect_tcp(host, port, ssl_context=security.ssl_context, tls_hostname=host, tls_standard_compatible=False)
        except (OSError, TimeoutError) as exc:
            raise DisconnectedError(f"Connection to {address} failed: {exc}") from None
        except (anyio.BrokenResourceError, anyio.EndOfStream) as exc:  # the TLS handshake failed or was cut short
            raise DisconnectedError(f"SSL handshake with {address} failed: {exc.__cause__ or 'the connection was closed'}") from None
        connection = cls(stream, address, client_id, request_timeout_s)
        task_group.start_soon(connection._read_answers)
        try:
            await connection._negotiate_versions()
            sasl = security.sasl_client(host)
            if sasl is not None:
                await connection._authenticate(sasl)
        except AuthenticationError as exc:
            log.error("[%s] Connection to %s failed authentication due to: %s", client_id, address, exc)
            await connection.close()
            raise
        except BaseException:
            await connection.close()
            raise
        return connection

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    async def _negotiate_versions(self) -> None:
        """ApiVersions at our highest version; a broker that does not know it answers UNSUPPORTED_VERSION in
        the v0 layout with its own range of ApiVersions, and the request is repeated at its highest."""
        body = {"client_software_name": CLIENT_SOFTWARE_NAME, "client_software_version": "1"}
        version = our_versions(ApiKey.ApiVersions).stop - 1
        response = await self.send(ApiKey.ApiVersions, version, body)
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            theirs = {k.api_key: k.max_version for k in response.api_keys}
            response = await self.send(ApiKey.ApiVersions, min(theirs.get(ApiKey.ApiVersions, 0), version), body)
        if response.error_code != ErrorCode.NONE:
            raise ResponseError(response.error_code, "ApiVersions")
        self.api_versions = {k.api_key: range(k.min_version, k.max_version + 1) for k in response.api_keys}

    async def _authenticate(self, client: SaslClient) -> None:
        """Kafka's SaslClientAuthenticator: SaslHandshake v1 naming the mechanism, then its tokens in
        SaslAuthenticate requests until it is done; a refusal is a ResponseError with the broker's message."""
        from odradek.broker.security import sasl_client  # the SASL modules only for a broker that uses SASL

        handshake = await self.send(ApiKey.SaslHandshake, 1, {"mechanism": client.mechanism})
        if handshake.error_code != ErrorCode.NONE:
            raise AuthenticationError(handshake.error_code, f"SASL mechanism {client.mechanism}; the broker enables {', '.join(handshake.mechanisms)}")
        version = self.version_for(ApiKey.SaslAuthenticate)
        try:
            # off the event loop: GSSAPI's first token asks the KDC, SCRAM's answer derives keys
            token: bytes | None = await anyio.to_thread.run_sync(client.first)
            while token is not None:
                answer = await self.send(ApiKey.SaslAuthenticate, version, {"auth_bytes": token})
                if answer.error_code != ErrorCode.NONE:
                    raise AuthenticationError(answer.error_code, answer.error_message)
                token = await anyio.to_thread.run_sync(client.respond, bytes(answer.auth_bytes))
        except sasl_client.SaslClientError as exc:
            raise AuthenticationError(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)) from None

    def version_for(self, api_key: int) -> int:
        """The highest version of the API both the broker and odradek know."""
        theirs = self.api_versions.get(api_key)
        ours = our_versions(api_key)
        common = range(max(ours.start, theirs.start), min(ours.stop, theirs.stop)) if theirs else range(0)
        if not common:
            name = APIS[api_key].name
            raise UnsupportedVersionError(f"The broker at {self.address} does not support {name} at any version odradek knows ({ours.start}-{ours.stop - 1})")
        return common.stop - 1

    async def request(self, api_key: int, body: Mapping[str, Any], *, timeout_s: float | None = None) -> Container:
        """Send at the negotiated version and wait for the answer."""
        return await self.send(api_key, self.version_for(api_key), body, timeout_s=timeout_s)

    async def send(self, api_key: int, version: int, body: Mapping[str, Any], *, timeout_s: float | None = None) -> Container:
        """Send one request at ``version`` and wait for its answer; other requests may be in flight meanwhile.

        Raises TimeoutError (and closes the connection) when no answer comes within the timeout, and
        DisconnectedError when the connection is or gets closed."""
        if self._closed is not None:
            raise DisconnectedError(f"Connection to {self.address} is closed") from self._closed
        correlation_id = next(self._correlation_ids)
        frame = encode_request(api_key, version, correlation_id, body, client_id=self.client_id)
        pending = _InFlight(correlation_id, api_key, version)
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        with anyio.move_on_after(timeout) as scope:
            async with self._send_lock:
                self._in_flight.append(pending)
                try:
                    await self._stream.send(frame)
                except anyio.get_cancelled_exc_class():
                    # A frame cut short leaves the stream unusable.
                    await self._fail(DisconnectedError(f"Connection to {self.address} closed: a request was cancelled while being sent"))
                    raise
                except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                    await self._fail(DisconnectedError(f"Connection to {self.address} lost while sending: {exc}"))
            await pending.done.wait()
        if scope.cancelled_caught and not pending.done.is_set():
            if pending in self._in_flight:  # sent (or being sent): the answers after it could not be matched
                await self._fail(DisconnectedError(f"Connection to {self.address} closed: a request timed out"))
            raise TimeoutError(f"{APIS[api_key].name} to {self.address} was not answered within {timeout:g} s")
        if pending.error is not None:
            raise pending.error
        assert pending.response is not None
        return pending.response

    async def _read_answers(self) -> None:
        """Match each answer to the oldest request in flight; any mismatch or end of stream closes."""
        try:
            while True:
                (size,) = _SIZE.unpack(await self._receive.receive_exactly(_SIZE.size))
                frame = await self._receive.receive_exactly(size)
                if not self._in_flight:
                    raise DisconnectedError(f"{self.address} sent an answer to no request")
                pending = self._in_flight[0]  # left in flight until matched: a bad answer fails it with the rest
                correlation_id, body = decode_response(pending.api_key, pending.version, frame)
                if correlation_id != pending.correlation_id:
                    raise DisconnectedError(f"Correlation id for response ({correlation_id}) does not match request ({pending.correlation_id})")
                self._in_flight.popleft()
                pending.response = body
                pending.done.set()
        except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await self._fail(DisconnectedError(f"Connection to {self.address} was closed by the broker"))
        except DisconnectedError as exc:
            await self._fail(exc)
        except (DecodeError, ValueError, struct.error, IndexError) as exc:  # an answer that is not Kafka's wire format
            await self._fail(DisconnectedError(f"Bad answer from {self.address}: {exc}"))

    async def _fail(self, error: BaseException) -> None:
        """Close, failing every request in flight with ``error``."""
        if self._closed is None:
            self._closed = error
        while self._in_flight:
            pending = self._in_flight.popleft()
            pending.error = error
            pending.done.set()
        with anyio.CancelScope(shield=True):
            await self._stream.aclose()

    async def close(self) -> None:
        await self._fail(DisconnectedError(f"Connection to {self.address} was closed"))


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` as bootstrap.servers is written."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in filter(None, (s.strip() for s in items)):
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"Invalid url in bootstrap.servers: {item}")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("No resolvable bootstrap urls given in bootstrap.servers")
    return out


class KafkaClient:
    """Connections to a cluster's brokers, found from the bootstrap servers; use as ``async with``."""

    def __init__(self, bootstrap_servers: str | Iterable[str], *, client_id: str = CLIENT_SOFTWARE_NAME, request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, security: ClientSecurity = PLAINTEXT) -> None:
        self.bootstrap_servers = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.security = security
        self.request_timeout_s = request_timeout_s
        self.nodes: dict[int, Node] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self._connections: dict[int | tuple[str, int], BrokerConnection] = {}
        self._task_group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> "KafkaClient":
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        try:
            await self.refresh_metadata()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        """An error from the ``async with`` body comes out as it is, not wrapped in an exception group: the
        task group holds only the connections' readers, which end quietly when cancelled."""
        await self.close()

    async def close(self) -> None:
        assert self._task_group is not None
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()
        self._task_group.cancel_scope.cancel()
        await self._task_group.__aexit__(None, None, None)

    async def _connection(self, key: int | tuple[str, int], host: str, port: int) -> BrokerConnection:
        connection = self._connections.get(key)
        if connection is None or connection.closed:
            assert self._task_group is not None
            connection = await BrokerConnection.connect(host, port, self._task_group, client_id=self.client_id, request_timeout_s=self.request_timeout_s, security=self.security)
            self._connections[key] = connection
        return connection

    async def connection(self, node_id: int) -> BrokerConnection:
        """The connection to a broker the metadata named, opened on first use."""
        node = self.nodes.get(node_id)
        if node is None:
            raise DisconnectedError(f"Node {node_id} is not in the cluster metadata")
        return await self._connection(node_id, node.host, node.port)

    async def any_connection(self) -> BrokerConnection:
        """An open connection if there is one, else the first broker (or bootstrap server) that accepts one."""
        for connection in self._connections.values():
            if not connection.closed:
                return connection
        candidates = [(n.node_id, n.host, n.port) for n in self.nodes.values()] + [((h, p), h, p) for h, p in self.bootstrap_servers]
        errors = []
        for key, host, port in candidates:
            try:
                return await self._connection(key, host, port)
            except DisconnectedError as exc:
                errors.append(str(exc))
        raise DisconnectedError("; ".join(errors) or "no broker to connect to")

    async def request(self, api_key: int, body: Mapping[str, Any], *, node_id: int | None = None, timeout_s: float | None = None) -> Container:
        """A request to one broker (any broker if ``node_id`` is None)."""
        connection = await (self.any_connection() if node_id is None else self.connection(node_id))
        return await connection.request(api_key, body, timeout_s=timeout_s)

    async def refresh_metadata(self, topics: list[str] | None = None) -> Container:
        """Metadata for ``topics`` (all topics if None); the brokers and controller it names are remembered."""
        connection = await self.any_connection()
        version = connection.version_for(ApiKey.Metadata)
        if topics is None and version == 0:
            requested: list[MetadataRequestTopicDict] | None = []  # v0 has no null: an empty list means all topics
        else:
            requested = None if topics is None else [{"name": t} for t in topics]
        body: MetadataRequestDict = {"topics": requested, "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
        response = await connection.send(ApiKey.Metadata, version, body)
        self.nodes = {b.node_id: Node(b.node_id, b.host, b.port) for b in response.brokers}
        self.cluster_id = getattr(response, "cluster_id", None)
        self.controller_id = getattr(response, "controller_id", -1)
        return response

    async def find_coordinator(self, key: str, key_type: CoordinatorType = CoordinatorType.GROUP, *, timeout_s: float | None = None) -> Node:
        """The coordinator of a group or transactional id, asking again while it is not available yet (as a
        new offsets topic is being made), until the timeout."""
        deadline = anyio.current_time() + (self.request_timeout_s if timeout_s is None else timeout_s)
        backoff_s = 0.1
        while True:
            connection = await self.any_connection()
            version = connection.version_for(ApiKey.FindCoordinator)
            body: FindCoordinatorRequestDict = {"key": key, "key_type": int(key_type), "coordinator_keys": [key]}
            response: FindCoordinatorResponse = await connection.send(ApiKey.FindCoordinator, version, body)
            answer = response.coordinators[0] if version >= 4 else response
            if answer.error_code == ErrorCode.NONE:
                node = Node(answer.node_id, answer.host, answer.port)
                self.nodes.setdefault(node.node_id, node)
                return node
            retriable = answer.error_code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)
            if not retriable or anyio.current_time() + backoff_s > deadline:
                raise ResponseError(answer.error_code, answer.error_message)
            await anyio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, 1.0)

    async def coordinator_request(self, key: str, api_key: int, body: dict[str, Any], key_type: CoordinatorType = CoordinatorType.GROUP) -> Container:
        """A request to the coordinator of ``key``."""
        node = await self.find_coordinator(key, key_type)
        return await self.request(api_key, body, node_id=node.node_id)


__all__ = [
    "AuthenticationError",
    "BrokerConnection",
    "CoordinatorType",
    "DisconnectedError",
    "KafkaClient",
    "Node",
    "ResponseError",
    "UnsupportedVersionError",
    "parse_bootstrap",
]
