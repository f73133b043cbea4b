import struct

import pytest

from odradek.broker.network.framing import FIRST_GROWTH, FrameReader, FrameTooLarge
from odradek.broker.network.memory_pool import MemoryPool


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def receive(reader: FrameReader, data: bytes, chunk: int) -> list[bytes]:
    """Drive the reader as the socket loop does: recv_into its buffer, at most ``chunk`` bytes at a time."""
    frames = []
    view = memoryview(data)
    while view:
        target = reader.buffer()
        n = min(len(target), len(view), chunk)
        target[:n] = view[:n]
        view = view[n:]
        frames.extend(bytes(f) for f in reader.received(n))
    return frames


@pytest.mark.parametrize("chunk", [1, 3, 4, 5, 1000, 1 << 20])
def test_pipelined_frames_come_out_whole_and_in_order(chunk: int) -> None:
    payloads = [bytes([i]) * (i * 7) for i in range(40)] + [b"x" * 300_000, b"tail"]
    data = b"".join(frame(p) for p in payloads)
    assert receive(FrameReader(1 << 30, bytearray(1024)), data, chunk) == payloads


def test_a_large_frame_grows_with_the_bytes_received_not_with_its_size_prefix() -> None:
    reader = FrameReader(1 << 30, bytearray(64))
    big = bytes(range(256)) * 4096
    data = frame(big)
    reader.buffer()[:64] = data[:64]
    assert reader.received(64) == []
    target = reader.buffer()
    assert len(target) == FIRST_GROWTH - 60  # memory for what may arrive next, not the announced 1 MiB
    pos = 64
    while True:
        target = reader.buffer()
        assert len(target) <= max(FIRST_GROWTH, pos)  # at most doubled: growth follows the bytes received
        n = len(target)
        target[:] = data[pos : pos + n]
        pos += n
        frames = reader.received(n)
        if frames:
            break
    assert pos == len(data)
    (out,) = frames
    assert isinstance(out, bytearray) and out == big and len(out) == len(big)


def test_frames_are_charged_to_the_pool_from_their_size_prefix_until_released() -> None:
    pool = MemoryPool(1000)
    reader = FrameReader(1000, bytearray(64), pool)
    assert reader.feed(struct.pack(">i", 10)[:3]) == [] and pool.available == 1000 and not reader.in_frame
    assert reader.feed(b"\x0a" + b"x" * 5) == [] and pool.available == 990 and reader.in_frame
    (small,) = reader.feed(b"y" * 5 + struct.pack(">i", 900) + b"z" * 10)
    assert small == b"xxxxxyyyyy" and pool.available == 90 and reader.in_frame  # the second is charged once
    pool.release(len(small))
    reader.close()  # the connection ends mid-request
    assert pool.available == 1000 and not reader.in_frame


@pytest.mark.parametrize("size", [-1, -(2**31), 1001])
def test_sizes_outside_the_limit_are_refused(size: int) -> None:
    reader = FrameReader(1000)
    with pytest.raises(FrameTooLarge):
        reader.feed(struct.pack(">i", size) + b"\0" * 8)


def test_frames_are_writable_copies_independent_of_later_input() -> None:
    reader = FrameReader(1 << 20, bytearray(32))
    (a,) = reader.feed(frame(b"aaaa"))
    (b,) = reader.feed(frame(b"bbbb"))
    a[0:1] = b"z"
    assert bytes(a) == b"zaaa" and bytes(b) == b"bbbb"
