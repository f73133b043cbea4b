"""Kafka's framing (a 4-byte big-endian size, then the request), sans-IO.

The connection reads whatever the socket has into one growing buffer and cuts frames from it; a frame
larger than ``socket.request.max.bytes`` (or negative) is a protocol violation and closes the connection,
as Kafka's ``NetworkReceive`` does. Each frame comes out as its own ``bytearray`` so that the produce path
can patch batch headers in place and hand the same memory to the log.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

_SIZE = struct.Struct(">i")


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"request of {size} bytes exceeds socket.request.max.bytes={limit}" if size >= 0 else f"invalid frame size {size}")
        self.size = size


@dataclass
class FrameReader:
    max_size: int
    _buf: bytearray = field(default_factory=bytearray)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytearray]:
        """Add received bytes; return the complete frames now available, in order."""
        buf = self._buf
        buf += data
        frames = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > self.max_size:
                raise FrameTooLarge(size, self.max_size)
            if end - pos - 4 < size:
                break
            frames.append(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    def wanted(self) -> int:
        """Bytes still missing from the frame being received (0 if unknown): lets the reader size its recv."""
        buf = self._buf
        if len(buf) < 4:
            return 0
        return max(0, _SIZE.unpack_from(buf, 0)[0] + 4 - len(buf))

    @property
    def buffered(self) -> int:
        return len(self._buf)
