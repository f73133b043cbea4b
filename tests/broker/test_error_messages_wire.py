"""Error messages never echo unbounded client input: a request naming a topic of 32,767 characters (the
longest a string field holds) is answered, and its error message fits its own string field.

Kafka's messages quote the name whole; for this name they no longer fit, and Kafka answers these requests
UNKNOWN_SERVER_ERROR with no message (its response fails to serialize). odradek answers the error the
name deserves, with the quote cut (compat-tests/README.md). Where the message fits, it is Kafka's.
"""

from __future__ import annotations


import pytest

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import MAX_ERROR_MESSAGE_CHARS, ErrorCode

LONGEST = "t" * 32767



def requests(name: str) -> dict[str, tuple[ApiKey, int, dict]]:
    topic = {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    resource = {"resource_type": 2, "resource_name": name}
    return {
        "CreateTopics v4": (ApiKey.CreateTopics, 4, {"topics": [topic], "timeout_ms": 10000}),
        "CreateTopics v7": (ApiKey.CreateTopics, 7, {"topics": [topic], "timeout_ms": 10000}),
        "CreatePartitions": (ApiKey.CreatePartitions, 3, {"topics": [{"name": name, "count": 3, "assignments": None}], "timeout_ms": 5000, "validate_only": False}),
        "DescribeConfigs": (ApiKey.DescribeConfigs, 4, {"resources": [{**resource, "configuration_keys": None}], "include_synonyms": False, "include_documentation": False}),
        "IncrementalAlterConfigs": (ApiKey.IncrementalAlterConfigs, 1, {"resources": [{**resource, "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": False}),
        "AlterConfigs": (ApiKey.AlterConfigs, 2, {"resources": [{**resource, "configs": [{"name": "retention.ms", "value": "1000"}]}], "validate_only": False}),
        "DescribeProducers": (ApiKey.DescribeProducers, 0, {"topics": [{"name": name, "partition_indexes": [0]}]}),
    }


def error_of(api: str, response) -> tuple[int, str | None]:
    entry = {
        "CreateTopics v4": lambda r: r.topics[0],
        "CreateTopics v7": lambda r: r.topics[0],
        "CreatePartitions": lambda r: r.results[0],
        "DescribeConfigs": lambda r: r.results[0],
        "IncrementalAlterConfigs": lambda r: r.responses[0],
        "AlterConfigs": lambda r: r.responses[0],
        "DescribeProducers": lambda r: r.topics[0].partitions[0],
    }[api](response)
    return entry.error_code, entry.error_message


EXPECTED = {
    "CreateTopics v4": ErrorCode.INVALID_TOPIC_EXCEPTION,
    "CreateTopics v7": ErrorCode.INVALID_TOPIC_EXCEPTION,
    "CreatePartitions": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    "DescribeConfigs": ErrorCode.INVALID_TOPIC_EXCEPTION,
    "IncrementalAlterConfigs": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    "AlterConfigs": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    "DescribeProducers": ErrorCode.INVALID_TOPIC_EXCEPTION,
}


@pytest.fixture(scope="module")
def broker():
    with Broker() as b:
        yield b


@pytest.mark.parametrize("api", list(EXPECTED))
def test_a_topic_name_of_32767_characters_is_answered_with_a_bounded_message(broker, connect, api):
    wire = connect(broker.bootstrap)
    key, version, body = requests(LONGEST)[api]
    code, message = error_of(api, wire.call(key, version, body))
    assert code == EXPECTED[api]
    assert message is not None and len(message) <= MAX_ERROR_MESSAGE_CHARS and message.endswith("...")
    # the connection stays usable
    assert wire.call(ApiKey.ApiVersions, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0


@pytest.mark.parametrize(("name", "reason"), [
    ("x" * 300, f"the length of '{'x' * 300}' is longer than the max allowed length 249"),  # quoted whole: it fits
    ("a b", "'a b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ("a\n", "'a\n' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),  # not taken for an end
    ("..", "'..' is not allowed"),
])
def test_a_message_that_fits_is_kafkas_own(broker, real_kafka, connect, name, reason):
    answers = {}
    for who, bootstrap in (("odradek", broker.bootstrap), ("kafka", real_kafka.bootstrap)):
        key, version, body = requests(name)["CreateTopics v7"]
        answers[who] = error_of("CreateTopics v7", connect(bootstrap).call(key, version, body))
    assert answers["odradek"] == answers["kafka"] == (ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {reason}")
