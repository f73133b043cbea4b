"""A fetcher's side of an incremental fetch session (KIP-227; Kafka's ``FetchSessionHandler``), sans-IO.

Kafka's followers fetch in a session: a first full fetch (epoch 0) opens it on the leader, and each fetch
after it (epoch 1, 2, ...) names only the partitions whose request changed (a new fetch offset, log start
offset or epoch) and those to forget (no longer fetched here); the leader answers only partitions with
something new. A follower of many partitions then sends and reads a few of them per fetch, not all.

Any failure (an error answer, a lost connection, a timeout) makes the next fetch a full one: with the
session's id, which closes that session and opens a new one, or without an id once the leader has said it
knows none (``FETCH_SESSION_ID_NOT_FOUND``), as Kafka's handler does. A full fetch that the leader
answers without a session id (its cache full) leaves the fetcher fetching in full.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.protocol.message_types.fetch import FetchPartitionDict

INITIAL_EPOCH = 0
INVALID_SESSION_ID = 0
FIRST_SESSION_VERSION = 7
"""Fetch v7 brought sessions (KIP-227)."""

PartitionRequest = tuple[Uuid, "FetchPartitionDict"]
"""A partition as a fetch asks for it: its topic id (zeros for none) and its request fields."""


@dataclass(frozen=True)
class SessionFetch:
    """What one fetch sends: the session id and epoch, the partitions to send (all of them in a full
    fetch) and those the session forgets, with their topic ids."""

    session_id: int
    epoch: int
    to_send: dict[TopicPartition, PartitionRequest]
    to_forget: dict[TopicPartition, Uuid]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


@dataclass
class FetchSessionHandler:
    session_id: int = INVALID_SESSION_ID
    epoch: int = INITIAL_EPOCH
    """The next fetch's epoch: INITIAL_EPOCH for a full fetch."""
    partitions: dict[TopicPartition, PartitionRequest] = field(default_factory=dict)
    """The session's partitions as last sent: what the leader has."""
    version: int = -1
    """The Fetch version the session was opened with: topic ids (v13+) or names key its partitions."""

    def build(self, wanted: dict[TopicPartition, PartitionRequest], version: int) -> SessionFetch:
        """The fetch of ``wanted`` (every partition ready to fetch, as it is to be asked for now)."""
        if self.epoch == INITIAL_EPOCH or version != self.version:
            self.epoch, self.partitions, self.version = INITIAL_EPOCH, dict(wanted), version
            return SessionFetch(self.session_id, INITIAL_EPOCH, wanted, {})
        previous = self.partitions
        to_send = {tp: request for tp, request in wanted.items() if previous.get(tp) != request}
        to_forget = {tp: topic_id for tp, (topic_id, _) in previous.items() if tp not in wanted}
        self.partitions = dict(wanted)
        return SessionFetch(self.session_id, self.epoch, to_send, to_forget)

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """The leader's answer to the last fetch built; False when its partitions are not to be read (the
        next fetch is a full one)."""
        if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            return False
        if error_code != ErrorCode.NONE:
            self.handle_error()
            return False
        if self.epoch == INITIAL_EPOCH:
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == INVALID_SESSION_ID else 1
        elif session_id == INVALID_SESSION_ID:  # the leader closed the session
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        else:
            self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1
        return True

    def handle_error(self) -> None:
        """No answer (a lost connection, a timeout) or an error: the next fetch is a full one, closing
        this session for a new one."""
        self.epoch = INITIAL_EPOCH
