"""Protocol layer throughput: decoding the requests and encoding the responses on the hot paths.

Produce and Fetch figures are per request for realistic shapes: a 1 MiB batch per produce request (decoded
without copying the batch, then CRC-checked as the broker does), and a fetch response for 100 partitions
whose record data is left to sendfile (encode writes only lengths). The last rows compare construct's
interpreter, construct's compiler and our compiled codec on the same message.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import construct

from odradek.protocol.api import decode_request, encode_request, encode_response
from odradek.protocol.messages import metadata
from odradek.protocol.record_batch import verify_crc
from odradek.protocol.records import build_batch
from odradek.protocol.schema import decode, encode
from run import Result, measure

MIB = 1 << 20
PARTITIONS = 100


@dataclass(frozen=True)
class SegmentSlice:
    """What a fetch hands to encode_response instead of record bytes: only the length is encoded."""

    length: int


def produce_request_frame() -> tuple[bytes, int]:
    batch = build_batch([(None, b"v" * 1000) for _ in range(1048)])  # ≈ 1 MiB of record data
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [{"name": "bench", "partition_data": [{"index": 0, "records": batch}]}]}
    return encode_request(0, 9, 1, body, client_id="bench")[4:], len(batch)


def fetch_response_body() -> dict:
    topics = [
        {
            "topic": f"topic-{t}",
            "partitions": [
                {"partition_index": p, "high_watermark": 1_000_000, "last_stable_offset": 1_000_000, "log_start_offset": 0, "records": SegmentSlice(64 * 1024)}
                for p in range(PARTITIONS // 10)
            ],
        }
        for t in range(10)
    ]
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 7, "responses": topics}


def fetch_request_frame() -> bytes:
    topics = [
        {"topic": f"topic-{t}", "partitions": [{"partition": p, "fetch_offset": 123_456, "partition_max_bytes": MIB} for p in range(PARTITIONS // 10)]}
        for t in range(10)
    ]
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 50 * MIB, "session_id": 0, "session_epoch": -1, "topics": topics}
    return encode_request(1, 12, 1, body, client_id="bench")[4:]


def metadata_request_frame(topics: int) -> bytes:
    body = {"topics": [{"topic_id": uuid.UUID(int=0), "name": f"topic-{t}"} for t in range(topics)], "allow_auto_topic_creation": True}
    return encode_request(3, 12, 1, body, client_id="bench")[4:]


# Metadata v1 request in plain construct (null topics aside), to weigh construct's interpreter and compiler.
PLAIN_METADATA_V1 = construct.Struct("topics" / construct.PrefixedArray(construct.Int32sb, construct.Struct("name" / construct.PascalString(construct.Int16sb, "utf8"))))


def run() -> list[Result]:
    results = []

    produce, batch_size = produce_request_frame()

    def produce_decode_and_crc() -> None:
        records = decode_request(produce).body.topic_data[0].partition_data[0].records
        if not verify_crc(records):
            raise AssertionError("CRC mismatch")

    rate = measure(produce_decode_and_crc)
    results += [
        Result("Produce v9 request, 1 MiB batch: decode + CRC", rate, "requests/s"),
        Result("  same, as throughput", rate * batch_size / MIB, "MiB/s"),
        Result("  decode only (no CRC)", measure(lambda: decode_request(produce)), "requests/s"),
    ]

    body = fetch_response_body()
    results.append(Result(f"Fetch v12 response, {PARTITIONS} partitions (records spliced): encode", measure(lambda: encode_response(1, 12, 1, body)), "responses/s"))

    fetch = fetch_request_frame()
    results.append(Result(f"Fetch v12 request, {PARTITIONS} partitions: decode", measure(lambda: decode_request(fetch)), "requests/s"))
    for topics in (1, 100):
        frame = metadata_request_frame(topics)
        results.append(Result(f"Metadata v12 request, {topics} topic(s): decode", measure(lambda: decode_request(frame)), "requests/s"))

    value = {"topics": [{"name": f"topic-{t}"} for t in range(10)]}
    data = encode(metadata.REQUEST, 1, value)
    compiled = PLAIN_METADATA_V1.compile()
    names = [t["name"] for t in value["topics"]]
    for parsed in (PLAIN_METADATA_V1.parse(data), compiled.parse(data), decode(metadata.REQUEST, 1, data)[0]):
        assert [t.name for t in parsed.topics] == names
    results += [
        Result("Metadata v1 body, 10 topics: construct interpreted", measure(lambda: PLAIN_METADATA_V1.parse(data)), "decodes/s"),
        Result("  construct compiled", measure(lambda: compiled.parse(data)), "decodes/s"),
        Result("  odradek schema (compiled)", measure(lambda: decode(metadata.REQUEST, 1, data)), "decodes/s"),
    ]
    return results


if __name__ == "__main__":
    import run as runner

    runner.print_table([("protocol", r) for r in run()])
