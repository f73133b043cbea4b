"""Our committed message declarations against Kafka's JSON specs (3.9's and 4.4's), read here by an independent loader.

The generator (``odradek.tools.gen_messages``) wrote the declarations from these specs; this file re-reads
the specs with its own small parser and compares field by field, so a bug in the generator, a hand edit of a
generated module, or a spec update that was not regenerated all show up here, named by API and field.

A message declared from one spec set alone must equal that spec exactly. A message both sets define, where
4.4 adds versions, is compared version by version: at each version it must read as the spec that defines
it (3.9's up to 3.9's highest version, 4.4's above), and at each version both define, as both.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import pytest

from odradek.protocol.messages import MODULES, coordinator_records, data, headers
from odradek.protocol.schema import NULL, Array, F, Message, S

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO.parent / "shared" / "kafka-protocol"
SPECS_4_4 = REPO.parent / "shared" / "kafka-protocol-4.4"

PRIMITIVE_TYPES = {"bool", "int8", "int16", "uint16", "int32", "int64", "float64", "uuid", "string", "bytes", "records"}
INTEGER_TYPES = {"int8", "int16", "uint16", "int32", "int64"}

# A JSON string (kept) or a // comment running to the end of the line (dropped); strings may hold "//".
_STRING_OR_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*')


def read_spec(path: Path) -> dict[str, Any]:
    text = _STRING_OR_COMMENT.sub(lambda m: m.group(1) or "", path.read_text())
    return json.loads(text)


def spec_dir(name: str, root: Path = SPECS) -> Path:
    path = root / name
    if not path.is_dir():
        pytest.skip(f"Kafka's specs are absent ({path})")
    return path


_spec_cache: dict[tuple[Path, str], list[dict[str, Any]]] = {}


def specs_in(name: str, root: Path = SPECS) -> list[dict[str, Any]]:
    if (root, name) not in _spec_cache:
        _spec_cache[root, name] = [read_spec(p) for p in sorted(spec_dir(name, root).glob("*.json"))]
    return _spec_cache[root, name]


def api_spec(api_key: int, kind: str, root: Path = SPECS) -> dict[str, Any] | None:
    found = [s for s in specs_in("message", root) if s.get("type") == kind and s.get("apiKey") == api_key]
    assert len(found) <= 1, f"{len(found)} {kind} specs for API key {api_key}"
    return found[0] if found else None


def named_spec(directory: str, name: str, root: Path = SPECS) -> dict[str, Any] | None:
    found = [s for s in specs_in(directory, root) if s["name"] == name]
    assert len(found) <= 1, f"{len(found)} specs named {name} in {directory}"
    return found[0] if found else None


# ----------------------------------------------------------------------------------------------------------
# Version ranges, parsed here independently of odradek.protocol.schema.Versions.


def spec_range(text: str | None) -> tuple[int, int | None] | None:
    """Kafka's "3+", "1-4", "7", "none" as (low, high or None for open-ended); None for an empty range."""
    if text is None or text == "none":
        return None
    m = re.fullmatch(r"(\d+)(\+|-(\d+))?", text.strip())
    assert m is not None, f"unreadable version range {text!r}"
    low = int(m.group(1))
    if m.group(2) == "+":
        return (low, None)
    high = int(m.group(3)) if m.group(3) else low
    return (low, high)


def our_range(versions: Any) -> tuple[int, int | None] | None:
    if versions is None:
        return None
    if versions.high is not None and versions.low > versions.high:
        return None
    return (versions.low, versions.high)


def in_range(r: tuple[int, int | None] | None, version: int) -> bool:
    return r is not None and r[0] <= version and (r[1] is None or version <= r[1])


# ----------------------------------------------------------------------------------------------------------
# Field-by-field comparison. Each mismatch is reported as "Message.Field.SubField: what differs".


def spec_default(field: dict[str, Any]) -> Any:
    """The spec's declared default in the declarations' vocabulary (NULL for "null" and for JSON's null, which
    Kafka 4.x's specs also write); absent → None."""
    if "default" not in field:
        return None
    value = field["default"]
    t = field["type"]
    if value is None or value == "null":
        return NULL
    if t in INTEGER_TYPES:
        return int(value, 0) if isinstance(value, str) else value
    if t == "bool":
        return value if isinstance(value, bool) else {"true": True, "false": False}[value]
    if t == "float64":
        return float(value)
    return value


def compare_fields(path: str, ours: tuple[F, ...], spec_fields: list[dict[str, Any]], common: dict[str, Any]) -> Iterator[str]:
    our_names = [f.name for f in ours]
    spec_names = [f["name"] for f in spec_fields]
    if our_names != spec_names:
        yield f"{path}: fields {our_names} != spec {spec_names}"
        return
    for f, s in zip(ours, spec_fields):
        yield from compare_field(f"{path}.{s['name']}", f, s, common)


def spec_field_versions(path: str, s: dict[str, Any]) -> str:
    """A field's versions; Kafka's generator takes a tagged field's taggedVersions when it gives no versions."""
    versions = s.get("versions") or s.get("taggedVersions")
    assert versions, f"{path}: the spec gives no versions"
    return str(versions)


def compare_field(path: str, f: F, s: dict[str, Any], common: dict[str, Any]) -> Iterator[str]:
    checks = {
        "versions": (our_range(f.versions), spec_range(spec_field_versions(path, s))),
        "nullableVersions": (our_range(f.nullable), spec_range(s.get("nullableVersions"))),
        "tag": (f.tag, s.get("tag")),
        "taggedVersions": (our_range(f.tagged), spec_range(s.get("taggedVersions"))),
        # Field-level flexibleVersions: absent (inherit the message's) differs from an explicit "none".
        "flexibleVersions": (
            "inherited" if f.flexible is None else our_range(f.flexible),
            spec_range(s["flexibleVersions"]) if "flexibleVersions" in s else "inherited",
        ),
    }
    for what, (mine, theirs) in checks.items():
        if mine != theirs:
            yield f"{path}: {what} {mine!r} != spec {theirs!r}"
    want_default = spec_default(s)
    if type(f.default) is not type(want_default) or f.default != want_default:
        yield f"{path}: default {f.default!r} != spec {want_default!r}"
    yield from compare_type(path, f.type, s, common)


def compare_type(path: str, ours: Any, s: dict[str, Any], common: dict[str, Any]) -> Iterator[str]:
    spec_type: str = s["type"]
    is_array = spec_type.startswith("[]")
    base = spec_type[2:] if is_array else spec_type
    if is_array:
        if not isinstance(ours, Array):
            yield f"{path}: type {ours!r} is not the spec's array {spec_type}"
            return
        ours = ours.element
    elif isinstance(ours, Array):
        yield f"{path}: type is an array, the spec's is {spec_type}"
        return
    if base in PRIMITIVE_TYPES:
        assert "fields" not in s, f"{path}: a primitive with fields"
        if ours != base:
            yield f"{path}: type {ours!r} != spec {spec_type}"
        return
    if not isinstance(ours, S):
        yield f"{path}: type {ours!r} is not the spec's struct {spec_type}"
        return
    if ours.name != base:
        yield f"{path}: struct named {ours.name!r} != spec {base!r}"
    if "fields" in s:
        struct_fields = s["fields"]
    elif base in common:
        struct_fields = common[base]["fields"]
    else:
        yield f"{path}: the spec's type {base} is neither inline nor a common struct"
        return
    yield from compare_fields(path, ours.fields, struct_fields, common)


def compare_message(ours: Message, spec: dict[str, Any]) -> list[str]:
    name = spec["name"]
    problems = []
    if ours.name != name:
        problems.append(f"{name}: named {ours.name!r}")
    if our_range(ours.valid) != spec_range(spec["validVersions"]):
        problems.append(f"{name}: validVersions {ours.valid} != spec {spec['validVersions']}")
    if our_range(ours.flexible) != spec_range(spec.get("flexibleVersions")):
        problems.append(f"{name}: flexibleVersions {ours.flexible} != spec {spec.get('flexibleVersions')}")
    common = {c["name"]: c for c in spec.get("commonStructs", [])}
    problems.extend(compare_fields(name, ours.fields, spec.get("fields", []), common))
    return problems


def spec_versions(spec: dict[str, Any]) -> range:
    """The versions a spec defines, less a latest one it marks unstable (the declarations leave it out)."""
    valid = spec_range(spec["validVersions"])
    if valid is None:
        return range(0)  # an API Kafka 4.x removed: LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown
    low, high = valid
    assert high is not None
    return range(low, high + (0 if spec.get("latestVersionUnstable", False) else 1))


# ----------------------------------------------------------------------------------------------------------
# Version by version: what a message is at one version, for messages both spec sets define.


def our_shape(fields: tuple[F, ...], version: int) -> list[Any]:
    out = []
    for f in fields:
        if version not in f.versions:
            continue
        t = f.type
        element = t.element if isinstance(t, Array) else t
        inner = our_shape(element.fields, version) if isinstance(element, S) else None
        type_name = element.name if isinstance(element, S) else element
        out.append(
            (
                f.name,
                ("[]" if isinstance(t, Array) else "") + type_name,
                version in f.nullable,
                f.tag if version in f.tagged else None,
                f.default,
                None if f.flexible is None else version in f.flexible,
                inner,
            )
        )
    return out


def spec_shape(fields: list[dict[str, Any]], version: int, common: dict[str, Any], renames: dict[str, str]) -> list[Any]:
    out = []
    for s in fields:
        if not in_range(spec_range(spec_field_versions(s["name"], s)), version):
            continue
        t: str = s["type"]
        base = t.removeprefix("[]")
        struct = s.get("fields") or (common[base]["fields"] if base in common else None)
        out.append(
            (
                renames.get(s["name"], s["name"]),
                t,
                in_range(spec_range(s.get("nullableVersions")), version),
                s.get("tag") if in_range(spec_range(s.get("taggedVersions")), version) else None,
                spec_default(s),
                in_range(spec_range(s["flexibleVersions"]), version) if "flexibleVersions" in s else None,
                None if struct is None else spec_shape(struct, version, common, renames),
            )
        )
    return out


def without_names(shape: list[Any]) -> list[Any]:
    """The wire shape alone: what an API Kafka renamed must keep at the versions both names define."""
    return [(None, t if inner is None else t.startswith("[]"), *rest, None if inner is None else without_names(inner)) for _, t, *rest, inner in shape]


def compare_at_version(ours: Message, spec: dict[str, Any], version: int, names: bool = True) -> list[str]:
    from odradek.tools.gen_messages import FIELDS_RENAMED_AFTER_3_9

    renames = FIELDS_RENAMED_AFTER_3_9.get(spec["name"], {})
    common = {c["name"]: c for c in spec.get("commonStructs", [])}
    mine, theirs = our_shape(ours.fields, version), spec_shape(spec.get("fields", []), version, common, renames)
    if not names:
        mine, theirs = without_names(mine), without_names(theirs)
    problems = []
    if ours.is_flexible(version) != in_range(spec_range(spec.get("flexibleVersions")), version):
        problems.append(f"{spec['name']} v{version}: flexible {ours.is_flexible(version)} differs from the spec")
    if mine != theirs:
        problems.append(f"{spec['name']} v{version}: ours {mine} != spec {theirs}")
    return problems


def only_tags_added(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """4.4's spec is 3.9's (same versions, same fields in the same places) plus tagged fields only."""
    if (old.get("validVersions"), old.get("flexibleVersions")) != (new.get("validVersions"), new.get("flexibleVersions")):
        return False
    old_fields = {f["name"]: f for f in old["fields"]}
    added = [f for f in new["fields"] if f["name"] not in old_fields]
    kept = [f["name"] for f in new["fields"] if f["name"] in old_fields]
    same = all({k: v for k, v in f.items() if k != "about"} == {k: v for k, v in old_fields[f["name"]].items() if k != "about"} for f in new["fields"] if f["name"] in old_fields and "fields" not in f)
    return bool(added) and all("taggedVersions" in f and "versions" not in f for f in added) and kept == [f["name"] for f in old["fields"]] and same


def compare_declaration(ours: Message, old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """Ours against Kafka 3.9's spec (``old``) and 4.4's (``new``), either of which may be absent."""
    old_versions = spec_versions(old) if old else range(0)
    new_versions = spec_versions(new) if new else range(0)
    if old and new and only_tags_added(old, new):
        return compare_message(ours, new)  # 4.4's alone, exactly: 3.9's reader skips the tags it does not know
    if old and (not new_versions or new_versions.stop <= old_versions.stop):
        return compare_message(ours, old)  # 3.9's alone, exactly
    assert new is not None
    if not old:
        return compare_message(ours, new)  # 4.4's alone, exactly
    problems = []
    want = f"{old_versions.start}-{new_versions.stop - 1}"
    if str(ours.valid) != want:
        problems.append(f"{ours.name}: valid versions {ours.valid} != {want} (3.9's lowest to 4.4's highest)")
    renamed = old["name"] != new["name"]
    for version in old_versions:
        problems += compare_at_version(ours, old, version, names=not renamed)
    for version in new_versions:
        problems += compare_at_version(ours, new, version)
    return problems


# ----------------------------------------------------------------------------------------------------------
# Which APIs the broker must define.


def served_by_a_broker(spec: dict[str, Any]) -> bool:
    """Listened for by a ZooKeeper-mode or KRaft broker; 3.9's unstable share-group previews (KIP-932) are left out."""
    listeners = set(spec.get("listeners", ()))
    if not listeners & {"zkBroker", "broker"}:
        return False
    share_group = spec["name"].startswith("Share") or "ShareGroup" in spec["name"]
    return not (share_group and spec.get("latestVersionUnstable", False))


def broker_requests(root: Path) -> dict[int, dict[str, Any]]:
    return {s["apiKey"]: s for s in specs_in("message", root) if s.get("type") == "request" and served_by_a_broker(s)}


def test_the_broker_defines_exactly_the_apis_brokers_listen_for() -> None:
    """Kafka 3.9's and Kafka 4.4's, by 4.4's name where Kafka renamed one (ListConfigResources)."""
    wanted = {key: s["name"] for key, s in broker_requests(SPECS).items()} | {key: s["name"] for key, s in broker_requests(SPECS_4_4).items()}
    ours = {key: module.REQUEST.name for key, module in MODULES.items()}
    assert ours == wanted
    assert ours[74] == "ListConfigResourcesRequest"
    assert ours[0] == "ProduceRequest" and str(MODULES[0].REQUEST.valid) == "0-13"


def test_share_group_apis_are_declared_from_kafka_4_4_not_from_3_9s_previews() -> None:
    previews = {
        s["apiKey"]
        for s in specs_in("message")
        if s.get("type") == "request" and {"zkBroker", "broker"} & set(s.get("listeners", ())) and not served_by_a_broker(s)
    }
    assert previews, "expected the KIP-932 share-group APIs among 3.9's specs"
    for key in previews:
        assert "Share" in MODULES[key].NAME
        assert MODULES[key].KAFKA_3_9_VERSIONS is None
        assert compare_message(MODULES[key].REQUEST, api_spec(key, "request", SPECS_4_4)) == []  # type: ignore[arg-type]
    assert str(MODULES[76].REQUEST.valid) == "1"  # ShareGroupHeartbeat: 4.4 dropped 3.9's v0 preview


API_MODULES = sorted(MODULES.items())


def api_specs(api_key: int, kind: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(3.9's spec, 4.4's spec) for an API, 3.9's only if a 3.9 broker serves it (not a preview)."""
    old = api_spec(api_key, kind) if api_key in broker_requests(SPECS) else None
    return old, api_spec(api_key, kind, SPECS_4_4)


@pytest.mark.parametrize("api_key,module", API_MODULES, ids=[m.NAME for _, m in API_MODULES])
def test_api_module_matches_spec(api_key: int, module: ModuleType) -> None:
    old, new = api_specs(api_key, "request")
    request = old or new
    assert request is not None
    assert module.API_KEY == api_key
    renamed = old is not None and new is not None and old["name"] != new["name"]
    assert module.NAME == (new if renamed else request)["name"].removesuffix("Request")  # type: ignore[index]
    assert module.LISTENERS == tuple(request["listeners"])
    assert module.KAFKA_3_9_VERSIONS == (old["validVersions"] if old else None)
    problems = compare_declaration(module.REQUEST, old, new) + compare_declaration(module.RESPONSE, *api_specs(api_key, "response"))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("api_key,module", API_MODULES, ids=[m.NAME for _, m in API_MODULES])
def test_every_version_of_the_api_compiles(api_key: int, module: ModuleType) -> None:
    for message in (module.REQUEST, module.RESPONSE):
        versions = message.versions()
        for version in versions:
            codec = message.codec(version)
            assert callable(codec.parsefunc) and callable(codec.buildfunc), f"{message.name} v{version}"
        with pytest.raises(ValueError):
            message.codec(versions.stop)


@pytest.mark.parametrize("var,spec_name", [("REQUEST_HEADER", "RequestHeader"), ("RESPONSE_HEADER", "ResponseHeader")])
def test_header_matches_spec(var: str, spec_name: str) -> None:
    spec = named_spec("message", spec_name)
    assert spec is not None and spec["type"] == "header"
    ours: Message = getattr(headers, var)
    problems = compare_declaration(ours, spec, named_spec("message", spec_name, SPECS_4_4))
    assert not problems, "\n".join(problems)
    for version in spec_versions(spec):
        ours.codec(version)


def coordinator_record_messages() -> dict[str, Message]:
    return {m.name: m for m in vars(coordinator_records).values() if isinstance(m, Message)}


def test_coordinator_records_are_exactly_the_specs() -> None:
    """Kafka 3.9's and the ones 4.4 adds: ConsumerGroup*, ShareGroup*, ShareSnapshot/ShareUpdate, StreamsGroup*."""
    names = {s["name"] for s in specs_in("coordinator-records")} | {s["name"] for s in specs_in("coordinator-records", SPECS_4_4)}
    assert set(coordinator_record_messages()) == names
    assert {"ConsumerGroupMetadataValue", "ShareSnapshotValue", "ShareUpdateValue"} <= names


def test_coordinator_record_types_are_the_specs_api_keys() -> None:
    """Kafka 4.x tells records apart by type (the key's leading int16): ConsumerGroupMetadata is 3, ShareUpdate 1."""
    wanted: dict[str, set[int]] = {}
    for spec in specs_in("coordinator-records", SPECS_4_4):
        wanted.setdefault(re.sub("(Key|Value)$", "", spec["name"]), set()).add(spec["apiKey"])
    assert all(len(keys) == 1 for keys in wanted.values()), wanted
    assert coordinator_records.RECORD_TYPES == {name: keys.pop() for name, keys in wanted.items()}
    assert (coordinator_records.RECORD_TYPES["OffsetCommit"], coordinator_records.RECORD_TYPES["GroupMetadata"]) == (1, 2)  # 3.9's key versions


@pytest.mark.parametrize("name", sorted(coordinator_record_messages()))
def test_coordinator_record_matches_spec(name: str) -> None:
    ours = coordinator_record_messages()[name]
    problems = compare_declaration(ours, named_spec("coordinator-records", name), named_spec("coordinator-records", name, SPECS_4_4))
    assert not problems, "\n".join(problems)
    for version in ours.versions():
        ours.codec(version)


def data_messages() -> dict[str, Message]:
    return {m.name: m for m in vars(data).values() if isinstance(m, Message)}


def test_data_structures_are_exactly_the_specs() -> None:
    wanted = {s["name"] for root in (SPECS, SPECS_4_4) for s in specs_in("message", root) if s.get("type") == "data"}
    assert set(data_messages()) == wanted


@pytest.mark.parametrize("name", sorted(data_messages()))
def test_data_structure_matches_spec(name: str) -> None:
    ours = data_messages()[name]
    problems = compare_declaration(ours, named_spec("message", name), named_spec("message", name, SPECS_4_4))
    assert not problems, "\n".join(problems)
    for version in ours.versions():
        ours.codec(version)


def test_loader_keeps_double_slashes_inside_strings(tmp_path: Path) -> None:
    """The spec loader must not mistake a URL in an "about" text for a comment."""
    path = tmp_path / "x.json"
    path.write_text('// Licensed\n{ "about": "see https://kafka.apache.org", // trailing\n  "n": 1 }\n')
    from odradek.tools.gen_messages import load_spec

    expected = {"about": "see https://kafka.apache.org", "n": 1}
    assert read_spec(path) == expected  # this test's independent loader
    assert load_spec(path) == expected  # the generator's


def test_committed_modules_are_what_the_generator_writes(tmp_path: Path) -> None:
    """Regenerating changes nothing: the modules carry every field's ``about`` text and no hand edits."""
    from odradek.tools.gen_messages import generate

    generate(SPECS, SPECS_4_4, tmp_path)
    committed = REPO / "protocol" / "messages"
    generated = sorted(p.name for p in tmp_path.glob("*.py"))
    assert generated == sorted(p.name for p in committed.glob("*.py"))
    assert [name for name in generated if (tmp_path / name).read_text() != (committed / name).read_text()] == []


def test_generated_fields_carry_kafkas_about_text_as_their_doc() -> None:
    text = (REPO / "protocol" / "messages" / "delete_records.py").read_text()
    assert "# The partition low water mark.\n                    F('LowWatermark', 'int64')," in text


# ----------------------------------------------------------------------------------------------------------
# The generator's merge rule, on small specs: 3.9's up to its highest version, 4.4's above, or a loud refusal.


def tiny_spec(valid: str, *fields: dict[str, Any]) -> dict[str, Any]:
    return {"apiKey": 0, "type": "request", "name": "TinyRequest", "validVersions": valid, "flexibleVersions": "1+", "fields": list(fields)}


def test_the_merge_keeps_3_9s_versions_and_adds_4_4s() -> None:
    from odradek.tools.gen_messages import declare

    old = tiny_spec("0-1", {"name": "A", "type": "int32", "versions": "0+"}, {"name": "Gone", "type": "string", "versions": "0+"})
    new = tiny_spec("1-2", {"name": "A", "type": "int32", "versions": "0+"}, {"name": "Gone", "type": "string", "versions": "0-1"}, {"name": "B", "type": "int64", "versions": "2+"})
    declared = declare(old, new)
    assert declared.kafka_3_9_versions == "0-1"
    assert declared.spec["validVersions"] == "0-2"
    assert [(f["name"], f["versions"]) for f in declared.spec["fields"]] == [("A", "0+"), ("Gone", "0-1"), ("B", "2+")]


@pytest.mark.parametrize(
    "new_field",
    [
        {"name": "A", "type": "int64", "versions": "0+"},  # another type
        {"name": "A", "type": "int32", "versions": "0+", "nullableVersions": "1+"},  # nullable at a shared version
        {"name": "A", "type": "int32", "versions": "0+", "default": 7},  # another default
    ],
    ids=["type", "nullable", "default"],
)
def test_the_generator_refuses_specs_that_disagree_on_a_shared_version(new_field: dict[str, Any]) -> None:
    from odradek.tools.gen_messages import SpecMismatch, declare

    old = tiny_spec("0-1", {"name": "A", "type": "int32", "versions": "0+"})
    with pytest.raises(SpecMismatch, match="Tiny"):
        declare(old, tiny_spec("1-2", new_field))


def test_the_generator_refuses_a_field_4_4_adds_at_a_version_3_9_defines() -> None:
    from odradek.tools.gen_messages import SpecMismatch, declare

    old = tiny_spec("0-1", {"name": "A", "type": "int32", "versions": "0+"})
    new = tiny_spec("0-2", {"name": "A", "type": "int32", "versions": "0+"}, {"name": "B", "type": "int8", "versions": "1+"})
    with pytest.raises(SpecMismatch, match=r"TinyRequest v1"):
        declare(old, new)
