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
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from odradek.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, parse_header

_SCAN_CHUNK = 8192
"""Bytes read per ``pread`` when walking batch headers: small batches are walked from memory, large ones cost
one page-sized read per header."""


class FileRecords:
    __slots__ = ("path", "_fd", "size", "__weakref__")

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        self._fd = fd
        self.size = size

    @classmethod
    def open(cls, path: Path) -> FileRecords:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
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
        """(position, header) of each complete batch from ``position``; stops at a torn or partial tail.

        Reads headers only (61 bytes per batch, taken from page-sized reads): no record is decoded. A batch
        whose declared size is smaller than a header or runs past ``end`` ends the walk, as Kafka's
        FileLogInputStream does.
        """
        if end is None:
            end = self.size
        buf = b""
        buf_start = position
        while position + LOG_OVERHEAD <= end:
            offset_in_buf = position - buf_start
            if offset_in_buf < 0 or offset_in_buf + HEADER_SIZE > len(buf):
                buf = self.read(position, min(max(_SCAN_CHUNK, HEADER_SIZE), end - position))
                buf_start, offset_in_buf = position, 0
                if len(buf) < LOG_OVERHEAD:
                    return
            if offset_in_buf + HEADER_SIZE > len(buf):
                return  # fewer bytes than a header remain before ``end``
            header = parse_header(buf, offset_in_buf)
            size = header.batch_length + LOG_OVERHEAD
            if size < HEADER_SIZE or position + size > end:
                return
            yield position, header
            position += size

    def search_for_offset(self, target: int, position: int) -> tuple[int, BatchHeader] | None:
        """The first batch from ``position`` whose last offset is >= ``target`` (Kafka's searchForOffsetWithSize)."""
        for batch_position, header in self.batch_headers(position):
            if header.base_offset + header.last_offset_delta >= target:
                return batch_position, header
        return None


@dataclass(frozen=True, slots=True)
class FileSlice:
    """``length`` bytes of a segment file at ``position``, for ``os.sendfile(sock, file.fileno(), position, length)``.

    Holds its ``FileRecords`` so the bytes stay readable even if the segment is deleted meanwhile.
    """

    file: FileRecords
    position: int
    length: int

    def read(self) -> bytes:
        """The bytes themselves, for paths that cannot sendfile (tests, TLS, down-conversion)."""
        return self.file.read(self.position, self.length)
