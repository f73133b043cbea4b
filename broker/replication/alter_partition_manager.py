"""A leader's ISR changes sent to the controller (Kafka's ``DefaultAlterPartitionManager``, KIP-497).

A partition leader never writes its ISR itself: :meth:`AlterPartitionManager.submit` queues the change it
proposes, and one AlterPartition request at a time carries every queued change to the active controller,
with this broker's id and epoch (its registration's czxid in ZooKeeper mode). Each partition's answer goes
back to it (:meth:`~odradek.broker.replication.partition.Partition.on_alter_partition`), which commits the ISR the
controller wrote, gives up until the next LeaderAndIsr, or asks to send again. A request that fails as a
whole (no controller, a lost connection, NOT_CONTROLLER, STALE_BROKER_EPOCH) is sent again after a pause.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

import anyio

from odradek.broker.network.kafka_client import BrokerConnection, Node, ResponseError, retry_backoff_s
from odradek.broker.replication.partition import AlterPartitionResult, PendingIsrChange
from odradek.broker.security.client import PLAINTEXT, ClientSecurity
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.kafka_uuid import ZERO_UUID
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from odradek.broker.replication.partition import Partition
    from odradek.protocol.message_types.alter_partition import AlterPartitionRequestDict, AlterPartitionResponse, TopicDataDict

log = logging.getLogger("odradek.alter_partition")

RETRY_BACKOFF_S = 0.05
"""Kafka's ``retry.backoff.ms`` default for the broker-to-controller channel."""
LAST_VERSION_WITHOUT_TOPIC_IDS = 1


class AlterPartitionManager:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], controller: Callable[[], Node | None], task_group: "TaskGroup", request_timeout_s: float = 30.0, security: ClientSecurity = PLAINTEXT) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.controller = controller
        """The active controller's inter-broker endpoint, or None while there is none."""
        self.request_timeout_s = request_timeout_s
        self.security = security
        """How the controller's inter-broker listener is connected to."""
        self.queued: dict[TopicPartition, tuple[Partition, PendingIsrChange]] = {}
        self._wake = anyio.Event()
        self._connection: BrokerConnection | None = None
        self._connected_to: Node | None = None
        task_group.start_soon(self._run, task_group)

    def submit(self, partition: "Partition", change: PendingIsrChange) -> None:
        """Queue ``change`` (a later one for the same partition replaces it)."""
        self.queued[(partition.topic, partition.index)] = (partition, change)
        self._wake.set()

    async def _run(self, task_group: "TaskGroup") -> None:
        while True:
            if not self.queued:
                await self._wake.wait()
                self._wake = anyio.Event()
                continue
            sending, self.queued = self.queued, {}
            try:
                answers = await self._send(sending, task_group)
            except (OSError, TimeoutError, KafkaError, ResponseError) as exc:
                log.info("AlterPartition to the controller failed (%s); retrying", exc)
                self._requeue(sending)
                await anyio.sleep(retry_backoff_s(exc, RETRY_BACKOFF_S))
                continue
            for key, (partition, change) in sending.items():
                if partition.on_alter_partition(change, answers.get(key, AlterPartitionResult(ErrorCode.UNKNOWN_SERVER_ERROR))):
                    self._requeue({key: (partition, change)})

    def _requeue(self, items: dict[TopicPartition, tuple["Partition", PendingIsrChange]]) -> None:
        for key, item in items.items():
            self.queued.setdefault(key, item)

    async def _connect(self, task_group: "TaskGroup") -> BrokerConnection:
        controller = self.controller()
        if controller is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "no active controller")
        if self._connection is None or self._connection.closed or self._connected_to != controller:
            if self._connection is not None:
                await self._connection.close()
            self._connection = await BrokerConnection.connect(controller.host, controller.port, task_group, client_id=f"broker-{self.broker_id}-alter-partition", request_timeout_s=self.request_timeout_s, security=self.security)
            self._connected_to = controller
        return self._connection

    async def _send(self, items: dict[TopicPartition, tuple["Partition", PendingIsrChange]], task_group: "TaskGroup") -> dict[TopicPartition, AlterPartitionResult]:
        connection = await self._connect(task_group)
        version = connection.version_for(ApiKey.AlterPartition)
        if any(p.topic_id in (None, ZERO_UUID) for p, _ in items.values()):
            version = min(version, LAST_VERSION_WITHOUT_TOPIC_IDS)
        topics: dict[str, TopicDataDict] = {}
        names: dict[object, str] = {}
        for (topic, index), (partition, change) in items.items():
            names[partition.topic_id] = topic
            entry = topics.setdefault(topic, {"topic_name": topic, "topic_id": partition.topic_id or ZERO_UUID, "partitions": []})
            entry["partitions"].append(
                {
                    "partition_index": index,
                    "leader_epoch": change.leader_epoch,
                    "new_isr": list(change.isr),
                    "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in change.isr],  # ZooKeeper mode: -1
                    "leader_recovery_state": 0,
                    "partition_epoch": change.partition_epoch,
                }
            )
        body: AlterPartitionRequestDict = {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch(), "topics": list(topics.values())}
        response: AlterPartitionResponse = await connection.send(ApiKey.AlterPartition, version, body)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(response.error_code))
        answers = {}
        for answered in response.topics:
            name = answered.topic_name if version < 2 else names.get(answered.topic_id)
            if name is None:  # as Kafka: its partitions stay unanswered (UNKNOWN_SERVER_ERROR, retried)
                log.error("Received an unexpected topic %s in the AlterPartition response, ignoring it", answered.topic_id)
                continue
            for p in answered.partitions:
                answers[(name, p.partition_index)] = AlterPartitionResult(ErrorCode(p.error_code), p.leader_epoch, tuple(p.isr), p.partition_epoch)
        return answers
