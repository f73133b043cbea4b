"""AlterUserScramCredentials: add or remove users' SCRAM credentials (``kafka-configs.sh --alter
--add-config 'SCRAM-SHA-256=[password=...]' --entity-type users``); the client sends the salted password,
never the password. The rules are Kafka's (broker/security/scram_admin.py)."""

from __future__ import annotations

from odradek.broker.security.scram import CredentialStore
from odradek.broker.security.scram_admin import alter_user_scram_credentials
from odradek.protocol.api import Request


def handle(credentials: CredentialStore, request: Request) -> dict:
    body = request.body
    return {"throttle_time_ms": 0, "results": alter_user_scram_credentials(credentials, list(body.upsertions), list(body.deletions))}
