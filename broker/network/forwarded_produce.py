"""A Produce request as a front process forwards it to worker 0, decoded and checked (docs/multicore.md, step 2).

A front decodes its client's Produce request and runs the checks of each partition's batch that need no
partition state (``storage.log_validator.precheck``: the header, the CRC, the record walk's structure), then
sends worker 0, in the connection's byte stream where the client's frame was, an *internal frame*: the request
header's fields, the body's, and per partition the batch with the checks' verdict. Worker 0 reads it in place
of decoding the client's frame and takes the verdicts in place of its own header, CRC and walk, raising a
refusal's error at the point where its own check would have raised it: the answer is the one the request
would get without a front. Everything that needs the broker's state (authorization, quotas, the partition,
the topic's config: sizes, timestamp bounds, keys of compacted topics, codecs) stays worker 0's.

An internal frame is told apart by its API key, :data:`MARKER` (-1, no API's): a front never forwards a
client's frame with that key as it came (:func:`guard`), and worker 0 reads the marker only on PLAINTEXT
connections a front holds, so no client can forge one. Worker 0 answers such a request with a
:class:`ProduceAnswer`, each partition's outcome as a few fields, from which the front builds the Kafka
response at the request's version (one encoder, the front's): worker 0 encodes no Produce response for a
front. A SASL listener's connections are forwarded as they came (a SASL exchange's frames need not be requests, and what a client may send depends on its
authentication, which is worker 0's): worker 0 decodes and checks their requests itself.
"""

from __future__ import annotations

import collections
import operator
import struct
from typing import TYPE_CHECKING, Any

from odradek.broker.replication.replica_manager import PartitionAppend
from odradek.protocol.api import ApiKey, Request, RequestHeader, decode_request, encode_response
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import NO_TIMESTAMP, ValidatedBatches, parse_header
from odradek.protocol.record_walk import WalkedBatch
from odradek.protocol.schema import DecodeError, EncodeError
from odradek.protocol.values import TupleFields
from odradek.storage.log_validator import Prechecked, precheck

if TYPE_CHECKING:
    from odradek.protocol.message_types.produce import PartitionProduceResponseDict, ProduceResponseDict, TopicProduceResponseDict

MARKER = -1
"""The API key of an internal frame."""
REPLACED_MARKER = b"\xff\xfe"
"""What a front writes over the API key of a client's frame that carries the marker: -2, as unknown to worker 0
as -1 is to a single broker (it closes the connection either way)."""
MAX_FORWARDED = 1 << 20
"""A Produce request larger than this is forwarded as the client sent it (worker 0 checks it): a front holds
at most this much of a connection before forwarding it, as it forwards at most this much unread."""

_HEAD = struct.Struct(">hhibhi")
"""marker, api version, correlation id, request header version, acks, timeout_ms"""
_STRING = struct.Struct(">h")
_COUNT = struct.Struct(">i")
_PARTITION = struct.Struct(">iBi")
"""partition index, verdict, records length (-1: null)"""
_ERROR = struct.Struct(">hi")
"""error code, message length (-1: none)"""
_WALKED = struct.Struct(">qB")
"""max timestamp, offsets in sequence"""
UNCHECKED, REFUSED, CHECKED, WALK_REFUSED, WALKED = range(5)
"""A partition's verdict: no precheck (no records, a legacy message set), header or CRC refused, header and CRC
passed but the walk left to worker 0, the walk refused, the walk passed."""
OUTCOME_FIELDS = ("error_code", "base_offset", "log_append_time_ms", "log_start_offset")
"""The fields of a partition's entry in the Produce response that a :class:`ProduceAnswer` carries as numbers
(:data:`_OUTCOME`); besides them an entry has its index (the front's, from the request) and, for records the
validator refused one by one, the record errors and the error message."""
_OUTCOME = struct.Struct(">hqqqi")
"""A partition's :data:`OUTCOME_FIELDS`, then how many record errors follow (-1: the entry has neither record
errors nor error message; else the error message, then each error's batch index and message)."""
_outcome = operator.itemgetter(*OUTCOME_FIELDS)


class ForwardedTopic(TupleFields):
    name: str
    partition_data: list[PartitionAppend]
    """Each partition's append: its ``index`` and ``records`` are what the handler reads of a decoded one's."""


class ForwardedProduce(TupleFields):
    """The body of a forwarded Produce request: the fields the produce handler reads of a decoded one, and the
    appends with their verdicts."""

    acks: int
    timeout_ms: int
    transactional_id: str | None
    topic_data: list[ForwardedTopic]
    appends: list[PartitionAppend]


def guard(header: bytearray) -> None:
    """A client frame's first bytes (size, API key) before the front forwards them: never the marker."""
    if header[4] == 0xFF and header[5] == 0xFF:
        header[4:6] = REPLACED_MARKER


# -- the front's side ---------------------------------------------------------------------------------------


def _put_string(value: str | None, out: list[bytes], size: struct.Struct = _STRING) -> None:
    if value is None:
        out.append(size.pack(-1))
    else:
        data = value.encode()
        out.append(size.pack(len(data)))
        out.append(data)


def _put_error(exc: KafkaError, out: list[bytes]) -> None:
    message = None if exc.message is None else exc.message.encode()
    out.append(_ERROR.pack(exc.code, -1 if message is None else len(message)))
    if message is not None:
        out.append(message)


class Awaited(TupleFields):
    """What a front keeps of a forwarded Produce request until worker 0's :class:`ProduceAnswer`: what the
    Kafka response repeats of the request."""

    api_version: int
    correlation_id: int
    topics: list[tuple[str, list[int]]]
    """Each topic's name and its partitions' indexes, in the request's order."""


def encode(request: Request[Any]) -> tuple[bytes, Awaited]:
    """The internal frame (size prefix included) of a decoded Produce request, its batches prechecked; and
    what the front keeps to build its answer."""
    header, body = request.header, request.body
    out: list[bytes] = [b"", _HEAD.pack(MARKER, header.api_version, header.correlation_id, header.header_version, body.acks, body.timeout_ms)]
    _put_string(header.client_id, out)
    _put_string(body.transactional_id, out)
    out.append(_COUNT.pack(len(body.topic_data)))
    topics: list[tuple[str, list[int]]] = []
    for topic in body.topic_data:
        _put_string(topic.name, out)
        out.append(_COUNT.pack(len(topic.partition_data)))
        indexes: list[int] = []
        topics.append((topic.name, indexes))
        for pd in topic.partition_data:
            indexes.append(pd.index)
            records = pd.records
            pre = precheck(records)
            if pre is None:
                verdict = UNCHECKED
            elif pre.error is not None:
                verdict = REFUSED
            elif pre.walk_error is not None:
                verdict = WALK_REFUSED
            elif pre.walked is not None:
                verdict = WALKED
            else:
                verdict = CHECKED
            out.append(_PARTITION.pack(pd.index, verdict, -1 if records is None else len(records)))
            if pre is not None:
                if pre.error is not None:
                    _put_error(pre.error, out)
                elif pre.walk_error is not None:
                    _put_error(pre.walk_error, out)
                elif pre.walked is not None:
                    out.append(_WALKED.pack(pre.walked.max_timestamp, pre.walked.offsets_in_sequence))
            if records is not None:
                out.append(records)
    size = sum(len(part) for part in out)
    out[0] = _COUNT.pack(size)
    return b"".join(out), Awaited(header.api_version, header.correlation_id, topics)


def kafka_answer(awaited: Awaited, answer: memoryview) -> bytes:
    """The Kafka response frame of a forwarded Produce request, from worker 0's :class:`ProduceAnswer`: the
    entries the produce handler made, rebuilt, encoded at the request's version."""
    (throttle_ms,) = _COUNT.unpack_from(answer, 0)
    pos = _COUNT.size
    responses: list[TopicProduceResponseDict] = []
    placed: list[Any] = []
    for name, indexes in awaited.topics:
        entries: list[PartitionProduceResponseDict] = []
        for index in indexes:
            *outcome, errors = _OUTCOME.unpack_from(answer, pos)
            pos += _OUTCOME.size
            entry: Any = {"index": index, **dict(zip(OUTCOME_FIELDS, outcome))}
            if errors >= 0:
                entry["error_message"], pos = _string(answer, pos, _COUNT)
                record_errors = []
                for _ in range(errors):
                    (batch_index,) = _COUNT.unpack_from(answer, pos)
                    message, pos = _string(answer, pos + _COUNT.size, _COUNT)
                    record_errors.append({"batch_index": batch_index, "batch_index_error_message": message})
                entry["record_errors"] = record_errors
            entries.append(entry)
        placed += entries
        responses.append({"name": name, "partition_responses": entries})
    response: Any = {"responses": responses, "throttle_time_ms": throttle_ms}
    if pos < len(answer):
        (count,) = _COUNT.unpack_from(answer, pos)
        pos += _COUNT.size
        for _ in range(count):
            place, leader_id, leader_epoch = _LEADER.unpack_from(answer, pos)
            pos += _LEADER.size
            placed[place]["current_leader"] = {"leader_id": leader_id, "leader_epoch": leader_epoch}
        (count,) = _COUNT.unpack_from(answer, pos)
        pos += _COUNT.size
        nodes = []
        for _ in range(count):
            (node_id,) = _COUNT.unpack_from(answer, pos)
            host, pos = _string(answer, pos + _COUNT.size, _COUNT)
            (port,) = _COUNT.unpack_from(answer, pos)
            rack, pos = _string(answer, pos + _COUNT.size, _COUNT)
            nodes.append({"node_id": node_id, "host": host, "port": port, "rack": rack})
        response["node_endpoints"] = nodes
    return encode_response(ApiKey.Produce, awaited.api_version, awaited.correlation_id, response)[0]


# -- worker 0's side ----------------------------------------------------------------------------------------


def decode_frame(frame: bytearray | memoryview) -> Request[Any]:
    """A frame of a connection a front holds: an internal frame's request, or the client's as it came."""
    if len(frame) >= _HEAD.size and frame[0] == 0xFF and frame[1] == 0xFF:
        try:
            return decode(frame)
        except (struct.error, ValueError) as exc:  # a front's bug, never a client's bytes
            raise DecodeError(f"internal frame: {exc}") from None
    return decode_request(frame)


class ProduceAnswer(bytes):
    """A forwarded Produce request's answer as worker 0 sends it to the front (a piece of its own kind,
    worker_channel.ANSWER): the throttle time, then each partition's outcome in the request's order, then, only
    when the handler gave leader hints (KIP-951, broker/handlers/leader_hints.py), the hinted partitions (their
    place among the outcomes, leader and epoch) and the leaders' endpoints."""

    __slots__ = ()


_ANSWER_FIELDS = frozenset({"responses", "throttle_time_ms", "node_endpoints"})
_LEADER = struct.Struct(">iii")
"""A hinted partition's place among the answer's outcomes, its leader id and leader epoch."""


def answer(response: ProduceResponseDict) -> ProduceAnswer:
    """The :class:`ProduceAnswer` of the produce handler's response to a forwarded request. A response with
    more than the fields it carries is refused (EncodeError, as the encoder refuses what it cannot carry)
    rather than answered without them."""
    out = [_COUNT.pack(response.get("throttle_time_ms", 0))]
    if not response.keys() <= _ANSWER_FIELDS:
        raise EncodeError(f"a forwarded Produce's answer carries no {sorted(response.keys() - _ANSWER_FIELDS)}")
    leaders: list[bytes] = []
    place = 0
    for topic in response["responses"]:
        for entry in topic["partition_responses"]:
            record_errors = entry.get("record_errors")
            leader = entry.get("current_leader")
            # the index; the record errors and message; the leader hint
            if len(entry) != len(OUTCOME_FIELDS) + (1 if record_errors is None else 3) + (leader is not None):
                raise EncodeError(f"a forwarded Produce's answer carries {OUTCOME_FIELDS}, record errors and leader hints, not {sorted(entry)}")
            out.append(_OUTCOME.pack(*_outcome(entry), -1 if record_errors is None else len(record_errors)))
            if record_errors is not None:
                _put_string(entry["error_message"], out, _COUNT)
                for error in record_errors:
                    out.append(_COUNT.pack(error["batch_index"]))
                    _put_string(error["batch_index_error_message"], out, _COUNT)
            if leader is not None:
                leaders.append(_LEADER.pack(place, leader["leader_id"], leader["leader_epoch"]))
            place += 1
    nodes = response.get("node_endpoints", [])
    if leaders or nodes:
        out.append(_COUNT.pack(len(leaders)))
        out += leaders
        out.append(_COUNT.pack(len(nodes)))
        for node in nodes:
            out.append(_COUNT.pack(node["node_id"]))
            _put_string(node["host"], out, _COUNT)
            out.append(_COUNT.pack(node["port"]))
            _put_string(node["rack"], out, _COUNT)
    return ProduceAnswer(b"".join(out))


def _string(view: memoryview, pos: int, size_of: struct.Struct = _STRING) -> tuple[str | None, int]:
    (size,) = size_of.unpack_from(view, pos)
    pos += size_of.size
    if size < 0:
        return None, pos
    return str(view[pos : pos + size], "utf-8"), pos + size


def _error_at(view: memoryview, pos: int) -> tuple[KafkaError, int]:
    code, size = _ERROR.unpack_from(view, pos)
    pos += _ERROR.size
    if size < 0:
        return KafkaError(ErrorCode(code)), pos
    return KafkaError(ErrorCode(code), str(view[pos : pos + size], "utf-8")), pos + size


def decode(frame: bytearray | memoryview) -> Request[Any]:
    """The Produce request an internal frame (without its size prefix) carries. Straight-line: this is what
    worker 0 spends in place of decoding the client's frame and checking its batches."""
    view = memoryview(frame)
    _, api_version, correlation_id, header_version, acks, timeout_ms = _HEAD.unpack_from(view, 0)
    client_id, pos = _string(view, _HEAD.size)
    transactional_id, pos = _string(view, pos)
    topics: list[ForwardedTopic] = []
    appends: list[PartitionAppend] = []
    (topic_count,) = _COUNT.unpack_from(view, pos)
    pos += 4
    for _ in range(topic_count):
        name, pos = _string(view, pos)
        assert name is not None
        (partition_count,) = _COUNT.unpack_from(view, pos)
        pos += 4
        partitions: list[PartitionAppend] = []
        for _ in range(partition_count):
            index, verdict, size = _PARTITION.unpack_from(view, pos)
            pos += _PARTITION.size
            pre: Prechecked | None = None
            if verdict == WALKED:
                max_timestamp, in_sequence = _WALKED.unpack_from(view, pos)
                pos += _WALKED.size
                pre = Prechecked(walked=WalkedBatch(max_timestamp, in_sequence == 1, []))
            elif verdict == REFUSED:
                error, pos = _error_at(view, pos)
                pre = Prechecked(error=error)
            elif verdict == WALK_REFUSED:
                error, pos = _error_at(view, pos)
                pre = Prechecked(walk_error=error)
            elif verdict == CHECKED:
                pre = Prechecked()
            records = None if size < 0 else view[pos : pos + size]
            pos += max(size, 0)
            if pre is not None and pre.error is None and records is not None:
                batch = parse_header(records)  # the front validated it: the one batch, at 0
                pre.validated = ValidatedBatches([(0, batch)], batch.records_count, max(NO_TIMESTAMP, batch.max_timestamp), size)
            append = PartitionAppend(name, index, records, pre)
            partitions.append(append)
            appends.append(append)
        topics.append(ForwardedTopic(name, partitions))
    return Request(RequestHeader(ApiKey.Produce, api_version, correlation_id, client_id, header_version), ForwardedProduce(acks, timeout_ms, transactional_id, topics, appends))


_SIZE_AND_KEY = struct.Struct(">ih")
_PASS_ALL = 1 << 62


class ProduceFramer:
    """A front's view of one client's byte stream, frame by frame: a Produce request of at most
    :data:`MAX_FORWARDED` bytes at a version worker 0 serves is decoded, its batches prechecked, and forwarded
    as an internal frame; every other byte as it came, in the same order. ``versions`` None (a SASL listener,
    whose requests worker 0 serves only once authenticated): every byte as it came."""

    __slots__ = ("versions", "head", "frame", "need", "passing", "awaiting")

    def __init__(self, versions: range | None) -> None:
        self.versions = versions
        self.head = bytearray()
        """A frame's size and API key, while they arrive."""
        self.frame: bytearray | None = None
        """A Produce request's frame (size prefix included) while it arrives, ``need`` bytes to go."""
        self.need = 0
        self.passing = _PASS_ALL if versions is None else 0
        """Bytes of the current frame still to forward as they come."""
        self.awaiting: collections.deque[Awaited] = collections.deque()
        """The Produce requests forwarded as internal frames whose answers are to come (acks 0 has none), in order."""

    def feed(self, data: memoryview) -> list[tuple[bool, bytes]]:
        """What to forward, in order, of ``data`` the client sent: each part with whether it is one whole
        internal frame (which worker 0 may serve at once: worker_channel.FRAME) or bytes as they came."""
        if self.passing >= len(data):
            self.passing -= len(data)
            return [(False, bytes(data))]
        out: list[tuple[bool, bytes]] = []
        raw = bytearray()
        pos, end = 0, len(data)
        while pos < end:
            if self.passing:
                n = min(self.passing, end - pos)
                raw += data[pos : pos + n]
                pos += n
                self.passing -= n
                continue
            if self.frame is not None:
                n = min(self.need, end - pos)
                self.frame += data[pos : pos + n]
                pos += n
                self.need -= n
                if not self.need:
                    if raw:
                        out.append((False, bytes(raw)))
                        raw = bytearray()
                    out.append(self._forward(self.frame))
                    self.frame = None
                continue
            n = min(_SIZE_AND_KEY.size - len(self.head), end - pos)
            self.head += data[pos : pos + n]
            pos += n
            if len(self.head) < _SIZE_AND_KEY.size:
                break
            head, self.head = self.head, bytearray()
            size, api_key = _SIZE_AND_KEY.unpack(head)
            if size < 2:
                # Not a request (worker 0 closes the connection at it): what follows is never read as frames.
                raw += head
                self.passing = _PASS_ALL
            elif api_key == ApiKey.Produce and size <= MAX_FORWARDED:
                self.frame, self.need = head, size - 2
                if not self.need:
                    raw += head
                    self.frame = None
            else:
                guard(head)
                raw += head
                self.passing = size - 2
        if raw:
            out.append((False, bytes(raw)))
        return out

    def _forward(self, frame: bytearray) -> tuple[bool, bytes]:
        """The internal frame of a whole Produce request; the frame as it came when worker 0 would not serve it
        (it answers or closes as without a front)."""
        try:
            request = decode_request(memoryview(frame)[4:])
        except Exception:
            return False, bytes(frame)
        assert self.versions is not None
        if request.header.api_version not in self.versions:
            return False, bytes(frame)
        internal, awaited = encode(request)
        if request.body.acks != 0:
            self.awaiting.append(awaited)
        return True, internal

    def answered(self, answer: memoryview) -> bytes:
        """The Kafka response of the oldest Produce request awaiting its answer, from worker 0's."""
        return kafka_answer(self.awaiting.popleft(), answer)
