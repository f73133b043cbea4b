"""The broker's coordinators, each built at its first use (``KafkaServer.coordinators``).

A single node whose clients form no group and open no transaction needs neither coordinator, and their
modules (the runtime, the group state machine, the transaction log, the markers, the verification) are a
good part of a broker's start-up. So a coordinator is built, and its modules imported, when something first
needs it: a request of one of its APIs, or this broker becoming the leader of a partition of its topic --
at start-up too, where a restart on a log directory holding ``__consumer_offsets`` or ``__transaction_state``
builds it and loads those partitions as before. One that is not built has no shards: no partition of its
topic to unload or forget, no timers, no transaction to complete.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Awaitable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import anyio
import anyio.to_thread

from odradek.protocol.values import FrozenFields

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from odradek.broker.config import BrokerConfig
    from odradek.broker.coordinator.deferred import Deferred
    from odradek.protocol.errors import ErrorCode
    from odradek.controller.metadata_image import TopicInfo

Runtime = Any
"""A :class:`~odradek.broker.coordinator.runtime.CoordinatorRuntime` (not imported here: the runtime imports
this module's :class:`CoordinatorTopic`)."""

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"

T = TypeVar("T")


class AskCoordinator(Exception):
    """What a partition leader's check of a transactional produce (or TxnOffsetCommit) raises when another
    broker's transaction coordinator must be asked first (:mod:`odradek.broker.coordinator.transaction.transaction_verification`):
    ``answer()`` asks it (the append waits for it, holding its turn on the partition), and the check is made
    again with its verdict. Here, beside the table of coordinators, so that the replica manager, which catches
    it on the produce path, imports neither the verification nor the transaction coordinator's package before
    a transactional produce needs them."""

    def __init__(self, ask: Callable[[], Deferred[ErrorCode]]) -> None:
        super().__init__("the transaction coordinator is another broker")
        self._ask = ask

    async def answer(self) -> ErrorCode:
        [verdict] = await self.answers([self])
        return verdict

    @staticmethod
    async def answers(asks: list["AskCoordinator"]) -> list[ErrorCode]:
        """Every ask sent before any answer is awaited: those for one coordinator share its next request."""
        deferreds = [ask._ask() for ask in asks]
        verdicts = []
        for deferred in deferreds:
            if not deferred.done:
                arrived = anyio.Event()
                deferred.add_callback(lambda _: arrived.set())
                await arrived.wait()
            verdicts.append(deferred.value)
        return verdicts


class CoordinatorTopic(FrozenFields):
    """A coordinator's internal topic, as the first FindCoordinator creates it."""

    __slots__ = _FIELDS = ("name", "num_partitions", "replication_factor", "configs", "compression")
    name: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str]
    compression: int
    """The codec of the batches the runtime writes (``offsets.topic.compression.codec``)."""

    def __init__(self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str], compression: int = 0) -> None:
        self._set(name, num_partitions, replication_factor, configs, compression)


def offsets_topic(config: "BrokerConfig") -> CoordinatorTopic:
    """``__consumer_offsets`` as the broker's ``offsets.topic.*`` configs make it."""
    return CoordinatorTopic(
        GROUP_METADATA_TOPIC,
        config["offsets.topic.num.partitions"],
        config["offsets.topic.replication.factor"],
        {"cleanup.policy": "compact", "segment.bytes": str(config["offsets.topic.segment.bytes"]), "compression.type": "producer"},
        config["offsets.topic.compression.codec"],
    )


def transaction_state_topic(config: "BrokerConfig") -> CoordinatorTopic:
    """``__transaction_state`` as Kafka makes it: compacted, uncompressed, no unclean leader election."""
    return CoordinatorTopic(
        TRANSACTION_STATE_TOPIC,
        config["transaction.state.log.num.partitions"],
        config["transaction.state.log.replication.factor"],
        {
            "unclean.leader.election.enable": "false",
            "compression.type": "uncompressed",
            "cleanup.policy": "compact",
            "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
            "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
        },
    )


def share_group_state_topic(config: "BrokerConfig") -> CoordinatorTopic:
    """``__share_group_state`` as Kafka 4.4 makes it (``ShareCoordinatorService.shareGroupStateTopicConfigs``)."""
    return CoordinatorTopic(
        SHARE_GROUP_STATE_TOPIC,
        config["share.coordinator.state.topic.num.partitions"],
        config["share.coordinator.state.topic.replication.factor"],
        {
            "cleanup.policy": "delete",
            "compression.type": "producer",
            "segment.bytes": str(config["share.coordinator.state.topic.segment.bytes"]),
            "min.insync.replicas": str(config["share.coordinator.state.topic.min.isr"]),
            "retention.ms": "-1",
        },
    )


class CoordinatorKind:
    """A coordinator: the internal topic it keeps its state in, and how to build it on that topic."""

    __slots__ = ("topic", "build", "modules")

    def __init__(self, topic: CoordinatorTopic, build: Callable[[CoordinatorTopic], Runtime], modules: tuple[str, ...] = ()) -> None:
        self.topic = topic
        self.build = build
        self.modules = modules
        """The modules ``build`` imports, which :meth:`Coordinators.prepare` imports ahead of it on a worker thread."""


class Coordinators(Mapping[str, Runtime]):
    """The coordinators by kind (FindCoordinator's key type names: ``group``, ``transaction``, ``share``); looking one
    up builds it. Each runs on the
    event loop (:meth:`CoordinatorRuntime.run`, its loads and timers) from the time the broker serves, or
    from its building when that comes later."""

    def __init__(self, kinds: dict[str, CoordinatorKind]) -> None:
        self.kinds = kinds
        self.built: dict[str, Runtime] = {}
        """The coordinators built so far: those with state to follow leadership changes and deletions."""
        self._tasks: TaskGroup | None = None

    def __getitem__(self, kind: str) -> Runtime:
        runtime = self.built.get(kind)
        if runtime is None:
            runtime = self.built[kind] = self.kinds[kind].build(self.kinds[kind].topic)
            if self._tasks is not None:
                # Its loads (queued meanwhile) start with it.
                self._tasks.start_soon(runtime.run)
        return runtime

    def __iter__(self) -> Iterator[str]:
        return iter(self.kinds)

    def __len__(self) -> int:
        return len(self.kinds)

    def topics(self) -> list[CoordinatorTopic]:
        return [kind.topic for kind in self.kinds.values()]

    def prepared(self, kind: str) -> bool:
        """Whether looking up ``kind`` (a kind this broker has) imports nothing: it is built, or its modules are."""
        return kind in self.built or all(module in sys.modules for module in self.kinds[kind].modules)

    def kinds_of(self, topics: Iterable[str]) -> list[str]:
        """The kinds keeping their state in one of ``topics``."""
        names = set(topics)
        return [name for name, kind in self.kinds.items() if kind.topic.name in names]

    def when_prepared(self, kinds: Iterable[str], answer: Callable[[], T | Awaitable[T]]) -> T | Awaitable[T]:
        """``answer()``, which may look up ``kinds``: at once when that imports nothing, else awaitable, their
        modules imported first on a worker thread (:meth:`prepare`), off the event loop that serves every
        client."""
        missing = [kind for kind in kinds if not self.prepared(kind)]
        if not missing:
            return answer()
        return self._answer_prepared(missing, answer)

    async def _answer_prepared(self, kinds: list[str], answer: Callable[[], T | Awaitable[T]]) -> T:
        for kind in kinds:
            await self.prepare(kind)
        result = answer()
        return await result if isinstance(result, Awaitable) else result

    async def prepare(self, kind: str) -> None:
        """Import the modules of coordinator ``kind`` on a worker thread, so that building it at its lookup
        holds the event loop only for the building. Imported on the event loop, and compiled from source
        where Python keeps no bytecode (``PYTHONDONTWRITEBYTECODE``), the group coordinator's modules held
        every client of the broker 0.3 to 1 s at the first FindCoordinator of a group."""
        missing = [module for module in self.kinds[kind].modules if module not in sys.modules]
        if missing:
            await anyio.to_thread.run_sync(lambda: [importlib.import_module(module) for module in missing])

    def leading(self, topic: "TopicInfo", partitions: list[int], broker_id: int) -> Runtime | None:
        """The coordinator to tell of a leadership change of ``partitions`` of ``topic``: a built one of that
        topic, or, when this broker now leads one of them, the topic's coordinator built now."""
        for name, kind in self.kinds.items():
            if kind.topic.name == topic.name:
                if name in self.built or any(topic.partitions[index].leader == broker_id for index in partitions):
                    return self[name]
                return None
        return None

    async def run(self, tasks: "TaskGroup") -> None:
        """Run the coordinators built so far in ``tasks`` (each once started), and those built later."""
        for runtime in list(self.built.values()):
            await tasks.start(runtime.run)
        self._tasks = tasks
