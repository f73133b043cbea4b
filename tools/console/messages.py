"""Messages of one partition, read with Fetch from its leader as a consumer reads them, and a test record
produced with Produce.

Browsing starts at an offset or at the first record at or after a timestamp (ListOffsets), reads oldest
first (from there on) or newest first (back from there), and may keep only records whose key equals a
text or whose key or value contains one; a filtered read looks at no more than :data:`MAX_SCAN` records
so that a page over a large partition stays quick, and says how far it looked.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import anyio
import anyio.to_thread

from odradek.broker.network.kafka_client import KafkaClient, ResponseError
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import RecordsError, iter_batch_positions, peek_magic, read_batch_header
from odradek.protocol.records import Record, build_batch, iter_records
from odradek.tools.admin_common import EARLIEST, LATEST, CommandError, broker_error, list_offsets, topic_metadata

MAX_SCAN = 10_000
"""Records a filtered read looks at, at most."""
FETCH_MAX_BYTES = 1 << 20
WINDOW = 500
"""Records read per step when reading back from the end with a filter."""
MAGIC_V2 = 2
FORMATS = ("text", "json", "hex")


@dataclass
class MessageView:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]

    @property
    def time(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.timestamp / 1000)) + f".{self.timestamp % 1000:03d}Z"


@dataclass
class Browse:
    topic: str
    partition: int
    log_start: int
    log_end: int
    start: int
    """The offset browsing began at (after a timestamp's look-up)."""
    newest_first: bool
    messages: list[MessageView]
    scanned: int
    """Records looked at (more than shown when filtered)."""


def render(data: bytes | None, fmt: str) -> str:
    """A key, value or header shown as text (UTF-8, undecodable bytes replaced), pretty JSON (text if it is
    not JSON) or hex."""
    if data is None:
        return "null"
    if fmt == "hex":
        return data.hex(" ")
    text = data.decode("utf-8", errors="replace")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def matches(m: MessageView, key: str | None, contains: str | None) -> bool:
    if key is not None and (m.key or b"") != key.encode():
        return False
    if contains:
        needle = contains.encode()
        return needle in (m.key or b"") or needle in (m.value or b"")
    return True


async def _partition(client: KafkaClient, topic: str, partition: int):
    metadata = await topic_metadata(client, [topic])
    if topic not in metadata:
        raise CommandError(f"Topic {topic} does not exist or may not be described")
    found = next((p for p in metadata[topic].partitions if p.partition_index == partition), None)
    if found is None:
        raise CommandError(f"Topic {topic} has no partition {partition}")
    if found.leader_id < 0:
        raise CommandError(f"Partition {topic}-{partition} has no leader")
    return metadata[topic], found.leader_id


async def fetch(client: KafkaClient, topic, leader: int, partition: int, offset: int) -> tuple[list[MessageView], int]:
    """The records from ``offset`` one Fetch returns (control records left out), and the offset after the
    last batch read (``offset`` when nothing was returned)."""
    body = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": FETCH_MAX_BYTES, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic.name, "topic_id": getattr(topic, "topic_id", None), "partitions": [
            {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": FETCH_MAX_BYTES}
        ]}],
        "forgotten_topics_data": [], "rack_id": "",
    }
    response = await client.request(ApiKey.Fetch, body, node_id=leader)
    if getattr(response, "error_code", ErrorCode.NONE) != ErrorCode.NONE:
        raise ResponseError(response.error_code, "Fetch")
    data = response.responses[0].partitions[0]
    if data.error_code != ErrorCode.NONE:
        raise broker_error(data.error_code, None)
    records = bytes(data.records or b"")
    try:
        # Decoding (and decompressing) a megabyte of records is CPU work: off the event loop, which in
        # ``odradek serve`` is the broker's.
        return await anyio.to_thread.run_sync(decode_messages, records, offset)
    except RecordsError as exc:
        raise CommandError(f"Partition {topic.name}-{partition} holds records that cannot be read at offset {offset}: {exc}") from None


def decode_messages(records: bytes, offset: int) -> tuple[list[MessageView], int]:
    """The records at or after ``offset`` in fetched batches (control batches and the older message formats
    left out), and the offset after the last batch."""
    buf = memoryview(records)
    out: list[MessageView] = []
    next_offset = offset
    for pos, _, _ in iter_batch_positions(buf):
        if peek_magic(buf, pos) != MAGIC_V2:
            continue
        header = read_batch_header(buf, pos)
        next_offset = max(next_offset, header.next_offset)
        if header.is_control:
            continue
        for r in iter_records(buf, pos):
            assert r.offset is not None and r.timestamp is not None  # a decoded record carries both
            if r.offset >= offset:
                out.append(MessageView(r.offset, r.timestamp, r.key, r.value, r.headers))
    return out, next_offset


async def _read_range(client: KafkaClient, topic, leader: int, partition: int, start: int, stop: int, limit: int, keep) -> tuple[list[MessageView], int]:
    """Records in [start, stop) that ``keep`` accepts, oldest first, up to ``limit`` of them; and how many
    were looked at."""
    out: list[MessageView] = []
    scanned = 0
    offset = start
    while offset < stop and len(out) < limit and scanned < MAX_SCAN:
        batch, next_offset = await fetch(client, topic, leader, partition, offset)
        if next_offset <= offset:
            break
        for m in batch:
            if m.offset >= stop or len(out) >= limit:
                break
            scanned += 1
            if keep(m):
                out.append(m)
        offset = next_offset
    return out, scanned


async def browse(client: KafkaClient, topic_name: str, partition: int, *, offset: int | None = None, timestamp: int | None = None, newest_first: bool = True, limit: int = 50, key: str | None = None, contains: str | None = None) -> Browse:
    topic, leader = await _partition(client, topic_name, partition)
    tp = (topic_name, partition)
    log_start = (await list_offsets(client, [tp], EARLIEST)).get(tp, 0)
    log_end = (await list_offsets(client, [tp], LATEST)).get(tp, 0)
    if timestamp is not None:
        start = (await list_offsets(client, [tp], timestamp)).get(tp, log_end)
    elif offset is not None:
        start = min(max(offset, log_start), log_end)
    else:
        start = log_end if newest_first else log_start
    keep = lambda m: matches(m, key, contains)  # noqa: E731
    if not newest_first:
        oldest, oldest_scanned = await _read_range(client, topic, leader, partition, start, log_end, limit, keep)
        return Browse(topic_name, partition, log_start, log_end, start, False, oldest, oldest_scanned)
    # Newest first: back from ``start`` (its record included when it was asked for), a window at a time.
    stop = min(start + 1, log_end) if (offset is not None or timestamp is not None) else log_end
    messages: list[MessageView] = []
    scanned = 0
    while stop > log_start and len(messages) < limit and scanned < MAX_SCAN:
        lo = max(log_start, stop - (limit if key is None and not contains else WINDOW))
        window, looked = await _read_range(client, topic, leader, partition, lo, stop, MAX_SCAN, keep)
        scanned += looked
        messages += reversed(window)
        stop = lo
    return Browse(topic_name, partition, log_start, log_end, start, True, messages[:limit], scanned)


async def produce(client: KafkaClient, topic_name: str, partition: int, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]]) -> int:
    """One record, acks=all, to the partition's leader; its offset."""
    _, leader = await _partition(client, topic_name, partition)
    batch = build_batch([Record(key=key, value=value, headers=headers)])
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [{"name": topic_name, "partition_data": [{"index": partition, "records": batch}]}]}
    answer = (await client.request(ApiKey.Produce, body, node_id=leader)).responses[0].partition_responses[0]
    if answer.error_code != ErrorCode.NONE:
        raise broker_error(answer.error_code, getattr(answer, "error_message", None))
    return answer.base_offset
