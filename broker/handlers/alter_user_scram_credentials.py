"""AlterUserScramCredentials: add or remove users' SCRAM credentials (``kafka-configs.sh --alter
--add-config 'SCRAM-SHA-256=[password=...]' --entity-type users``); the client sends the salted password,
never the password. The rules are Kafka's (broker/security/scram_admin.py)."""

from __future__ import annotations

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.security.scram import CredentialStore
from odradek.broker.security.scram_admin import alter_user_scram_credentials
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode


def handle(credentials: CredentialStore, authorization: Authorization, request: Request) -> dict:
    body = request.body
    if not authorization.authorize(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        users = dict.fromkeys([u.name for u in body.upsertions] + [d.name for d in body.deletions])
        return {"throttle_time_ms": 0, "results": [{"user": u, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None} for u in users]}
    return {"throttle_time_ms": 0, "results": alter_user_scram_credentials(credentials, list(body.upsertions), list(body.deletions))}
