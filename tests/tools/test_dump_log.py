"""``odradek dump-log`` against segments and indexes written byte by byte from Kafka's documented formats.

The builders below encode batches, records, legacy messages and index entries straight from
implementation.html with ``struct`` and the codec libraries, never through odradek's own encoders, and the
expected output is written out in Kafka 3.9's DumpLogSegments format. Two goldens come from Kafka itself:
a KRaft control batch reproduced byte for byte from an Apache Kafka pull request (its size and CRC match
the ones Kafka printed), and the ``--offsets-decoder`` JSON of Kafka's DumpLogSegmentsTest.
"""

from __future__ import annotations

import base64
import gzip
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import crc32c
import lz4.frame
import pytest
import snappy
import zstandard

from odradek.cli import main as odradek_main
from tests.validated import validated

SEGMENT = "00000000000000000000"

# --- builders, from implementation.html ---------------------------------------------------------------------


def varint(n: int) -> bytes:
    """Zigzag varint (records use them for every length and delta)."""
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append(u & 0x7F | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def uvarint(n: int) -> bytes:
    """Unsigned varint (compact lengths of flexible message versions)."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def sized(data: bytes | None) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


def record(offset_delta: int, key: bytes | None, value: bytes | None, *, timestamp_delta: int = 0, headers=()) -> bytes:
    """length varint, attributes int8, timestampDelta varlong, offsetDelta varint, key, value, headers."""
    body = (
        b"\x00"
        + varint(timestamp_delta)
        + varint(offset_delta)
        + sized(key)
        + sized(value)
        + varint(len(headers))
        + b"".join(sized(k) + sized(v) for k, v in headers)
    )
    return varint(len(body)) + body


def batch(
    base_offset: int,
    records: list[bytes],
    *,
    base_timestamp: int,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    records_count: int | None = None,
    compress=None,
) -> bytes:
    """baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8 (2), crc uint32 (CRC-32C of
    the rest), attributes int16, lastOffsetDelta int32, baseTimestamp, maxTimestamp, producerId int64,
    producerEpoch int16, baseSequence int32, records count int32, records (compressed as a whole)."""
    payload = b"".join(records)
    if compress is not None:
        payload = compress(payload)
    covered = struct.pack(
        ">hiqqqhii",
        attributes,
        len(records) - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        base_timestamp if max_timestamp is None else max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records) if records_count is None else records_count,
    ) + payload
    body = struct.pack(">ibI", partition_leader_epoch, 2, crc32c.crc32c(covered)) + covered
    return struct.pack(">qi", base_offset, len(body)) + body


def legacy(offset: int, magic: int, key: bytes | None, value: bytes | None, *, attributes: int = 0, timestamp: int = 0) -> bytes:
    """offset int64, messageSize int32, crc uint32 (CRC-32 of the rest), magic, attributes, [timestamp], key, value."""
    fields = bytes([magic, attributes]) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for data in (key, value):
        fields += struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data
    message = struct.pack(">I", zlib.crc32(fields)) + fields
    return struct.pack(">qi", offset, len(message)) + message


def crc_of(entry: bytes) -> int:
    """The stored CRC: at byte 17 of a batch, byte 12 of a legacy message."""
    return struct.unpack_from(">I", entry, 17 if entry[16] == 2 else 12)[0]


def control_key(control_type: int) -> bytes:
    return struct.pack(">hh", 0, control_type)


def xerial_snappy(data: bytes) -> bytes:
    """The Java client's SnappyOutputStream framing: magic, version 1, compatible 1, then sized blocks."""
    block = snappy.compress(data)
    return b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(block)) + block


CODECS = {
    "gzip": (1, gzip.compress),
    "snappy": (2, xerial_snappy),
    "lz4": (3, lambda data: lz4.frame.compress(data, block_linked=False)),
    "zstd": (4, lambda data: zstandard.ZstdCompressor().compress(data)),
}


def write(path: Path, *parts: bytes) -> Path:
    path.write_bytes(b"".join(parts))
    return path


def dump(capsys, *argv: str) -> tuple[str, str, int]:
    code = odradek_main(["dump-log", *argv])
    out, err = capsys.readouterr()
    return out, err, code


def lines(*items: str) -> str:
    return "".join(item + "\n" for item in items)


# --- magic 2 batches ----------------------------------------------------------------------------------------


def test_builders_follow_the_documented_layout():
    literal = bytes.fromhex(
        "0000000000000000"  # baseOffset 0
        "00000040"  # batchLength 64
        "00000000"  # partitionLeaderEpoch 0
        "02"  # magic 2
        "db5e9cdd"  # crc
        "0000"  # attributes: no compression, CreateTime
        "00000000"  # lastOffsetDelta 0
        "0000018bcfe56800"  # baseTimestamp 1700000000000
        "0000018bcfe56800"  # maxTimestamp
        "ffffffffffffffff"  # producerId -1
        "ffff"  # producerEpoch -1
        "ffffffff"  # baseSequence -1
        "00000001"  # records count 1
        "1c"  # record length 14
        "00"  # attributes
        "00"  # timestampDelta 0
        "00"  # offsetDelta 0
        "06" "6b6579"  # key "key"
        "0a" "76616c7565"  # value "value"
        "00"  # no headers
    )
    assert crc32c.crc32c(literal[21:]) == 0xDB5E9CDD
    assert batch(0, [record(0, b"key", b"value")], base_timestamp=1_700_000_000_000, partition_leader_epoch=0) == literal


def test_a_hand_written_batch(tmp_path, capsys):
    literal = batch(0, [record(0, b"key", b"value")], base_timestamp=1_700_000_000_000, partition_leader_epoch=0)
    log = write(tmp_path / f"{SEGMENT}.log", literal)

    out, err, code = dump(capsys, "--files", str(log), "--print-data-log")

    assert (code, err) == (0, "")
    assert out == lines(
        f"Dumping {log}",
        "Log starting offset: 0",
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        "position: 0 CreateTime: 1700000000000 size: 76 magic: 2 compresscodec: none crc: 3680410845 isvalid: true",
        "| offset: 0 CreateTime: 1700000000000 keySize: 3 valueSize: 5 sequence: -1 headerKeys: [] key: key payload: value",
    )


def test_kraft_control_batch_as_kafka_printed_it(tmp_path, capsys):
    # The batch behind the "Before" output of apache/kafka#19729 (KAFKA-19069, written by Kafka 4.0 and
    # printed by a pre-fix kafka-dump-log): LeaderChange, KRaftVersion and KRaftVoters control records.
    # Rebuilt from the record specs, it has exactly the size and CRC Kafka printed.
    timestamp = 1747299887693
    leader_change = struct.pack(">hi", 0, 1) + uvarint(2) + struct.pack(">i", 1) + b"\0" + uvarint(2) + struct.pack(">i", 1) + b"\0" + b"\0"
    kraft_version = struct.pack(">hh", 0, 1) + b"\0"
    voters = (
        struct.pack(">h", 0)
        + uvarint(2)  # one voter
        + struct.pack(">i", 1)
        + base64.urlsafe_b64decode("tpx8pd1IQDqJwMfGzXj6GA==")
        + uvarint(2)  # one endpoint
        + uvarint(11) + b"CONTROLLER"
        + uvarint(10) + b"localhost"
        + struct.pack(">H", 9093)
        + b"\0"
        + struct.pack(">hh", 0, 1) + b"\0"  # KRaftVersionFeature 0..1
        + b"\0"
        + b"\0"
    )
    control = batch(
        0,
        [record(0, control_key(2), leader_change), record(1, control_key(5), kraft_version), record(2, control_key(6), voters)],
        base_timestamp=timestamp,
        attributes=0x20,
        partition_leader_epoch=1,
    )
    log = write(tmp_path / f"{SEGMENT}.log", control)

    out, err, code = dump(capsys, "--files", str(log), "--deep-iteration")

    assert (code, err) == (0, "")
    assert out == lines(
        f"Dumping {log}",
        "Log starting offset: 0",
        "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: 1 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty "
        "position: 0 CreateTime: 1747299887693 size: 174 magic: 2 compresscodec: none crc: 3714449884 isvalid: true",
        "| offset: 0 CreateTime: 1747299887693 keySize: 4 valueSize: 19 sequence: -1 headerKeys: [] "
        "controlType: LEADER_CHANGE(2)",
        "| offset: 1 CreateTime: 1747299887693 keySize: 4 valueSize: 5 sequence: -1 headerKeys: [] "
        'KRaftVersion {"version":0,"kRaftVersion":1}',
        "| offset: 2 CreateTime: 1747299887693 keySize: 4 valueSize: 55 sequence: -1 headerKeys: [] "
        'KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":"tpx8pd1IQDqJwMfGzXj6GA",'
        '"endpoints":[{"name":"CONTROLLER","host":"localhost","port":9093}],'
        '"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}',
    )


def mixed_log() -> list[bytes]:
    """Plain, idempotent-transactional gzip, a COMMIT marker, LogAppendTime, and a delete horizon."""
    return [
        batch(
            0,
            [
                record(0, b"k0", b"v0", headers=[(b"h1", b"x"), (b"h2", None)]),
                record(1, None, b"v1", timestamp_delta=5),
            ],
            base_timestamp=1000,
            max_timestamp=1005,
            partition_leader_epoch=0,
        ),
        batch(
            2,
            [record(0, b"a", None), record(1, b"b", b"c", timestamp_delta=1)],
            base_timestamp=2000,
            max_timestamp=2001,
            attributes=0x10 | 1,
            partition_leader_epoch=1,
            producer_id=42,
            producer_epoch=3,
            base_sequence=10,
            compress=gzip.compress,
        ),
        batch(
            4,
            [record(0, control_key(1), struct.pack(">hi", 0, 7))],
            base_timestamp=3000,
            attributes=0x30,
            partition_leader_epoch=1,
            producer_id=42,
            producer_epoch=3,
        ),
        batch(5, [record(0, b"t", b"u", timestamp_delta=3)], base_timestamp=100, max_timestamp=9999, attributes=0x08),
        batch(6, [record(0, b"d", None)], base_timestamp=123456, attributes=0x40),
    ]


def batch_lines(batches: list[bytes]) -> list[str]:
    b0, b1, b2, b3, b4 = batches
    p1 = len(b0)
    p2 = p1 + len(b1)
    p3 = p2 + len(b2)
    p4 = p3 + len(b3)
    return [
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        f"position: 0 CreateTime: 1005 size: {len(b0)} magic: 2 compresscodec: none crc: {crc_of(b0)} isvalid: true",
        "baseOffset: 2 lastOffset: 3 count: 2 baseSequence: 10 lastSequence: 11 producerId: 42 producerEpoch: 3 "
        "partitionLeaderEpoch: 1 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty "
        f"position: {p1} CreateTime: 2001 size: {len(b1)} magic: 2 compresscodec: gzip crc: {crc_of(b1)} isvalid: true",
        "baseOffset: 4 lastOffset: 4 count: 1 baseSequence: -1 lastSequence: -1 producerId: 42 producerEpoch: 3 "
        "partitionLeaderEpoch: 1 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty "
        f"position: {p2} CreateTime: 3000 size: {len(b2)} magic: 2 compresscodec: none crc: {crc_of(b2)} isvalid: true",
        "baseOffset: 5 lastOffset: 5 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: -1 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        f"position: {p3} LogAppendTime: 9999 size: {len(b3)} magic: 2 compresscodec: none crc: {crc_of(b3)} isvalid: true",
        "baseOffset: 6 lastOffset: 6 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: -1 isTransactional: false isControl: false deleteHorizonMs: OptionalLong[123456] "
        f"position: {p4} CreateTime: 123456 size: {len(b4)} magic: 2 compresscodec: none crc: {crc_of(b4)} isvalid: true",
    ]


def test_batches_only_by_default(tmp_path, capsys):
    batches = mixed_log()
    log = write(tmp_path / f"{SEGMENT}.log", *batches, b"\x00" * 7)

    out, err, code = dump(capsys, "--files", str(log))

    assert (code, err) == (0, "")
    assert out == lines(f"Dumping {log}", "Log starting offset: 0", *batch_lines(batches), f"Found 7 invalid bytes at the end of {SEGMENT}.log")


def test_records_with_print_data_log(tmp_path, capsys):
    batches = mixed_log()
    log = write(tmp_path / f"{SEGMENT}.log", *batches)

    out, err, code = dump(capsys, "--files", str(log), "--print-data-log")

    assert (code, err) == (0, "")
    b0, b1, b2, b3, b4 = batch_lines(batches)
    assert out == lines(
        f"Dumping {log}",
        "Log starting offset: 0",
        b0,
        "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [h1,h2] key: k0 payload: v0",
        "| offset: 1 CreateTime: 1005 keySize: -1 valueSize: 2 sequence: -1 headerKeys: [] payload: v1",
        b1,
        "| offset: 2 CreateTime: 2000 keySize: 1 valueSize: -1 sequence: 10 headerKeys: [] key: a",
        "| offset: 3 CreateTime: 2001 keySize: 1 valueSize: 1 sequence: 11 headerKeys: [] key: b payload: c",
        b2,
        "| offset: 4 CreateTime: 3000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 7",
        b3,
        "| offset: 5 LogAppendTime: 9999 keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] key: t payload: u",
        b4,
        "| offset: 6 CreateTime: 123456 keySize: 1 valueSize: -1 sequence: -1 headerKeys: [] key: d",
    )


def test_skip_record_metadata_keeps_only_keys_and_payloads(tmp_path, capsys):
    log = write(tmp_path / f"{SEGMENT}.log", mixed_log()[0])

    out, _, code = dump(capsys, "--files", str(log), "--print-data-log", "--skip-record-metadata")

    assert code == 0
    assert out.splitlines()[3:] == ["| key: k0 payload: v0", " payload: v1"]


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec(tmp_path, capsys, codec):
    codec_id, compress = CODECS[codec]
    data = batch(
        10,
        [record(0, b"key-0", b"value-0" * 20), record(1, None, b"value-1" * 20, timestamp_delta=7)],
        base_timestamp=5000,
        max_timestamp=5007,
        attributes=codec_id,
        compress=compress,
    )
    log = write(tmp_path / "00000000000000000010.log", data)

    out, err, code = dump(capsys, "--files", str(log), "--print-data-log")

    assert (code, err) == (0, "")
    assert out == lines(
        f"Dumping {log}",
        "Log starting offset: 10",
        "baseOffset: 10 lastOffset: 11 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: -1 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        f"position: 0 CreateTime: 5007 size: {len(data)} magic: 2 compresscodec: {codec} crc: {crc_of(data)} isvalid: true",
        f"| offset: 10 CreateTime: 5000 keySize: 5 valueSize: 140 sequence: -1 headerKeys: [] key: key-0 payload: {'value-0' * 20}",
        f"| offset: 11 CreateTime: 5007 keySize: -1 valueSize: 140 sequence: -1 headerKeys: [] payload: {'value-1' * 20}",
    )


def test_a_damaged_batch_is_reported_invalid_and_still_shown(tmp_path, capsys):
    data = bytearray(batch(0, [record(0, b"key", b"value")], base_timestamp=1))
    data[-2] ^= ord("e") ^ ord("E")  # "value" -> "valuE", under the CRC
    log = write(tmp_path / f"{SEGMENT}.log", bytes(data))

    out, _, code = dump(capsys, "--files", str(log), "--print-data-log")

    assert code == 0
    assert out.splitlines()[2].endswith(f"crc: {crc_of(bytes(data))} isvalid: false")
    assert out.splitlines()[3].endswith("key: key payload: valuE")


def test_a_batch_counting_no_records_shows_none(tmp_path, capsys):
    data = batch(0, [record(0, b"key", b"value")], base_timestamp=1, records_count=0)
    log = write(tmp_path / f"{SEGMENT}.log", data)

    out, err, code = dump(capsys, "--files", str(log), "--print-data-log")

    assert (code, err) == (0, "")
    assert len(out.splitlines()) == 3
    assert " count: 0 " in out.splitlines()[2]


def test_sequences_wrap_as_kafka_increments_them(tmp_path, capsys):
    data = batch(0, [record(0, b"a", b"1"), record(1, b"b", b"2")], base_timestamp=1, producer_id=1, producer_epoch=0, base_sequence=2**31 - 1)
    log = write(tmp_path / f"{SEGMENT}.log", data)

    out, _, code = dump(capsys, "--files", str(log), "--deep-iteration")

    assert code == 0
    assert "baseSequence: 2147483647 lastSequence: 0 " in out.splitlines()[2]
    assert [line.split(" sequence: ")[1].split()[0] for line in out.splitlines()[3:]] == ["2147483647", "0"]


def test_max_bytes_and_non_consecutive_offsets(tmp_path, capsys):
    first = batch(0, [record(0, b"a", b"1"), record(1, b"b", b"2")], base_timestamp=1)
    gap = batch(5, [record(0, b"c", b"3")], base_timestamp=2)
    after = batch(6, [record(0, b"d", b"4")], base_timestamp=3)
    log = write(tmp_path / f"{SEGMENT}.log", first, gap, after, batch(9, [record(0, b"e", b"5")], base_timestamp=4))

    out, err, code = dump(capsys, "--files", str(log), "--deep-iteration", "--max-bytes", str(len(first) + len(gap) + len(after) - 1))

    assert code == 0
    assert [line.split()[1] for line in out.splitlines() if line.startswith("baseOffset")] == ["0", "5"]
    assert "invalid bytes" not in out  # only reported when the whole file is read
    assert err == lines(f"Non-consecutive offsets in {log}", "  1 is followed by 5")

    out, err, code = dump(capsys, "--files", str(log), "--deep-iteration")

    assert err == lines(f"Non-consecutive offsets in {log}", "  6 is followed by 9", "  1 is followed by 5")


# --- legacy message sets ------------------------------------------------------------------------------------


def test_legacy_messages(tmp_path, capsys):
    v0 = legacy(0, 0, b"k0", b"v0")
    v1 = legacy(1, 1, b"k1", None, timestamp=1111)
    inner = [legacy(0, 1, b"a", b"A", timestamp=2000), legacy(1, 1, None, b"B", timestamp=2001), legacy(2, 1, b"c", b"C", timestamp=2002)]
    wrapper = legacy(4, 1, None, gzip.compress(b"".join(inner)), attributes=1, timestamp=2002)
    appended_inner = [legacy(0, 1, b"x", b"X", timestamp=10), legacy(1, 1, b"y", b"Y", timestamp=11)]
    appended = legacy(6, 1, None, gzip.compress(b"".join(appended_inner)), attributes=1 | 0x08, timestamp=5555)
    v0_inner = [legacy(7, 0, b"m", b"M"), legacy(8, 0, b"n", b"N")]
    v0_wrapper = legacy(8, 0, None, gzip.compress(b"".join(v0_inner)), attributes=1)
    log = write(tmp_path / f"{SEGMENT}.log", v0, v1, wrapper, appended, v0_wrapper)
    p = [0]
    for entry in (v0, v1, wrapper, appended):
        p.append(p[-1] + len(entry))

    out, err, code = dump(capsys, "--files", str(log), "--print-data-log")

    assert (code, err) == (0, "")
    assert out == lines(
        f"Dumping {log}",
        "Log starting offset: 0",
        f"offset: 0 position: 0 NoTimestampType: -1 size: {len(v0)} magic: 0 compresscodec: none crc: {crc_of(v0)} isvalid: true",
        f"| offset: 0 NoTimestampType: -1 keySize: 2 valueSize: 2 isValid: true crc: {crc_of(v0)}}} key: k0 payload: v0",
        f"offset: 1 position: {p[1]} CreateTime: 1111 size: {len(v1)} magic: 1 compresscodec: none crc: {crc_of(v1)} isvalid: true",
        f"| offset: 1 CreateTime: 1111 keySize: 2 valueSize: -1 isValid: true crc: {crc_of(v1)}}} key: k1",
        f"offset: 4 position: {p[2]} CreateTime: 2002 size: {len(wrapper)} magic: 1 compresscodec: gzip crc: {crc_of(wrapper)} isvalid: true",
        f"| offset: 2 CreateTime: 2000 keySize: 1 valueSize: 1 isValid: true crc: {crc_of(inner[0])}}} key: a payload: A",
        f"| offset: 3 CreateTime: 2001 keySize: -1 valueSize: 1 isValid: true crc: {crc_of(inner[1])}}} payload: B",
        f"| offset: 4 CreateTime: 2002 keySize: 1 valueSize: 1 isValid: true crc: {crc_of(inner[2])}}} key: c payload: C",
        f"offset: 6 position: {p[3]} LogAppendTime: 5555 size: {len(appended)} magic: 1 compresscodec: gzip crc: {crc_of(appended)} isvalid: true",
        f"| offset: 5 LogAppendTime: 5555 keySize: 1 valueSize: 1 isValid: true crc: {crc_of(appended_inner[0])}}} key: x payload: X",
        f"| offset: 6 LogAppendTime: 5555 keySize: 1 valueSize: 1 isValid: true crc: {crc_of(appended_inner[1])}}} key: y payload: Y",
        f"offset: 8 position: {p[4]} NoTimestampType: -1 size: {len(v0_wrapper)} magic: 0 compresscodec: gzip crc: {crc_of(v0_wrapper)} isvalid: true",
        f"| offset: 7 NoTimestampType: -1 keySize: 1 valueSize: 1 isValid: true crc: {crc_of(v0_inner[0])}}} key: m payload: M",
        f"| offset: 8 NoTimestampType: -1 keySize: 1 valueSize: 1 isValid: true crc: {crc_of(v0_inner[1])}}} key: n payload: N",
    )


def test_a_damaged_legacy_message(tmp_path, capsys):
    data = bytearray(legacy(0, 1, b"k", b"v", timestamp=3))
    data[-1] ^= 1
    log = write(tmp_path / f"{SEGMENT}.log", bytes(data))

    out, _, code = dump(capsys, "--files", str(log), "--deep-iteration")

    assert code == 0
    assert out.splitlines()[2].endswith(f"crc: {crc_of(bytes(data))} isvalid: false")
    assert out.splitlines()[3] == f"| offset: 0 CreateTime: 3 keySize: 1 valueSize: 1 isValid: false crc: {crc_of(bytes(data))}}}"


# --- indexes ------------------------------------------------------------------------------------------------


def indexed_segment(tmp_path: Path) -> tuple[list[bytes], list[int]]:
    """Batches with last offsets 1, 2, 5, 6 (max timestamps 101, 102, 105, 106) in a segment at base 0."""
    batches = [
        batch(0, [record(0, b"a", b"0"), record(1, b"b", b"1", timestamp_delta=1)], base_timestamp=100, max_timestamp=101),
        batch(2, [record(0, b"c", b"2")], base_timestamp=102),
        batch(
            3,
            [record(0, b"d", b"3"), record(1, b"e", b"4", timestamp_delta=1), record(2, b"f", b"5", timestamp_delta=2)],
            base_timestamp=103,
            max_timestamp=105,
        ),
        batch(6, [record(0, b"g", b"6")], base_timestamp=106),
    ]
    write(tmp_path / f"{SEGMENT}.log", *batches)
    positions = [0]
    for data in batches[:-1]:
        positions.append(positions[-1] + len(data))
    return batches, positions


def offset_index(*entries: tuple[int, int], preallocated: int = 0) -> bytes:
    """relativeOffset int32, position int32; zeroed entries at the end of a preallocated index."""
    return b"".join(struct.pack(">ii", *entry) for entry in entries) + bytes(8 * preallocated)


def time_index(*entries: tuple[int, int], preallocated: int = 0) -> bytes:
    """timestamp int64, relativeOffset int32."""
    return b"".join(struct.pack(">qi", *entry) for entry in entries) + bytes(12 * preallocated)


def test_offset_index_of_an_active_segment(tmp_path, capsys):
    _, positions = indexed_segment(tmp_path)
    index = write(tmp_path / f"{SEGMENT}.index", offset_index((1, 0), (2, positions[1]), (5, positions[2]), preallocated=5))

    out, err, code = dump(capsys, "--files", str(index))

    assert (code, err) == (0, "")
    assert out == lines(f"Dumping {index}", "offset: 1 position: 0", f"offset: 2 position: {positions[1]}", f"offset: 5 position: {positions[2]}")


def test_offset_index_mismatches(tmp_path, capsys):
    _, positions = indexed_segment(tmp_path)
    index = write(tmp_path / f"{SEGMENT}.index", offset_index((1, 0), (3, positions[2]), (4, positions[2]), (6, positions[3])))

    out, err, code = dump(capsys, "--files", str(index), "--verify-index-only")

    assert code == 0
    assert out == lines(f"Dumping {index}")
    assert err == lines(f"Mismatches in :{index}", "  Index offset: 4, log offset: 5", "  Index offset: 3, log offset: 5")


def test_offset_index_empty_and_sanity_checks(tmp_path, capsys):
    indexed_segment(tmp_path)
    index = write(tmp_path / f"{SEGMENT}.index", b"")
    assert dump(capsys, "--files", str(index)) == (lines(f"Dumping {index}", f"{index} is empty."), "", 0)

    write(index, offset_index((1, 0), (2, 94), preallocated=3))
    assert dump(capsys, "--files", str(index), "--index-sanity-check") == (
        lines(f"Dumping {index}", f"{index} passed sanity check."),
        "",
        0,
    )

    write(index, offset_index((1, 0), (-3, 94)))
    out, err, code = dump(capsys, "--files", str(index), "--index-sanity-check")
    assert (out, code) == (lines(f"Dumping {index}"), 1)
    assert err == lines(
        f"Error: CorruptIndexException: Corrupt index found, index file {index} has non-zero size but the last "
        "offset is -3 which is less than the base offset 0"
    )

    write(index, offset_index((1, 0)) + b"\0\0\0")
    _, err, code = dump(capsys, "--files", str(index), "--index-sanity-check")
    assert code == 1
    assert err == lines(f"Error: CorruptIndexException: Index file {index} is corrupt, found 11 bytes which is neither positive nor a multiple of 8")


def test_time_index_of_an_active_segment(tmp_path, capsys):
    _, positions = indexed_segment(tmp_path)
    write(tmp_path / f"{SEGMENT}.index", offset_index((1, 0), (5, positions[2]), preallocated=4))
    index = write(tmp_path / f"{SEGMENT}.timeindex", time_index((101, 1), (102, 2), (105, 5), (106, 6), preallocated=3))

    out, err, code = dump(capsys, "--files", str(index))

    assert (code, err) == (0, "")
    assert out == lines(
        f"Dumping {index}",
        "timestamp: 101 offset: 1",
        "timestamp: 102 offset: 2",
        "timestamp: 105 offset: 5",
        "timestamp: 106 offset: 6",
    )

    # The zeroed tail that lets the entries be read is what fails the broker's startup check.
    out, err, code = dump(capsys, "--files", str(index), "--index-sanity-check")
    assert (out, code) == (lines(f"Dumping {index}"), 1)
    assert err == lines(
        f"Error: CorruptIndexException: Corrupt time index found, time index file ({index}) has non-zero size but "
        "the last timestamp is 0 which is less than the first timestamp 101"
    )


def test_time_index_errors(tmp_path, capsys):
    _, positions = indexed_segment(tmp_path)
    write(tmp_path / f"{SEGMENT}.index", offset_index((1, 0), (5, positions[2])))
    index = write(
        tmp_path / f"{SEGMENT}.timeindex",
        time_index((101, 1), (999, 2), (150, 5), (106, 4), (200, 40)),
    )

    out, err, code = dump(capsys, "--files", str(index), "--verify-index-only")

    assert (out, code) == (lines(f"Dumping {index}"), 0)
    assert err == lines(
        f"Found timestamp mismatch in :{index}",
        "  Index timestamp: 999, log timestamp: 102",
        "  Index timestamp: 150, log timestamp: 105",
        f"Found out of order timestamp in :{index}",
        "  Index timestamp: 150, Previously indexed timestamp: 999",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 4, found log offset: 5",
        "Indexed offset: 40, found log offset: -1",
    )

    write(index, time_index((101, 1), (102, 2)))
    assert dump(capsys, "--files", str(index), "--index-sanity-check") == (
        lines(f"Dumping {index}", f"{index} passed sanity check."),
        "",
        0,
    )


def test_time_index_lookups_search_a_preallocated_index_as_kafka_does(tmp_path, capsys):
    # Kafka finds an offset's position by searching the last 1024 entries of the .index first, over the
    # zeroed tail of a preallocated index too. Here the entry for offset 1400 points one batch too far:
    # Kafka's search lands on it and reports the offset missing, where a plain binary search over all
    # 2000 entries would run into the zeros, start from position 0 and find offset 1400 fine.
    batches = [batch(n, [record(0, b"k", b"v")], base_timestamp=1000 + n) for n in range(1500)]
    positions = [0]
    for data in batches:
        positions.append(positions[-1] + len(data))
    write(tmp_path / f"{SEGMENT}.log", *batches)
    entries = [(n, positions[n + 1] if n == 1400 else positions[n]) for n in range(1500)]
    write(tmp_path / f"{SEGMENT}.index", offset_index(*entries, preallocated=500))
    index = write(tmp_path / f"{SEGMENT}.timeindex", time_index((2400, 1400)))

    out, err, code = dump(capsys, "--files", str(index), "--verify-index-only")

    assert (out, code) == (lines(f"Dumping {index}"), 0)
    assert err == lines("The following indexed offsets are not found in the log.", "Indexed offset: 1400, found log offset: 1401")


# --- __consumer_offsets and __transaction_state -------------------------------------------------------------


def string16(text: str | None) -> bytes:
    return struct.pack(">h", -1) if text is None else struct.pack(">h", len(text)) + text.encode()


def compact(text: str | bytes | None) -> bytes:
    if text is None:
        return b"\0"
    data = text.encode() if isinstance(text, str) else text
    return uvarint(len(data) + 1) + data


def consumer_subscription_v3() -> bytes:
    # ConsumerProtocol.serializeSubscription(new Subscription(["foo"], null, [foo-0], 0, Optional.of("rack")))
    return (
        struct.pack(">h", 3)
        + struct.pack(">i", 1) + string16("foo")  # topics
        + struct.pack(">i", -1)  # userData: null
        + struct.pack(">i", 1) + string16("foo") + struct.pack(">ii", 1, 0)  # ownedPartitions
        + struct.pack(">i", 0)  # generationId
        + string16("rack")
    )


def consumer_assignment_v3() -> bytes:
    return struct.pack(">h", 3) + struct.pack(">i", 1) + string16("foo") + struct.pack(">ii", 1, 0) + struct.pack(">i", -1)


def group_metadata_value_v4(subscription: bytes, assignment: bytes) -> bytes:
    return (
        struct.pack(">h", 4)
        + compact("consumer")
        + struct.pack(">i", 10)
        + compact("range")
        + compact("member")
        + struct.pack(">q", -1)
        + uvarint(2)  # one member
        + compact("member") + compact("instance") + compact("client") + compact("host")
        + struct.pack(">ii", 1000, 100)
        + compact(subscription)
        + compact(assignment)
        + b"\0"  # member tagged fields
        + b"\0"
    )


def test_offsets_decoder(tmp_path, capsys):
    offset_commit_v1_key = struct.pack(">h", 1) + string16("group") + string16("foo") + struct.pack(">i", 0)
    offset_commit_v0_key = struct.pack(">h", 0) + string16("g") + string16("bar") + struct.pack(">i", 3)
    group_key = struct.pack(">h", 2) + string16("group")
    records = [
        (offset_commit_v1_key, struct.pack(">hqi", 3, 42, 5) + string16("meta") + struct.pack(">q", 1000)),
        (offset_commit_v0_key, struct.pack(">hq", 1, 7) + string16("") + struct.pack(">qq", 1, 2)),
        (group_key, group_metadata_value_v4(consumer_subscription_v3(), consumer_assignment_v3())),
        (group_key, group_metadata_value_v4(b"Subscription", b"Assignment")),
        (offset_commit_v1_key, None),
        (struct.pack(">h", 32767) + string16("group"), struct.pack(">h", 0)),
        (offset_commit_v1_key, struct.pack(">hq", 3, 42)),
    ]
    data = batch(0, [record(i, key, value) for i, (key, value) in enumerate(records)], base_timestamp=1)
    log = write(tmp_path / f"{SEGMENT}.log", data)

    out, err, code = dump(capsys, "--files", str(log), "--offsets-decoder", "--skip-record-metadata")

    assert (code, err) == (0, "")
    shown = out.splitlines()[3:]
    offset_commit_key = '| key: {"type":"1","data":{"group":"group","topic":"foo","partition":0}}'
    # Kafka's DumpLogSegmentsTest.testOffsetsMessageParser expectations for the two group metadata records.
    group_metadata_key = '| key: {"type":"2","data":{"group":"group"}}'
    group_head = (
        '{"version":"4","data":{"protocolType":"consumer","generation":10,"protocol":"range","leader":"member",'
        '"currentStateTimestamp":-1,"members":[{"memberId":"member","groupInstanceId":"instance","clientId":"client",'
        '"clientHost":"host","rebalanceTimeout":1000,"sessionTimeout":100,'
    )
    assert shown[:6] == [
        f'{offset_commit_key} payload: {{"version":"3","data":{{"offset":42,"leaderEpoch":5,"metadata":"meta","commitTimestamp":1000}}}}',
        '| key: {"type":"0","data":{"group":"g","topic":"bar","partition":3}} '
        'payload: {"version":"1","data":{"offset":7,"metadata":"","commitTimestamp":1,"expireTimestamp":2}}',
        f"{group_metadata_key} payload: {group_head}"
        '"subscription":{"topics":["foo"],"userData":null,"ownedPartitions":[{"topic":"foo","partitions":[0]}],'
        '"generationId":0,"rackId":"rack"},"assignment":{"assignedPartitions":[{"topic":"foo","partitions":[0]}],'
        '"userData":null}}]}}',
        f'{group_metadata_key} payload: {group_head}"subscription":"U3Vic2NyaXB0aW9u","assignment":"QXNzaWdubWVudA=="}}]}}}}',
        f"{offset_commit_key} payload: <DELETE>",
        "| key: Unknown record type 32767 at offset 5, skipping.",
    ]
    assert shown[6].startswith("| key: Error at offset 6, skipping. Could not read record with version 3 from value's buffer due to: ")
    assert len(shown) == 7


def test_offsets_decoder_needs_keys(tmp_path, capsys):
    log = write(tmp_path / f"{SEGMENT}.log", batch(0, [record(0, None, b"x")], base_timestamp=1))

    out, err, code = dump(capsys, "--files", str(log), "--offsets-decoder")

    assert code == 1
    assert out.splitlines()[-1] == "| offset: 0 CreateTime: 1 keySize: -1 valueSize: 1 sequence: -1 headerKeys: []"
    assert not out.endswith("\n")  # Kafka dies in the middle of the line
    assert err == lines("Error: Failed to decode message at offset 0 using offset topic decoder (message had a missing key)")


def transaction_value(status: int, partitions: list[tuple[str, list[int]]] | None, *, version: int = 0) -> bytes:
    head = struct.pack(">hqhib", version, 0, 0, 60000, status)
    if version == 0:
        parts = struct.pack(">i", -1) if partitions is None else struct.pack(">i", len(partitions)) + b"".join(
            string16(topic) + struct.pack(">i", len(ids)) + b"".join(struct.pack(">i", i) for i in ids) for topic, ids in partitions
        )
        return head + parts + struct.pack(">qq", 1680383478418, -1)
    parts = uvarint(len(partitions) + 1) + b"".join(
        compact(topic) + uvarint(len(ids) + 1) + b"".join(struct.pack(">i", i) for i in ids) + b"\0" for topic, ids in partitions
    )
    return head + parts + struct.pack(">qq", 1680383478418, 1680383478000) + b"\0"


def test_transaction_log_decoder(tmp_path, capsys):
    key = struct.pack(">h", 0) + string16("kafka-txn-0")
    records = [
        (key, transaction_value(0, None)),
        (key, transaction_value(1, [("output-topic", [0])])),
        # TransactionMetadata keeps partitions in a Scala HashSet: TopicPartition("t", p) hashes to
        # 31 * (31 + p) + "t".hashCode() = 1077 + 31p, and 1077, 1108, 1139 fall in buckets 5, 4 and 3
        # of its 16 slots -- so Kafka lists them backwards.
        (key, transaction_value(2, [("t", [0, 1, 2])], version=1)),
        # Single-letter topics hash to 961 + 31p + letter: a-0..2 = 1058, 1089, 1120 and q-0..2 = 1074, 1105,
        # 1136. Added three at a time, the set grows to 32 slots at its 12th partition, so a's buckets
        # (0-2) come before q's (16-18)...
        (key, transaction_value(1, [("a", [0, 1, 2]), ("b", [0, 1, 2]), ("q", [0, 1, 2]), ("r", [0, 1, 2])])),
        # ... but ten partitions at once are added without growing: 13 partitions in 16 slots, where
        # a-2 and q-2 share bucket 0 and q-3..q-9 (1167 .. 1353) fill buckets 15 down to 9.
        (key, transaction_value(1, [("a", [0, 1, 2]), ("q", list(range(10)))])),
        # Thirteen at once are sized for first: 32 slots, where t-0..t-12 (1077 + 31p) sit in buckets 21 down to 9.
        (key, transaction_value(1, [("t", list(range(13)))])),
        (key, None),
        (struct.pack(">h", 5) + string16("x"), b""),
    ]
    log = write(tmp_path / f"{SEGMENT}.log", batch(0, [record(i, k, v) for i, (k, v) in enumerate(records)], base_timestamp=1))

    out, err, code = dump(capsys, "--files", str(log), "--transaction-log-decoder")

    assert (code, err) == (0, "")
    payload = "producerId:0,producerEpoch:0,state={},partitions=[{}],txnLastUpdateTimestamp=1680383478418,txnTimeoutMs=60000"
    assert [line.split(" headerKeys: [] ")[1] for line in out.splitlines()[3:]] == [
        "key: transaction_metadata::transactionalId=kafka-txn-0 payload: " + payload.format("Empty", ""),
        "key: transaction_metadata::transactionalId=kafka-txn-0 payload: " + payload.format("Ongoing", "output-topic-0"),
        "key: transaction_metadata::transactionalId=kafka-txn-0 payload: " + payload.format("PrepareCommit", "t-2,t-1,t-0"),
        "key: transaction_metadata::transactionalId=kafka-txn-0 payload: "
        + payload.format("Ongoing", "a-2,a-1,b-2,a-0,b-1,b-0,q-2,q-1,r-2,q-0,r-1,r-0"),
        "key: transaction_metadata::transactionalId=kafka-txn-0 payload: "
        + payload.format("Ongoing", "a-2,q-2,a-1,q-1,a-0,q-0,q-9,q-8,q-7,q-6,q-5,q-4,q-3"),
        "key: transaction_metadata::transactionalId=kafka-txn-0 payload: "
        + payload.format("Ongoing", ",".join(f"t-{p}" for p in range(12, -1, -1))),
        "key: transaction_metadata::transactionalId=kafka-txn-0 payload: <DELETE>",
        "key: unknown::version=5",
    ]


# --- other files, decoders, failures, and the real command --------------------------------------------------


def test_kraft_snapshot(tmp_path, capsys):
    header = struct.pack(">hq", 0, 10000) + b"\0"
    footer = struct.pack(">h", 0) + b"\0"
    snapshot = write(
        tmp_path / "00000000000000000100-0000000002.checkpoint",
        batch(0, [record(0, control_key(3), header)], base_timestamp=7, attributes=0x20),
        batch(1, [record(0, control_key(4), footer)], base_timestamp=7, attributes=0x20),
    )

    out, _, code = dump(capsys, "--files", str(snapshot), "--deep-iteration")

    assert code == 0
    shown = out.splitlines()
    assert shown[1] == "Snapshot end offset: 100, epoch: 2"
    assert shown[3].endswith('headerKeys: [] SnapshotHeader {"version":0,"lastContainedLogTimestamp":10000}')
    assert shown[5].endswith('headerKeys: [] SnapshotFooter {"version":0}')


def test_key_and_value_decoders(tmp_path, capsys):
    log = write(tmp_path / f"{SEGMENT}.log", batch(0, [record(0, struct.pack(">i", -7), struct.pack(">q", 2**40))], base_timestamp=1))

    out, _, code = dump(
        capsys,
        "--files", str(log),
        "--value-decoder-class", "kafka.serializer.LongDecoder",
        "--key-decoder-class", "org.apache.kafka.tools.api.IntegerDecoder",
    )

    assert code == 0
    shown = out.splitlines()
    assert shown[1] == "kafka.serializer.LongDecoder is deprecated. Please use org.apache.kafka.tools.api.LongDecoder instead"
    assert shown[2] == "Log starting offset: 0"
    assert shown[4].endswith("headerKeys: [] key: -7 payload: 1099511627776")


def test_producer_snapshot_transaction_index_and_unknown_files(tmp_path, capsys):
    entries = struct.pack(">i", 2) + struct.pack(">qhiqiqiq", 5, 1, 9, 40, 2, 777, 3, 38) + struct.pack(">qhiqiqiq", 6, 0, -1, -1, 0, 888, -1, -1)
    snapshot = write(tmp_path / "00000000000000000041.snapshot", struct.pack(">hI", 1, crc32c.crc32c(entries)) + entries)
    txn_index = write(tmp_path / f"{SEGMENT}.txnindex", struct.pack(">hqqqq", 0, 5, 10, 20, 21), struct.pack(">hqqqq", 0, 6, 30, 31, 31))
    other = write(tmp_path / "partition.metadata", b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA")

    out, err, code = dump(capsys, "--files", f"{snapshot},{txn_index},{other}")

    assert code == 0
    assert out == lines(
        f"Dumping {snapshot}",
        "producerId: 5 producerEpoch: 1 coordinatorEpoch: 3 currentTxnFirstOffset: OptionalLong[38] lastTimestamp: 777 "
        "firstSequence: 7 lastSequence: 9 lastOffset: 40 offsetDelta: 2 timestamp: 777",
        "producerId: 6 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty lastTimestamp: 888 ",
        f"Dumping {txn_index}",
        "version: 0 producerId: 5 firstOffset: 10 lastOffset: 20 lastStableOffset: 21",
        "version: 0 producerId: 6 firstOffset: 30 lastOffset: 31 lastStableOffset: 31",
        f"Dumping {other}",
    )
    assert err == lines(f"Ignoring unknown file {other}")


def test_a_file_name_without_a_dot_stops_the_dump(tmp_path, capsys):
    """Kafka's tool takes the suffix from the last dot without checking there is one, and dies."""
    txn_index = write(tmp_path / f"{SEGMENT}.txnindex", struct.pack(">hqqqq", 0, 5, 10, 20, 21))
    checkpoint = write(tmp_path / "leader-epoch-checkpoint", b"0\n0\n")

    out, err, code = dump(capsys, "--files", f"{txn_index},{checkpoint},{txn_index}")

    assert code == 1
    assert out == lines(f"Dumping {txn_index}", "version: 0 producerId: 5 firstOffset: 10 lastOffset: 20 lastStableOffset: 21", f"Dumping {checkpoint}")
    assert err == lines("Error: StringIndexOutOfBoundsException: begin -1, end 23, length 23")


def test_an_entry_too_small_to_be_a_message_stops_the_dump(tmp_path, capsys):
    good = batch(0, [record(0, b"a", b"1")], base_timestamp=1)
    log = write(tmp_path / f"{SEGMENT}.log", good, struct.pack(">qi", 1, 13), bytes(30))

    out, err, code = dump(capsys, "--files", str(log))

    assert code == 1
    assert len(out.splitlines()) == 3  # the first batch was printed
    assert err == lines(
        f"Error: CorruptRecordException: Found record size 13 smaller than minimum record overhead (14) in file {log}."
    )


def test_the_odradek_command(tmp_path):
    """The real command line, as an operator runs it: a log and its two indexes in one call."""
    batches, positions = indexed_segment(tmp_path)
    write(tmp_path / f"{SEGMENT}.index", offset_index((1, 0), (4, positions[2]), preallocated=2))
    write(tmp_path / f"{SEGMENT}.timeindex", time_index((101, 1), (106, 6), preallocated=2))
    files = ",".join(f"{SEGMENT}.{suffix}" for suffix in ("log", "index", "timeindex"))

    result = subprocess.run(
        [sys.executable, "-m", "odradek", "dump-log", "--files", files],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )

    assert result.returncode == 0, result.stderr
    size = [len(data) for data in batches]
    assert result.stdout == lines(
        f"Dumping {SEGMENT}.log",
        "Log starting offset: 0",
        *(
            f"baseOffset: {base} lastOffset: {last} count: {last - base + 1} baseSequence: -1 lastSequence: -1 "
            "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: -1 isTransactional: false isControl: false "
            f"deleteHorizonMs: OptionalLong.empty position: {position} CreateTime: {max_ts} size: {length} magic: 2 "
            f"compresscodec: none crc: {crc_of(data)} isvalid: true"
            for (base, last, max_ts), position, length, data in zip(
                [(0, 1, 101), (2, 2, 102), (3, 5, 105), (6, 6, 106)], positions, size, batches
            )
        ),
        f"Dumping {SEGMENT}.index",
        "offset: 1 position: 0",
        f"offset: 4 position: {positions[2]}",
        f"Dumping {SEGMENT}.timeindex",
        "timestamp: 101 offset: 1",
        "timestamp: 106 offset: 6",
    )
    assert result.stderr == lines(f"Mismatches in :{tmp_path}/{SEGMENT}.index", "  Index offset: 4, log offset: 5")


def test_segments_written_by_odradek_storage_are_consistent(tmp_path, capsys):
    """As Kafka's DumpLogSegmentsTest does for Kafka's own log: flushed but not closed, so the active segment's
    indexes keep their preallocated zeroed tail, the dump must find every index entry in the log."""
    from odradek.protocol.records import Record, build_batch
    from odradek.storage.log import Log
    from odradek.storage.log_config import LogConfig

    log = Log.open(tmp_path / "topic-0", LogConfig(index_interval_bytes=128))
    for n in range(12):
        records = [Record(timestamp=10_000 + 3 * n + i, key=b"key %d" % i, value=b"value %d" % i * 5) for i in range(n % 4 + 1)]
        log.append_as_leader(validated(build_batch(records, compression=n % 3)), leader_epoch=0)
    log.flush()
    segment = tmp_path / "topic-0" / SEGMENT
    files = ",".join(f"{segment}.{suffix}" for suffix in ("log", "index", "timeindex"))

    out, err, code = dump(capsys, "--files", files, "--deep-iteration", "--verify-index-only")

    assert (code, err) == (0, "")
    assert sum(line.startswith("baseOffset: ") for line in out.splitlines()) == 12
    assert "invalid bytes" not in out
    out, err, code = dump(capsys, "--files", files)
    assert (code, err) == (0, "")
    assert sum(line.startswith("offset: ") for line in out.splitlines()) > 3
    assert sum(line.startswith("timestamp: ") for line in out.splitlines()) > 3

    log.close()  # trims the indexes to their entries, which then pass the broker's startup check
    out, err, code = dump(capsys, "--files", files, "--index-sanity-check")
    assert (code, err) == (0, "")
    assert out.splitlines()[-4:] == [
        f"Dumping {segment}.index",
        f"{segment}.index passed sanity check.",
        f"Dumping {segment}.timeindex",
        f"{segment}.timeindex passed sanity check.",
    ]
