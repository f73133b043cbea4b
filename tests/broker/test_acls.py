"""ACLs managed with Kafka's own ``kafka-acls.sh`` and on the wire, compared with a real Kafka 3.9 running
the same authorizer (``AclAuthorizer`` with ``super.users=User:ANONYMOUS``: PLAINTEXT clients are
ANONYMOUS, so the tools may manage ACLs), and ACLs surviving a restart."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

from odradek import Broker
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode

sys.path.insert(0, str(Path(__file__).parents[1] / "jvm"))
import kafka_jvm  # noqa: E402

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED = 3, 4
READ, ALLOW = 3, 3


@pytest.fixture(scope="module")
def kafka_with_acls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_jvm.KafkaBroker]:
    root = tmp_path_factory.mktemp("kafka-acls")
    try:
        zookeeper = kafka_jvm.ZooKeeper(root / "zookeeper").start()
    except kafka_jvm.JvmUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    kafka = kafka_jvm.KafkaBroker(root / "kafka", zookeeper.connect, settings=AUTHORIZER)
    try:
        yield kafka.start()
    finally:
        kafka.stop()
        zookeeper.stop()


@pytest.fixture(scope="module")
def odradek_with_acls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    config = {"broker.id": "0", **kafka_jvm.BROKER_SETTINGS, **AUTHORIZER}
    with Broker(log_dir=tmp_path_factory.mktemp("odradek-acls"), subprocess=True, config=config) as b:
        yield b


def acls_tool(bootstrap: str, *args: str) -> str:
    result = kafka_jvm.run_tool("kafka-acls", "--bootstrap-server", bootstrap, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def blocks(output: str) -> dict[tuple[str, str], set[str]]:
    """The tool's listing as (principal, resource) -> ACL lines. The order of principals, resources and ACLs
    is Java hash order (enum hash codes differ from one JVM to the next), not a contract; with
    ``--principal`` the tool prints an ``ACLs for principal`` line straight above the first resource's block,
    so that line is a heading of its own here. Every other line that is not an ACL heads a resource's block
    (``Adding ACLs for resource ...``, ``Current ACLs for resource ...``)."""
    listing: dict[tuple[str, str], set[str]] = {}
    principal = resource = ""
    for line in filter(None, (line.strip() for line in output.splitlines())):
        if line.startswith("ACLs for principal"):
            principal = line
        elif line.startswith("(principal="):
            listing[(principal, resource)].add(line)
        else:
            resource = line
            listing.setdefault((principal, resource), set())
    return listing


SCRIPT = [
    ["--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe", "--topic", "orders"],
    ["--add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.1", "--operation", "Write", "--topic", "ord", "--resource-pattern-type", "prefixed"],
    ["--add", "--allow-principal", "User:*", "--operation", "All", "--group", "*"],
    ["--add", "--allow-principal", "User:alice", "--producer", "--topic", "t1", "--transactional-id", "tx"],
    ["--list"],
    ["--list", "--topic", "orders", "--resource-pattern-type", "match"],
    ["--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders"],
    ["--list", "--principal", "User:alice"],
    ["--remove", "--force", "--topic", "ord", "--resource-pattern-type", "any"],
    ["--list"],
]


def test_kafka_acls_tool_adds_lists_and_removes_as_on_kafka(kafka_with_acls, odradek_with_acls) -> None:
    for args in SCRIPT:
        expected = acls_tool(kafka_with_acls.bootstrap, *args)
        got = acls_tool(odradek_with_acls.bootstrap, *args)
        assert blocks(got) == blocks(expected), args


def test_acls_survive_a_restart(tmp_path: Path, connect) -> None:
    with Broker(log_dir=tmp_path, config=AUTHORIZER) as broker:
        wire = connect(broker.bootstrap)
        creation = {"resource_type": TOPIC, "resource_name": "kept", "resource_pattern_type": PREFIXED, "principal": "User:carol", "host": "*", "operation": READ, "permission_type": ALLOW}
        assert wire.call(ApiKey.CreateAcls, 3, {"creations": [creation]}).results[0].error_code == ErrorCode.NONE
        wire.close()
        broker.restart()
        wire = connect(broker.bootstrap)
        described = wire.call(ApiKey.DescribeAcls, 3, {"resource_type_filter": TOPIC, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
        assert [(r.resource_name, r.pattern_type, [a.principal for a in r.acls]) for r in described.resources] == [("kept", PREFIXED, ["User:carol"])]


def creation(resource_type: int = TOPIC, name: str = "t", pattern: int = LITERAL, operation: int = READ, permission: int = ALLOW, principal: str = "User:alice") -> dict:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern, "principal": principal, "host": "*", "operation": operation, "permission_type": permission}


CREATIONS = [
    ("cluster resource named otherwise", 3, creation(CLUSTER, "my-cluster", operation=7)),
    ("empty resource name", 3, creation(name="")),
    ("resource type ANY", 3, creation(1)),
    ("pattern type MATCH", 3, creation(pattern=2)),
    ("operation ANY", 3, creation(operation=1)),
    ("a principal without a type", 3, creation(principal="alice")),
    ("a slash in the name", 3, creation(name="a/b")),
]


@pytest.mark.parametrize("version,acl", [c[1:] for c in CREATIONS], ids=[c[0] for c in CREATIONS])
def test_bad_creations_answer_as_kafka(version, acl, kafka_with_acls, odradek_with_acls, connect) -> None:
    def answer(bootstrap: str):
        result = connect(bootstrap).call(ApiKey.CreateAcls, version, {"creations": [acl]}).results[0]
        return result.error_code, result.error_message

    assert answer(odradek_with_acls.bootstrap) == answer(kafka_with_acls.bootstrap)


UNPARSABLE = [
    ("DescribeAcls with resource type UNKNOWN", ApiKey.DescribeAcls, 3, {"resource_type_filter": 0, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}),
    ("CreateAcls with operation UNKNOWN", ApiKey.CreateAcls, 3, {"creations": [creation(operation=0)]}),
    ("DeleteAcls with permission UNKNOWN", ApiKey.DeleteAcls, 3, {"filters": [{"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 0}]}),
]


@pytest.mark.parametrize("api,version,body", [u[1:] for u in UNPARSABLE], ids=[u[0] for u in UNPARSABLE])
def test_requests_kafka_cannot_parse_close_the_connection(api, version, body, kafka_with_acls, odradek_with_acls, connect) -> None:
    for bootstrap in (kafka_with_acls.bootstrap, odradek_with_acls.bootstrap):
        wire = connect(bootstrap)
        with pytest.raises(ConnectionError):
            wire.call(api, version, body)


def test_codes_kafka_does_not_define_match_nothing(kafka_with_acls, odradek_with_acls, connect) -> None:
    """A code outside Kafka's enums parses as UNKNOWN: a creation with it is refused, a filter with it
    selects nothing (and deletes nothing)."""
    weird = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None, "host_filter": None, "operation": 99, "permission_type": 1}

    def answers(bootstrap: str) -> tuple:
        wire = connect(bootstrap)
        created = wire.call(ApiKey.CreateAcls, 3, {"creations": [creation(name="weird", operation=99), creation(name="fine")]}).results
        described = wire.call(ApiKey.DescribeAcls, 3, weird)
        deleted = wire.call(ApiKey.DeleteAcls, 3, {"filters": [weird]}).filter_results
        return (
            [(r.error_code, r.error_message) for r in created],
            (described.error_code, described.error_message, len(described.resources)),
            [(r.error_code, r.error_message, len(r.matching_acls)) for r in deleted],
        )

    assert answers(odradek_with_acls.bootstrap) == answers(kafka_with_acls.bootstrap)


UNDEFINED_CODES = [("resource_type", "resource_type_filter", -128), ("pattern", "pattern_type_filter", 67), ("operation", "operation", -1), ("permission", "permission_type", 17)]
"""(creation argument, filter field, code): codes outside Kafka's enums that a mutation fuzz sent (issue 26).
Only UNKNOWN (0) makes Kafka's request constructors refuse a request, and the connection close; these
parse, as UNKNOWN elements of a binding."""
UNDEFINED_CASES = [*([c] for c in UNDEFINED_CODES), UNDEFINED_CODES]
"""Each code alone, and all four in one binding, as the fuzz sent them."""


@pytest.fixture(params=["authorizer", "no-authorizer"])
def kafka_and_odradek(request) -> tuple[str, str]:
    """The bootstraps of the real Kafka and of odradek, both with AclAuthorizer or both without one (where
    every ACL request that parses is answered SECURITY_DISABLED)."""
    kafka, odradek = ("kafka_with_acls", "odradek_with_acls") if request.param == "authorizer" else ("real_kafka", "odradek_as_kafka")
    return request.getfixturevalue(kafka).bootstrap, request.getfixturevalue(odradek).bootstrap


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("codes", UNDEFINED_CASES, ids=[c[0][0] for c in UNDEFINED_CODES] + ["all-four"])
def test_undefined_codes_are_answered_as_kafka_at_every_version(codes: list[tuple[str, str, int]], version: int, kafka_and_odradek: tuple[str, str], connect) -> None:
    created = creation(name="undefined", **{argument: code for argument, _, code in codes})
    filters = {"resource_type_filter": TOPIC, "resource_name_filter": "undefined", "pattern_type_filter": LITERAL, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    filters.update({field: code for _, field, code in codes})

    def answers(bootstrap: str) -> list:
        seen = []
        for api, body in ((ApiKey.CreateAcls, {"creations": [created]}), (ApiKey.DescribeAcls, filters), (ApiKey.DeleteAcls, {"filters": [filters]})):
            try:
                answer = connect(bootstrap).call(api, version, body)
            except ConnectionError:
                seen.append((api.name, "closed"))
                continue
            entries = answer.results if api == ApiKey.CreateAcls else answer.filter_results if api == ApiKey.DeleteAcls else [answer]
            seen.append((api.name, [(e.error_code, e.error_message, len(e.get("resources") or e.get("matching_acls") or [])) for e in entries]))
        return seen

    kafka, odradek = kafka_and_odradek
    assert answers(odradek) == answers(kafka)


def test_without_an_authorizer_the_tool_is_told_security_is_disabled(real_kafka, odradek_as_kafka) -> None:
    def listing(bootstrap: str) -> str:
        result = kafka_jvm.run_tool("kafka-acls", "--bootstrap-server", bootstrap, "--list")
        return result.stdout + result.stderr.split("\n\tat ")[0]

    expected = listing(real_kafka.bootstrap)
    assert "SecurityDisabledException: No Authorizer is configured on the broker" in expected
    assert listing(odradek_as_kafka.bootstrap) == expected


@pytest.mark.parametrize("name", ["org.apache.kafka.metadata.authorizer.StandardAuthorizer", "com.example.NoSuchAuthorizer"])
def test_an_authorizer_odradek_lacks_stops_the_start(tmp_path: Path, name: str) -> None:
    """Running without the authorization the operator configured would open the broker to everyone."""
    with pytest.raises(RuntimeError, match=f"authorizer.class.name={name}"):
        Broker(log_dir=tmp_path, subprocess=True, config={"authorizer.class.name": name}).start()
