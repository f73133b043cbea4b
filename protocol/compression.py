"""Compression codecs of record batches and legacy message sets, byte-compatible with Kafka's clients.

Kafka does not use the codecs' plain formats everywhere, so each one is framed here the way the Java client
writes it and read the way the Java client reads it:

* gzip: RFC 1952 members (``GZIPOutputStream``); concatenated members are read through.
* snappy: the xerial ``SnappyOutputStream`` framing (a 16-byte header, then ``[int32 length][raw block]``
  repeated, 32 KiB of input per block). Readers also accept plain raw snappy, because xerial's
  ``SnappyInputStream`` does and some non-Java clients send it.
* lz4: the LZ4 frame format with independent 64 KiB blocks (Kafka's ``Lz4BlockOutputStream``). Kafka
  decompresses every block on its own, so frames whose blocks depend on earlier ones are rejected as Java
  rejects them. Magic-0 message sets come from Kafka 0.8/0.9, whose header checksum byte (HC) hashed the
  4-byte frame magic as well; Kafka writes that broken HC for magic 0 and skips the check when reading
  magic 0, and so do we.
* zstd: a single zstd frame (``zstd-jni``'s ``ZstdOutputStream``).

Every decoder stops at ``max_size`` output bytes so a tiny batch cannot expand into gigabytes: gzip through
zlib's output limit, snappy from the length each raw block declares, lz4 per block into a buffer of the
frame's maximum block size, zstd from the frame's declared content size or zstandard's output limit.
Block and content checksums inside lz4 frames are not verified (the batch CRC or legacy message CRC already
covers the compressed bytes); the lz4 header checksum is.

All decode failures raise :class:`~odradek.protocol.record_batch.CorruptRecordError`: data beyond
``max_size`` its DecompressedTooLargeError, anything else its UndecompressableRecordsError.
"""

from __future__ import annotations

import mmap
import struct
import threading
from typing import Any, Callable

from odradek.protocol.record_batch import DEFAULT_MAX_DECOMPRESSED_SIZE as DEFAULT_MAX_DECOMPRESSED_SIZE  # the codecs' bound and ids,
from odradek.protocol.record_batch import CompressionType as CompressionType  # named here by the codecs' users too
from odradek.protocol.record_batch import (
    CorruptRecordError,
    DecompressedTooLargeError,
    UndecompressableRecordsError,
)

Bytes = bytes | bytearray | memoryview


def compression_type(codec_id: int) -> CompressionType:
    """The codec for attribute bits 0-2; ids 5-7 are unassigned and mean a corrupt batch."""
    try:
        return CompressionType(codec_id)
    except ValueError:
        raise CorruptRecordError(f"unknown compression type id {codec_id}") from None


cramjam: Any = None
zstandard: Any = None
zlib: Any = None


def _import_codecs() -> None:
    """zlib (gzip), cramjam (snappy, lz4, zstd into a buffer) and zstandard, imported at the first compression
    or decompression: a broker that starts, or whose clients do not compress, does not wait for them."""
    global cramjam, zstandard, zlib
    import zlib as _zlib

    import cramjam as _cramjam
    import zstandard as _zstandard

    cramjam, zlib, zstandard = _cramjam, _zlib, _zstandard


def compress(codec: int, data: Bytes, *, magic: int = 2) -> bytes:
    """Compress ``data`` as Kafka's Java client would for a batch of ``magic`` (only lz4 depends on it)."""
    if zstandard is None:
        _import_codecs()
    return _COMPRESSORS[CompressionType(codec)](data, magic)


def decompress(codec: int, data: Bytes, *, magic: int = 2, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes | bytearray | memoryview:
    """Decompress ``data`` from a batch (or legacy wrapper message) of ``magic``; at most ``max_size`` bytes."""
    if zstandard is None:
        _import_codecs()
    try:
        return _DECOMPRESSORS[compression_type(codec)](memoryview(data), magic, max_size)
    except (zlib.error, cramjam.DecompressionError, zstandard.ZstdError) as e:
        raise UndecompressableRecordsError(f"cannot decompress {CompressionType(codec).name} data: {e}") from None


class _Scratch(threading.local):
    """Per-thread decoder state the produce path would otherwise build for every batch (a zstd context is
    tens of KiB, set up in about as long as a 16 KiB batch takes to decompress), and output buffers grown
    as needed; per thread because none may be shared, and the log cleaner decompresses on a thread of its
    own."""

    def __init__(self) -> None:
        self._zstd: Any = None
        self._lz4_block = bytearray()
        self._zstd_output = bytearray()

    @property
    def zstd(self) -> Any:
        """This thread's zstd decompression context (made at its first zstd batch)."""
        if self._zstd is None:
            self._zstd = zstandard.ZstdDecompressor()
        return self._zstd

    def lz4_block(self, size: int) -> memoryview:
        """A buffer for one lz4 block of at most ``size`` bytes (64 KiB in Kafka's frames, 4 MiB at most)."""
        if len(self._lz4_block) < size:
            self._lz4_block = bytearray(size)
        return memoryview(self._lz4_block)[:size]

    def zstd_output(self, size: int) -> memoryview:
        """``size`` bytes of this thread's zstd output buffer, grown when needed; beyond the usual a fresh
        anonymous mapping instead (so one bomb does not keep 128 MiB per thread), which the kernel zeroes
        page by page as the decoder writes it: a bytearray is zeroed up front holding the GIL (~30 ms for
        128 MiB), which would stall the event loop while a worker thread decodes a large batch."""
        if size > _ZSTD_SCRATCH_MAX:
            return memoryview(mmap.mmap(-1, size))
        if len(self._zstd_output) < size:
            self._zstd_output = bytearray(size)
        return memoryview(self._zstd_output)[:size]


def _too_large(max_size: int) -> DecompressedTooLargeError:
    return DecompressedTooLargeError(f"decompressed data exceeds {max_size} bytes")


# --- none ---------------------------------------------------------------------------------------------------


def _identity(data: Bytes, magic: int, max_size: int | None = None) -> bytes:
    return bytes(data)


# --- gzip ---------------------------------------------------------------------------------------------------

_GZIP_WBITS = 16 + 15
"""zlib's window bits for a gzip header and trailer around the deflate stream: 16 + ``zlib.MAX_WBITS``."""


def _gzip_compress(data: Bytes, magic: int) -> bytes:
    compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, _GZIP_WBITS)
    compressed: bytes = compressor.compress(data) + compressor.flush()
    return compressed


def _gzip_decompress(data: memoryview, magic: int, max_size: int) -> bytes:
    parts: list[bytes] = []
    produced = 0
    remaining: Bytes = data
    while True:  # GZIPInputStream reads concatenated members as one stream
        member = zlib.decompressobj(_GZIP_WBITS)
        part = member.decompress(remaining, max_size - produced + 1)
        produced += len(part)
        if produced > max_size:
            raise _too_large(max_size)
        if not member.eof:
            raise UndecompressableRecordsError("truncated gzip data")
        parts.append(part)
        remaining = member.unused_data
        if not remaining:
            return b"".join(parts)


# --- snappy -------------------------------------------------------------------------------------------------

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # format version 1, minimum compatible version 1
_XERIAL_BLOCK_SIZE = 32 * 1024  # SnappyOutputStream's default
_INT32 = struct.Struct(">i")


def _snappy_compress(data: Bytes, magic: int) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: memoryview, magic: int, max_size: int) -> bytes:
    if not (len(data) >= len(_XERIAL_HEADER) and data[: len(XERIAL_MAGIC)] == XERIAL_MAGIC):
        return _snappy_raw_block(data, max_size)
    parts: list[bytes] = []
    produced = 0
    pos = len(_XERIAL_HEADER)
    end = len(data)
    while pos < end:
        # xerial's reader also accepts several streams written back to back, each with its own header.
        if data[pos : pos + len(XERIAL_MAGIC)] == XERIAL_MAGIC:
            pos += len(_XERIAL_HEADER)
            continue
        if pos + 4 > end:
            raise UndecompressableRecordsError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise UndecompressableRecordsError(f"xerial snappy block of {length} bytes overruns the data")
        part = _snappy_raw_block(data[pos : pos + length], max_size - produced)
        produced += len(part)
        parts.append(part)
        pos += length
    return b"".join(parts)


def _snappy_raw_block(block: memoryview, max_size: int) -> bytes:
    if cramjam.snappy.decompress_raw_len(block) > max_size:
        raise _too_large(max_size)
    return bytes(cramjam.snappy.decompress_raw(block))


# --- lz4 ----------------------------------------------------------------------------------------------------

LZ4_MAGIC = 0x184D2204
_LZ4_MAGIC_BYTES = struct.pack("<I", LZ4_MAGIC)
_UINT32_LE = struct.Struct("<I")
_LZ4_UNCOMPRESSED_BLOCK = 0x80000000
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}  # BD bits 4-6
# FLG bits: 7-6 version (01), 5 block independence, 4 block checksum, 3 content size, 2 content checksum,
# 1-0 reserved (Kafka follows frame spec 1.5.1, before bit 0 became the dictionary id flag).
_FLG_VERSION_1 = 0x40
_FLG_BLOCK_INDEPENDENCE = 0x20
_FLG_BLOCK_CHECKSUM = 0x10
_FLG_CONTENT_SIZE = 0x08
_FLG_CONTENT_CHECKSUM = 0x04
_FLG_RESERVED = 0x03
_KAFKA_FLG = _FLG_VERSION_1 | _FLG_BLOCK_INDEPENDENCE
_KAFKA_BD = 4 << 4
_KAFKA_BLOCK_SIZE = _LZ4_BLOCK_SIZES[4]


def xxh32(data: Bytes, seed: int = 0) -> int:
    """XXH32, only ever run on lz4 frame descriptors (a few bytes), so plain Python is fast enough."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    data = bytes(data)
    n = len(data)
    pos = 0
    if n >= 16:
        lanes = [(seed + p1 + p2) & mask, (seed + p2) & mask, seed & mask, (seed - p1) & mask]
        while pos + 16 <= n:
            for i in range(4):
                word = _UINT32_LE.unpack_from(data, pos + 4 * i)[0]
                lanes[i] = (rotl((lanes[i] + word * p2) & mask, 13) * p1) & mask
            pos += 16
        h = (rotl(lanes[0], 1) + rotl(lanes[1], 7) + rotl(lanes[2], 12) + rotl(lanes[3], 18)) & mask
    else:
        h = (seed + p5) & mask
    h = (h + n) & mask
    while pos + 4 <= n:
        h = (rotl((h + _UINT32_LE.unpack_from(data, pos)[0] * p3) & mask, 17) * p4) & mask
        pos += 4
    while pos < n:
        h = (rotl((h + data[pos] * p5) & mask, 11) * p1) & mask
        pos += 1
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    h ^= h >> 16
    return h


def _lz4_header_checksum(descriptor: Bytes) -> int:
    return (xxh32(descriptor) >> 8) & 0xFF


def _lz4_compress(data: Bytes, magic: int) -> bytes:
    descriptor = bytes((_KAFKA_FLG, _KAFKA_BD))
    # Magic 0 readers (Kafka 0.8/0.9) expect the checksum over magic + descriptor: Kafka writes it that way.
    checksummed = _LZ4_MAGIC_BYTES + descriptor if magic == 0 else descriptor
    parts = [_LZ4_MAGIC_BYTES, descriptor, bytes((_lz4_header_checksum(checksummed),))]
    view = memoryview(data)
    for start in range(0, len(view), _KAFKA_BLOCK_SIZE):
        chunk = view[start : start + _KAFKA_BLOCK_SIZE]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) < len(chunk):
            parts.append(_UINT32_LE.pack(len(block)))
            parts.append(block)
        else:  # incompressible: store as is, like Lz4BlockOutputStream
            parts.append(_UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_BLOCK))
            parts.append(bytes(chunk))
    parts.append(_UINT32_LE.pack(0))
    return b"".join(parts)


def _lz4_decompress(data: memoryview, magic: int, max_size: int) -> bytearray:
    end = len(data)
    if end < 7 or data[:4] != _LZ4_MAGIC_BYTES:
        raise UndecompressableRecordsError("not an lz4 frame")
    flg, bd = data[4], data[5]
    if flg & 0xC0 != _FLG_VERSION_1 or flg & _FLG_RESERVED or bd & 0x8F:
        raise UndecompressableRecordsError(f"unsupported lz4 frame descriptor {flg:#04x} {bd:#04x}")
    max_block_size = _LZ4_BLOCK_SIZES.get(bd >> 4)
    if max_block_size is None:
        raise UndecompressableRecordsError(f"invalid lz4 block maximum size code {bd >> 4}")
    pos = 6 + (8 if flg & _FLG_CONTENT_SIZE else 0)
    if pos >= end:
        raise UndecompressableRecordsError("truncated lz4 frame descriptor")
    if magic != 0 and data[pos] != _lz4_header_checksum(data[4:pos]):
        raise UndecompressableRecordsError("lz4 frame descriptor checksum mismatch")
    pos += 1
    trailer = 4 if flg & _FLG_BLOCK_CHECKSUM else 0
    scratch = _scratch.lz4_block(max_block_size)
    out = bytearray()  # blocks are copied once, into this (no per-block bytes, no join)
    while True:
        if pos + 4 > end:
            raise UndecompressableRecordsError("truncated lz4 frame")
        (size,) = _UINT32_LE.unpack_from(data, pos)
        pos += 4
        if size == 0:
            if flg & _FLG_CONTENT_CHECKSUM and pos + 4 > end:
                raise UndecompressableRecordsError("truncated lz4 content checksum")
            return out
        stored = size & _LZ4_UNCOMPRESSED_BLOCK
        size &= ~_LZ4_UNCOMPRESSED_BLOCK
        if size > max_block_size or pos + size + trailer > end:
            raise UndecompressableRecordsError(f"lz4 block of {size} bytes overruns the frame")
        block = data[pos : pos + size]
        out += block if stored else scratch[: cramjam.lz4.decompress_block_into(block, scratch)]
        if len(out) > max_size:
            raise _too_large(max_size)
        pos += size + trailer


# --- zstd ---------------------------------------------------------------------------------------------------


def _zstd_compress(data: Bytes, magic: int) -> bytes:
    compressed: bytes = zstandard.ZstdCompressor(level=3).compress(data)  # 3 is Kafka's default zstd level
    return compressed


_ZSTD_FIRST_OUTPUT = 1 << 20
"""The first output size tried for a zstd frame that does not declare its size (grown 4-fold until the
data fits or the bound is reached)."""
_ZSTD_SCRATCH_MAX = 4 * _ZSTD_FIRST_OUTPUT
"""The largest output kept in a thread's scratch buffer; a larger one is a mapping of its own, returned as
decoded (its own, so no copy under the GIL)."""


def _zstd_decompress(data: memoryview, magic: int, max_size: int) -> bytes | memoryview:
    declared = zstandard.frame_content_size(data)  # -1 when the frame does not say (Java's, librdkafka's)
    if declared > max_size:
        raise _too_large(max_size)
    if declared >= 0:
        # One frame per batch, so anything after it is corruption rather than a second frame.
        decompressed: bytes = _scratch.zstd.decompress(data, allow_extra_data=False)
        return decompressed
    # Undeclared: decoded in one pass into an output buffer of a bounded size (zstandard's streaming
    # decoder, its only way without a size, is ~10x slower: ~0.6 ms for a 1 MiB batch instead of ~0.06).
    size = min(max_size, max(_ZSTD_FIRST_OUTPUT, 32 * len(data)))
    while True:
        output = _scratch.zstd_output(size)
        try:
            decoded = output[: cramjam.zstd.decompress_into(data, output)]
            return decoded if size > _ZSTD_SCRATCH_MAX else bytes(decoded)
        except cramjam.DecompressionError as e:
            if str(e) != _ZSTD_OUTPUT_FULL:
                raise UndecompressableRecordsError(f"cannot decompress ZSTD data: {e}") from None
            if size >= max_size:
                raise _too_large(max_size) from None
            size = min(max_size, size * 4)


_ZSTD_OUTPUT_FULL = "failed to write whole buffer"
"""cramjam's message when the output buffer is too small (the one way to tell it from corrupt data)."""


_scratch = _Scratch()

_COMPRESSORS = {
    CompressionType.NONE: _identity,
    CompressionType.GZIP: _gzip_compress,
    CompressionType.SNAPPY: _snappy_compress,
    CompressionType.LZ4: _lz4_compress,
    CompressionType.ZSTD: _zstd_compress,
}

_DECOMPRESSORS: dict[CompressionType, Callable[[memoryview, int, int], bytes | bytearray | memoryview]] = {
    CompressionType.NONE: _identity,
    CompressionType.GZIP: _gzip_decompress,
    CompressionType.SNAPPY: _snappy_decompress,
    CompressionType.LZ4: _lz4_decompress,
    CompressionType.ZSTD: _zstd_decompress,
}
