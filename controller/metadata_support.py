"""What the broker asks of its metadata mode: one interface, chosen once at start (Kafka's ``MetadataSupport``).

Kafka 3.9 hands its request handlers a ``MetadataSupport``, a ``ZkSupport`` or a ``RaftSupport``, and each
handler that only one mode serves downcasts it (``requireZkOrThrow``). Here the handlers never ask which mode
they run in: every difference is a method of :class:`MetadataSupport`, answering the same types in every mode.

- :class:`odradek.controller.embedded_controller.EmbeddedController`: a single node that is its own controller. Its
  changes are in the image when the call returns; it answers the controller's requests from other brokers
  as a broker no controller leads would (STALE_CONTROLLER_EPOCH, NOT_CONTROLLER).
- :class:`odradek.broker.zk_broker.ZkBroker` (``zookeeper.connect``): a broker of a ZooKeeper cluster. It
  writes ZooKeeper (on a worker thread, :meth:`MetadataSupport.admin_call`) and waits for the controller's
  UpdateMetadata to show the change; only the active controller's broker serves the controller's requests.

A third mode (KRaft: a broker forwarding to a controller quorum and following its metadata log) is a third
implementation and a third branch where the broker starts (``odradek.broker.kafka_server``); no handler
changes. tests/test_layering.py checks that handlers name no implementation and that nothing outside the
start-up code tests the mode.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Awaitable, Callable, ClassVar, Iterable, Mapping, Protocol, TypeVar

from odradek.controller.metadata_image import MetadataImage, TopicInfo
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka_uuid import Uuid
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    # The election, reassignment and ZooKeeper data modules are imported where they are used: a single node
    # starts without them.
    from odradek.controller.leader_election import ElectionError, ElectionType
    from odradek.controller.reassignment import ApiError
    from odradek.controller.zk_data import ReplicaAssignment
    from odradek.protocol.message_types.allocate_producer_ids import AllocateProducerIdsResponseDict
    from odradek.protocol.message_types.alter_configs import AlterConfigsResponseDict
    from odradek.protocol.message_types.alter_partition import AlterPartitionResponseDict
    from odradek.protocol.message_types.controlled_shutdown import ControlledShutdownResponseDict

T = TypeVar("T")

PartitionErrors = dict[TopicPartition, ErrorCode]
"""A controller request's answer per partition (LeaderAndIsr, StopReplica)."""


if TYPE_CHECKING:  # a type for the checker only: creating a Protocol class costs ~0.13 M instructions a start
    class ControllerForBrokers(Protocol):
        """The active controller as other brokers reach it (AlterPartition, AllocateProducerIds,
        ControlledShutdown): each answer a response body, made on the controller's own thread."""

        def alter_partition(self, body: Any, version: int) -> "Future[AlterPartitionResponseDict]": ...

        def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> "Future[AllocateProducerIdsResponseDict]": ...

        def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> "Future[ControlledShutdownResponseDict]": ...

    class ConfigWrites(Protocol):
        """The config changes of one AlterConfigs or IncrementalAlterConfigs, made as the mode makes them: at once
        (the embedded controller), or gathered while the request is checked and written before it is answered
        (ZooKeeper, off the event loop)."""

        def set_topic_configs(self, name: str, configs: dict[str, str]) -> None: ...

        def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
            """A broker's dynamic configs (its id) or the cluster default's (``<default>``), replaced."""

        def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
            """A group's configs, replaced (a group left without any has no entry)."""

        def written(self, answer: AlterConfigsResponseDict) -> AlterConfigsResponseDict | Awaitable[AlterConfigsResponseDict]:
            """``answer`` (an AlterConfigs or IncrementalAlterConfigs response: the two have one shape), once every
            change is written."""


class MetadataSupport(ABC):
    """The cluster's metadata as one broker sees and changes it."""

    def __init__(self) -> None:
        self.creating: set[str] = set()
        """Topics whose logs are being made before the topic is created: their names are taken."""

    @property
    @abstractmethod
    def image(self) -> MetadataImage:
        """The broker's current metadata: brokers, topics, configs (replaced as it changes: read it each time)."""

    # -- lifecycle --------------------------------------------------------------------------------------------

    @abstractmethod
    def startup(self) -> None:
        """Join the cluster once the logs are loaded: this broker's partitions are handed to it."""

    @abstractmethod
    async def controlled_shutdown(self) -> None:
        """Before the broker stops serving: have its leaderships moved to other replicas, if any can take them."""

    @abstractmethod
    def shutdown(self) -> None: ...

    # -- where requests for the controller are served ---------------------------------------------------------

    @abstractmethod
    def is_controller(self) -> bool:
        """Whether the admin requests Kafka sends to the controller (CreateTopics, DeleteTopics,
        CreatePartitions, AlterUserScramCredentials, partition reassignments) are served here; elsewhere they
        are answered NOT_CONTROLLER, and the client asks the broker the metadata names controller."""

    @abstractmethod
    def controller_for_brokers(self) -> ControllerForBrokers | None:
        """The controller other brokers' requests reach, when it is active here; None answers them
        NOT_CONTROLLER."""

    @abstractmethod
    async def admin_call(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``call`` (one that reads or writes the metadata store) made where the store allows: on the event
        loop, or on a worker thread when it blocks on the network."""

    # -- topics ------------------------------------------------------------------------------------------------

    def reserve_topic_name(self, name: str) -> None:
        """Take a validated topic's name while its logs are made: no other request creates it meanwhile."""
        self.creating.add(name)

    def release_topic_name(self, name: str) -> None:
        self.creating.discard(name)

    @abstractmethod
    def makes_logs_before_publishing(self) -> bool:
        """Whether a topic the broker creates for itself (auto-creation, the coordinators' topics) has its logs
        made before it is published; otherwise the controller's LeaderAndIsr makes them, as Kafka's brokers do."""

    @abstractmethod
    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        assignments: dict[int, list[int]] | None = None,
        *,
        validate_only: bool = False,
        default_partitions: int = 1,
        default_replication_factor: int = 1,
        topic_id: Uuid | None = None,
    ) -> TopicInfo:
        """Validate and assign a topic (raising the KafkaError Kafka answers); unless ``validate_only``, create
        it. ``topic_id``: the id a validate-only call chose, for logs made in advance."""

    @abstractmethod
    def delete_topic(self, name: str) -> TopicInfo: ...

    @abstractmethod
    def plan_partitions(self, name: str, count: int, assignments: list[list[int]] | None) -> TopicInfo:
        """The topic with only the new partitions whose logs are to be made before :meth:`create_partitions`."""

    @abstractmethod
    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None) -> list[int]:
        """Grow the topic to ``count`` partitions; answers the new partitions."""

    @abstractmethod
    async def until_led(self, partitions: Mapping[str, Iterable[int]], timeout_s: float) -> set[str]:
        """The topics of which a created partition is not yet led in :attr:`image` once ``timeout_s`` passed
        (Kafka's ``DelayedCreatePartitions``)."""

    @abstractmethod
    async def until_gone(self, topics: Iterable[str], timeout_s: float) -> set[str]:
        """The deleted topics still in :attr:`image` once ``timeout_s`` passed (``DelayedDeleteTopics``)."""

    # -- configs and producer ids -------------------------------------------------------------------------------

    @abstractmethod
    def config_writes(self) -> ConfigWrites:
        """Where one request's config changes go."""

    def entity_configs(self) -> Mapping[str, dict[str, str]]:
        """The client quota entities' configs (``users/u``, ``clients/c``, ``users/u/clients/c``, ``ips/i``), for
        the quotas: the image's own map, not to be changed. The same dict for the broker's life, changed in place
        (``ClientQuotas.entities`` holds it)."""
        return self.image.entity_configs

    @abstractmethod
    def set_entity_config(self, path: str, props: dict[str, str]) -> None:
        """Replace one client quota entity's configs; an entity left without any has no entry."""

    @abstractmethod
    def allocate_producer_ids(self) -> range:
        """A block of producer ids for this broker, unique in the cluster."""

    allocating_producer_ids_waits: ClassVar[bool] = False
    """Whether :meth:`allocate_producer_ids` waits for a round trip (ZooKeeper's conditional write): blocks are
    then claimed on a worker thread ahead of need, as Kafka 3.9's brokers ask their controller for them."""

    # -- leaders and reassignments ------------------------------------------------------------------------------

    @abstractmethod
    async def elect_leaders(self, partitions: set[TopicPartition], election_type: ElectionType, timeout_s: float) -> dict[TopicPartition, ElectionError]:
        """An ElectLeaders request's outcome per partition, each elected leader shown in :attr:`image`."""

    @abstractmethod
    async def alter_partition_reassignments(self, targets: dict[TopicPartition, tuple[int, ...] | None]) -> dict[TopicPartition, ApiError] | ApiError:
        """Start (or with None cancel) moves: each partition's answer, or one error for the whole request."""

    @abstractmethod
    async def list_partition_reassignments(self, partitions: list[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment] | ApiError:
        """The moves in progress (None: of every partition), or one error for the whole request."""

    # -- the controller's requests to this broker ---------------------------------------------------------------

    @abstractmethod
    def leader_and_isr(self, body: Any) -> tuple[ErrorCode, PartitionErrors]:
        """Become leader or follower of the partitions named; the request's error and each partition's."""

    @abstractmethod
    def stop_replica(self, body: Any) -> tuple[ErrorCode, PartitionErrors]:
        """Stop serving (and where said, delete) the replicas named."""

    @abstractmethod
    def update_metadata(self, body: Any) -> ErrorCode:
        """The controller's view of brokers and partitions, taken into :attr:`image`."""
