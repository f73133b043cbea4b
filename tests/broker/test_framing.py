import struct

import pytest

from odradek.broker.framing import FrameReader, FrameTooLarge


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
    assert receive(FrameReader(1 << 30, staging_size=1024), data, chunk) == payloads


def test_a_large_frame_is_received_into_its_own_buffer() -> None:
    reader = FrameReader(1 << 30, staging_size=64)
    big = bytes(range(256)) * 4096
    data = frame(big)
    first = reader.buffer()
    first[:64] = data[:64]
    assert reader.received(64) == []
    target = reader.buffer()
    assert len(target) == len(big) - 60  # the rest of the frame, nothing more: one copy, by the kernel
    target[:] = data[64:]
    (out,) = reader.received(len(target))
    assert isinstance(out, bytearray) and out == big


@pytest.mark.parametrize("size", [-1, -(2**31), 1001])
def test_sizes_outside_the_limit_are_refused(size: int) -> None:
    reader = FrameReader(1000)
    with pytest.raises(FrameTooLarge):
        reader.feed(struct.pack(">i", size) + b"\0" * 8)


def test_frames_are_writable_copies_independent_of_later_input() -> None:
    reader = FrameReader(1 << 20, staging_size=32)
    (a,) = reader.feed(frame(b"aaaa"))
    (b,) = reader.feed(frame(b"bbbb"))
    a[0:1] = b"z"
    assert bytes(a) == b"zaaa" and bytes(b) == b"bbbb"
