"""Kafka's ACLs: resource patterns, access control entries, their bindings, the filters DescribeAcls and
DeleteAcls match them with, and the JSON an ACL znode holds. The authorizer, its stores and the ACL
requests' handlers use them; the vocabulary they are made of is :mod:`.acl`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from odradek.broker.authorizer.acl import (
    ACL_JSON_VERSION,
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_principal,
)
from odradek.protocol.values import FrozenFields, TupleFields

if TYPE_CHECKING:
    from odradek.protocol.message_types.delete_acls import DeleteAclsMatchingAclDict


class ResourcePattern(TupleFields):
    """A tuple: the authorizer builds several per decision, and a tuple is cheap to make and hash."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    @property
    def zk_path(self) -> str:
        """The znode Kafka's AclAuthorizer keeps this pattern's ACLs in (``ZkAclStore``)."""
        store = "/kafka-acl" if self.pattern_type == PatternType.LITERAL else f"/kafka-acl-extended/{self.pattern_type.name.lower()}"
        return f"{store}/{self.resource_type.pascal}/{self.name}"

    @classmethod
    def from_zk_path(cls, path: str) -> "ResourcePattern":
        parts = path.split("/", 5)
        if parts[1] == "kafka-acl":
            return cls(ResourceType.from_name(parts[2]), path.split("/", 3)[3], PatternType.LITERAL)
        return cls(ResourceType.from_name(parts[3]), path.split("/", 4)[4], PatternType[parts[2].upper()])


class AccessControlEntry(TupleFields):
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def to_json(self) -> dict[str, str]:
        return {"principal": self.principal, "permissionType": self.permission_type.pascal, "operation": self.operation.pascal, "host": self.host}

    @classmethod
    def from_json(cls, item: dict[str, str]) -> "AccessControlEntry":
        return cls(
            parse_principal(item["principal"]),
            item["host"],
            AclOperation.from_name(item["operation"]),
            AclPermissionType.from_name(item["permissionType"]),
        )


def acls_to_json(entries: Iterable[AccessControlEntry]) -> dict:
    """The content of an ACL znode: ``{"version": 1, "acls": [...]}``, the entries in the order given (Kafka
    writes its set's iteration order: insertion order up to four entries)."""
    return {"version": ACL_JSON_VERSION, "acls": [e.to_json() for e in entries]}


def acls_from_json(data: dict) -> list[AccessControlEntry]:
    """A znode's entries in its order, each once."""
    if data.get("version") != ACL_JSON_VERSION:
        raise ValueError(f"unsupported ACL JSON version {data.get('version')}")
    return list(dict.fromkeys(AccessControlEntry.from_json(item) for item in data["acls"]))


class AclBinding(TupleFields):
    pattern: ResourcePattern
    entry: AccessControlEntry


class ResourcePatternFilter(FrozenFields):
    __slots__ = _FIELDS = ("resource_type", "name", "pattern_type")
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def __init__(self, resource_type: ResourceType, name: str | None, pattern_type: PatternType) -> None:
        self._set(resource_type, name, pattern_type)

    def matches(self, pattern: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``: MATCH also selects the wildcard and the prefixes that
        cover ``name``; ANY selects literal and prefixed patterns of exactly ``name``."""
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)

    def definite_patterns(self) -> list[ResourcePattern]:
        """The patterns a filter that names exactly one resource selects, even if none has ACLs yet
        (``matchesAtMostOne`` and ``filterToResources``)."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN) or self.name is None:
            return []
        if self.pattern_type == PatternType.ANY:
            return [ResourcePattern(self.resource_type, self.name, p) for p in (PatternType.LITERAL, PatternType.PREFIXED)]
        if self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            return [ResourcePattern(self.resource_type, self.name, self.pattern_type)]
        return []


class AccessControlEntryFilter(FrozenFields):
    __slots__ = _FIELDS = ("principal", "host", "operation", "permission_type")
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def __init__(self, principal: str | None, host: str | None, operation: AclOperation, permission_type: AclPermissionType) -> None:
        self._set(principal, host, operation, permission_type)

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )


class AclBindingFilter(FrozenFields):
    __slots__ = _FIELDS = ("pattern", "entry")
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    def __init__(self, pattern: ResourcePatternFilter, entry: AccessControlEntryFilter) -> None:
        self._set(pattern, entry)

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)


def unparsable_filter(fields) -> bool:
    """A filter whose resource type, pattern type, operation or permission is UNKNOWN's code 0: Kafka's
    request parsing refuses it, which closes the connection. (A code Kafka does not define at all becomes
    UNKNOWN after parsing, and then matches nothing.)"""
    return 0 in (fields.resource_type_filter, fields.pattern_type_filter, fields.operation, fields.permission_type)


def binding_filter(fields) -> AclBindingFilter:
    """The filter a DescribeAcls request or a DeleteAcls filter entry carries (its ``*_filter`` fields)."""
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType.from_code(fields.resource_type_filter), fields.resource_name_filter, PatternType.from_code(fields.pattern_type_filter)),
        AccessControlEntryFilter(fields.principal_filter, fields.host_filter, AclOperation.from_code(fields.operation), AclPermissionType.from_code(fields.permission_type)),
    )


def binding_to_fields(pattern: ResourcePattern, entry: AccessControlEntry) -> DeleteAclsMatchingAclDict:
    """A binding as DeleteAcls' answer names its fields."""
    return {
        "resource_type": pattern.resource_type,
        "resource_name": pattern.name,
        "pattern_type": pattern.pattern_type,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation,
        "permission_type": entry.permission_type,
    }
