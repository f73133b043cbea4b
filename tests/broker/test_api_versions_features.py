"""ApiVersions' feature fields (KIP-584) as a client reads them off the wire, from the broker's feature table.

These tests give the handler tables of their own (an empty one answers as before features existed) and
decode its answer as a client would; the broker's own table finalizes a level only with the versions it
implies served.
"""

from __future__ import annotations

import pytest

from odradek.broker.features import FEATURES, Feature, FinalizedFeatures, finalized_in_cluster, registered_features
from odradek.broker.handlers import api_versions
from odradek.broker.kafka_apis import API_RANGES, HANDLERS
from odradek.protocol.api import ApiKey, decode_request, decode_response, encode_request, encode_response

TABLE = (
    Feature("transaction.version", 0, 2, 2),
    Feature("group.version", 0, 1, 1),
    Feature("share.version", 0, 1, 0),  # supported, not finalized
    Feature("metadata.version", 1, 27, 27),
)


def answer(features: tuple[Feature, ...], version: int) -> tuple[bytes, object]:
    """The ApiVersions answer's frame and the response as a client decodes it."""
    body = {"client_software_name": "probe", "client_software_version": "1"}
    request = decode_request(encode_request(ApiKey.ApiVersions, version, 7, body)[4:])
    frame, _ = encode_response(ApiKey.ApiVersions, version, 7, api_versions.handle(API_RANGES, FinalizedFeatures(features), request))
    _, response = decode_response(ApiKey.ApiVersions, version, frame[4:])
    return frame, response


@pytest.mark.parametrize("version", range(HANDLERS[ApiKey.ApiVersions].min_version, HANDLERS[ApiKey.ApiVersions].max_version + 1))
def test_with_no_features_the_answer_is_what_it_always_was(version: int) -> None:
    frame, response = answer((), version)
    plain, _ = encode_response(ApiKey.ApiVersions, version, 7, {"error_code": 0, "api_keys": API_RANGES})
    assert frame == plain
    if version >= 3:
        assert (response.supported_features, response.finalized_features, response.finalized_features_epoch) == ([], [], -1)


def test_v4_lists_every_supported_feature_and_the_finalized_levels() -> None:
    _, response = answer(TABLE, 4)
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == [
        ("transaction.version", 0, 2),
        ("group.version", 0, 1),
        ("share.version", 0, 1),
        ("metadata.version", 1, 27),
    ]
    # A feature finalized at level 0 is off and not listed, as Kafka's ApiVersionsResponse leaves it out.
    assert [(f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features] == [
        ("transaction.version", 2, 2),
        ("group.version", 1, 1),
        ("metadata.version", 27, 27),
    ]
    assert response.finalized_features_epoch >= 0  # clients ignore finalized levels under a negative epoch


def test_below_v4_a_supported_feature_from_level_0_is_left_out() -> None:
    """KAFKA-17492: clients before ApiVersions v4 fail to read a supported range starting at 0."""
    _, response = answer(TABLE, 3)
    assert [f.name for f in response.supported_features] == ["metadata.version"]
    assert [f.name for f in response.finalized_features] == ["transaction.version", "group.version", "metadata.version"]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_before_v3_the_answer_has_no_feature_fields(version: int) -> None:
    frame, _ = answer(TABLE, version)
    assert frame == encode_response(ApiKey.ApiVersions, version, 7, {"error_code": 0, "api_keys": API_RANGES})[0]


def test_a_finalized_group_version_1_comes_with_the_consumer_group_apis() -> None:
    """``group.version`` 1 says the consumer group protocol (KIP-848) is served: its two APIs must be."""
    levels = {f.name: f.level for f in FEATURES}
    assert levels["group.version"] == 1
    served = {key: handler.max_version for key, handler in HANDLERS.items()}
    assert served[ApiKey.ConsumerGroupHeartbeat] >= 1 and ApiKey.ConsumerGroupDescribe in served


def test_a_finalized_transaction_version_2_comes_with_the_versions_it_implies() -> None:
    """A 4.x client that sees ``transaction.version`` 2 sends EndTxn v5, Produce v12 and TxnOffsetCommit v5
    (and no AddPartitionsToTxn): advertising the level without them would break its transactions."""
    levels = {f.name: f.level for f in FEATURES}
    assert levels["transaction.version"] == 2
    served = {key: handler.max_version for key, handler in HANDLERS.items()}
    assert served[ApiKey.EndTxn] >= 5 and served[ApiKey.Produce] >= 12 and served[ApiKey.TxnOffsetCommit] >= 5


def test_in_a_zookeeper_cluster_a_level_is_finalized_only_where_every_registered_broker_supports_it() -> None:
    """What each broker registers in ``/brokers/ids/<id>`` decides: Kafka 3.9's register no features (``{}``),
    so beside one nothing is finalized; a broker supporting up to a lower level brings the level down to it."""
    ours = registered_features()
    assert finalized_in_cluster([ours, ours]) == FEATURES
    assert [f.level for f in finalized_in_cluster([ours, {}])] == [0] * len(FEATURES)
    older = {**ours, "transaction.version": {"min_version": 0, "max_version": 1}}
    assert {f.name: f.level for f in finalized_in_cluster([ours, older])}["transaction.version"] == 1
