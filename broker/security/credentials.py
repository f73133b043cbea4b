"""Where a broker keeps its users' SCRAM credentials: a file beside the embedded controller's metadata on a
single node; in a ZooKeeper cluster, as Kafka 3.9 keeps them, the user's config entity
``/config/users/<user>`` (the user name sanitized) whose ``SCRAM-SHA-256``/``SCRAM-SHA-512`` keys sit beside
the user's quotas, each change announced in ``/config/changes`` so that every broker's cache follows
(Kafka's ``CredentialProvider`` fed by the ``UserConfigHandler``)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Mapping

from odradek.broker.quotas import DEFAULT, desanitize, sanitize
from odradek.broker.security.scram import SCRAM_MECHANISMS, ScramCredential
from odradek.controller import zk_data as zd
from odradek.controller.zk_client import ZkClient

if TYPE_CHECKING:
    from odradek.broker.security.delegation_token import DelegationTokenManager


def scram_configs(config: Mapping[str, str]) -> dict[str, str]:
    """The SCRAM keys of a user's entity config."""
    return {k: v for k, v in config.items() if k in SCRAM_MECHANISMS}


class ZkCredentialStore:
    """The users' SCRAM configs, cached from ZooKeeper (read at start, then at each user's change
    notification); changes are written to ZooKeeper first."""

    def __init__(self) -> None:
        self.zk: ZkClient | None = None
        self._users: dict[str, dict[str, str]] = {}
        """Desanitized user name -> mechanism -> ``salt=..,stored_key=..,server_key=..,iterations=..``."""
        self._lock = threading.Lock()
        self.tokens: DelegationTokenManager | None = None
        """The delegation tokens, bound to ZooKeeper with the credentials (:meth:`bind`)."""

    def bind(self, zk: ZkClient) -> None:
        """The broker's session; every ``/config/users/<user>`` read (at start)."""
        self.zk = zk
        for sanitized, config in zk.all_entity_configs(zd.ConfigType.USER).items():
            if "/" not in sanitized:
                self.update(sanitized, config)
        if self.tokens is not None:
            from odradek.broker.security.delegation_token_zk import ZkTokenStore

            store = ZkTokenStore(zk)
            self.tokens.store = store
            self.tokens.start()
            store.follow(self.tokens)

    def update(self, sanitized_user: str, config: Mapping[str, str]) -> None:
        """A user's entity config as ZooKeeper now holds it (the default user has no credentials)."""
        if sanitized_user == DEFAULT:
            return
        user = desanitize(sanitized_user)
        assert user is not None
        with self._lock:
            if configs := scram_configs(config):
                self._users[user] = configs
            else:
                self._users.pop(user, None)

    def credential(self, mechanism: str, user: str) -> ScramCredential | None:
        text = self._users.get(user, {}).get(mechanism)
        return ScramCredential.from_config(text) if text is not None else None

    def credentials(self) -> dict[str, dict[str, ScramCredential]]:
        return {user: {m: ScramCredential.from_config(t) for m, t in configs.items()} for user, configs in list(self._users.items())}

    def alter(self, upsertions: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]) -> None:
        """Per user (``ZkAdminManager.alterUserScramCredentials``): the entity config read from ZooKeeper,
        its mechanism keys removed or set, written back with a change notification."""
        assert self.zk is not None, "the broker's ZooKeeper session is bound before it serves"
        users = dict.fromkeys([u for u, _, _ in upsertions] + [u for u, _ in deletions])
        for user in users:
            config = self.zk.entity_config(zd.ConfigType.USER, sanitize(user))
            for name, mechanism in deletions:
                if name == user:
                    config.pop(mechanism, None)
            for name, mechanism, credential in upsertions:
                if name == user:
                    config[mechanism] = credential.to_config()
            self.zk.change_entity_config(zd.ConfigType.USER, sanitize(user), config)
            self.update(sanitize(user), config)
