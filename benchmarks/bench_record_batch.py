"""Record batch checks on the produce path: header parse + CRC-32C verify, the record walk, and struct vs
construct headers.

The broker reads the 61-byte header of each produced batch and CRCs the rest: a 1 MiB batch (CRC-bound)
and a 16 KiB batch (the Java producer's default batch.size, where the per-batch Python overhead shows).
Then it walks every record (``record_walk.walk_batch``, Kafka's LogValidator loop, in C), decompressing a
compressed batch first: the walk rows give that cost per batch of 100-byte records, the worst case (most
records per byte), uncompressed and in the codecs whose decompression it adds. The last rows compare one
header parse with ``struct`` against construct's compiled parser for the same layout, which is why the hot
path uses struct.
"""

from __future__ import annotations

import construct
import zstandard

from odradek.protocol.compression import CompressionType, decompress
from odradek.protocol.record_batch import HEADER_SIZE, encode_batch, parse_header, validate_batches, verify_crc
from odradek.protocol.record_walk import TimestampBounds, walk_batch
from odradek.protocol.records import Record, build_batch, iter_records
from run import Result, measure

MIB = 1 << 20

HEADER = construct.Struct(
    "base_offset" / construct.Int64sb,
    "batch_length" / construct.Int32sb,
    "partition_leader_epoch" / construct.Int32sb,
    "magic" / construct.Int8sb,
    "crc" / construct.Int32ub,
    "attributes" / construct.Int16sb,
    "last_offset_delta" / construct.Int32sb,
    "base_timestamp" / construct.Int64sb,
    "max_timestamp" / construct.Int64sb,
    "producer_id" / construct.Int64sb,
    "producer_epoch" / construct.Int16sb,
    "base_sequence" / construct.Int32sb,
    "records_count" / construct.Int32sb,
)


def batch_of(size: int) -> bytes:
    """An uncompressed batch of about ``size`` bytes of 1000-byte values, as a producer would send."""
    count = max(1, size // 1010)
    return build_batch([Record(timestamp=1_700_000_000_000 + i, value=b"v" * 1000) for i in range(count)])


def run() -> list[Result]:
    results = []
    for label, size in (("1 MiB", MIB), ("16 KiB", 16 * 1024)):
        batch = batch_of(size)

        def parse_and_verify() -> None:
            if not verify_crc(batch, 0, parse_header(batch)):
                raise AssertionError("CRC mismatch")

        rate = measure(parse_and_verify)
        results += [
            Result(f"{label} batch: header parse + CRC verify", rate, "batches/s"),
            Result("  same, as throughput", rate * len(batch) / MIB, "MiB/s"),
            Result("  validate_batches (all produce checks)", measure(lambda: validate_batches(batch)), "batches/s"),
        ]

    results += walk_results()

    small = batch_of(16 * 1024)
    count = parse_header(small).records_count
    results.append(Result("16 KiB batch: decode every record (iter_records)", measure(lambda: list(iter_records(small))) * count, "records/s"))

    compiled = HEADER.compile()
    parsed = compiled.parse(small)
    assert (parsed.crc, parsed.records_count) == (parse_header(small).crc, count)
    results += [
        Result("header parse: struct (parse_header)", 1e6 / measure(lambda: parse_header(small)), "µs/call (lower is better)"),
        Result("header parse: construct compiled", 1e6 / measure(lambda: compiled.parse(small)), "µs/call (lower is better)"),
    ]
    return results


def walk_results() -> list[Result]:
    """The record walk per batch of 100-byte records with keys and a header, as the produce path runs it
    (timestamp bounds on, as for a CreateTime topic)."""
    results = []
    bounds = TimestampBounds(1_700_000_000_000, 7 * 86_400_000, 3_600_000)
    for label, size in (("1 MiB", MIB), ("16 KiB", 16 * 1024)):
        count = size // 130
        records = [Record(timestamp=1_700_000_000_000 + i, key=b"key-%06d" % i, value=bytes(range(100)), headers=[("h", b"1")]) for i in range(count)]
        for codec in (CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD):
            batch = build_batch(records, compression=codec)
            variants = [(codec.name.lower(), batch)]
            if codec == CompressionType.ZSTD:  # Java's and librdkafka's frames do not declare their size
                variants.append(("zstd, size not declared", _without_zstd_content_size(batch)))
            for name, data in variants:
                header = parse_header(data)
                rate = measure(lambda: walk_batch(data, 0, header, timestamps=bounds, require_keys=False))
                results.append(Result(f"{label} batch of {count:,} 100 B records, {name}: walk every record", 1e6 / rate, "µs/batch (lower is better)"))
                results.append(Result("  same, per record", 1e9 / rate / count, "ns/record (lower is better)"))
    return results


def _without_zstd_content_size(batch: bytes) -> bytes:
    """The zstd batch re-encoded with a frame that does not declare its decompressed size."""
    header = parse_header(batch)
    frame = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(decompress(CompressionType.ZSTD, batch[HEADER_SIZE:]))
    return encode_batch(
        frame, base_offset=header.base_offset, attributes=header.attributes, last_offset_delta=header.last_offset_delta,
        base_timestamp=header.base_timestamp, max_timestamp=header.max_timestamp, records_count=header.records_count,
    )


if __name__ == "__main__":
    import run as runner

    runner.print_table([("record_batch", r) for r in run()])
