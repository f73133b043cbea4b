"""Codecs: our framing against the other implementations installed (the formats clients really send)."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from odradek.protocol.compression import (
    CompressionType,
    compress,
    decompress,
    xxh32,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import CorruptRecordError

FUZZ = settings(
    max_examples=int(os.environ.get("ODRADEK_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

CODECS = list(CompressionType)
COMPRESSED = [c for c in CODECS if c is not CompressionType.NONE]
XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)

# Text-like data that compresses, big enough to span several lz4 (64 KiB) and xerial (32 KiB) blocks.
REPETITIVE = b"".join(b"record %d says hello to the log; " % i for i in range(12000))
RANDOM = os.urandom(200_000)


def lz4_frame(data: bytes, **options) -> bytes:
    """A standard lz4 frame with independent blocks, as librdkafka and kafka-python write them."""
    return lz4.frame.compress(data, block_linked=False, **options)


def broken_header_checksum(frame: bytes) -> bytes:
    """The frame with Kafka 0.8/0.9's header checksum: xxh32 over magic + descriptor, not the descriptor."""
    descriptor_end = 7 + (8 if frame[4] & 0x08 else 0) - 1
    broken = (xxh32(frame[:descriptor_end]) >> 8) & 0xFF
    return frame[:descriptor_end] + bytes((broken,)) + frame[descriptor_end + 1 :]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", [b"", b"x", REPETITIVE, RANDOM], ids=["empty", "one-byte", "repetitive", "random"])
def test_round_trip(codec: CompressionType, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000), magic=st.sampled_from([0, 1, 2]))
def test_round_trip_any_data_any_magic(codec: CompressionType, data: bytes, magic: int) -> None:
    assert decompress(codec, compress(codec, data, magic=magic), magic=magic) == data


def test_compression_actually_shrinks_compressible_data() -> None:
    for codec in COMPRESSED:
        assert len(compress(codec, REPETITIVE)) < len(REPETITIVE) // 3, codec.name


# --- gzip ---------------------------------------------------------------------------------------------------


def test_gzip_interoperates_with_stdlib_gzip() -> None:
    assert decompress(CompressionType.GZIP, gzip.compress(REPETITIVE)) == REPETITIVE
    assert gzip.decompress(compress(CompressionType.GZIP, REPETITIVE)) == REPETITIVE
    assert decompress(CompressionType.GZIP, kafka_codec.gzip_encode(REPETITIVE)) == REPETITIVE


def test_gzip_reads_concatenated_members_like_gzipinputstream() -> None:
    data = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(CompressionType.GZIP, data) == b"first second"


# --- snappy -------------------------------------------------------------------------------------------------


def test_snappy_writes_xerial_framing_with_32k_blocks() -> None:
    data = compress(CompressionType.SNAPPY, REPETITIVE)
    assert data[:16] == XERIAL_HEADER
    pos, blocks = 16, []
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos)
        blocks.append(snappy.decompress(data[pos + 4 : pos + 4 + length]))
        pos += 4 + length
    assert pos == len(data)
    assert [len(b) for b in blocks[:-1]] == [32 * 1024] * (len(blocks) - 1)
    assert b"".join(blocks) == REPETITIVE


def test_snappy_interoperates_with_kafka_python_xerial_codec() -> None:
    assert decompress(CompressionType.SNAPPY, kafka_codec.snappy_encode(REPETITIVE)) == REPETITIVE
    assert kafka_codec.snappy_decode(compress(CompressionType.SNAPPY, REPETITIVE)) == REPETITIVE


def test_snappy_reads_raw_snappy_without_framing() -> None:
    assert decompress(CompressionType.SNAPPY, snappy.compress(REPETITIVE)) == REPETITIVE
    assert decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(b"abc"))) == b"abc"


def test_snappy_reads_hand_built_xerial_frame_and_concatenated_streams() -> None:
    first, second = snappy.compress(b"hello, "), snappy.compress(b"kafka")
    frame = XERIAL_HEADER + struct.pack(">i", len(first)) + first + struct.pack(">i", len(second)) + second
    assert decompress(CompressionType.SNAPPY, frame) == b"hello, kafka"
    assert decompress(CompressionType.SNAPPY, frame + frame) == b"hello, kafkahello, kafka"
    assert decompress(CompressionType.SNAPPY, XERIAL_HEADER) == b""


def test_snappy_ignores_xerial_version_fields_like_kafka_python() -> None:
    block = snappy.compress(b"payload")
    frame = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + struct.pack(">i", len(block)) + block
    assert decompress(CompressionType.SNAPPY, frame) == b"payload"


def test_snappy_block_overrunning_the_frame_is_corrupt() -> None:
    block = snappy.compress(b"payload")
    frame = XERIAL_HEADER + struct.pack(">i", len(block) + 1) + block
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, frame)


# --- lz4 ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, expected",
    [(b"", 0x02CC5D05), (b"a", 0x550D7456), (b"abc", 0x32D153FF), (b"Nobody inspects the spammish repetition", 0xE2293B2F)],
)
def test_xxh32_matches_reference_vectors(data: bytes, expected: int) -> None:
    assert xxh32(data) == expected


def test_lz4_writes_kafka_frame_readable_by_lz4_library() -> None:
    frame = compress(CompressionType.LZ4, REPETITIVE)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[4] == 0x60  # version 1, independent blocks, no checksums, no content size
    assert frame[5] == 0x40  # 64 KiB blocks
    assert frame[-4:] == b"\x00\x00\x00\x00"  # end mark
    assert lz4.frame.decompress(frame) == REPETITIVE
    assert kafka_codec.lz4_decode(frame) == REPETITIVE


def test_lz4_stores_incompressible_blocks_uncompressed() -> None:
    frame = compress(CompressionType.LZ4, RANDOM[:1000])
    (size,) = struct.unpack_from("<I", frame, 7)
    assert size == 1000 | 0x80000000
    assert frame[11:1011] == RANDOM[:1000]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"store_size": False},
        {"block_checksum": True},
        {"content_checksum": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB},
        {"compression_level": 9},
    ],
    ids=["defaults", "no-content-size", "block-checksums", "content-checksum", "4mb-blocks", "hc"],
)
def test_lz4_reads_frames_from_lz4_library(options: dict) -> None:
    assert decompress(CompressionType.LZ4, lz4_frame(REPETITIVE, **options)) == REPETITIVE


def test_lz4_reads_kafka_python_frames() -> None:
    assert decompress(CompressionType.LZ4, kafka_codec.lz4_encode(REPETITIVE)) == REPETITIVE


def test_lz4_rejects_linked_blocks_like_kafka() -> None:
    # Kafka decompresses every block on its own; a block referring back to the previous one cannot be read.
    linked = lz4.frame.compress(REPETITIVE, block_linked=True)
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.LZ4, linked)


def test_lz4_header_checksum_is_verified_for_magic_1_and_2() -> None:
    frame = bytearray(lz4_frame(b"some data"))
    header_checksum_at = 6 + 8  # lz4.frame stores the content size by default
    frame[header_checksum_at] ^= 0xFF
    for magic in (1, 2):
        with pytest.raises(CorruptRecordError, match="checksum"):
            decompress(CompressionType.LZ4, bytes(frame), magic=magic)


def test_lz4_magic_0_frames_carry_kafka_08_broken_header_checksum() -> None:
    legacy = broken_header_checksum(lz4_frame(REPETITIVE, store_size=False))
    assert decompress(CompressionType.LZ4, legacy, magic=0) == REPETITIVE
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.LZ4, legacy, magic=1)

    ours = compress(CompressionType.LZ4, REPETITIVE, magic=0)
    assert ours[6] == (xxh32(ours[:6]) >> 8) & 0xFF
    assert ours[6] != (xxh32(ours[4:6]) >> 8) & 0xFF
    with pytest.raises(RuntimeError):  # a standard reader refuses it: the bug is faithfully reproduced
        lz4.frame.decompress(ours)
    assert decompress(CompressionType.LZ4, ours, magic=0) == REPETITIVE


def test_lz4_header_checksum_agrees_with_lz4_library() -> None:
    for options in ({}, {"store_size": False}, {"block_checksum": True, "content_checksum": True}):
        frame = lz4_frame(b"x", **options)
        end = 6 + (8 if frame[4] & 0x08 else 0)
        assert frame[end] == (xxh32(frame[4:end]) >> 8) & 0xFF


# --- zstd ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("write_content_size", [True, False])
def test_zstd_interoperates_with_zstandard(write_content_size: bool) -> None:
    frame = zstandard.ZstdCompressor(write_content_size=write_content_size).compress(REPETITIVE)
    assert decompress(CompressionType.ZSTD, frame) == REPETITIVE
    assert zstandard.ZstdDecompressor().decompress(compress(CompressionType.ZSTD, REPETITIVE)) == REPETITIVE


def test_zstd_interoperates_with_kafka_python_and_cramjam() -> None:
    assert decompress(CompressionType.ZSTD, kafka_codec.zstd_encode(REPETITIVE)) == REPETITIVE
    assert kafka_codec.zstd_decode(compress(CompressionType.ZSTD, REPETITIVE)) == REPETITIVE
    assert decompress(CompressionType.ZSTD, bytes(cramjam.zstd.compress(REPETITIVE))) == REPETITIVE


def test_zstd_trailing_bytes_after_the_frame_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.ZSTD, compress(CompressionType.ZSTD, b"abc") + b"junk")


# --- bombs, garbage and truncation --------------------------------------------------------------------------

BOMB = bytes(8 * 1024 * 1024)

BOMBS = {
    "gzip": (CompressionType.GZIP, gzip.compress(BOMB)),
    "snappy-xerial": (CompressionType.SNAPPY, kafka_codec.snappy_encode(BOMB)),
    "snappy-raw": (CompressionType.SNAPPY, snappy.compress(BOMB)),
    "lz4": (CompressionType.LZ4, lz4_frame(BOMB)),
    "zstd-with-size": (CompressionType.ZSTD, zstandard.ZstdCompressor().compress(BOMB)),
    "zstd-without-size": (CompressionType.ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress(BOMB)),
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_decompression_stops_at_max_size(name: str) -> None:
    codec, data = BOMBS[name]
    assert len(data) < len(BOMB) // 20
    with pytest.raises(CorruptRecordError, match="exceeds"):
        decompress(codec, data, max_size=1024 * 1024)
    assert decompress(codec, data, max_size=len(BOMB)) == BOMB


def test_zstd_lying_content_size_is_refused_before_allocating() -> None:
    frame = bytearray(zstandard.ZstdCompressor().compress(b"tiny"))
    params = zstandard.get_frame_parameters(bytes(frame))
    assert params.content_size == 4
    with pytest.raises(CorruptRecordError, match="exceeds"):
        decompress(CompressionType.ZSTD, bytes(frame), max_size=3)


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD])
def test_every_truncation_is_detected(codec: CompressionType) -> None:
    data = compress(codec, REPETITIVE[:100_000])
    for cut in list(range(0, 40)) + list(range(40, len(data), 97)):
        with pytest.raises(CorruptRecordError):
            decompress(codec, data[:cut])


def test_snappy_truncation_is_detected_or_yields_whole_blocks() -> None:
    # xerial framing has no end mark: a cut exactly between blocks reads as fewer blocks (as in Java).
    data = compress(CompressionType.SNAPPY, REPETITIVE[:100_000])
    for cut in range(17, len(data), 37):
        try:
            out = decompress(CompressionType.SNAPPY, data[:cut])
        except CorruptRecordError:
            continue
        assert REPETITIVE.startswith(out) and len(out) % (32 * 1024) == 0


def test_unknown_codec_id_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError) as info:
        decompress(5, b"data")
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE


@FUZZ
@given(codec=st.sampled_from(COMPRESSED), data=st.binary(max_size=300), magic=st.sampled_from([0, 2]))
def test_garbage_raises_only_corrupt_record_error(codec: CompressionType, data: bytes, magic: int) -> None:
    try:
        decompress(codec, data, magic=magic, max_size=1 << 20)
    except CorruptRecordError:
        pass


@FUZZ
@given(
    codec=st.sampled_from(COMPRESSED),
    payload=st.binary(min_size=1, max_size=2000),
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=1, max_value=255)), min_size=1, max_size=4),
)
def test_damaged_frames_raise_only_corrupt_record_error(codec: CompressionType, payload: bytes, flips: list) -> None:
    data = bytearray(compress(codec, payload))
    for where, mask in flips:
        data[where % len(data)] ^= mask
    try:
        decompress(codec, bytes(data), max_size=1 << 20)
    except CorruptRecordError:
        pass
