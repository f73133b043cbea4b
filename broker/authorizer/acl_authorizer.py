"""Kafka's ZooKeeper-mode ``AclAuthorizer``, sans-IO: decisions over an in-memory ACL cache, and the ACL
changes CreateAcls/DeleteAcls make, written through an :class:`AclStore` (the embedded controller's
metadata on one node; ZooKeeper's ``/kafka-acl`` znodes in a cluster).

The decision rules are Kafka's: a super user may do anything; a resource with no matching ACL at all
(literal, ``*`` wildcard or covering prefix) is open only with ``allow.everyone.if.no.acl.found``;
otherwise any matching DENY refuses, and an ALLOW of the operation (or of one implying it, or ALL) for
the principal or ``User:*`` from the host or ``*`` grants.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

from odradek.broker.authorizer.acl import (
    IMPLIED_BY,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_principal,
)
from odradek.broker.authorizer.acl_bindings import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern, acls_from_json, acls_to_json
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("kafka.authorizer.logger")

ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


AclUpdate = Callable[[dict | None], dict | None]
"""A resource's new ACL znode JSON from its current one (None: no znode)."""


class AclStore(Protocol):
    """Where ACL znodes live: their JSON by path."""

    def acl_znodes(self) -> dict[str, dict]: ...

    def update_acl_znode(self, path: str, update: AclUpdate) -> dict | None:
        """Write ``update`` of the znode's current JSON (None deleting it) and return what was written. Where
        other brokers write too, the write is conditional on the version read, and ``update`` is applied
        again to what they wrote until it goes through (Kafka's ``updateResourceAcls``)."""

    def follow_changes(self, on_change: Callable[..., None]) -> None:
        """Where other brokers write ACLs too: ``on_change(pattern, read)`` at each of their changes."""


@dataclass(frozen=True)
class Session:
    """Who is asking, from where (Kafka's ``AuthorizableRequestContext`` as the authorizer uses it)."""

    principal: str
    """``type:name``, e.g. ``User:alice``."""
    host: str


@dataclass
class AclAuthorizer:
    store: AclStore
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    cache: dict[ResourcePattern, frozenset[AccessControlEntry]] = field(default_factory=dict)
    prefixes: dict[ResourceType, list[str]] = field(default_factory=dict)
    """The names of the prefixed patterns per resource type: a decision looks at these few, not every prefix
    of the resource's name."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    """In a cluster ACL changes are written from a worker thread while the event loop decides: both maps are
    replaced whole (copy on write) under this lock, never changed in place."""
    _changing: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    """Kafka's ``lock``: one change at a time is read from the store, written and cached before the next, a
    change notification's reading included, so that no cached state is older than one read after it."""

    @classmethod
    def from_config(cls, store: AclStore, super_users: str | None, allow_everyone: bool) -> "AclAuthorizer":
        """``super.users`` is a semicolon-separated list of principals."""
        users = frozenset(parse_principal(s.strip()) for s in (super_users or "").split(";") if s.strip())
        authorizer = cls(store, users, allow_everyone)
        authorizer.load()
        return authorizer

    def load(self) -> None:
        """Read every ACL znode (Kafka's ``loadCache``; a znode it cannot parse is skipped with a warning)."""
        cache = {}
        for path, data in self.store.acl_znodes().items():
            try:
                cache[ResourcePattern.from_zk_path(path)] = frozenset(acls_from_json(data))
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                log.warning("Ignoring ACLs at %s: %s", path, exc)
        with self._lock:
            self.cache, self.prefixes = cache, _prefix_index(cache)

    def refresh(self, pattern: ResourcePattern, read: Callable[[], dict | None]) -> None:
        """A resource's ACLs as ``read`` of its znode now finds them (Kafka's ``processAclChangeNotification``:
        another broker changed them), read and cached between two changes of this broker's."""
        with self._changing:
            data = read()
            try:
                entries = frozenset(acls_from_json(data)) if data is not None else frozenset()
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("Ignoring ACLs of %s: %s", pattern, exc)
                return
            log.info("Processing Acl change notification for %s:%s:%s", pattern.resource_type.pascal, pattern.pattern_type.name, pattern.name)
            self._cache(pattern, entries)

    # -- decisions --------------------------------------------------------------------------------------

    def authorize(self, session: Session, operation: AclOperation, resource: ResourcePattern, *, log_denied: bool = True) -> bool:
        """May ``session`` do ``operation`` on the literal ``resource``? A refusal is logged (Kafka's audit
        log at INFO) unless it only filters or computes authorized operations (Kafka's ``logIfDenied``)."""
        if session.principal in self.super_users:
            return True
        acls = self._matching_acls(resource.resource_type, resource.name)
        if not acls:
            allowed = self.allow_everyone_if_no_acl_found
        else:
            allowed = not self._acl_exists(acls, session, {operation}, AclPermissionType.DENY) and self._acl_exists(
                acls, session, IMPLIED_BY.get(operation, frozenset({operation})), AclPermissionType.ALLOW
            )
        if not allowed and log_denied:
            log.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:%s:%s", session.principal, operation.pascal, session.host, resource.resource_type.pascal, resource.pattern_type.name, resource.name)
        return allowed

    def authorized_operations(self, session: Session, resource: ResourcePattern) -> frozenset[AclOperation]:
        """The operations of ``resource``'s type that ``session`` may do (the ``*_authorized_operations`` fields)."""
        return frozenset(op for op in SUPPORTED_OPERATIONS[resource.resource_type] if self.authorize(session, op, resource, log_denied=False))

    def authorize_by_resource_type(self, session: Session, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May ``session`` do ``operation`` on at least one resource of the type (Kafka's
        ``authorizeByResourceType``, used for IDEMPOTENT_WRITE by WRITE on any topic, KIP-679)? True if
        some ALLOW (literal or prefixed) is not dominated by a DENY of the same name or a covering prefix."""
        if session.principal in self.super_users:
            return True
        deny_literals = self._names(session, operation, resource_type, PatternType.LITERAL, AclPermissionType.DENY)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = self._names(session, operation, resource_type, PatternType.PREFIXED, AclPermissionType.DENY)
        allow_literals = self._names(session, operation, resource_type, PatternType.LITERAL, AclPermissionType.ALLOW)
        allow_prefixes = self._names(session, operation, resource_type, PatternType.PREFIXED, AclPermissionType.ALLOW)

        def denied_by_prefix(name: str) -> bool:
            return any(name[:i] in deny_prefixes for i in range(1, len(name) + 1))

        return any(not denied_by_prefix(p) for p in allow_prefixes) or any(
            name == WILDCARD_RESOURCE or (name not in deny_literals and not denied_by_prefix(name)) for name in allow_literals
        )

    def _names(self, session: Session, operation: AclOperation, resource_type: ResourceType, pattern_type: PatternType, permission: AclPermissionType) -> set[str]:
        """Names of ``resource_type`` patterns with an entry of ``permission`` for exactly ``operation`` or ALL
        (this check has no implication) matching the session."""
        return {
            pattern.name
            for pattern, entries in self.cache.items()
            if pattern.resource_type == resource_type and pattern.pattern_type == pattern_type
            and any(e.permission_type == permission and e.operation in (operation, AclOperation.ALL) and self._entry_applies(e, session) for e in entries)
        }

    def _matching_acls(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The entries of the literal pattern, the ``*`` wildcard and every prefix pattern covering ``name``."""
        found: list[AccessControlEntry] = []
        for key in (ResourcePattern(resource_type, name), ResourcePattern(resource_type, WILDCARD_RESOURCE)):
            found.extend(self.cache.get(key, ()))
        cache = self.cache  # the prefixes may be a newer map's, read a moment later
        for prefix in self.prefixes.get(resource_type, ()):
            if name.startswith(prefix):
                found.extend(cache.get(ResourcePattern(resource_type, prefix, PatternType.PREFIXED), ()))
        return found

    @staticmethod
    def _entry_applies(entry: AccessControlEntry, session: Session) -> bool:
        return entry.principal in (session.principal, WILDCARD_PRINCIPAL) and entry.host in (session.host, WILDCARD_HOST)

    def _acl_exists(self, acls: Iterable[AccessControlEntry], session: Session, operations: Iterable[AclOperation], permission: AclPermissionType) -> bool:
        ops = set(operations) | {AclOperation.ALL}
        return any(e.permission_type == permission and e.operation in ops and self._entry_applies(e, session) for e in acls)

    # -- ACL management ---------------------------------------------------------------------------------

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The bindings a DescribeAcls filter selects, in Kafka's cache order (resource type, pattern type,
        name descending)."""
        cache = self.cache
        order = sorted(cache, key=lambda p: p.name, reverse=True)
        order.sort(key=lambda p: (p.resource_type, p.pattern_type))
        return [
            AclBinding(pattern, entry)
            for pattern in order
            for entry in sorted(cache[pattern])
            if binding_filter.matches(AclBinding(pattern, entry))
        ]

    def create_acls(self, bindings: list[AclBinding]) -> list[KafkaError | None]:
        """Add the bindings, grouped by resource pattern (one znode write each); per binding None or the error.
        A binding with an UNKNOWN element or a ``/`` in its name (a znode path separator) is refused."""
        with self._changing:
            return self._create_acls(bindings)

    def _create_acls(self, bindings: list[AclBinding]) -> list[KafkaError | None]:
        results: list[KafkaError | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, binding in enumerate(bindings):
            entry = binding.entry
            unknown = 0 in (binding.pattern.resource_type, binding.pattern.pattern_type, entry.operation, entry.permission_type)
            if unknown or "/" in binding.pattern.name:
                results[i] = KafkaError(ErrorCode.INVALID_REQUEST, "Failed to create ACL")
            else:
                by_pattern.setdefault(binding.pattern, []).append(i)
        for pattern, indexes in by_pattern.items():
            try:
                entries = [bindings[i].entry for i in indexes]
                for entry in entries:
                    parse_principal(entry.principal)
                self._update(pattern, lambda current: list(dict.fromkeys([*current, *entries])))  # called before the loop moves on
            except (ValueError, KafkaError) as exc:
                error = exc if isinstance(exc, KafkaError) else KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
                for i in indexes:
                    results[i] = error
        return results

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove what each filter matches among each resource's current ACLs; per filter the bindings it
        deleted (a binding matched by several filters is reported under the first)."""
        with self._changing:
            return self._delete_acls(filters)

    def _delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        deleted: list[list[AclBinding]] = [[] for _ in filters]
        patterns = list(self.cache)
        for f in filters:
            patterns.extend(p for p in f.pattern.definite_patterns() if p not in patterns)
        claimed: set[AclBinding] = set()
        for pattern in patterns:
            matching = [(i, f) for i, f in enumerate(filters) if f.pattern.matches(pattern)]
            if not matching:
                continue
            removed: dict[AclBinding, int] = {}

            def remove(current: list[AccessControlEntry], pattern: ResourcePattern = pattern, matching=matching, removed=removed) -> list[AccessControlEntry]:
                removed.clear()  # applied again after another broker's write: only the last round counts
                for entry in current:
                    for i, f in matching:
                        if f.entry.matches(entry):
                            removed.setdefault(AclBinding(pattern, entry), i)
                return [e for e in current if AclBinding(pattern, e) not in removed]

            self._update(pattern, remove)
            for binding, i in sorted(removed.items(), key=lambda item: item[0].entry):
                if binding not in claimed:
                    claimed.add(binding)
                    deleted[i].append(binding)
        return deleted

    def _update(self, pattern: ResourcePattern, change: Callable[[list[AccessControlEntry]], list[AccessControlEntry]]) -> None:
        """Write ``change`` of a pattern's current entries (its znode deleted when none are left), then cache them."""

        def update(data: dict | None) -> dict | None:
            current = acls_from_json(data) if data is not None else []
            entries = change(current)
            return acls_to_json(entries) if entries else None

        written = self.store.update_acl_znode(pattern.zk_path, update)
        entries = frozenset(acls_from_json(written)) if written is not None else frozenset()
        if entries != self.cache.get(pattern, frozenset()):
            log.info("Updated ACLs for %s:%s:%s", pattern.resource_type.pascal, pattern.pattern_type.name, pattern.name)
        self._cache(pattern, entries)

    def _cache(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        with self._lock:
            cache = dict(self.cache)
            if entries:
                cache[pattern] = entries
            else:
                cache.pop(pattern, None)
            self.cache, self.prefixes = cache, _prefix_index(cache)


def _prefix_index(cache: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> dict[ResourceType, list[str]]:
    prefixes: dict[ResourceType, list[str]] = {}
    for pattern in cache:
        if pattern.pattern_type == PatternType.PREFIXED:
            prefixes.setdefault(pattern.resource_type, []).append(pattern.name)
    return prefixes
