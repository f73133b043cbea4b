"""UpdateFeatures and Envelope, which a Kafka 3.9 ZooKeeper-mode broker advertises without acting on them:
the same requests to odradek and to Kafka 3.9.1, and the same answers, except where odradek finalizes a
feature (docs/protocol.md, Features)."""

from __future__ import annotations

from typing import Iterator

import pytest

from odradek import Broker
from odradek.protocol.api import ApiKey, encode_request
from tests.conftest import Wire

NOT_SUPPORTED = "Could not apply finalized feature update because the provided feature is not supported."


@pytest.fixture(scope="module")
def brokers(real_kafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with Broker(log_dir=tmp_path_factory.mktemp("features"), subprocess=True) as broker:
        yield {"odradek": broker.bootstrap, "kafka": real_kafka.bootstrap}


def update(bootstrap: str, feature: str, level: int, upgrade_type: int = 1) -> tuple[int, list[tuple[str, int, str | None]]]:
    body = {"timeout_ms": 5000, "feature_updates": [{"feature": feature, "max_version_level": level, "upgrade_type": upgrade_type}], "validate_only": False}
    answer = Wire.call_once(bootstrap, ApiKey.UpdateFeatures, 1, body)
    return answer.error_code, [(r.feature, r.error_code, r.error_message) for r in answer.results]


def test_updates_of_features_neither_finalizes_are_refused_alike(brokers: dict[str, str]) -> None:
    for feature, level, upgrade_type in (("no.such.feature", 1, 1), ("metadata.version", 20, 1), ("no.such.feature", 0, 3)):
        answers = {name: update(bootstrap, feature, level, upgrade_type) for name, bootstrap in brokers.items()}
        assert answers["odradek"] == answers["kafka"], (feature, level)
    assert update(brokers["kafka"], "no.such.feature", 1) == (0, [("no.such.feature", 42, NOT_SUPPORTED)])


def test_odradeks_fixed_levels_are_kept(brokers: dict[str, str]) -> None:
    """A ZooKeeper-mode Kafka finalizes no feature; odradek keeps transaction.version at 2: asking for 2
    changes nothing, asking for 1 is refused."""
    assert update(brokers["odradek"], "transaction.version", 2) == (0, [("transaction.version", 0, None)])
    error, [(_, code, message)] = update(brokers["odradek"], "transaction.version", 1, 2)
    assert (error, code) == (0, 42) and message is not None and "does not change" in message


def test_an_envelope_closes_the_connection_on_both(brokers: dict[str, str]) -> None:
    body = {"request_data": b"", "request_principal": None, "client_host_address": b"\x7f\x00\x00\x01"}
    for bootstrap in brokers.values():
        wire = Wire(bootstrap)
        wire.send(encode_request(ApiKey.Envelope, 0, 1, body))
        assert wire.closed_by_peer()
        wire.close()
