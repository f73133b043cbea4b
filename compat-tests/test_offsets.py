"""Where offsets come from and where reading stops: ListOffsets, fetching outside the log (beyond its end,
before its start after DeleteRecords), and how long a fetch waits (long polling)."""

from __future__ import annotations

import threading
import time
from contextlib import closing

from compat_client import Client, GroupMember, MemberConfig, Record
from compat_observe import unique, within
from compat_targets import Target

RECORDS_TIMEOUT_S = 15


def list_offsets(target: Target, client: Client) -> dict:
    """ListOffsets answers; CreateTimes out of order so that the max timestamp is not the last record."""
    topic = client.new_topic("list-offsets")
    base = int(time.time() * 1000) - 60_000
    client.produce(topic, [Record(b"%d" % n, timestamp_ms=base + ts) for n, ts in enumerate((0, 3000, 2000, 1000))])

    def ask(spec: str | int) -> list[int] | str:
        found = client.list_offset(topic, 0, spec)
        if "error" in found:
            return found["error"]
        return [found["offset"], found["timestamp"] - base if found["timestamp"] >= 0 else found["timestamp"]]

    return {
        "earliest": ask("earliest"),
        "latest": ask("latest"),
        "at_first_timestamp": ask(base),
        "between_timestamps": ask(base + 1500),
        "after_last_timestamp": ask(base + 3001),
        "max_timestamp": ask("max_timestamp"),
    }


def test_list_offsets(compat):
    compat.check(
        list_offsets,
        {
            "earliest": [0, -1],
            "latest": [4, -1],
            "at_first_timestamp": [0, 0],
            # the first offset whose timestamp is at or after the one asked for, not the closest one
            "between_timestamps": [1, 3000],
            "after_last_timestamp": [-1, -1],
            # KIP-734: the record with the largest timestamp, wherever it is in its batch
            "max_timestamp": [1, 3000],
        },
    )


def fetch_outside_the_log(target: Target, client: Client) -> dict:
    topic = client.new_topic("out-of-range")
    client.produce(topic, [Record(b"%d" % n) for n in range(3)])

    def read(offset: int, timeout_s: float = 5) -> dict:
        seen, error = client.read(topic, 0, offset, 1, timeout_s)
        return {"offsets": [r["offset"] for r in seen], "error": error}

    observed = {
        "beyond_log_end": read(10),
        "at_log_end": read(3, timeout_s=1),  # nothing to read yet, and no error: the consumer waits there
        "last_record": read(2),
        "delete_beyond_high_watermark": client.delete_records(topic, 0, 10),
        "delete_before_2": client.delete_records(topic, 0, 2),
    }
    observed |= {
        "earliest_after_delete": client.list_offset(topic, 0, "earliest")["offset"],
        "before_log_start": read(0),
        "at_log_start": read(2),
    }
    return observed


def test_fetch_outside_the_log(compat):
    compat.check(
        fetch_outside_the_log,
        {
            "beyond_log_end": {"offsets": [], "error": "OFFSET_OUT_OF_RANGE"},
            "at_log_end": {"offsets": [], "error": None},
            "last_record": {"offsets": [2], "error": None},
            "delete_beyond_high_watermark": {"error": "OFFSET_OUT_OF_RANGE"},
            "delete_before_2": {"low_watermark": 2},
            "earliest_after_delete": 2,
            "before_log_start": {"offsets": [], "error": "OFFSET_OUT_OF_RANGE"},
            "at_log_start": {"offsets": [2], "error": None},
        },
    )


LONG_WAIT_MS = 3000
MIN_BYTES_WAIT_MS = 1000


def long_poll(target: Target, client: Client) -> dict:
    """A fetch waiting for data answers as soon as a record arrives, and a fetch whose fetch.min.bytes is
    not reached answers when its max wait expires, with what there is."""
    topic = client.new_topic("long-poll")
    with closing(client.reader(topic, 0, 0, max_wait_ms=LONG_WAIT_MS, min_bytes=1)) as reader:
        reader.read(1, 0.5)  # connected, and a fetch is parked at the log end
        acked: list[float] = []
        producer = threading.Thread(target=lambda: (client.produce(topic, [Record(b"wake")]), acked.append(time.monotonic())))
        produced_from = time.monotonic()
        producer.start()
        seen, error = reader.read(1, LONG_WAIT_MS / 1000 + 5)
        arrived = time.monotonic()
        producer.join()
    # Promptness is measured from the producer's acknowledgement; the record can reach the reader before the
    # producer's client has seen that acknowledgement (acks=1), by as long as the client stalls (kafka-python's
    # loop was seen blocked 224 ms on a loaded machine), but never before its produce began.
    prompt_ms = (arrived - acked[0]) * 1000 if acked else float("inf")
    produce_ms = (acked[0] - produced_from) * 1000 if acked else 0.0

    with closing(client.reader(topic, 0, 0, max_wait_ms=MIN_BYTES_WAIT_MS, min_bytes=1024 * 1024)) as waiting:
        started = time.monotonic()
        held, held_error = waiting.read(1, MIN_BYTES_WAIT_MS / 1000 + 5)
        held_ms = (time.monotonic() - started) * 1000
    return {
        "woken_by_record": {"offsets": [r["offset"] for r in seen], "error": error, "after_ack_ms": within(prompt_ms, -produce_ms, LONG_WAIT_MS / 3)},
        "min_bytes_not_reached": {"offsets": [r["offset"] for r in held], "error": held_error, "after_ms": within(held_ms, MIN_BYTES_WAIT_MS * 0.9, MIN_BYTES_WAIT_MS + 2000)},
    }


def test_long_poll(compat):
    compat.check(
        long_poll,
        {
            "woken_by_record": {"offsets": [0], "error": None, "after_ack_ms": "within"},
            "min_bytes_not_reached": {"offsets": [0], "error": None, "after_ms": "within"},
        },
    )


def auto_offset_reset(target: Target, client: Client) -> dict:
    """Where a group member with no committed offset starts: earliest (the log start, which DeleteRecords
    moved), latest (only what is produced after it joined), or none (the client raises its error)."""
    topic = client.new_topic("offset-reset")
    client.produce(topic, [Record(b"%d" % n) for n in range(4)])
    deleted = client.delete_records(topic, 0, 1)

    def member(reset: str) -> GroupMember:
        return client.group_member(unique(f"group-reset-{reset}"), [topic], MemberConfig(auto_offset_reset=reset))

    with closing(member("earliest")) as earliest:
        from_earliest = earliest.wait_for_records(3, RECORDS_TIMEOUT_S)
    with closing(member("latest")) as latest:
        latest.wait_for(bool, RECORDS_TIMEOUT_S)
        time.sleep(1)  # the member looks up the log end once assigned; what is produced after that is its to read
        client.produce(topic, [Record(b"4")])
        from_latest = latest.wait_for_records(1, RECORDS_TIMEOUT_S)
    with closing(member("none")) as none:
        none.wait_for(bool, RECORDS_TIMEOUT_S)
        deadline = time.monotonic() + RECORDS_TIMEOUT_S
        while not none.errors and time.monotonic() < deadline:
            time.sleep(0.05)
        from_none = {"records": list(none.received), "first_error": none.errors[0] if none.errors else None}
    return {
        "delete_records": deleted,
        "earliest": [[offset, value] for _, _, offset, value in from_earliest],
        "latest": [[offset, value] for _, _, offset, value in from_latest],
        "none": {**from_none, "records": [[offset, value] for _, _, offset, value in from_none["records"]]},
    }


# What each client raises to its user for auto.offset.reset=none without a committed offset.
NO_OFFSET_ERRORS = {
    "confluent-kafka": "LOCAL:_AUTO_OFFSET_RESET",  # librdkafka's "error" reset, an error event from poll
    "kafka-python": "NoOffsetForPartitionError",
    "aiokafka": "NoOffsetForPartitionError",
}


def test_auto_offset_reset(compat):
    compat.check(
        auto_offset_reset,
        {
            "delete_records": {"low_watermark": 1},
            "earliest": [[1, "1"], [2, "2"], [3, "3"]],
            "latest": [[4, "4"]],
            "none": {"records": [], "first_error": NO_OFFSET_ERRORS[compat.client_name]},
        },
    )
