"""DescribeUserScramCredentials: which SCRAM mechanisms each user has, with their iterations (never salts or
keys); all users when the request names none."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.broker.security.scram import CredentialStore
from odradek.broker.security.scram_admin import describe_user_scram_credentials
from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.describe_user_scram_credentials import DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponseDict, DescribeUserScramCredentialsResultDict


def handle(credentials: CredentialStore, authorization: Authorization, request: Request[DescribeUserScramCredentialsRequest]) -> DescribeUserScramCredentialsResponseDict:
    if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        # Kafka's refusal repeats the error once per user named, without the user's name.
        refused: DescribeUserScramCredentialsResultDict = {"user": "", "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "credential_infos": []}
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "results": [refused for _ in request.body.users or ()]}
    users = request.body.users
    names = None if users is None else [u.name for u in users]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": describe_user_scram_credentials(credentials, names)}
