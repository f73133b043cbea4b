"""The share-state RPCs a share-partition leader sends the share coordinator (KIP-932; Kafka's
``ShareCoordinatorService``): InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState and ReadShareGroupStateSummary, all served by :func:`handle`, which tells them apart
by the request's API key.

Only brokers send them (CLUSTER_ACTION on the cluster; refused, every partition answers
CLUSTER_AUTHORIZATION_FAILED). A request without a group id is answered with no results, as Kafka's. Each
key (``group:topicId:partition``) is answered by the coordinator of its ``__share_group_state`` partition:
elsewhere NOT_COORDINATOR, while that partition loads COORDINATOR_LOAD_IN_PROGRESS; then, in Kafka's
order, INVALID_REQUEST for a negative partition, the epoch fences (FENCED_LEADER_EPOCH,
FENCED_STATE_EPOCH; ``broker/coordinator/share/share_coordinator.py``) and UNKNOWN_TOPIC_OR_PARTITION for
a topic partition the metadata does not hold. A write answers once its records are committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.coordinator.deferred import Deferred
from odradek.broker.coordinator.share.share_records import SharePartitionKey
from odradek.broker.handlers.share_acknowledgements import when_done
from odradek.broker.share.persister import READS, StateAnswer, served
from odradek.protocol.api import ApiKey, Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.delete_share_group_state import DeleteShareGroupStateRequest
    from odradek.protocol.message_types.initialize_share_group_state import InitializeShareGroupStateRequest
    from odradek.protocol.message_types.read_share_group_state import ReadShareGroupStateRequest
    from odradek.protocol.message_types.read_share_group_state_summary import ReadShareGroupStateSummaryRequest
    from odradek.protocol.message_types.write_share_group_state import WriteShareGroupStateRequest

    ShareStateRequest = (
        InitializeShareGroupStateRequest | ReadShareGroupStateRequest | WriteShareGroupStateRequest | DeleteShareGroupStateRequest | ReadShareGroupStateSummaryRequest
    )
    from odradek.broker.authorization import Authorization
    from odradek.broker.coordinator.share.share_coordinator import ShareCoordinator
    from odradek.controller.metadata_image import MetadataImage

def handle(coordinators: Any, metadata: "MetadataImage", authorization: "Authorization", request: Request[ShareStateRequest]) -> Any:
    api = ApiKey(request.header.api_key)
    body = request.body
    if not authorization.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        refused = Deferred.completed(StateAnswer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
        return _response(api, [(t.topic_id, p.partition, refused) for t in body.topics for p in t.partitions])
    if not body.group_id:
        return {"results": []}
    coordinator: ShareCoordinator = coordinators["share"].coordinator
    answers = [(t.topic_id, p.partition, _answer(api, coordinator, metadata, SharePartitionKey(body.group_id, t.topic_id, p.partition), p)) for t in body.topics for p in t.partitions]
    return when_done([d for _, _, d in answers], lambda: _response(api, answers))


def _answer(api: ApiKey, coordinator: "ShareCoordinator", metadata: "MetadataImage", key: SharePartitionKey, partition: Any) -> Deferred[StateAnswer]:
    error = coordinator.runtime.status(coordinator.partition_of(key))
    if error is None and key.partition < 0:
        error = ErrorCode.INVALID_REQUEST
    if error is not None:
        return Deferred.completed(StateAnswer(error))
    topic = metadata.topic_by_id(key.topic_id)
    if api != ApiKey.DeleteShareGroupState and (topic is None or key.partition not in topic.partitions):
        # After the fences, as Kafka checks: a fenced request is told so first.
        leader_epoch = -1 if api == ApiKey.ReadShareGroupStateSummary else getattr(partition, "leader_epoch", -1)
        fenced = coordinator.runtime.read(coordinator.partition_of(key), lambda shard: shard.fenced(key, getattr(partition, "state_epoch", -1), leader_epoch))
        return Deferred.completed(StateAnswer(fenced or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    fields = {
        "leader_epoch": getattr(partition, "leader_epoch", -1), "state_epoch": getattr(partition, "state_epoch", -1), "start_offset": getattr(partition, "start_offset", -1),
        "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset, "delivery_state": b.delivery_state, "delivery_count": b.delivery_count} for b in getattr(partition, "state_batches", ())],
    }
    return served(api, coordinator, key, fields)


def _response(api: ApiKey, answers: list[tuple[Any, int, Deferred[StateAnswer]]]) -> dict:
    results: dict[Any, list[dict]] = {}
    for topic_id, index, done in answers:
        answer = done.value
        entry: dict[str, Any] = {"partition": index, "error_code": answer.error, "error_message": None if answer.error == ErrorCode.NONE else answer.message or answer.error.message}
        if api in READS and answer.error == ErrorCode.NONE:
            entry.update(state_epoch=answer.state_epoch, start_offset=answer.start_offset)
            if api == ApiKey.ReadShareGroupState:
                entry["state_batches"] = [b.to_wire() for b in answer.batches]
            else:
                entry.update(leader_epoch=answer.leader_epoch, delivery_complete_count=answer.delivery_complete_count)
        results.setdefault(topic_id, []).append(entry)
    return {"results": [{"topic_id": t, "partitions": p} for t, p in results.items()]}
