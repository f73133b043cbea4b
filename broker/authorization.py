"""What clients are told they may do. odradek has no authorizer (as Kafka with ``authorizer.class.name``
unset), so every operation a resource type supports is authorized; requests that ask for the bitfield
(Metadata v8+, DescribeCluster, DescribeGroups v3+) get all of them, the others get Kafka's "omitted"
marker."""

from __future__ import annotations

import enum

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class AclOperation(enum.IntEnum):
    """Kafka's ACL operation codes: bit positions in the authorized-operations fields."""

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


O = AclOperation
# AclEntry.supportedOperations in Kafka 3.9, per resource type.
CLUSTER_OPERATIONS = frozenset({O.CREATE, O.ALTER, O.DESCRIBE, O.CLUSTER_ACTION, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS, O.IDEMPOTENT_WRITE})
TOPIC_OPERATIONS = frozenset({O.READ, O.WRITE, O.CREATE, O.DESCRIBE, O.DELETE, O.ALTER, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS})
GROUP_OPERATIONS = frozenset({O.READ, O.DESCRIBE, O.DELETE})


def authorized_operations(operations: frozenset[AclOperation], requested: bool = True) -> int:
    """The bitfield for ``operations``, or the omitted marker when the request did not ask for it."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    return sum(1 << op for op in operations)
