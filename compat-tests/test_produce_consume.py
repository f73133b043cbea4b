"""Producing and consuming: every compression codec, keys, headers, null values, both timestamp types,
the offsets the broker assigns, and MESSAGE_TOO_LARGE."""

from __future__ import annotations

import time

from compat_client import COMPRESSIONS, Client, Record, TopicSpec
from compat_observe import unique, within
from compat_targets import Target

# Timestamps are relative to a base a minute in the past: far-past CreateTimes would fall to time-based
# retention (retention.ms 7 days) during the session.
BASE_TS_OFFSET_MS = 60_000


def records(base_ts: int) -> list[Record]:
    return [
        Record(b"first", key=b"k1", headers=(("trace", b"abc"), ("empty", b"")), timestamp_ms=base_ts),
        Record(None, key=b"deleted", timestamp_ms=base_ts + 1),  # a tombstone: null value
        Record(b"no key", timestamp_ms=base_ts + 2),
        Record(b"", key=b"", headers=(("trace", b"1"), ("trace", b"2")), timestamp_ms=base_ts + 1000),
    ]


def relative(seen: list[dict], base_ts: int) -> list[dict]:
    return [{**r, "timestamp": r["timestamp"] - base_ts} for r in seen]


def every_compression(target: Target, client: Client) -> dict:
    base_ts = int(time.time() * 1000) - BASE_TS_OFFSET_MS
    out = {}
    for codec in COMPRESSIONS:
        topic = client.new_topic(f"codec-{codec}")
        delivered = client.produce(topic, records(base_ts), compression=codec)
        consumed, error = client.read(topic, 0, 0, 4)
        out[codec] = {"delivered": delivered, "consumed": relative(consumed, base_ts), "error": error}
    return out


def _consumed(offset: int, key, value, headers, ts: int) -> dict:
    return {"partition": 0, "offset": offset, "key": key, "value": value, "headers": headers, "timestamp_type": "CreateTime", "timestamp": ts}


EXPECTED_ROUND_TRIP = {
    "delivered": [{"partition": 0, "offset": n, "error": "NONE"} for n in range(4)],
    "consumed": [
        _consumed(0, "k1", "first", [["trace", "abc"], ["empty", ""]], 0),
        _consumed(1, "deleted", None, [], 1),
        _consumed(2, None, "no key", [], 2),
        _consumed(3, "", "", [["trace", "1"], ["trace", "2"]], 1000),
    ],
    "error": None,
}


def test_every_compression(compat):
    compat.check(every_compression, {codec: EXPECTED_ROUND_TRIP for codec in COMPRESSIONS})


def log_append_time(target: Target, client: Client) -> dict:
    topic = unique("log-append-time")
    created = client.create_topics([TopicSpec(topic, configs={"message.timestamp.type": "LogAppendTime"})])
    client.wait_for_topic(topic, 1)
    create_time = int(time.time() * 1000) - 3_600_000
    before = int(time.time() * 1000)
    delivered = client.produce(topic, [Record(b"a", timestamp_ms=create_time), Record(b"b", timestamp_ms=create_time + 5)])
    after = int(time.time() * 1000)
    consumed, error = client.read(topic, 0, 0, 2)
    return {
        "created": created[topic],
        "delivered": delivered,
        "error": error,
        "timestamp_types": [r["timestamp_type"] for r in consumed],
        # The broker's clock replaces the producer's timestamp: between sending and the acknowledgement.
        "timestamps": [within(r["timestamp"], before, after) for r in consumed],
    }


def test_log_append_time(compat):
    compat.check(
        log_append_time,
        {
            "created": "NONE",
            "delivered": [{"partition": 0, "offset": 0, "error": "NONE"}, {"partition": 0, "offset": 1, "error": "NONE"}],
            "error": None,
            "timestamp_types": ["LogAppendTime", "LogAppendTime"],
            "timestamps": ["within", "within"],
        },
    )


def offsets_assigned(target: Target, client: Client) -> dict:
    """Offsets are per partition, consecutive across producers and batches, one per record even when a
    compressed batch carries several."""
    topic = client.new_topic("offsets", partitions=2)
    sessions = [
        client.produce(topic, [Record(b"a")]),
        client.produce(topic, [Record(b"b%d" % n) for n in range(5)], compression="gzip"),
        client.produce(topic, [Record(b"c", partition=1), Record(b"d", partition=0), Record(b"e", partition=1)]),
    ]
    return {
        "delivered": [[[d["partition"], d["offset"]] for d in session] for session in sessions],
        "log_end_offsets": [client.list_offset(topic, p, "latest")["offset"] for p in (0, 1)],
    }


def test_offsets_assigned(compat):
    compat.check(
        offsets_assigned,
        {
            "delivered": [[[0, 0]], [[0, 1], [0, 2], [0, 3], [0, 4], [0, 5]], [[1, 0], [0, 6], [1, 1]]],
            "log_end_offsets": [7, 2],
        },
    )


def message_too_large(target: Target, client: Client) -> dict:
    """A batch over the topic's max.message.bytes is refused whole and takes no offset."""
    topic = client.new_topic("too-large", configs={"max.message.bytes": "1024"})
    return {
        "too_large": client.produce(topic, [Record(b"x" * 4096)]),
        "fits": client.produce(topic, [Record(b"y" * 100)]),
        "log_end_offset": client.list_offset(topic, 0, "latest")["offset"],
    }


def test_message_too_large(compat):
    compat.check(
        message_too_large,
        {
            "too_large": [{"partition": 0, "offset": -1, "error": "MESSAGE_TOO_LARGE"}],
            "fits": [{"partition": 0, "offset": 0, "error": "NONE"}],
            "log_end_offset": 1,
        },
    )


def idempotent_retry(target: Target, client: Client) -> dict:
    """The response to the producer's first batch is lost on the way back; the producer resends the same
    batch (same producer id, epoch and sequence) and the broker acknowledges it without appending it twice."""
    from compat_proxy import ResponseDroppingProxy

    topic = client.new_topic("idempotent")
    proxy = ResponseDroppingProxy(target.bootstrap, drops=1)
    try:
        delivered = client.produce(topic, [Record(b"a"), Record(b"b"), Record(b"c")], idempotent=True, bootstrap=proxy.address)
        more = client.produce(topic, [Record(b"d")], idempotent=True, bootstrap=proxy.address)
    finally:
        proxy.close()
    in_log, error = client.read(topic, 0, 0, 5, timeout_s=1)  # one more than were sent: nothing else comes
    return {
        "responses_lost": proxy.dropped,
        "delivered": delivered + more,
        "log": [[r["offset"], r["value"]] for r in in_log],
        "error": error,
    }


def test_idempotent_retry(compat):
    compat.check(
        idempotent_retry,
        {
            "responses_lost": 1,
            "delivered": [{"partition": 0, "offset": n, "error": "NONE"} for n in range(4)],
            "log": [[0, "a"], [1, "b"], [2, "c"], [3, "d"]],
            "error": None,
        },
    )


COMPACTION_TIMEOUT_S = 60


def compacted_read_back(target: Target, client: Client) -> dict:
    """A compacted topic read back once the cleaner ran: the latest value of each key, tombstones kept
    (delete.retention.ms is a day), offsets unchanged. segment.ms rolls the segment at the next append,
    so the records before it are no longer in the active segment, which the cleaner never touches."""
    topic = unique("compacted")
    configs = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}
    client.create_topics([TopicSpec(topic, configs=configs)])
    client.wait_for_topic(topic, 1)
    writes = [(b"k1", b"a1"), (b"k2", b"b1"), (b"k1", b"a2"), (b"k3", b"c1"), (b"k2", None), (b"k1", b"a3")]
    client.produce(topic, [Record(value, key=key) for key, value in writes])
    time.sleep(0.3)  # past segment.ms: the next append rolls a new segment
    client.produce(topic, [Record(b"d1", key=b"k4")])
    deadline = time.monotonic() + COMPACTION_TIMEOUT_S
    while True:
        seen, error = client.read(topic, 0, 0, len(writes) + 1, timeout_s=1)
        if len(seen) < len(writes) + 1 or error is not None or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return {
        "read_back": [[r["offset"], r["key"], r["value"]] for r in seen],
        "error": error,
        "log_end": client.list_offset(topic, 0, "latest")["offset"],
    }


def test_compacted_read_back(compat):
    compat.check(
        compacted_read_back,
        {"read_back": [[3, "k3", "c1"], [4, "k2", None], [5, "k1", "a3"], [6, "k4", "d1"]], "error": None, "log_end": 7},
    )
