"""Request frames captured from confluent-kafka, kafka-python and aiokafka decode completely and re-encode
to the same bytes.

The frames in ``golden/`` were recorded by ``capture_golden.py`` (a proxy between each client and a real
broker); file names say ``<client>_<Api>_v<version>_<seq>.bin``. Byte-identical re-encoding shows that
every field, tagged field and null marker the clients write is understood and kept, in their versions
rather than the ones our own encoder would pick.
"""

from __future__ import annotations

import re
import struct
from collections import defaultdict
from pathlib import Path

import pytest

from odradek.protocol.api import APIS, ApiKey, decode_request, encode_request
from odradek.protocol.legacy_records import up_convert
from odradek.protocol.record_batch import iter_batch_positions, peek_magic, read_batch_header, validate_batches
from odradek.protocol.records import iter_records

GOLDEN = Path(__file__).parent / "golden"
FRAMES = sorted(GOLDEN.glob("*.bin"))
NAME = re.compile(r"(?P<client>[a-z-]+)_(?P<api>[A-Za-z]+)_v(?P<version>\d+)_(?P<seq>\d+)\.bin")
CLIENTS = ("confluent", "kafka-python", "aiokafka")
TRAILING = {"confluent_Metadata_v12_0003.bin": bytes.fromhex("010000")}
"""Frames that carry bytes after their last field, which Kafka ignores (and so do we): librdkafka 2.16's
AdminClient.list_topics() sends Metadata v12 with three. Anywhere else, a remainder is a decoding bug."""
CODECS = {0, 1, 2, 3, 4}


def _name(path: Path) -> re.Match:
    match = NAME.fullmatch(path.name)
    assert match, f"unexpected golden file name {path.name}"
    return match


@pytest.mark.parametrize("path", FRAMES, ids=[p.stem for p in FRAMES])
def test_frame_decodes_completely_and_reencodes_identically(path: Path) -> None:
    frame = path.read_bytes()
    name = _name(path)

    trailing = TRAILING.get(path.name, b"")
    fields = frame[: len(frame) - len(trailing)]

    request = decode_request(frame)
    header = request.header
    rebuilt = encode_request(header.api_key, header.api_version, header.correlation_id, request.body, client_id=header.client_id)

    assert (APIS[header.api_key].name, header.api_version) == (name["api"], int(name["version"]))
    assert frame.endswith(trailing)
    assert rebuilt == struct.pack(">i", len(fields)) + fields, "every byte the client wrote is decoded and written back alike"


PRODUCE_FRAMES = [p for p in FRAMES if _name(p)["api"] == "Produce"]


@pytest.mark.parametrize("path", PRODUCE_FRAMES, ids=[p.stem for p in PRODUCE_FRAMES])
def test_produced_records_decode(path: Path) -> None:
    """The record data inside each captured Produce decodes down to the last record, whatever the codec."""
    request = decode_request(path.read_bytes())
    for topic in request.body.topic_data:
        for partition in topic.partition_data:
            records = partition.records
            if peek_magic(records) < 2:
                records = up_convert(records)  # legacy message sets (produce v0-v2) as the broker stores them
            validate_batches(records)
            for pos, _, _ in iter_batch_positions(records):
                header = read_batch_header(records, pos)
                decoded = list(iter_records(records, pos))
                assert len(decoded) == header.records_count
                assert [r.offset for r in decoded] == list(range(header.base_offset, header.last_offset + 1))


def test_capture_covers_every_client_api_and_codec() -> None:
    """The golden set holds what each client sends in ordinary use, produce frames in every codec."""
    apis: dict[str, set[str]] = defaultdict(set)
    codecs: dict[str, set[int]] = defaultdict(set)
    for path in FRAMES:
        name = _name(path)
        apis[name["client"]].add(name["api"])
        if name["api"] == "Produce":
            records = decode_request(path.read_bytes()).body.topic_data[0].partition_data[0].records
            if peek_magic(records) == 2:
                codecs[name["client"]].add(read_batch_header(records).compression)
    wanted = {ApiKey(k).name for k in (ApiKey.ApiVersions, ApiKey.Metadata, ApiKey.Produce, ApiKey.Fetch, ApiKey.ListOffsets, ApiKey.CreateTopics)}
    wanted |= {ApiKey(k).name for k in (ApiKey.FindCoordinator, ApiKey.JoinGroup, ApiKey.SyncGroup, ApiKey.OffsetCommit, ApiKey.OffsetFetch, ApiKey.LeaveGroup)}
    for client in CLIENTS:
        assert wanted <= apis[client], f"{client} lacks {sorted(wanted - apis[client])}"
        assert codecs[client] == CODECS, f"{client} produce frames cover codecs {sorted(codecs[client])}"
