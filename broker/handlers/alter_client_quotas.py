"""AlterClientQuotas: set or remove quota keys of user / client-id / ip entities (Kafka's
``handleAlterClientQuotasRequest`` over ``ZkAdminManager.alterClientQuotas``). Needs ALTER_CONFIGS on the
cluster; each entry succeeds or fails on its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.protocol.message_types.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponseDict, ResponseEntryDataDict

if TYPE_CHECKING:
    from odradek.broker.authorization import Authorization
    from odradek.broker.quotas import ClientQuotaConfigs
    from odradek.controller.metadata_support import MetadataSupport


def handle(authorization: "Authorization", client_quotas: "ClientQuotaConfigs", metadata_support: "MetadataSupport", request: Request[AlterClientQuotasRequest]) -> Awaitable[AlterClientQuotasResponseDict]:
    """Each entry altered in turn (in a cluster its ZooKeeper reads and writes made on a worker thread)."""
    body = request.body
    allowed = authorization.authorize(request, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)

    def alter() -> AlterClientQuotasResponseDict:
        entries: list[ResponseEntryDataDict] = []
        for entry in body.entries:
            entity = {e.entity_type: e.entity_name for e in entry.entity}
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            message: str | None = code.message  # Kafka's getErrorResponse text
            if allowed:
                try:
                    client_quotas.alter(entity, [(op.key, None if op.remove else op.value) for op in entry.ops], body.validate_only)
                    code, message = ErrorCode.NONE, None
                except KafkaError as exc:
                    code, message = exc.code, exc.message
            entries.append({"error_code": code, "error_message": message, "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()]})
        return {"entries": entries}

    return metadata_support.admin_call(alter)
