"""A ZooKeeper cluster's delegation tokens where Kafka 3.9 keeps them (``DelegationTokenManagerZk``): each
token's information at ``/delegation_token/tokens/<id>``, and each change announced by a sequence znode under
``/delegation_token/token_changes`` naming the token, which every broker's watch reads again into its cache.
So a token made through one broker logs in at every other, Kafka's brokers included."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from odradek.broker.security.delegation_token import TokenInformation
from odradek.controller import zk_data as zd
from odradek.controller.zk_client import ZkClient

if TYPE_CHECKING:
    from odradek.broker.security.delegation_token import DelegationTokenManager

log = logging.getLogger("odradek.delegation_token")


class ZkTokenStore:
    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk
        self._last_change = ""

    def load(self) -> list[TokenInformation]:
        """Kafka's ``createDelegationTokenPaths`` then ``loadCache``."""
        for path in (zd.DELEGATION_TOKENS, zd.DELEGATION_TOKEN_CHANGES):
            self.zk.create_recursive(path, None)
        tokens = []
        for token_id in self.zk.kazoo.get_children(zd.DELEGATION_TOKENS):
            token = self._read(token_id)
            if token is not None:
                tokens.append(token)
        log.info("Loading the token cache. Total token count: %d", len(tokens))
        return tokens

    def _read(self, token_id: str) -> TokenInformation | None:
        data, _ = self.zk.get_data_and_version(zd.delegation_token_path(token_id))
        if not data:
            return None
        try:
            return TokenInformation.from_json(data)
        except (ValueError, KeyError) as exc:
            log.error("Error while getting Token for tokenId: %s: %s", token_id, exc)
            return None

    def write(self, token: TokenInformation) -> None:
        path = zd.delegation_token_path(token.token_id)
        try:
            self.zk.kazoo.set(path, token.to_json())
        except NoNodeError:
            self.zk.create_recursive(path, token.to_json())
        self._announce(token.token_id)

    def delete(self, token_id: str) -> None:
        try:
            self.zk.kazoo.delete(zd.delegation_token_path(token_id))
        except NoNodeError:
            pass
        self._announce(token_id)

    def _announce(self, token_id: str) -> None:
        self.zk.create_recursive(f"{zd.DELEGATION_TOKEN_CHANGES}/{zd.DELEGATION_TOKEN_CHANGE_PREFIX}", token_id.encode(), sequence=True)

    def follow(self, manager: "DelegationTokenManager") -> None:
        """Every change another broker announces from now on, into ``manager``'s cache (on kazoo's thread)."""
        self._last_change = max(self.zk.kazoo.get_children(zd.DELEGATION_TOKEN_CHANGES), default="")

        def changed(children: list[str]) -> None:
            for child in sorted(c for c in children if c > self._last_change):
                self._last_change = child
                data, _ = self.zk.get_data_and_version(f"{zd.DELEGATION_TOKEN_CHANGES}/{child}")
                if data is None:
                    continue
                token_id = data.decode()
                log.info("Processing Token Notification for tokenId: %s", token_id)
                manager.updated(token_id, self._read(token_id))
            self.zk.purge_obsolete_notifications(zd.DELEGATION_TOKEN_CHANGES, children)

        ChildrenWatch(self.zk.kazoo, zd.DELEGATION_TOKEN_CHANGES, changed)
