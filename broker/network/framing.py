"""Kafka's framing (a 4-byte big-endian size, then the request), sans-IO.

Memory follows the bytes actually received, never a size prefix: a client that announces a 100 MB request
and sends nothing costs nothing, and thousands of idle connections cost no buffers. So the socket reads
into a receive buffer shared by all the connections of one event loop (a read and the cutting of its frames
happen without a switch in between); each complete frame is copied out as its own writable ``bytearray``
(the produce path patches batch headers in place and hands the same memory to the log), and only the bytes
of an unfinished frame stay with the connection. A frame too large for the shared buffer is received into
its own ``bytearray``, filled directly by the socket and replaced by one twice its size when full, so it
ends exactly the size announced, holds at most twice the bytes received, and is copied about once in all.

Each frame is charged to the request memory pool when its size prefix is read and released by the caller
once handled (``queued.max.request.bytes``). A size above ``socket.request.max.bytes`` (or negative) is a
protocol violation that closes the connection, as Kafka's ``NetworkReceive`` does.
"""

from __future__ import annotations

import struct

from odradek.broker.network.memory_pool import UNBOUNDED, MemoryPool, Unbounded

_SIZE = struct.Struct(">i")
RECEIVE_BUFFER_SIZE = 256 * 1024
FIRST_GROWTH = 64 * 1024
"""The first buffer of a large frame: past this, a frame's buffer doubles as its bytes arrive."""


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"request of {size} bytes exceeds socket.request.max.bytes={limit}" if size >= 0 else f"invalid frame size {size}")
        self.size = size


class FrameReader:
    def __init__(self, max_size: int, receive_buffer: bytearray | None = None, pool: MemoryPool | Unbounded = UNBOUNDED) -> None:
        self.max_size = max_size
        self.pool = pool
        self._shared = receive_buffer if receive_buffer is not None else bytearray(RECEIVE_BUFFER_SIZE)
        self._whole = memoryview(self._shared)
        """The shared buffer, where the next bytes go when nothing of a frame is pending (made once, not per read)."""
        self._pending = b""  # the start of an unfinished frame that fits the shared buffer
        self._pending_charged = False  # its size prefix was read and charged to the pool
        self._frame: bytearray | None = None  # an unfinished large frame, filled up to _filled
        self._size = 0
        self._filled = 0

    @property
    def in_frame(self) -> bool:
        """A request's size was read and charged and its body is still arriving (reading on needs no pool)."""
        return self._frame is not None or self._pending_charged

    @property
    def between_frames(self) -> bool:
        """Nothing of a frame waits here: the next bytes begin one."""
        return self._frame is None and not self._pending

    def buffer(self) -> memoryview:
        """Where the next received bytes go (pass to ``socket.recv_into``, then call ``received`` at once)."""
        frame = self._frame
        if frame is not None:
            if self._filled == len(frame):
                # A new buffer rather than a resize: the last one may still be exported to the caller.
                self._frame = grown = bytearray(min(2 * len(frame), self._size))
                grown[: self._filled] = frame
                frame = grown
            return memoryview(frame)[self._filled :]
        pending = len(self._pending)
        if not pending:
            return self._whole
        self._shared[:pending] = self._pending
        return self._whole[pending:]

    def received(self, n: int) -> list[bytearray]:
        """``n`` bytes were written into the last buffer; return the frames now complete, in order."""
        frame = self._frame
        if frame is not None:
            self._filled += n
            if self._filled < self._size:
                return []
            self._frame = None
            return [frame]
        return self._cut(len(self._pending) + n)

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

    def close(self) -> None:
        """The connection ends: release what its unfinished request holds of the pool."""
        if self._frame is not None:
            self.pool.release(self._size)
        elif self._pending_charged:
            self.pool.release(_SIZE.unpack_from(self._pending)[0])
        self._frame, self._pending, self._pending_charged = None, b"", False

    def _cut(self, end: int) -> list[bytearray]:
        shared = self._shared
        start = 0
        charged = self._pending_charged
        frames = []
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(shared, start)
            if not charged:
                if size < 0 or size > self.max_size:
                    raise FrameTooLarge(size, self.max_size)
                self.pool.allocate(size)
            if end - start - 4 >= size:
                frames.append(shared[start + 4 : start + 4 + size])
                start += 4 + size
                charged = False
                continue
            if size + 4 > len(shared):
                have = end - start - 4
                self._frame = frame = bytearray(min(size, max(have, FIRST_GROWTH)))
                frame[:have] = shared[start + 4 : end]
                self._size, self._filled = size, have
                self._pending, self._pending_charged = b"", False
                return frames
            charged = True
            break
        self._pending = bytes(shared[start:end]) if start < end else b""
        self._pending_charged = charged
        return frames
