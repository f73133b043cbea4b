"""The AclAuthorizer's rules, one row each: who may do what on which resource, given which ACLs."""

from __future__ import annotations

import pytest

from odradek.broker.authorizer import create_authorizer
from odradek.broker.authorizer.acl import AclOperation as Op, AclPermissionType as Perm, PatternType as PT, ResourceType as RT
from odradek.broker.authorizer.acl_bindings import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
)
from odradek.broker.authorizer.acl_authorizer import ACL_AUTHORIZER, AclAuthorizer, Session
from odradek.storage.config_types import ConfigError

ALICE = Session("User:alice", "10.0.0.1")


class DictStore:
    """ACL znodes in a dict, as the embedded controller keeps them."""

    def __init__(self) -> None:
        self.znodes: dict[str, dict] = {}

    def acl_znodes(self) -> dict[str, dict]:
        return dict(self.znodes)

    def update_acl_znode(self, path: str, update) -> dict | None:
        data = update(self.znodes.get(path))
        if data is None:
            self.znodes.pop(path, None)
        else:
            self.znodes[path] = data
        return data


def acl(name: str, op: Op, perm: Perm = Perm.ALLOW, *, principal: str = "User:alice", host: str = "*", pattern: PT = PT.LITERAL, rt: RT = RT.TOPIC) -> AclBinding:
    return AclBinding(ResourcePattern(rt, name, pattern), AccessControlEntry(principal, host, op, perm))


def authorizer(*bindings: AclBinding, super_users: str = "", allow_everyone: bool = False) -> AclAuthorizer:
    auth = AclAuthorizer.from_config(DictStore(), super_users, allow_everyone)
    assert auth.create_acls(list(bindings)) == [None] * len(bindings)
    return auth


T = ResourcePattern(RT.TOPIC, "orders")

RULES = [
    # (ACLs, authorizer options, session, operation, resource, allowed)
    ("no ACL: denied", [], {}, ALICE, Op.READ, T, False),
    ("no ACL, allow.everyone.if.no.acl.found", [], {"allow_everyone": True}, ALICE, Op.READ, T, True),
    ("allow.everyone does not open a resource with ACLs", [acl("orders", Op.WRITE, principal="User:bob")], {"allow_everyone": True}, ALICE, Op.READ, T, False),
    ("super user", [], {"super_users": "User:admin;User:alice"}, ALICE, Op.DELETE, T, True),
    ("literal allow", [acl("orders", Op.READ)], {}, ALICE, Op.READ, T, True),
    ("literal allow of another op", [acl("orders", Op.READ)], {}, ALICE, Op.WRITE, T, False),
    ("literal allow of another topic", [acl("payments", Op.READ)], {}, ALICE, Op.READ, T, False),
    ("literal allow of another type", [acl("orders", Op.READ, rt=RT.GROUP)], {}, ALICE, Op.READ, T, False),
    ("wildcard resource", [acl("*", Op.READ)], {}, ALICE, Op.READ, T, True),
    ("prefixed allow", [acl("ord", Op.READ, pattern=PT.PREFIXED)], {}, ALICE, Op.READ, T, True),
    ("prefixed not a prefix", [acl("orx", Op.READ, pattern=PT.PREFIXED)], {}, ALICE, Op.READ, T, False),
    ("prefixed * is a plain prefix", [acl("*", Op.READ, pattern=PT.PREFIXED)], {}, ALICE, Op.READ, T, False),
    ("wildcard principal", [acl("orders", Op.READ, principal="User:*")], {}, ALICE, Op.READ, T, True),
    ("other principal", [acl("orders", Op.READ, principal="User:bob")], {}, ALICE, Op.READ, T, False),
    ("exact host", [acl("orders", Op.READ, host="10.0.0.1")], {}, ALICE, Op.READ, T, True),
    ("other host", [acl("orders", Op.READ, host="10.0.0.2")], {}, ALICE, Op.READ, T, False),
    ("ALL grants any op", [acl("orders", Op.ALL)], {}, ALICE, Op.ALTER_CONFIGS, T, True),
    ("DENY wins over ALLOW", [acl("orders", Op.READ), acl("orders", Op.READ, Perm.DENY)], {}, ALICE, Op.READ, T, False),
    ("DENY of User:* wins", [acl("orders", Op.READ), acl("*", Op.READ, Perm.DENY, principal="User:*")], {}, ALICE, Op.READ, T, False),
    ("prefixed DENY wins over literal ALLOW", [acl("orders", Op.READ), acl("o", Op.READ, Perm.DENY, pattern=PT.PREFIXED)], {}, ALICE, Op.READ, T, False),
    ("DENY ALL wins", [acl("orders", Op.READ), acl("orders", Op.ALL, Perm.DENY)], {}, ALICE, Op.READ, T, False),
    ("DENY from another host does not apply", [acl("orders", Op.READ), acl("orders", Op.READ, Perm.DENY, host="10.9.9.9")], {}, ALICE, Op.READ, T, True),
    ("DENY of another op does not apply", [acl("orders", Op.READ), acl("orders", Op.WRITE, Perm.DENY)], {}, ALICE, Op.READ, T, True),
    ("a DENY alone denies even with allow.everyone", [acl("orders", Op.WRITE, Perm.DENY)], {"allow_everyone": True}, ALICE, Op.READ, T, False),
    ("super user beats DENY", [acl("orders", Op.READ, Perm.DENY)], {"super_users": "User:alice"}, ALICE, Op.READ, T, True),
    ("READ implies DESCRIBE", [acl("orders", Op.READ)], {}, ALICE, Op.DESCRIBE, T, True),
    ("WRITE implies DESCRIBE", [acl("orders", Op.WRITE)], {}, ALICE, Op.DESCRIBE, T, True),
    ("DELETE implies DESCRIBE", [acl("orders", Op.DELETE)], {}, ALICE, Op.DESCRIBE, T, True),
    ("ALTER implies DESCRIBE", [acl("orders", Op.ALTER)], {}, ALICE, Op.DESCRIBE, T, True),
    ("CREATE does not imply DESCRIBE", [acl("orders", Op.CREATE)], {}, ALICE, Op.DESCRIBE, T, False),
    ("DESCRIBE does not imply READ", [acl("orders", Op.DESCRIBE)], {}, ALICE, Op.READ, T, False),
    ("ALTER_CONFIGS implies DESCRIBE_CONFIGS", [acl("orders", Op.ALTER_CONFIGS)], {}, ALICE, Op.DESCRIBE_CONFIGS, T, True),
    ("DENY DESCRIBE is not implied by DENY READ", [acl("orders", Op.READ), acl("orders", Op.READ, Perm.DENY)], {}, ALICE, Op.DESCRIBE, T, True),
    ("cluster", [acl("kafka-cluster", Op.IDEMPOTENT_WRITE, rt=RT.CLUSTER)], {}, ALICE, Op.IDEMPOTENT_WRITE, ResourcePattern(RT.CLUSTER, "kafka-cluster"), True),
]


@pytest.mark.parametrize("bindings,options,session,op,resource,allowed", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_authorize(bindings, options, session, op, resource, allowed) -> None:
    assert authorizer(*bindings, **options).authorize(session, op, resource) is allowed


BY_TYPE = [
    ("no ACL", [], {}, False),
    ("no ACL, allow.everyone", [], {"allow_everyone": True}, True),
    ("WRITE on one topic", [acl("orders", Op.WRITE)], {}, True),
    ("WRITE on a prefix", [acl("ord", Op.WRITE, pattern=PT.PREFIXED)], {}, True),
    ("READ only", [acl("orders", Op.READ)], {}, False),
    ("WRITE denied on the same topic", [acl("orders", Op.WRITE), acl("orders", Op.WRITE, Perm.DENY)], {}, False),
    ("WRITE denied by a covering prefix", [acl("orders", Op.WRITE), acl("or", Op.WRITE, Perm.DENY, pattern=PT.PREFIXED)], {}, False),
    ("WRITE denied on another topic", [acl("orders", Op.WRITE), acl("payments", Op.WRITE, Perm.DENY)], {}, True),
    ("WRITE denied on *", [acl("orders", Op.WRITE), acl("*", Op.WRITE, Perm.DENY)], {"allow_everyone": True}, False),
    ("super user", [], {"super_users": "User:alice"}, True),
]


@pytest.mark.parametrize("bindings,options,allowed", [r[1:] for r in BY_TYPE], ids=[r[0] for r in BY_TYPE])
def test_authorize_by_resource_type(bindings, options, allowed) -> None:
    """KIP-679: IDEMPOTENT_WRITE is granted by WRITE on any topic."""
    assert authorizer(*bindings, **options).authorize_by_resource_type(ALICE, Op.WRITE, RT.TOPIC) is allowed


def test_authorized_operations_are_the_supported_ones_granted() -> None:
    auth = authorizer(acl("orders", Op.WRITE), acl("orders", Op.ALTER_CONFIGS))
    assert auth.authorized_operations(ALICE, T) == {Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}
    assert auth.authorized_operations(ALICE, ResourcePattern(RT.GROUP, "g")) == frozenset()


def test_acls_are_stored_as_zookeeper_znodes_and_reloaded() -> None:
    store = DictStore()
    auth = AclAuthorizer.from_config(store, None, False)
    auth.create_acls([acl("orders", Op.READ), acl("ord", Op.WRITE, Perm.DENY, pattern=PT.PREFIXED, host="10.0.0.1")])
    assert store.znodes == {
        "/kafka-acl/Topic/orders": {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]},
        "/kafka-acl-extended/prefixed/Topic/ord": {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Deny", "operation": "Write", "host": "10.0.0.1"}]},
    }
    assert AclAuthorizer.from_config(store, None, False).cache == auth.cache


def f(rt: RT = RT.ANY, name: str | None = None, pt: PT = PT.ANY, principal: str | None = None, host: str | None = None, op: Op = Op.ANY, perm: Perm = Perm.ANY) -> AclBindingFilter:
    return AclBindingFilter(ResourcePatternFilter(rt, name, pt), AccessControlEntryFilter(principal, host, op, perm))


LIT, WILD, PRE = acl("orders", Op.READ), acl("*", Op.READ), acl("ord", Op.WRITE, pattern=PT.PREFIXED)
FILTERS = [
    ("any", f(), [LIT, WILD, PRE]),
    ("literal name", f(RT.TOPIC, "orders", PT.LITERAL), [LIT]),
    ("any pattern of a name", f(RT.TOPIC, "ord", PT.ANY), [PRE]),
    ("match: literal, wildcard and covering prefixes", f(RT.TOPIC, "orders", PT.MATCH), [LIT, WILD, PRE]),
    ("prefixed", f(pt=PT.PREFIXED), [PRE]),
    ("operation", f(op=Op.WRITE), [PRE]),
    ("principal", f(principal="User:bob"), []),
    ("other resource type", f(RT.GROUP), []),
]


@pytest.mark.parametrize("binding_filter,expected", [r[1:] for r in FILTERS], ids=[r[0] for r in FILTERS])
def test_filters(binding_filter, expected) -> None:
    auth = authorizer(LIT, WILD, PRE)
    assert set(auth.acls(binding_filter)) == set(expected)


def test_delete_reports_each_binding_once_under_the_first_filter() -> None:
    auth = authorizer(LIT, WILD, PRE)
    deleted = auth.delete_acls([f(RT.TOPIC, "orders", PT.LITERAL), f(RT.TOPIC)])
    assert [set(d) for d in deleted] == [{LIT}, {WILD, PRE}]
    assert auth.cache == {} and auth.store.znodes == {}


def test_create_refuses_a_name_with_a_slash() -> None:
    auth = authorizer()
    [error] = auth.create_acls([acl("a/b", Op.READ)])
    assert error is not None and error.message == "Failed to create ACL"


def test_authorizer_class_names() -> None:
    assert create_authorizer("", DictStore(), None, False) is None
    assert isinstance(create_authorizer(ACL_AUTHORIZER, DictStore(), None, False), AclAuthorizer)
    for name in ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "com.example.Nope"):
        with pytest.raises(ConfigError):
            create_authorizer(name, DictStore(), None, False)
