"""Kafka's ACL vocabulary: resource patterns, access control entries, the filters DescribeAcls and
DeleteAcls match them with, and the JSON an ACL znode holds.

The codes are the wire codes of Kafka's ``ResourceType``, ``PatternType``, ``AclOperation`` and
``AclPermissionType``; names are Kafka's Pascal-case names (``SecurityUtils.operationName``), as they
appear in ZooKeeper's ``/kafka-acl/<ResourceType>/<name>`` JSON and in ``kafka-acls.sh`` output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from odradek.protocol.values import CodeEnum, FrozenFields, TupleFields

if TYPE_CHECKING:
    from odradek.protocol.message_types.delete_acls import DeleteAclsMatchingAclDict

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"
ACL_JSON_VERSION = 1


def pascal_case(name: str) -> str:
    """Kafka's ``toPascalCase``: ``DESCRIBE_CONFIGS`` -> ``DescribeConfigs``."""
    return "".join(part.capitalize() for part in name.split("_"))


class _Named(CodeEnum):
    @property
    def pascal(self) -> str:
        return pascal_case(self.name)

    @classmethod
    def from_code(cls, code: int):
        """Kafka's ``fromCode``: a code it does not know is UNKNOWN."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @classmethod
    def from_name(cls, name: str):
        """Kafka's ``SecurityUtils`` lookups accept the Pascal-case and the upper-case name."""
        for member in cls:
            if name in (member.pascal, member.pascal.upper()):
                return member
        raise ValueError(f"Unknown {cls.__name__}: {name}")


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Named):
    """Also the bit positions of the authorized-operations fields."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


O = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({O.READ, O.WRITE, O.CREATE, O.DESCRIBE, O.DELETE, O.ALTER, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({O.READ, O.DESCRIBE, O.DELETE}),
    ResourceType.CLUSTER: frozenset({O.CREATE, O.CLUSTER_ACTION, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS, O.IDEMPOTENT_WRITE, O.ALTER, O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({O.DESCRIBE, O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({O.DESCRIBE}),
    ResourceType.USER: frozenset({O.CREATE_TOKENS, O.DESCRIBE_TOKENS}),
}
"""Kafka's ``AclEntry.supportedOperations``: what authorized-operations fields are computed over."""

IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    O.DESCRIBE: frozenset({O.DESCRIBE, O.READ, O.WRITE, O.DELETE, O.ALTER}),
    O.DESCRIBE_CONFIGS: frozenset({O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS}),
}
"""An ALLOW of any of these grants the key operation (Kafka's ACL inheritance); others grant only themselves."""


def parse_principal(text: str | None) -> str:
    """Kafka's ``SecurityUtils.parseKafkaPrincipal``: ``type:name`` (split at the first colon), or ValueError.
    Principals are compared as this text, as Kafka compares type and name."""
    if not text or ":" not in text:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    return text


ANONYMOUS = "User:ANONYMOUS"
WILDCARD_PRINCIPAL = "User:*"


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
