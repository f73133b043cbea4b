"""The single node's SCRAM credentials: a file beside the embedded controller's metadata.

Apart from :mod:`.scram`, which it imports at the first credential it parses: a broker whose listeners
have no SASL/SCRAM makes the store at start (AlterUserScramCredentials may write it) and never needs the
mechanisms, ``hashlib``, ``hmac`` and ``secrets`` behind it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.storage.checkpoints import write_atomically

if TYPE_CHECKING:
    from odradek.broker.security.delegation_token import DelegationTokenManager
    from odradek.broker.security.scram import ScramCredential

SCRAM_CREDENTIALS_FILE = "odradek-scram-credentials.json"
"""In the first log directory, beside the embedded controller's metadata."""


class FileCredentialStore:
    """The users' SCRAM configs as one JSON file, ``{user: {"SCRAM-SHA-256": "salt=...,..."}}`` (the config
    map ZooKeeper's ``/config/users/<user>`` holds), rewritten atomically on each change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, str]] = json.loads(path.read_text()) if path.exists() else {}
        self.tokens: DelegationTokenManager | None = None
        """The delegation tokens, when ``delegation.token.secret.key`` is set (kept in a file of their own)."""

    def credential(self, mechanism: str, user: str) -> ScramCredential | None:
        text = self._users.get(user, {}).get(mechanism)
        from odradek.broker.security.scram import ScramCredential

        return ScramCredential.from_config(text) if text is not None else None

    def credentials(self) -> dict[str, dict[str, ScramCredential]]:
        from odradek.broker.security.scram import ScramCredential

        return {user: {m: ScramCredential.from_config(t) for m, t in configs.items()} for user, configs in self._users.items()}

    def alter(self, upsertions: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]) -> None:
        with self._lock:
            users = {u: dict(c) for u, c in self._users.items()}
            for user, mechanism in deletions:
                users.get(user, {}).pop(mechanism, None)
            for user, mechanism, credential in upsertions:
                users.setdefault(user, {})[mechanism] = credential.to_config()
            users = {u: c for u, c in users.items() if c}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, json.dumps(users, sort_keys=True).encode())
            self._users = users
