"""Requests a broker sends to other brokers on its own behalf, batched per destination (Kafka's
``InterBrokerSendThread``, as its ``TransactionMarkerChannelManager`` and ``AddPartitionsToTxnManager`` use it).

Items (a transaction's markers, a transaction to verify) are queued per destination broker; while no
request is in flight to a broker, everything queued for it goes out in one request. Each item's
:class:`~odradek.broker.coordinator.deferred.Deferred` completes with its share of the answer, or with the failure
the :class:`RequestKind` says when the broker cannot be reached (no endpoint, a lost connection, a timeout):
the callers retry, finding the destination again, as Kafka's managers do.

The connection goes to the destination's inter-broker listener (with its TLS and SASL), one per
destination, reopened after a failure.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generic, Protocol, TypeVar

import anyio

from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.network.kafka_client import BrokerConnection, DisconnectedError, Node, ResponseError, UnsupportedVersionError
from odradek.broker.security.client import PLAINTEXT, ClientSecurity
from odradek.protocol.schema import Container

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

log = logging.getLogger("odradek.inter_broker_send")

Item = TypeVar("Item")
Result = TypeVar("Result")


class Unreachable(Exception):
    """The destination has no endpoint now, or the request could not be sent or answered."""


class RequestKind(Protocol[Item, Result]):
    @property
    def api_key(self) -> int:
        """The API the request is (read-only: a kind's class attribute, an ``ApiKey``)."""

    def body(self, items: list[Item], version: int) -> dict[str, Any]:
        """One request carrying every item."""

    def results(self, items: list[Item], response: Container, version: int) -> list[Result]:
        """Each item's result from the answer, in the items' order."""

    def failed(self, item: Item, reason: Exception) -> Result:
        """An item's result when its request could not be sent or answered (``reason``: :class:`Unreachable`,
        or :class:`UnsupportedVersionError` when the destination does not serve the API)."""

    def conflicts(self, queued: Item, item: Item) -> bool:
        """Whether ``item`` cannot go in the same request as ``queued`` (it waits for the next one)."""


@dataclass
class _Destination(Generic[Item, Result]):
    queue: list[tuple[Item, Deferred[Result]]] = field(default_factory=list)
    wake: anyio.Event = field(default_factory=anyio.Event)
    connection: BrokerConnection | None = None
    connected_to: Node | None = None


class InterBrokerSender(Generic[Item, Result]):
    def __init__(
        self, broker_id: int, name: str, kind: RequestKind[Item, Result], node: Callable[[int], Node | None], task_group: Callable[[], "TaskGroup | None"],
        request_timeout_s: float, security: ClientSecurity = PLAINTEXT,
    ) -> None:
        """``node``: a live broker's inter-broker endpoint; ``task_group``: where the senders and the
        connections' readers run (the broker's background); ``security``: the inter-broker listener's."""
        self.client_id = f"broker-{broker_id}-{name}"
        self.kind = kind
        self.node = node
        self.task_group = task_group
        self.request_timeout_s = request_timeout_s
        self.security = security
        self._destinations: dict[int, _Destination[Item, Result]] = {}

    def submit(self, broker_id: int, item: Item) -> Deferred[Result]:
        """Queue ``item`` for ``broker_id``; its result comes with the next request to that broker."""
        out: Deferred[Result] = Deferred()
        destination = self._destinations.get(broker_id)
        if destination is None:
            task_group = self.task_group()
            if task_group is None:
                out.complete(self.kind.failed(item, Unreachable("the broker is not serving")))
                return out
            destination = self._destinations[broker_id] = _Destination()
            task_group.start_soon(self._run, broker_id, destination, task_group)
        destination.queue.append((item, out))
        destination.wake.set()
        return out

    async def _run(self, broker_id: int, destination: _Destination[Item, Result], task_group: "TaskGroup") -> None:
        while True:
            if not destination.queue:
                await destination.wake.wait()
                destination.wake = anyio.Event()
                continue
            sending: list[tuple[Item, Deferred[Result]]] = []
            later: list[tuple[Item, Deferred[Result]]] = []
            for queued in destination.queue:
                (later if any(self.kind.conflicts(item, queued[0]) for item, _ in sending) else sending).append(queued)
            destination.queue = later
            items = [item for item, _ in sending]
            try:
                results = await self._send(broker_id, destination, items, task_group)
            except (Unreachable, UnsupportedVersionError) as exc:
                log.info("%s to broker %d failed: %s", type(self.kind).__name__, broker_id, exc)
                results = [self.kind.failed(item, exc) for item in items]
            except Exception as exc:  # an answer not as expected: the items are sent again, never left waiting
                log.exception("%s to broker %d failed", type(self.kind).__name__, broker_id)
                results = [self.kind.failed(item, Unreachable(str(exc))) for item in items]
            for (_, out), result in zip(sending, results):
                out.complete(result)

    async def _send(self, broker_id: int, destination: _Destination[Item, Result], items: list[Item], task_group: "TaskGroup") -> list[Result]:
        node = self.node(broker_id)
        if node is None:
            raise Unreachable(f"broker {broker_id} has no live endpoint on the inter-broker listener")
        try:
            if destination.connection is None or destination.connection.closed or destination.connected_to != node:
                if destination.connection is not None:
                    await destination.connection.close()
                destination.connection = await BrokerConnection.connect(node.host, node.port, task_group, client_id=self.client_id, request_timeout_s=self.request_timeout_s, security=self.security)
                destination.connected_to = node
            connection = destination.connection
            version = connection.version_for(self.kind.api_key)
            response = await connection.send(self.kind.api_key, version, self.kind.body(items, version))
        except (DisconnectedError, TimeoutError, OSError, ResponseError) as exc:
            raise Unreachable(str(exc)) from None
        return self.kind.results(items, response, version)
