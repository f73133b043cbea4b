"""ACLs in ZooKeeper, as a cluster of Kafka 3.9 brokers keeps them (``ZkAclStore``, ``ZkAclChangeStore``):
one znode per resource pattern, ``/kafka-acl/<ResourceType>/<name>`` (literal) and
``/kafka-acl-extended/prefixed/<ResourceType>/<name>``, written conditionally on the version read, each
change announced by an ``acl_changes_<seq>`` notification that every broker's authorizer follows.

Any broker may change any resource's ACLs; the notification makes the others read the resource again
(Kafka's ``ZkNodeChangeNotificationListener``: every notification newer than the last one processed, all
of them when the broker starts; those older than 15 minutes are purged).
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from typing import Callable

from kazoo.exceptions import KazooException
from kazoo.protocol.states import EventType, WatchedEvent

from odradek.broker.authorizer.acl import PatternType, ResourceType
from odradek.broker.authorizer.acl_bindings import ResourcePattern
from odradek.broker.authorizer.acl_authorizer import AclUpdate
from odradek.controller import zk_data as zd
from odradek.controller.zk_client import UNKNOWN_VERSION, ZkClient

log = logging.getLogger("kafka.authorizer.logger")

MAX_UPDATE_RETRIES = 10
"""``AclAuthorizer.maxUpdateRetries``: a write that lost the race this often more fails."""
RETRY_BACKOFF_MS, RETRY_BACKOFF_JITTER_MS = 100, 50
"""``retryBackoffMs`` and ``retryBackoffJitterMs``: the pause before reading a resource again after losing a race."""


ChangeHandler = Callable[[ResourcePattern, Callable[[], "dict | None"]], None]
"""What follows another broker's change: the resource, and how to read its ACL znode now."""


class AclUpdateError(Exception):
    """Kafka's ``IllegalStateException`` after ``maxUpdateRetries`` lost races."""


class ZkAclStore:
    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk
        self._last_change: dict[str, str] = {}
        """Per store, the newest notification processed (their names sort in sequence order)."""
        self._processing = threading.Lock()

    def acl_znodes(self) -> dict[str, dict]:
        """Every resource's ACLs (data that is not JSON is skipped, as Kafka reads it: no ACLs), read when the
        authorizer starts, after it made the ACL paths (Kafka's ``configure``)."""
        self.zk.create_acl_paths()
        found = {}
        for path, (data, _) in self.zk.acl_znodes().items():
            js = zd.decode_acls(data)
            if js is not None:
                found[path] = js
        return found

    def update_acl_znode(self, path: str, update: AclUpdate) -> dict | None:
        """Kafka's ``updateResourceAcls``: apply ``update`` to the znode as read and write it at that version
        (created if there was none, deleted if nothing is left); lost to another writer, read again and retry.
        A change is then announced in the store's change path."""
        pattern = ResourcePattern.from_zk_path(path)
        for attempt in range(MAX_UPDATE_RETRIES + 1):
            if attempt:
                time.sleep((RETRY_BACKOFF_MS + random.randrange(RETRY_BACKOFF_JITTER_MS)) / 1000)
            data, version = self.zk.get_data_and_version(path)
            current = zd.decode_acls(data)
            new = update(current)
            if new is not None:
                encoded = zd.encode_acls(new["acls"])
                ok, _ = self.zk.conditional_update(path, encoded, version) if version != UNKNOWN_VERSION else self.zk.create_if_not_exists(path, encoded)
            else:
                ok = version == UNKNOWN_VERSION or self.zk.conditional_delete(path, version)
            if ok:
                if _entries(new) != _entries(current):
                    store = pattern.pattern_type.name
                    self.zk.create_acl_change_notification(store, zd.encode_acl_change(pattern.resource_type.name, pattern.name, store))
                return new
        raise AclUpdateError(f"Failed to update ACLs for {path} after trying a maximum of {MAX_UPDATE_RETRIES} times")

    def follow_changes(self, on_change: ChangeHandler) -> None:
        """Watch both change paths; ``on_change(pattern, read)`` (``read`` giving the pattern's znode JSON)
        runs on a kazoo thread for every notification not yet processed (all present ones first)."""
        for store, path in zd.ACL_CHANGES.items():
            self._last_change[store] = ""
            self._watch(store, path, on_change)

    def _watch(self, store: str, path: str, on_change: ChangeHandler) -> None:
        """A child watch set again at each firing, and in every new session, whose watches start afresh
        (Kafka's listener looks for notifications it has not processed then, ``afterInitializingSession``)."""

        def fired(event: WatchedEvent | None = None) -> None:
            if event is not None and event.type == EventType.NONE:
                return
            with self._processing:
                try:
                    children = self.zk.kazoo.get_children(path, watch=fired)
                except KazooException as exc:  # the session is lost: its successor sets the watch again
                    log.warning("Cannot follow ACL changes at %s: %s", path, exc)
                    return
                self._process(store, path, sorted(children), on_change)

        self.zk.on_new_session(fired)
        self.zk.kazoo.handler.spawn(fired)

    def _process(self, store: str, path: str, children: list[str], on_change: ChangeHandler) -> None:
        """On a kazoo thread: each new notification's resource handed over; then the expired notifications purged."""
        for child in children:
            if child <= self._last_change[store]:
                continue
            self._last_change[store] = child
            change, _ = self.zk.get_data_and_version(f"{path}/{child}")
            if change is None:
                continue
            try:
                resource_type, name, pattern_type = zd.decode_acl_change(store, change)
                pattern = ResourcePattern(ResourceType[resource_type], name, PatternType[pattern_type])
            except (ValueError, KeyError, UnicodeDecodeError) as exc:
                log.error("error processing change notification %r from %s/%s: %s", change, path, child, exc)
                continue
            on_change(pattern, functools.partial(self._read_acls, pattern.zk_path))
        self.zk.purge_obsolete_notifications(path, children)

    def _read_acls(self, path: str) -> "dict | None":
        """A pattern's znode JSON, read when the change is handled."""
        return zd.decode_acls(self.zk.get_data_and_version(path)[0])


def _entries(data: dict | None) -> set:
    return {tuple(sorted(acl.items())) for acl in (data or {}).get("acls", ())}
