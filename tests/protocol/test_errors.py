"""ErrorCode against Kafka's own reference: the protocol doc's error table and the message specs."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError

SHARED = Path(__file__).parents[3] / "shared"
DOCS = SHARED / "kafka-protocol" / "docs"
MESSAGES = SHARED / "kafka-protocol" / "message"

ERROR_ROW = re.compile(r"<tr><td>([A-Z_]+)</td><td>(-?\d+)</td><td>(True|False)</td><td>(.*?)</td></tr>")
SSI_INCLUDE = re.compile(r'<!--#include virtual="([^"]+)" -->')
# Response specs list the errors each version may return as "// - NAME (version N+)".
SPEC_ERROR_BULLET = re.compile(r"^\s*//\s*-\s*([A-Z][A-Z_]+)\s*\(version", re.MULTILINE)


def protocol_html_error_rows() -> list[tuple[str, int, bool, str]]:
    """The Error Codes section of protocol.html, following its server-side include as the site does."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent")
    page = (DOCS / "protocol.html").read_text()
    section = page[page.index('id="protocol_error_codes"') : page.index('id="protocol_api_keys"')]
    include = SSI_INCLUDE.search(section)
    if include is not None:
        generated = DOCS / include.group(1)
        if not generated.is_file():
            pytest.skip(f"protocol.html takes its error table from {generated}, which is absent")
        section = generated.read_text()
    rows = ERROR_ROW.findall(section)
    assert rows, "no error rows found in protocol.html's Error Codes section"
    return [(name, int(code), retriable == "True", html.unescape(desc)) for name, code, retriable, desc in rows]


KAFKA_4_ERRORS = [
    ("INVALID_REGULAR_EXPRESSION", 128, False, "The regular expression is not valid."),
    ("SHARE_SESSION_LIMIT_REACHED", 133, True, "The limit of share sessions has been reached."),
]
"""The codes Kafka 4.x added that odradek answers with (the consumer group protocol's regex subscriptions,
share sessions), as Kafka 4.4's ``Errors`` declares them: its protocol doc's table is not in ``../shared``."""


def test_table_is_kafkas_error_table_row_for_row() -> None:
    """Kafka 3.9's table row for row, then only the 4.x codes the 4.x APIs served here need."""
    kafka_3_9 = protocol_html_error_rows()
    ours = [(code.name, int(code), code.retriable, code.message) for code in ErrorCode]
    assert ours[: len(kafka_3_9)] == kafka_3_9
    assert ours[len(kafka_3_9) :] == KAFKA_4_ERRORS


def test_every_error_the_message_specs_name_is_a_code() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent")
    named = {name for spec in MESSAGES.glob("*.json") for name in SPEC_ERROR_BULLET.findall(spec.read_text())}
    assert len(named) > 20, "the spec comments no longer list errors in the expected form"
    assert sorted(named - ErrorCode.__members__.keys()) == []


@pytest.mark.parametrize(
    ("name", "code", "retriable"),
    [
        ("UNKNOWN_SERVER_ERROR", -1, False),
        ("NONE", 0, False),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3, True),
        ("NOT_LEADER_OR_FOLLOWER", 6, True),
        ("UNSUPPORTED_VERSION", 35, False),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", 45, False),
        ("FETCH_SESSION_ID_NOT_FOUND", 70, True),
        ("INVALID_FETCH_SESSION_EPOCH", 71, True),
        ("VOTER_NOT_FOUND", 127, False),
    ],
)
def test_known_codes_decode_from_the_wire_value(name: str, code: int, retriable: bool) -> None:
    decoded = ErrorCode(code)
    assert decoded.name == name
    assert decoded.retriable is retriable


def test_every_code_is_a_distinct_int16() -> None:
    # An alias (two names, one value) would make a decoded code report the wrong name.
    assert len(ErrorCode.__members__) == len(ErrorCode)
    assert all(-(2**15) <= code < 2**15 for code in ErrorCode)


def test_none_carries_no_description() -> None:
    assert ErrorCode.NONE.message == ""
    assert ErrorCode.UNSUPPORTED_VERSION.message == "The version of API is not supported."


def test_kafka_error_without_message_falls_back_to_kafkas_description() -> None:
    with pytest.raises(KafkaError) as raised:
        raise KafkaError(ErrorCode.NOT_CONTROLLER)
    assert raised.value.code is ErrorCode.NOT_CONTROLLER
    assert raised.value.message is None
    assert str(raised.value) == "NOT_CONTROLLER (41): This is not the correct controller for this cluster."


def test_kafka_error_keeps_the_specific_message() -> None:
    error = KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor: 3 larger than available brokers: 1.")
    assert error.code is ErrorCode.INVALID_REPLICATION_FACTOR
    assert error.message == "Replication factor: 3 larger than available brokers: 1."
    assert "INVALID_REPLICATION_FACTOR (38)" in str(error)


def test_an_answers_code_reads_as_its_error_and_an_unknown_one_as_unknown_server_error() -> None:
    assert ErrorCode.for_code(7) is ErrorCode.REQUEST_TIMED_OUT
    assert ErrorCode.for_code(-1) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.for_code(32767) is ErrorCode.UNKNOWN_SERVER_ERROR
