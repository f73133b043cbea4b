"""What a front does with worker 0's answers (broker/network/worker_channel.py), on real segment files: the
slices worker 0 names by path and identity are read from the front's own descriptor, a file that took the
segment's name since is never read in its place, and a deleted segment's descriptor is let go."""

from __future__ import annotations

import os
from pathlib import Path

from odradek.broker.network.forwarded_produce import ProduceFramer
from odradek.broker.network.worker_channel import SegmentFiles, decode_answer, encode_answer
from odradek.storage.file_records import FileRecords


def read(pieces: list) -> bytes:
    return b"".join(os.pread(p[0].fileno(), p[2], p[1]) if type(p) is tuple else bytes(p) for p in pieces)


def test_an_answer_crosses_with_its_file_slices_read_from_the_fronts_own_descriptor(tmp_path: Path) -> None:
    segment = FileRecords.open(tmp_path / "00000000000000000000.log")
    segment.append(b"0123456789" * 100)
    payload = b"".join(bytes(p) for p in encode_answer([b"head", (segment, 10, 500), memoryview(b"tail")]))
    files = SegmentFiles()
    pieces = decode_answer(payload, files, ProduceFramer(None))
    assert pieces is not None and read(pieces) == b"head" + (b"0123456789" * 100)[10:510] + b"tail"
    assert pieces[1][0].fileno() != segment.fileno()  # the front opened the file itself
    segment.close()


def test_a_file_that_took_the_segments_name_is_not_read_in_its_place(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    old = FileRecords.open(path)
    old.append(b"old bytes")
    payload = b"".join(bytes(p) for p in encode_answer([(old, 0, 9)]))
    old.delete()
    new = FileRecords.open(path)  # the same name, another file (a topic deleted and created again)
    new.append(b"new bytes")
    assert decode_answer(payload, SegmentFiles(), ProduceFramer(None)) is None
    old.close()
    new.close()


def test_a_deleted_segment_is_let_go_at_the_sweep_and_read_until_then(tmp_path: Path) -> None:
    segment = FileRecords.open(tmp_path / "00000000000000000000.log")
    segment.append(b"kept until the sweep")
    payload = b"".join(bytes(p) for p in encode_answer([(segment, 0, 20)]))
    files = SegmentFiles()
    pieces = decode_answer(payload, files, ProduceFramer(None))
    assert pieces is not None and len(files.files) == 1
    segment.delete()
    again = decode_answer(payload, files, ProduceFramer(None))  # still open in the cache: the bytes worker 0 promised
    assert again is not None and read(again) == b"kept until the sweep"
    files.sweep()
    assert not files.files
    assert read(pieces) == b"kept until the sweep"  # a queued slice keeps its descriptor open
    segment.close()
