"""Encoding refuses a key that no version of its struct declares (under test: tests/conftest.py switches the
check on), so a misspelled field cannot silently go out as the field's default; a key that only other
versions declare is accepted, since handlers build one dict for every version they answer."""

from __future__ import annotations

import pytest

from odradek.protocol import schema
from odradek.protocol.api import decode_response, encode_request, encode_response
from odradek.protocol.messages import add_partitions_to_txn, delete_records, fetch
from odradek.protocol.schema import UnknownFieldError, encode


def delete_records_response(partition: dict) -> dict:
    return {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [partition]}]}


def test_the_check_is_on_in_the_test_suite() -> None:
    assert schema.CHECK_FIELD_NAMES


@pytest.mark.parametrize("version", delete_records.RESPONSE.versions())
def test_a_misspelled_key_in_a_nested_struct_raises_naming_key_and_struct(version: int) -> None:
    body = delete_records_response({"partition_index": 0, "low_watermrk": 42, "error_code": 0})
    with pytest.raises(UnknownFieldError, match=r"DeleteRecordsPartitionResult has no field 'low_watermrk'"):
        encode_response(21, version, 1, body)


def test_a_misspelled_top_level_key_raises_naming_the_message() -> None:
    with pytest.raises(UnknownFieldError, match=r"MetadataRequest has no field 'allow_auto_topic_creatoin'"):
        encode_request(3, 12, 1, {"topics": None, "allow_auto_topic_creatoin": False})


@pytest.mark.parametrize("version", [3, 4])
def test_a_misspelled_key_in_a_common_struct_raises_at_either_depth(version: int) -> None:
    # AddPartitionsToTxn's topic results are a common struct, at top level up to v3 and inside results by
    # transaction from v4: one dict serves both, so both lists are present and only one is encoded.
    topics = [{"name": "t", "results_by_partition": [{"partition_index": 0, "partition_eror_code": 0}]}]
    body = {"results_by_topic_v3_and_below": topics, "results_by_transaction": [{"transactional_id": "x", "topic_results": topics}]}
    with pytest.raises(UnknownFieldError, match=r"AddPartitionsToTxnPartitionResult has no field 'partition_eror_code'"):
        encode(add_partitions_to_txn.RESPONSE, version, body)


def test_the_error_names_every_unknown_key() -> None:
    with pytest.raises(UnknownFieldError, match=r"'a', 'b'"):
        encode(delete_records.RESPONSE, 0, {"throttle_time_ms": 0, "topics": [], "b": 1, "a": 2})


def test_a_key_of_another_version_is_accepted_and_not_encoded() -> None:
    # session_id exists from Fetch v7, log_start_offset from v5, preferred_read_replica (tagged-era) from v11.
    partition = {"partition_index": 0, "high_watermark": 5, "log_start_offset": 3, "preferred_read_replica": 2, "records": b""}
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 9, "responses": [{"topic": "t", "partitions": [partition]}]}
    bare = {"throttle_time_ms": 0, "responses": [{"topic": "t", "partitions": [{"partition_index": 0, "high_watermark": 5, "records": b""}]}]}
    assert encode(fetch.RESPONSE, 4, body) == encode(fetch.RESPONSE, 4, bare)


def test_a_decoded_response_with_unknown_tagged_fields_re_encodes() -> None:
    body = delete_records_response({"partition_index": 0, "low_watermark": 42, "error_code": 0})
    frame, _ = encode_response(21, 2, 1, body)
    _, decoded = decode_response(21, 2, frame[4:])
    decoded["_unknown_tags"] = {99: b"x"}
    again, _ = encode_response(21, 2, 1, decoded)
    assert decode_response(21, 2, again[4:])[1].topics[0].partitions[0].low_watermark == 42
