"""Kafka's ACL vocabulary: resource types, pattern types, operations and permission types, and what each
resource type supports. Every handler names these to ask the authorization; the ACLs themselves (patterns,
entries, bindings and their filters) are :mod:`.acl_bindings`', which a broker with no authorizer imports only
at its first ACL request.

The codes are the wire codes of Kafka's ``ResourceType``, ``PatternType``, ``AclOperation`` and
``AclPermissionType``; names are Kafka's Pascal-case names (``SecurityUtils.operationName``), as they
appear in ZooKeeper's ``/kafka-acl/<ResourceType>/<name>`` JSON and in ``kafka-acls.sh`` output.
"""

from __future__ import annotations

from odradek.protocol.values import CodeEnum

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
