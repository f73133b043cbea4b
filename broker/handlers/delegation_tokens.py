"""CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and DescribeDelegationToken (KIP-48), as
Kafka 3.9's ZooKeeper-mode ``KafkaApis`` answers them: served by any broker (the tokens live in ZooKeeper, or
beside a single node's metadata), never on a PLAINTEXT listener, a one-way TLS one or a connection that
logged in with a token (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED); DELEGATION_TOKEN_AUTH_DISABLED without
``delegation.token.secret.key``. The rules are :mod:`odradek.broker.security.delegation_token`'s."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable

from odradek.broker.authorization import Authorization
from odradek.broker.authorizer.acl import AclOperation, ResourceType
from odradek.broker.network.request_context import ANONYMOUS, USER_TYPE, KafkaPrincipal
from odradek.controller.metadata_support import MetadataSupport
from odradek.protocol.api import ApiKey, Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.security.delegation_token import Created, DelegationTokenManager, TokenInformation

ERROR_TIMESTAMP = -1


def allow_token_requests(request: Request[Any]) -> bool:
    """Kafka's ``allowTokenRequests``: an authenticated connection that did not log in with a token."""
    context = request.context
    if context is None or context.token_authenticated or context.security_protocol == "PLAINTEXT":
        return False
    return not (context.security_protocol == "SSL" and context.principal == ANONYMOUS)


def handle(tokens: "DelegationTokenManager | None", metadata_support: MetadataSupport, authorization: Authorization, request: Request[Any]) -> Any:
    api = request.header.api_key
    if api == ApiKey.CreateDelegationToken:
        return create(tokens, metadata_support, authorization, request)
    if api == ApiKey.DescribeDelegationToken:
        return describe(tokens, authorization, request)
    expiry = _renew_or_expire(tokens, metadata_support, request)
    return expiry if isinstance(expiry, dict) else _expiry_answer(expiry)


# -- create ---------------------------------------------------------------------------------------------------


def create(tokens: "DelegationTokenManager | None", metadata_support: MetadataSupport, authorization: Authorization, request: Request[Any]) -> Any:
    body, requester = request.body, request.context.principal
    owner = KafkaPrincipal(body.owner_principal_type or "", body.owner_principal_name) if body.owner_principal_name else requester
    if not allow_token_requests(request):
        return _created(request, ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, requester)
    if owner != requester and not authorization.authorize(request, AclOperation.CREATE_TOKENS, ResourceType.USER, str(owner)):
        return _created(request, ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, requester)
    renewers = [KafkaPrincipal(r.principal_type, r.principal_name) for r in body.renewers]
    if any(r.principal_type != USER_TYPE for r in renewers):
        return _created(request, ErrorCode.INVALID_PRINCIPAL_TYPE, owner, requester)
    if tokens is None or not tokens.enabled:
        return _created(request, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, owner, requester)
    return _create(request, metadata_support.admin_call(tokens.create, owner, requester, renewers, body.max_lifetime_ms), owner, requester)


async def _create(request: Request[Any], creating: "Awaitable[Created]", owner: KafkaPrincipal, requester: KafkaPrincipal) -> dict[str, Any]:
    created = await creating
    return _created(request, created.error, owner, requester, created.info, created.hmac)


def _created(request: Request[Any], error: ErrorCode, owner: KafkaPrincipal, requester: KafkaPrincipal, token: "TokenInformation | None" = None, hmac: bytes = b"") -> dict[str, Any]:
    """Kafka's ``CreateDelegationTokenResponse.prepareResponse``: the owner and requester even on an error."""
    return {
        "throttle_time_ms": 0, "error_code": error,
        "principal_type": owner.principal_type, "principal_name": owner.name,
        "token_requester_principal_type": requester.principal_type, "token_requester_principal_name": requester.name,
        "issue_timestamp_ms": token.issue_timestamp if token else ERROR_TIMESTAMP,
        "expiry_timestamp_ms": token.expiry_timestamp if token else ERROR_TIMESTAMP,
        "max_timestamp_ms": token.max_timestamp if token else ERROR_TIMESTAMP,
        "token_id": token.token_id if token else "", "hmac": hmac,
    }


# -- renew and expire -----------------------------------------------------------------------------------------


def _renew_or_expire(tokens: "DelegationTokenManager | None", metadata_support: MetadataSupport, request: Request[Any]) -> Any:
    if not allow_token_requests(request):
        return _expiry(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP)
    if tokens is None or not tokens.enabled:
        return _expiry(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, ERROR_TIMESTAMP)
    body, principal = request.body, request.context.principal
    if request.header.api_key == ApiKey.RenewDelegationToken:
        return metadata_support.admin_call(tokens.renew, principal, bytes(body.hmac), body.renew_period_ms)
    return metadata_support.admin_call(tokens.expire, principal, bytes(body.hmac), body.expiry_time_period_ms)


async def _expiry_answer(outcome: Awaitable[tuple[ErrorCode, int]]) -> dict[str, Any]:
    return _expiry(*await outcome)


def _expiry(error: ErrorCode, expiry_timestamp: int) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": error, "expiry_timestamp_ms": expiry_timestamp}


# -- describe -------------------------------------------------------------------------------------------------


def describe(tokens: "DelegationTokenManager | None", authorization: Authorization, request: Request[Any]) -> dict[str, Any]:
    if not allow_token_requests(request):
        return _described(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    if tokens is None or not tokens.enabled:
        return _described(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
    asked = request.body.owners
    if asked is not None and not asked:
        return _described(ErrorCode.NONE)
    from odradek.broker.security.delegation_token import describe_filter

    owners = None if asked is None else [KafkaPrincipal(o.principal_type, o.principal_name) for o in asked]
    eligible = describe_filter(
        request.context.principal, owners,
        lambda token_id: authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token_id),
        lambda owner: authorization.authorize(request, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, str(owner)),
    )
    return _described(ErrorCode.NONE, [
        {
            "principal_type": t.owner.principal_type, "principal_name": t.owner.name,
            "token_requester_principal_type": t.token_requester.principal_type, "token_requester_principal_name": t.token_requester.name,
            "issue_timestamp": t.issue_timestamp, "expiry_timestamp": t.expiry_timestamp, "max_timestamp": t.max_timestamp,
            "token_id": t.token_id, "hmac": hmac,
            "renewers": [{"principal_type": r.principal_type, "principal_name": r.name} for r in t.renewers],
        }
        for t, hmac in tokens.tokens(eligible)
    ])


def _described(error: ErrorCode, tokens: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": error, "tokens": tokens or []}
