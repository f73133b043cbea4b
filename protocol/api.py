"""API keys, header versions and request/response framing (sans-IO).

Header rules (Kafka's ``ApiMessageType.requestHeaderVersion``/``responseHeaderVersion``): a flexible API
version uses request header v2 and response header v1 (both carry tagged fields); otherwise request
header v1 and response header v0. Two exceptions: ControlledShutdown v0 uses request header v0 (no client
id), and ApiVersions responses always use response header v0 so that a client that does not know the
broker's versions can still read the answer.
"""

from __future__ import annotations

import struct
from functools import cached_property
from typing import Any, Generic, Mapping, TypeVar

from odradek.protocol.messages import DECLARATIONS, ApiKey, headers, module
from odradek.protocol.schema import Container, DecodeError, Message, Splice, Versions, decode, decode_frame_by, encode_frame, encode_frame_by, frame_programs
from odradek.protocol.values import TupleFields, plain_init

__all__ = [
    "ApiKey",
    "Api",
    "APIS",
    "RequestHeader",
    "Request",
    "UnknownApiKey",
    "UnsupportedApiVersion",
    "request_header_version",
    "response_header_version",
    "peek_header",
    "decode_request",
    "encode_request",
    "encode_response",
    "decode_response",
]


class Api:
    """An API as declared: every version odradek can decode (Kafka 3.9's, and those Kafka 4.4 adds).

    What the broker serves is not this: ``broker/kafka_apis.py`` says per API, by default the versions
    Kafka 3.9 defines (``kafka_3_9``), so declaring a newer version advertises nothing by itself. Its
    messages (``request``, ``response``) are imported at first use: a broker starting reads only the rest.
    """

    def __init__(self, key: int, name: str, versions: Versions, listeners: tuple[str, ...], kafka_3_9: Versions, throttled: bool) -> None:
        self.key = key
        self.name = name
        self.versions = versions
        """The request's valid versions."""
        self.listeners = listeners
        self.kafka_3_9 = kafka_3_9
        """The versions Kafka 3.9 defines (empty for an API Kafka added later, such as the share-group APIs)."""
        self.throttled = throttled
        """Its response carries a throttle time (ThrottleTimeMs)."""

    @cached_property
    def request(self) -> Message:
        return module(self.key).REQUEST  # type: ignore[no-any-return]

    @cached_property
    def response(self) -> Message:
        return module(self.key).RESPONSE  # type: ignore[no-any-return]

    @property
    def min_version(self) -> int:
        return self.versions.low

    @property
    def max_version(self) -> int:
        assert self.versions.high is not None
        return self.versions.high


APIS: dict[int, Api] = {
    key: Api(key, d.name, Versions.parse(d.versions), d.listeners, Versions.parse(d.kafka_3_9), d.throttled) for key, d in DECLARATIONS.items()
}

_CONTROLLED_SHUTDOWN = 7
_API_VERSIONS = 18


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == _CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if APIS[api_key].request.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == _API_VERSIONS:
        return 0
    return 1 if APIS[api_key].response.is_flexible(api_version) else 0


class UnknownApiKey(DecodeError):
    """The request names an API key we do not know: Kafka closes the connection."""


class UnsupportedApiVersion(DecodeError):
    """A known API at a version outside its valid range; the correlation id is still readable."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(api_key, api_version, correlation_id)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id

    def __str__(self) -> str:
        return f"API key {self.api_key} has no version {self.api_version}"


class RequestHeader(TupleFields):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


Body = TypeVar("Body", covariant=True)
"""A request's decoded body, for mypy: a handler names its API's type, ``Request[ProduceRequest]`` (generated
in ``protocol/message_types``); at run time every body is a ``Container``. Covariant: a function that two APIs
share (AlterConfigs and IncrementalAlterConfigs) takes ``Request[AlterConfigsRequest | IncrementalAlterConfigsRequest]``."""


@plain_init
class Request(Generic[Body]):
    __slots__ = ("header", "body", "client_address", "context")

    def __init__(self, header: RequestHeader, body: Body, client_address: str | None = None, context: Any = None) -> None:
        self.header = header
        self.body = body
        self.client_address = client_address
        """The peer's IP address, set by the network layer (Kafka reports it, e.g. as a group member's host)."""
        self.context = context
        """Who sent it and how (``odradek.broker.network.request_context.RequestContext``), set by the connection before
        the handler runs; ``None`` for requests decoded outside a broker (tools, tests)."""

    @property
    def api(self) -> Api:
        return APIS[self.header.api_key]


_PEEK = struct.Struct(">hhi")


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api key, api version, correlation id): the fields every request header version starts with."""
    if len(frame) < _PEEK.size:
        raise DecodeError("request shorter than a request header")
    return _PEEK.unpack_from(frame, 0)


def decode_request(frame: bytes | bytearray | memoryview) -> Request[Any]:
    """Decode a request frame (without its 4-byte size prefix); bytes after the body are ignored, as by Kafka.

    Raises :class:`UnknownApiKey`, :class:`UnsupportedApiVersion` or :class:`DecodeError`.
    """
    api_key, api_version, correlation_id = peek_header(frame)
    parts = _REQUEST_PARTS.get((api_key, api_version))
    if parts is None:
        if api_key not in APIS:
            raise UnknownApiKey(f"unknown API key {api_key}")
        if api_key not in _PARTS_OF:
            _parts_at_first_use(api_key)
            parts = _REQUEST_PARTS.get((api_key, api_version))
        if parts is None:
            raise UnsupportedApiVersion(api_key, api_version, correlation_id)
    # Kafka reads a request's fields and ignores whatever follows them (AbstractRequest.parseRequest does
    # not check for a remainder); librdkafka's AdminClient relies on it, sending Metadata v12 with 3 bytes
    # past the fields Kafka defines.
    programs = _REQUEST_PROGRAMS.get((api_key, api_version))
    if programs is None:
        programs = _REQUEST_PROGRAMS[(api_key, api_version)] = frame_programs(*parts)
    (header, body), _ = decode_frame_by(programs, frame, parts)
    return Request(RequestHeader(api_key, api_version, correlation_id, header.client_id, parts[0][1]), body)


_REQUEST_PARTS: dict[tuple[int, int], tuple[tuple[Message, int], tuple[Message, int]]] = {}
"""The header and body to decode for each API key and version, filled at the API's first use: looked up
once per request rather than worked out from the version ranges."""

_REQUEST_PROGRAMS: dict[tuple[int, int], tuple[Any, ...] | None] = {}
"""The schema machine's programs of each API key and version's header and body, made at its first request."""

_RESPONSE_PROGRAMS: dict[tuple[int, int], tuple[Any, ...] | None] = {}
"""The same of each API key and version's answer, made at its first answer."""

_RESPONSE_PARTS: dict[tuple[int, int], tuple[int, Message]] = {}
"""Each API key and version's response header version and response message, looked up once per answer."""

_PARTS_OF: set[int] = set()
"""The API keys whose versions are in both tables."""


def _parts_at_first_use(api_key: int) -> None:
    """Import the API's messages and fill both tables for each of its versions (again at worst, from two
    threads at once: the same entries)."""
    api = APIS[api_key]
    for version in api.request.versions():
        _REQUEST_PARTS[(api_key, version)] = ((headers.REQUEST_HEADER, request_header_version(api_key, version)), (api.request, version))
    for version in api.response.versions():
        _RESPONSE_PARTS[(api_key, version)] = (response_header_version(api_key, version), api.response)
    _PARTS_OF.add(api_key)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]) -> tuple[bytes, list[Splice]]:
    """A size-prefixed response frame, plus the splices where record data must be inserted."""
    try:
        header_version, response = _RESPONSE_PARTS[(api_key, api_version)]
    except KeyError:
        _parts_at_first_use(api_key)
        header_version, response = _RESPONSE_PARTS[(api_key, api_version)]
    programs = _RESPONSE_PROGRAMS.get((api_key, api_version))
    if programs is None:
        programs = _RESPONSE_PROGRAMS[(api_key, api_version)] = frame_programs((headers.RESPONSE_HEADER, header_version), (response, api_version))
    return encode_frame_by(programs, ((headers.RESPONSE_HEADER, header_version, {"correlation_id": correlation_id}), (response, api_version, body)))


def encode_request(api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any], client_id: str | None = "odradek") -> bytes:
    """A size-prefixed request frame (for inter-broker calls, tools and tests)."""
    header_body = {"request_api_key": api_key, "request_api_version": api_version, "correlation_id": correlation_id, "client_id": client_id}
    data, splices = encode_frame(
        (headers.REQUEST_HEADER, request_header_version(api_key, api_version), header_body),
        (APIS[api_key].request, api_version, body),
    )
    if splices:
        raise ValueError("requests cannot carry records placeholders")
    return data


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Container]:
    """(correlation id, body) of a response frame without its size prefix."""
    header, end = decode(headers.RESPONSE_HEADER, response_header_version(api_key, api_version), frame, exact=False)
    body, _ = decode(APIS[api_key].response, api_version, frame, end)
    return header.correlation_id, body
