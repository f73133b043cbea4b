"""Kafka's framing (a 4-byte big-endian size, then the request), sans-IO.

The connection receives into buffers this reader hands out: small frames arrive in a reusable staging
buffer (one read may carry many pipelined requests) and are cut out of it; a frame larger than the
staging buffer gets its own exact-size ``bytearray`` that the socket fills directly, so a 1 MiB produce
request is copied once, by the kernel. Each frame comes out as its own ``bytearray``, writable, so the
produce path patches batch headers in place and hands the same memory to the log.

A size above ``socket.request.max.bytes`` (or negative) is a protocol violation that closes the
connection, as Kafka's ``NetworkReceive`` does.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")
STAGING_SIZE = 256 * 1024


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"request of {size} bytes exceeds socket.request.max.bytes={limit}" if size >= 0 else f"invalid frame size {size}")
        self.size = size


class FrameReader:
    def __init__(self, max_size: int, staging_size: int = STAGING_SIZE) -> None:
        self.max_size = max_size
        self._stage = bytearray(staging_size)
        self._start = 0
        self._end = 0
        self._frame: bytearray | None = None
        self._filled = 0

    def buffer(self) -> memoryview:
        """Where the next received bytes go (pass to ``socket.recv_into``)."""
        if self._frame is not None:
            return memoryview(self._frame)[self._filled :]
        if self._end == len(self._stage):
            self._compact()
        return memoryview(self._stage)[self._end :]

    def received(self, n: int) -> list[bytearray]:
        """``n`` bytes were written into the last buffer; return the frames now complete, in order."""
        if self._frame is not None:
            self._filled += n
            if self._filled < len(self._frame):
                return []
            frame, self._frame = self._frame, None
            return [frame]
        self._end += n
        return self._cut()

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytearray]:
        """Add bytes received elsewhere (tests, tools): the same as writing them into ``buffer()``."""
        frames: list[bytearray] = []
        view = memoryview(data)
        while view:
            target = self.buffer()
            n = min(len(target), len(view))
            target[:n] = view[:n]
            view = view[n:]
            frames.extend(self.received(n))
        return frames

    def _cut(self) -> list[bytearray]:
        stage = self._stage
        start, end = self._start, self._end
        frames = []
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(stage, start)
            if size < 0 or size > self.max_size:
                raise FrameTooLarge(size, self.max_size)
            if end - start - 4 >= size:
                frames.append(stage[start + 4 : start + 4 + size])
                start += 4 + size
                continue
            if size + 4 > len(stage):
                have = end - start - 4
                frame = bytearray(size)
                frame[:have] = stage[start + 4 : end]
                self._frame, self._filled = frame, have
                start = end
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames

    def _compact(self) -> None:
        """Move a partial frame to the front of the staging buffer to make room for the rest of it."""
        pending = self._end - self._start
        self._stage[:pending] = self._stage[self._start : self._end]
        self._start, self._end = 0, pending
