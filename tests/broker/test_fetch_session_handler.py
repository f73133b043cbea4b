"""A follower's side of incremental fetch sessions (KIP-227, Kafka's FetchSessionHandler), sans-IO: what
each fetch names, and when it starts over in full. tests/broker/test_replica_fetcher.py follows a real
Kafka leader and an odradek one with it."""

from __future__ import annotations

import uuid

from odradek.broker.replication.fetch_session_handler import FetchSessionHandler, PartitionRequest
from odradek.protocol.errors import ErrorCode

TOPIC_ID = uuid.uuid4()


def request(partition: int, offset: int) -> PartitionRequest:
    return TOPIC_ID, {"partition": partition, "fetch_offset": offset, "current_leader_epoch": 1}


def test_after_the_full_fetch_only_changed_partitions_and_forgotten_ones_are_named() -> None:
    handler = FetchSessionHandler()
    wanted = {("t", p): request(p, 0) for p in range(3)}
    first = handler.build(wanted, 16)
    assert (first.session_id, first.epoch, list(first.to_send), first.to_forget) == (0, 0, list(wanted), {})
    assert handler.handle_response(ErrorCode.NONE, 77)
    second = handler.build({("t", 0): request(0, 0), ("t", 1): request(1, 5)}, 16)
    assert (second.session_id, second.epoch, list(second.to_send), second.to_forget) == (77, 1, [("t", 1)], {("t", 2): TOPIC_ID})
    assert handler.handle_response(ErrorCode.NONE, 77)
    third = handler.build({("t", 0): request(0, 0), ("t", 1): request(1, 5), ("t", 2): request(2, 0)}, 16)
    assert (third.epoch, list(third.to_send), third.to_forget) == (2, [("t", 2)], {})


def test_an_error_or_no_answer_makes_the_next_fetch_full_and_close_the_session() -> None:
    handler = FetchSessionHandler()
    wanted = {("t", 0): request(0, 0)}
    handler.build(wanted, 16)
    handler.handle_response(ErrorCode.NONE, 77)
    handler.build(wanted, 16)
    assert not handler.handle_response(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    retry = handler.build(wanted, 16)
    assert (retry.session_id, retry.epoch, list(retry.to_send)) == (77, 0, [("t", 0)])  # closes 77, opens a new one
    handler.handle_response(ErrorCode.NONE, 78)
    handler.build(wanted, 16)
    handler.handle_error()  # a lost connection
    assert (handler.build(wanted, 16).session_id, handler.epoch) == (78, 0)
    assert not handler.handle_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert (handler.build(wanted, 16).session_id, handler.epoch) == (0, 0)  # the leader knows no session


def test_a_leader_that_opens_no_session_is_fetched_from_in_full_and_a_new_version_starts_over() -> None:
    handler = FetchSessionHandler()
    wanted = {("t", 0): request(0, 0)}
    handler.build(wanted, 16)
    assert handler.handle_response(ErrorCode.NONE, 0)  # its cache is full
    assert handler.build(wanted, 16).full
    handler.handle_response(ErrorCode.NONE, 5)
    assert not handler.build(wanted, 16).full
    handler.handle_response(ErrorCode.NONE, 5)
    assert handler.build(wanted, 12).full  # topic names instead of ids: the session is keyed otherwise
    handler.handle_response(ErrorCode.NONE, 5)
    handler.build(wanted, 12)
    handler.handle_response(ErrorCode.NONE, 0)  # the leader closed the session
    assert handler.build(wanted, 12) == handler.build(wanted, 12) and handler.epoch == 0
