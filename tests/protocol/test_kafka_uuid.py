"""Kafka's ``Uuid`` (protocol/kafka_uuid.py) gives what the broker used of the standard library's ``uuid.UUID``,
with the same text, bytes and value, and is equal to (and found in a dict by) a ``uuid.UUID`` of the same value."""

from __future__ import annotations

import base64
import copy
import pickle
import random
import uuid

import pytest

from odradek.protocol.kafka_uuid import ZERO_UUID, Uuid, random_uuid, uuid_of_bytes

SAMPLES = [uuid.UUID(int=0), uuid.UUID(int=1), uuid.UUID("00112233-4455-6677-8899-aabbccddeeff"), uuid.UUID(int=(1 << 128) - 1)] + [
    uuid.UUID(int=random.Random(seed).getrandbits(128), version=4) for seed in range(20)  # the same on every pytest-xdist worker
]


@pytest.mark.parametrize("standard", SAMPLES, ids=str)
def test_a_uuid_reads_and_shows_as_the_standard_librarys(standard: uuid.UUID) -> None:
    for ours in (Uuid(str(standard)), Uuid(standard.hex), Uuid(f"{{{standard}}}"), Uuid(standard.urn), Uuid(bytes=standard.bytes), Uuid(int=standard.int), uuid_of_bytes(standard.bytes)):
        assert (str(ours), ours.bytes, ours.int, ours.hex) == (str(standard), standard.bytes, standard.int, standard.hex)
        assert ours == standard and standard == ours and not ours != standard and hash(ours) == hash(standard)
        assert {standard: 1}[ours] == 1 and {ours: 2}[standard] == 2
        assert repr(ours) == f"Uuid('{standard}')"


def test_order_equality_and_immutability() -> None:
    low, high = Uuid(int=1), Uuid(int=2)
    assert low < high <= high and high > low >= low and sorted([high, low]) == [low, high]
    assert low == Uuid(int=1) and low != high and low != 1 and low != str(low) and ZERO_UUID == Uuid(int=0)
    assert bool(ZERO_UUID)  # truthy, as a uuid.UUID: `topic_id or fallback` only replaces a missing one
    with pytest.raises(TypeError):
        low.int = 3  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(high)) == high and copy.copy(high) is high and copy.deepcopy([high])[0] is high


def test_bad_input_is_refused_as_the_standard_library_refuses_it() -> None:
    for kwargs in ({"bytes": b"short"}, {"int": -1}, {"int": 1 << 128}):
        with pytest.raises(ValueError):
            Uuid(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Uuid("not-a-uuid")
    with pytest.raises(TypeError):
        Uuid()


def test_random_uuids_are_version_4_and_differ() -> None:
    made = {random_uuid() for _ in range(1000)}
    assert len(made) == 1000
    for one in made:
        standard = uuid.UUID(str(one))
        assert (standard.version, standard.variant) == (4, uuid.RFC_4122)


def test_random_uuids_never_print_with_a_leading_dash_nor_are_reserved() -> None:
    """Kafka's ``Uuid.randomUuid``: a topic or cluster id's text (base64url) never starts with "-", which tools
    would read as an option; one in 64 random values would. Zero and one are reserved."""
    made = [random_uuid() for _ in range(2000)]
    texts = [base64.urlsafe_b64encode(u.bytes).decode() for u in made]
    assert not [t for t in texts if t.startswith("-")]
    assert {t[0] for t in texts} >= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") - {"-"}
    assert ZERO_UUID not in made and Uuid(int=1) not in made
