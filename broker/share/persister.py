"""How a share-partition leader reads and writes its share partitions' state (Kafka's ``Persister``, its
``DefaultStatePersister`` and ``PersisterStateManager``): through the share coordinator of each key, on
this broker or another.

A key (``group:topicId:partition``) belongs to the leader of its ``__share_group_state`` partition. When
that is this broker the local share coordinator answers; else the request goes to it over the
inter-broker listener as Kafka's share-state RPCs (Initialize/Read/Write/DeleteShareGroupState,
ReadShareGroupStateSummary), batched per destination and group. As Kafka's persister, a call whose
coordinator cannot answer yet -- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
a lost connection: the coordinator moved or is loading -- is retried with a growing backoff, finding the
coordinator again each time, until :data:`RETRY_BUDGET_MS` has passed; its caller then hears the error.

The calls of one key run in order, one at a time: a write retried after a coordinator move is not
overtaken by the next write of the same share partition.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Coroutine

import anyio

from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.share.share_records import SharePartitionKey, ShareState, delivery_complete_count
from odradek.broker.share.state_batches import StateBatch
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid

if TYPE_CHECKING:
    from odradek.broker.coordinator.share.share_coordinator import ShareCoordinator
    from odradek.broker.network.inter_broker_send import InterBrokerSender

RETRIABLE = frozenset({
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT,
})
"""What Kafka's ``PersisterStateManager`` retries (finding the coordinator again)."""
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 1000
RETRY_BUDGET_MS = 15000
"""How long a call keeps retrying: long enough for a killed coordinator's partitions to get a new leader
(its ZooKeeper session expiring) and load."""

UNINITIALIZED = -1
UNINITIALIZED_READ = "Read operation on uninitialized share partition not allowed."
"""Kafka 4.4's INVALID_REQUEST message for a ReadShareGroupState of a key never written: its group
coordinator initializes every share partition's state first. odradek's share partitions take it to mean
uninitialized (they initialize the state themselves)."""
READS = (ApiKey.ReadShareGroupState, ApiKey.ReadShareGroupStateSummary)


@dataclass(frozen=True)
class StateAnswer:
    """A share-state call's answer for one key (the partition result of any of the five RPCs)."""

    error: ErrorCode
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = UNINITIALIZED
    batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1
    message: str | None = None
    """The error's message when it is not the error code's own."""

    @classmethod
    def of(cls, state: ShareState | None) -> "StateAnswer":
        """A local state as ReadShareGroupState(Summary) answers it: never written is uninitialized, state
        epoch 0 (Kafka's ``PartitionFactory`` defaults)."""
        if state is None:
            return cls(ErrorCode.NONE)
        complete = -1 if state.start_offset == UNINITIALIZED else delivery_complete_count(state.start_offset, state.batches)
        return cls(ErrorCode.NONE, state.state_epoch, state.leader_epoch, state.start_offset, state.batches, complete)


@dataclass(frozen=True)
class StateCall:
    """One key's part of a share-state request: its partition entry's fields beyond ``partition``."""

    key: SharePartitionKey
    fields: dict[str, Any] = field(default_factory=dict)


class ShareStateRequest:
    """One of the five share-state RPCs as the inter-broker sender sends it: the calls of one group, each
    key once (a request has one GroupId, and two calls of a key keep their order)."""

    def __init__(self, api_key: ApiKey) -> None:
        self.api_key = api_key

    def body(self, items: list[StateCall], version: int) -> dict[str, Any]:
        topics: dict[Uuid, list[dict[str, Any]]] = {}
        for call in items:
            topics.setdefault(call.key.topic_id, []).append({"partition": call.key.partition, **call.fields})
        return {"group_id": items[0].key.group, "topics": [{"topic_id": t, "partitions": p} for t, p in topics.items()]}

    def results(self, items: list[StateCall], response: Any, version: int) -> list[StateAnswer]:
        found = {(r.topic_id, p.partition): p for r in response.results for p in r.partitions}
        return [_answer(found.get((call.key.topic_id, call.key.partition))) for call in items]

    def failed(self, item: StateCall, reason: Exception) -> StateAnswer:
        from odradek.broker.network.kafka_client import UnsupportedVersionError

        return StateAnswer(ErrorCode.UNSUPPORTED_VERSION if isinstance(reason, UnsupportedVersionError) else ErrorCode.NETWORK_EXCEPTION)

    def conflicts(self, queued: StateCall, item: StateCall) -> bool:
        return queued.key.group != item.key.group or queued.key == item.key


def _answer(partition: Any) -> StateAnswer:
    if partition is None:  # left out of the answer: asked again
        return StateAnswer(ErrorCode.NETWORK_EXCEPTION)
    code = partition.error_code
    error = ErrorCode.for_code(code)
    batches = tuple(StateBatch.from_wire({
        "first_offset": b.first_offset, "last_offset": b.last_offset, "delivery_state": b.delivery_state, "delivery_count": b.delivery_count,
    }) for b in getattr(partition, "state_batches", ()))
    return StateAnswer(
        error, getattr(partition, "state_epoch", 0), getattr(partition, "leader_epoch", -1), getattr(partition, "start_offset", UNINITIALIZED), batches,
        getattr(partition, "delivery_complete_count", -1),
    )


class Persister:
    def __init__(
        self,
        coordinator: "ShareCoordinator",
        sender: Callable[[ApiKey], "InterBrokerSender[StateCall, StateAnswer]"],
        spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], Any],
        *,
        retry_budget_ms: int = RETRY_BUDGET_MS,
    ) -> None:
        """``sender``: the inter-broker sender of an RPC (made once per API); ``spawn``: where retries run."""
        self.coordinator = coordinator
        self.broker_id = coordinator.runtime.broker_id
        self._sender = sender
        self._senders: dict[ApiKey, "InterBrokerSender[StateCall, StateAnswer]"] = {}
        self.spawn = spawn
        self.retry_budget_ms = retry_budget_ms
        self._last: dict[SharePartitionKey, Deferred[StateAnswer]] = {}

    # -- the five calls -------------------------------------------------------------------------------------

    def read(self, key: SharePartitionKey, leader_epoch: int) -> Deferred[StateAnswer]:
        """ReadShareGroupState: the share-partition leader's state as it starts leading (fencing leaders of
        lower epochs)."""
        return self._call(ApiKey.ReadShareGroupState, key, {"leader_epoch": leader_epoch})

    def read_summary(self, key: SharePartitionKey) -> Deferred[StateAnswer]:
        """ReadShareGroupStateSummary: the start offset, epochs and delivered count (DescribeShareGroupOffsets)."""
        return self._call(ApiKey.ReadShareGroupStateSummary, key, {"leader_epoch": -1})

    def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int, batches: list[StateBatch], complete: int) -> Deferred[ErrorCode]:
        fields = {"state_epoch": state_epoch, "leader_epoch": leader_epoch, "start_offset": start_offset, "delivery_complete_count": complete, "state_batches": [b.to_wire() for b in batches]}
        return self._call(ApiKey.WriteShareGroupState, key, fields).then(lambda answer: answer.error)

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> Deferred[ErrorCode]:
        return self._call(ApiKey.InitializeShareGroupState, key, {"state_epoch": state_epoch, "start_offset": start_offset}).then(lambda answer: answer.error)

    def delete(self, key: SharePartitionKey) -> Deferred[ErrorCode]:
        return self._call(ApiKey.DeleteShareGroupState, key, {}).then(lambda answer: answer.error)

    # -- internals ------------------------------------------------------------------------------------------

    def _call(self, api: ApiKey, key: SharePartitionKey, fields: dict[str, Any]) -> Deferred[StateAnswer]:
        """The call at once when nothing of the key is pending and it needs no retry (a local coordinator
        answers a read there and then); else in the background, after the key's calls before it."""
        previous = self._last.get(key)
        if previous is None or previous.done:
            first = self._attempt(api, key, fields)
            if first.done and first.value.error not in RETRIABLE:
                return first
        else:
            first = None
        out: Deferred[StateAnswer] = Deferred()
        self._last[key] = out
        out.add_callback(lambda _: self._settled(key, out))
        self.spawn(lambda: self._retrying(api, key, fields, previous, first, out))
        return out

    def _settled(self, key: SharePartitionKey, done: Deferred[StateAnswer]) -> None:
        if self._last.get(key) is done:
            del self._last[key]

    async def _retrying(self, api: ApiKey, key: SharePartitionKey, fields: dict[str, Any], previous: Deferred[StateAnswer] | None, first: Deferred[StateAnswer] | None, out: Deferred[StateAnswer]) -> None:
        deadline = time.monotonic() + self.retry_budget_ms / 1000
        backoff = RETRY_BACKOFF_MS / 1000
        try:
            if first is None:
                if previous is not None:
                    await _wait(previous)
                first = self._attempt(api, key, fields)
            answer = await _wait(first)
            while answer.error in RETRIABLE and time.monotonic() + backoff < deadline:
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_MS / 1000)
                answer = await _wait(self._attempt(api, key, fields))
        except BaseException:
            out.complete(StateAnswer(ErrorCode.UNKNOWN_SERVER_ERROR))  # cancelled (the broker stops): no caller left waiting
            raise
        out.complete(answer)

    def _attempt(self, api: ApiKey, key: SharePartitionKey, fields: dict[str, Any]) -> Deferred[StateAnswer]:
        error, broker = self.coordinator.locate(key)
        if error != ErrorCode.NONE:
            return Deferred.completed(StateAnswer(error))
        if broker == self.broker_id:
            return served(api, self.coordinator, key, fields)
        sender = self._senders.get(api)
        if sender is None:
            sender = self._senders[api] = self._sender(api)
        return sender.submit(broker, StateCall(key, fields))


def served(api: ApiKey, coordinator: "ShareCoordinator", key: SharePartitionKey, fields: dict[str, Any]) -> Deferred[StateAnswer]:
    """What this broker's share coordinator answers a share-state call (``fields``: the request's partition
    entry, batches as dicts): the RPCs' handler and the persister's local calls alike."""
    if api in READS:
        error, state = coordinator.read_state(key, fields["leader_epoch"] if api == ApiKey.ReadShareGroupState else -1)
        if error != ErrorCode.NONE:
            return Deferred.completed(StateAnswer(error))
        if state is None and api == ApiKey.ReadShareGroupState:
            return Deferred.completed(StateAnswer(ErrorCode.INVALID_REQUEST, message=UNINITIALIZED_READ))
        return Deferred.completed(StateAnswer.of(state))
    if api == ApiKey.WriteShareGroupState:
        batches = [StateBatch.from_wire(b) for b in fields["state_batches"]]
        done = coordinator.write_state(key, fields["start_offset"], batches, fields["state_epoch"], fields["leader_epoch"])
    elif api == ApiKey.InitializeShareGroupState:
        done = coordinator.initialize_state(key, fields["start_offset"], fields["state_epoch"])
    else:
        done = coordinator.delete_state(key)
    return done.then(StateAnswer)


async def _wait(deferred: Deferred[StateAnswer]) -> StateAnswer:
    if not deferred.done:
        event = anyio.Event()
        deferred.add_callback(lambda _: event.set())
        await event.wait()
    return deferred.value
