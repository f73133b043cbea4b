"""The controller's connections to the brokers (Kafka's ``ControllerChannelManager``), on odradek's own
inter-broker client (:mod:`odradek.broker.network.kafka_client`).

The ZooKeeper controller decides on its own thread and hands each request here without waiting. Requests
run on a separate thread with its own event loop (never the broker's), one queue and one sender task per
broker, so each broker gets its requests in the order they were decided. As Kafka's ``RequestSendThread``,
a sender that cannot reach its broker reconnects and sends the same request again until it goes through or
the broker is removed (it died: the controller will send it everything afresh when it comes back).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import anyio
import anyio.from_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from odradek.broker.network.kafka_client import BrokerConnection, DisconnectedError, ResponseError, retry_backoff_s
from odradek.broker.security.client import PLAINTEXT, ClientSecurity
from odradek.controller import zk_data as zd
from odradek.controller.zk_controller_state import ControlRequest
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
"""Kafka's controller retries a broker it cannot reach after ``retry.backoff.ms`` (100 ms)."""


@dataclass
class _Sender:
    endpoint: zd.EndPoint
    send: MemoryObjectSendStream[ControlRequest]
    receive: MemoryObjectReceiveStream[ControlRequest]
    cancel: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class ControllerChannelManager:
    """Implements :class:`odradek.controller.zk_controller.ControllerChannel`."""

    def __init__(self, controller_id: int, inter_broker_listener: str = "PLAINTEXT", *, security: ClientSecurity = PLAINTEXT, on_response: Callable[[ControlRequest, Any], None] | None = None) -> None:
        """``security``: how the inter-broker listener is connected to (its TLS and SASL)."""
        self.client_id = f"broker-{controller_id}-controller"
        self.listener = inter_broker_listener
        self.security = security
        self.on_response = on_response or (lambda request, response: None)
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._senders: dict[int, _Sender] = {}

    def close(self) -> None:
        for broker_id in list(self._senders):
            self.remove_broker(broker_id)
        self._portal_cm.__exit__(None, None, None)

    def send(self, broker: zd.BrokerRegistration, request: ControlRequest) -> None:
        endpoint = broker.endpoint(self.listener)
        if endpoint is None:
            log.warning("broker %d has no %s endpoint: %s not sent", broker.broker_id, self.listener, request.api_key)
            return
        sender = self._senders.get(broker.broker_id)
        if sender is not None and sender.endpoint != endpoint:
            self.remove_broker(broker.broker_id)  # it came back elsewhere
            sender = None
        if sender is None:
            sender = self._senders[broker.broker_id] = self._portal.call(self._new_sender, endpoint)
            self._portal.start_task_soon(self._run, sender)
        self._portal.call(sender.send.send_nowait, request)

    def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            self._portal.call(sender.cancel.cancel)

    async def _new_sender(self, endpoint: zd.EndPoint) -> _Sender:
        """A broker's queue, made on the channel's event loop (a cancel scope belongs to one)."""
        send, receive = anyio.create_memory_object_stream[ControlRequest](math.inf)
        return _Sender(endpoint, send, receive)

    async def _run(self, sender: _Sender) -> None:
        with sender.cancel:
            async with anyio.create_task_group() as tg:
                connection: BrokerConnection | None = None
                async for request in sender.receive:
                    while True:
                        try:
                            if connection is None or connection.closed:
                                connection = await BrokerConnection.connect(sender.endpoint.host or "", sender.endpoint.port, tg, client_id=self.client_id, security=self.security)
                            response = await connection.send(request.api_key, request.version, request.body)
                            break
                        except (DisconnectedError, TimeoutError, OSError, ResponseError) as exc:
                            log.info("controller request to broker %d failed (%s); retrying", request.broker_id, exc)
                            connection = None
                            await anyio.sleep(retry_backoff_s(exc, RETRY_BACKOFF_S))
                    code = response.get("error_code", 0)
                    if code:
                        log.warning("broker %d answered %s with %s", request.broker_id, request.api_key, ErrorCode(code).name)
                    self.on_response(request, response)
                tg.cancel_scope.cancel()
