"""AlterUserScramCredentials and DescribeUserScramCredentials over the credential store, as Kafka's
``ZkAdminManager`` answers them: per user, the first problem found (an empty name, an unknown mechanism,
iterations out of bounds, a user/mechanism pair twice in one request, deleting what does not exist) fails
that user's whole alteration with Kafka's code and message; the other users' changes are stored."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from odradek.broker.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, SCRAM_MECHANISMS, CredentialStore, ScramCredential
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.protocol.message_types.alter_user_scram_credentials import AlterUserScramCredentialsResultDict, ScramCredentialDeletion, ScramCredentialUpsertion
    from odradek.protocol.message_types.describe_user_scram_credentials import CredentialInfoDict, DescribeUserScramCredentialsResultDict

_BY_TYPE = {m.mechanism_type: m for m in SCRAM_MECHANISMS.values()}
_EMPTY_USER = "Username must not be empty"
_UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"


def alter_user_scram_credentials(
    store: CredentialStore, upsertions: list[ScramCredentialUpsertion], deletions: list[ScramCredentialDeletion]
) -> list[AlterUserScramCredentialsResultDict]:
    results: dict[str, tuple[ErrorCode, str | None]] = {}

    def fail(user: str, code: ErrorCode, message: str) -> None:
        results.setdefault(user, (code, message))

    for d in deletions:
        if not d.name:
            fail(d.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, _EMPTY_USER)
        elif d.mechanism not in _BY_TYPE:
            fail(d.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, _UNKNOWN_MECHANISM)
    for u in upsertions:
        if not u.name:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, _EMPTY_USER)
        elif u.mechanism not in _BY_TYPE:
            fail(u.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, _UNKNOWN_MECHANISM)
        elif u.iterations < MIN_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif u.iterations > MAX_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    pairs = Counter((x.name, x.mechanism) for x in [*upsertions, *deletions] if x.name not in results)
    for (user, _), count in pairs.items():
        if count > 1:
            fail(user, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    for d in deletions:
        if d.name not in results and store.credential(_BY_TYPE[d.mechanism].name, d.name) is None:
            fail(d.name, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    valid_users = {x.name for x in [*upsertions, *deletions]} - set(results)
    store.alter(
        [
            (u.name, _BY_TYPE[u.mechanism].name, ScramCredential.from_salted_password(_BY_TYPE[u.mechanism], bytes(u.salted_password), bytes(u.salt), u.iterations))
            for u in upsertions
            if u.name in valid_users
        ],
        [(d.name, _BY_TYPE[d.mechanism].name) for d in deletions if d.name in valid_users],
    )
    for user in valid_users:
        results[user] = (ErrorCode.NONE, None)
    return [{"user": user, "error_code": code, "error_message": message} for user, (code, message) in results.items()]


def describe_user_scram_credentials(store: CredentialStore, users: list[str] | None) -> list[DescribeUserScramCredentialsResultDict]:
    credentials = store.credentials()

    def infos(user: str) -> list[CredentialInfoDict]:
        return [{"mechanism": SCRAM_MECHANISMS[m].mechanism_type, "iterations": c.iterations} for m, c in sorted(credentials.get(user, {}).items(), key=lambda i: SCRAM_MECHANISMS[i[0]].mechanism_type)]

    if users is None:
        return [{"user": user, "error_code": ErrorCode.NONE, "error_message": None, "credential_infos": infos(user)} for user in sorted(credentials)]
    counts = Counter(users)
    results: list[DescribeUserScramCredentialsResultDict] = []
    for user in dict.fromkeys(users):
        if not user:
            results.append({"user": user, "error_code": ErrorCode.RESOURCE_NOT_FOUND, "error_message": _EMPTY_USER, "credential_infos": []})
        elif counts[user] > 1:
            message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
            results.append({"user": user, "error_code": ErrorCode.DUPLICATE_RESOURCE, "error_message": message, "credential_infos": []})
        elif user not in credentials:
            message = f"Attempt to describe a user credential that does not exist: {user}"
            results.append({"user": user, "error_code": ErrorCode.RESOURCE_NOT_FOUND, "error_message": message, "credential_infos": []})
        else:
            results.append({"user": user, "error_code": ErrorCode.NONE, "error_message": None, "credential_infos": infos(user)})
    return results
