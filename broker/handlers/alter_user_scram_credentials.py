"""AlterUserScramCredentials: add or remove users' SCRAM credentials (``kafka-configs.sh --alter
--add-config 'SCRAM-SHA-256=[password=...]' --entity-type users``); the client sends the salted password,
never the password. The rules are Kafka's (broker/security/scram_admin.py).

In a ZooKeeper cluster only the active controller's broker serves it, as Kafka's; any other answers
NOT_CONTROLLER and the admin client asks the controller. Needs ALTER on the cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.security.scram import CredentialStore
from odradek.broker.security.scram_admin import alter_user_scram_credentials
from odradek.controller.metadata_support import MetadataSupport
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.alter_user_scram_credentials import AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponseDict, AlterUserScramCredentialsResultDict


def handle(credentials: CredentialStore, metadata_support: MetadataSupport, authorization: Authorization, request: Request[AlterUserScramCredentialsRequest]) -> AlterUserScramCredentialsResponseDict | Awaitable[AlterUserScramCredentialsResponseDict]:
    body = request.body
    if not metadata_support.is_controller():
        return refused(body, ErrorCode.NOT_CONTROLLER)
    if not authorization.authorize(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return refused(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return answer(metadata_support.admin_call(alter_user_scram_credentials, credentials, list(body.upsertions), list(body.deletions)))


async def answer(results: Awaitable[list[AlterUserScramCredentialsResultDict]]) -> AlterUserScramCredentialsResponseDict:
    """The users' outcomes (in a cluster, the ZooKeeper reads and writes made on a worker thread)."""
    return {"throttle_time_ms": 0, "results": await results}


def refused(body: AlterUserScramCredentialsRequest, code: ErrorCode) -> AlterUserScramCredentialsResponseDict:
    """Kafka's ``getErrorResponse``: every user named, in name order, with the error (no message: ``ApiError``
    leaves out an exception's message when it is the code's own)."""
    users = sorted({u.name for u in body.upsertions} | {d.name for d in body.deletions})
    return {"throttle_time_ms": 0, "results": [{"user": u, "error_code": code, "error_message": None} for u in users]}
