"""DescribeClientQuotas: the quota entities a filter selects, with their values (Kafka's
``handleDescribeClientQuotasRequest`` over ``ZkAdminManager.describeClientQuotas``). Needs DESCRIBE_CONFIGS
on the cluster; a bad filter fails the whole request with a null entry list."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.quotas import FilterComponent
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.protocol.message_types.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponseDict

if TYPE_CHECKING:
    from odradek.broker.authorization import Authorization
    from odradek.broker.quotas import ClientQuotaConfigs

EXACT, DEFAULT, ANY = 0, 1, 2


def handle(authorization: "Authorization", client_quotas: "ClientQuotaConfigs", request: Request[DescribeClientQuotasRequest]) -> DescribeClientQuotasResponseDict:
    body = request.body
    if not authorization.authorize(request, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "entries": None}
    try:
        components = [component(c) for c in body.components]
        found = client_quotas.describe(components, body.strict)
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": exc.message, "entries": None}
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "entries": [
            {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()], "values": [{"key": k, "value": v} for k, v in values.items()]}
            for entity, values in found
        ],
    }


def component(c) -> FilterComponent:
    if c.match_type == EXACT:
        return FilterComponent(c.entity_type, c.match, False)
    if c.match_type == DEFAULT:
        return FilterComponent(c.entity_type, None, False)
    if c.match_type == ANY:
        return FilterComponent(c.entity_type, None, True)
    raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR)
