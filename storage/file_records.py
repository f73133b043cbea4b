"""A segment's ``.log`` file: record batches exactly as the broker stored them, and zero-copy slices of it.

The file is held as a raw descriptor (``os.pread``/``os.write``) rather than a buffered Python file: appends
go straight to the page cache, reads never copy through a userspace buffer, and the broker can
``os.sendfile`` a ``FileSlice`` to a socket.

Slice lifetime: a ``FileSlice`` keeps its ``FileRecords`` alive. Deleting a segment (retention,
DeleteRecords, topic deletion) unlinks its files but does not close the descriptor; the descriptor closes
when the last reference goes (the segment's and every slice's), so a fetch response being written while
retention deletes the segment still reads the bytes it was promised -- POSIX keeps an unlinked file's data
until its last descriptor closes. Only ``close()`` (broker shutdown) closes it eagerly.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from odradek.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, BatchHeader, parse_header, verify_crc
from odradek.protocol.values import plain_init

_SCAN_CHUNK = 8192
"""Bytes read per ``pread`` when walking batch headers: small batches are walked from memory, large ones cost
one page-sized read per header."""
_LENGTH = struct.Struct(">i")
_LENGTH_OFFSET = 8
"""Every entry, batch or legacy message, starts with an int64 offset and an int32 length."""
_READ_CHUNK = 1 << 20
"""Bytes read per ``pread`` when walking whole batches: one system call per MiB of log (a larger batch is read
whole)."""


Entry = TypeVar("Entry")


def walk_entries(
    read: Callable[[int, int], bytes],
    position: int,
    end: int,
    *,
    min_size: int,
    whole: bool,
    entry: Callable[[int, int, bytes, int], Entry | None],
) -> Iterator[Entry]:
    """The one walk over a segment file's framing: ``entry(position, size, chunk, at)`` for each entry (a
    magic-2 batch, or a legacy message) in ``[position, end)``, where ``chunk[at:]`` starts the entry; an
    ``entry`` returning None ends the walk (a batch failing its CRC, say).

    ``whole``: ``chunk[at:at + size]`` is the entire entry; otherwise the chunk holds at least its first
    ``min(size, HEADER_SIZE)`` bytes, and large entries are skipped without being read. The walk ends quietly
    at the first entry smaller than ``min_size`` or running past ``end`` -- a torn tail, as in Kafka's
    FileLogInputStream -- and where the file turns out shorter than ``end`` (truncated under the reader).
    Entries come from chunks, not one ``pread`` each, and nothing is decoded here; ``entry`` is a callback
    rather than the consumer of a yielded tuple because a second generator layer costs a quarter of the
    header walk's speed.
    """
    chunk_size = _READ_CHUNK if whole else _SCAN_CHUNK
    length_at = _LENGTH.unpack_from
    buf = b""
    buf_start = position
    while position + LOG_OVERHEAD <= end:
        at = position - buf_start
        if at + HEADER_SIZE > len(buf) and at + (need := min(HEADER_SIZE, end - position)) > len(buf):
            buf, buf_start, at = read(position, min(chunk_size, end - position)), position, 0
            if len(buf) < need:
                return
        size = length_at(buf, at + _LENGTH_OFFSET)[0] + LOG_OVERHEAD
        if size < min_size or position + size > end:
            return
        if whole and at + size > len(buf):
            buf, buf_start, at = read(position, max(min(chunk_size, end - position), size)), position, 0
            if len(buf) < size:
                return
        item = entry(position, size, buf, at)
        if item is None:
            return
        yield item
        position += size


def _header_entry(position: int, size: int, buf: bytes, at: int) -> tuple[int, BatchHeader]:
    return position, parse_header(buf, at)


def _batch_entry(position: int, size: int, buf: bytes, at: int) -> tuple[int, BatchHeader, memoryview]:
    return position, parse_header(buf, at), memoryview(buf)[at : at + size]


def _verified_batch_entry(position: int, size: int, buf: bytes, at: int) -> tuple[int, BatchHeader, memoryview] | None:
    header = parse_header(buf, at)
    if header.magic != MAGIC_V2 or not verify_crc(buf, at, header):
        return None
    return position, header, memoryview(buf)[at : at + size]


class FileRecords:
    __slots__ = ("path", "_fd", "size", "__weakref__")

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        self._fd = fd
        self.size = size

    @classmethod
    def open(cls, path: Path, *, writable: bool = True) -> FileRecords:
        """``writable=False`` for the offline readers (tools, Spark): they may point at a running broker's files
        and must never create or change one."""
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        return cls(path, fd, os.fstat(fd).st_size)

    def fileno(self) -> int:
        if self._fd < 0:
            raise ValueError(f"{self.path} is closed")
        return self._fd

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write at the end of the file; returns the position the data starts at."""
        position = self.size
        size = len(data)
        written = os.pwrite(self._fd, data, position)
        if written < size:
            view = memoryview(data)
            while written < size:
                written += os.pwrite(self._fd, view[written:], position + written)
        self.size += size
        return position

    def read(self, position: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``position`` (fewer at the end of the file)."""
        return os.pread(self._fd, length, position)

    def slice(self, position: int, length: int) -> FileSlice:
        return FileSlice(self, position, length)

    def truncate_to(self, size: int) -> int:
        """Cut the file to ``size`` bytes; returns the bytes removed."""
        removed = self.size - size
        if removed > 0 or os.fstat(self._fd).st_size != size:
            os.ftruncate(self._fd, size)
        self.size = size
        return max(removed, 0)

    def flush(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        """Unlink the file; the descriptor stays readable for outstanding slices (see module docstring)."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            os.close(fd)

    def batch_headers(self, position: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each complete batch from ``position`` to ``end``; stops at a torn or partial tail.

        Reads headers only (taken from page-sized reads): no record is read or decoded. The fetch path's walk.
        """
        return walk_entries(self.read, position, self.size if end is None else end, min_size=HEADER_SIZE, whole=False, entry=_header_entry)

    def batches(self, position: int = 0, end: int | None = None, *, verify: bool = False) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """(position, header, bytes) of each complete batch from ``position`` to ``end``, read a MiB at a time.

        ``verify``: the walk also ends at the first batch that is not magic 2 or fails its CRC (recovery);
        without it the bytes are as stored (the cleaner, which re-reads what recovery or a produce checked).
        """
        entry = _verified_batch_entry if verify else _batch_entry
        return walk_entries(self.read, position, self.size if end is None else end, min_size=HEADER_SIZE, whole=True, entry=entry)


@plain_init
class FileSlice:
    """``length`` bytes of a segment file at ``position``, for ``os.sendfile(sock, file.fileno(), position, length)``.

    Holds its ``FileRecords`` so the bytes stay readable even if the segment is deleted meanwhile.
    """

    __slots__ = ("file", "position", "length")

    def __init__(self, file: FileRecords, position: int, length: int) -> None:
        self.file = file
        self.position = position
        self.length = length

    def read(self) -> bytes:
        """The bytes themselves, for paths that cannot sendfile (tests, TLS, down-conversion)."""
        return self.file.read(self.position, self.length)
