"""Our committed message declarations against Kafka 3.9's JSON specs, read here by an independent loader.

The generator (``odradek.tools.gen_messages``) wrote the declarations from these specs; this file re-reads
the specs with its own small parser and compares field by field, so a bug in the generator, a hand edit of a
generated module, or a spec update that was not regenerated all show up here, named by API and field.
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

PRIMITIVE_TYPES = {"bool", "int8", "int16", "uint16", "int32", "int64", "float64", "uuid", "string", "bytes", "records"}
INTEGER_TYPES = {"int8", "int16", "uint16", "int32", "int64"}

# A JSON string (kept) or a // comment running to the end of the line (dropped); strings may hold "//".
_STRING_OR_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*')


def read_spec(path: Path) -> dict[str, Any]:
    text = _STRING_OR_COMMENT.sub(lambda m: m.group(1) or "", path.read_text())
    return json.loads(text)


def spec_dir(name: str) -> Path:
    path = SPECS / name
    if not path.is_dir():
        pytest.skip(f"Kafka's specs are absent ({path})")
    return path


_spec_cache: dict[str, list[dict[str, Any]]] = {}


def specs_in(name: str) -> list[dict[str, Any]]:
    if name not in _spec_cache:
        _spec_cache[name] = [read_spec(p) for p in sorted(spec_dir(name).glob("*.json"))]
    return _spec_cache[name]


def api_spec(api_key: int, kind: str) -> dict[str, Any]:
    found = [s for s in specs_in("message") if s.get("type") == kind and s.get("apiKey") == api_key]
    assert len(found) == 1, f"{len(found)} {kind} specs for API key {api_key}"
    return found[0]


def named_spec(directory: str, name: str) -> dict[str, Any]:
    found = [s for s in specs_in(directory) if s["name"] == name]
    assert len(found) == 1, f"{len(found)} specs named {name} in {directory}"
    return found[0]


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
    """The spec's declared default in the declarations' vocabulary (NULL for "null"); absent → None."""
    if "default" not in field:
        return None
    value = field["default"]
    t = field["type"]
    if value == "null":
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


def compare_field(path: str, f: F, s: dict[str, Any], common: dict[str, Any]) -> Iterator[str]:
    assert "versions" in s, f"{path}: the spec gives no versions"
    checks = {
        "versions": (our_range(f.versions), spec_range(s["versions"])),
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
    low, high = spec_range(spec["validVersions"])  # type: ignore[misc]
    assert high is not None
    return range(low, high + 1)


# ----------------------------------------------------------------------------------------------------------
# Which APIs the broker must define.


def served_by_a_broker(spec: dict[str, Any]) -> bool:
    """Listened for by a ZooKeeper-mode or KRaft broker; the unstable share-group APIs (KIP-932) are left out."""
    listeners = set(spec.get("listeners", ()))
    if not listeners & {"zkBroker", "broker"}:
        return False
    share_group = spec["name"].startswith("Share") or "ShareGroup" in spec["name"]
    return not (share_group and spec.get("latestVersionUnstable", False))


def test_the_broker_defines_exactly_the_apis_brokers_listen_for() -> None:
    wanted = {s["apiKey"]: s["name"] for s in specs_in("message") if s.get("type") == "request" and served_by_a_broker(s)}
    ours = {key: module.REQUEST.name for key, module in MODULES.items()}
    assert ours == wanted


def test_share_group_apis_are_left_out_because_unstable() -> None:
    left_out = {
        s["name"]
        for s in specs_in("message")
        if s.get("type") == "request" and {"zkBroker", "broker"} & set(s.get("listeners", ())) and not served_by_a_broker(s)
    }
    assert left_out, "expected the KIP-932 share-group APIs among the specs"
    assert all("Share" in name for name in left_out)
    assert not left_out & {m.REQUEST.name for m in MODULES.values()}


API_MODULES = sorted(MODULES.items())


@pytest.mark.parametrize("api_key,module", API_MODULES, ids=[m.NAME for _, m in API_MODULES])
def test_api_module_matches_spec(api_key: int, module: ModuleType) -> None:
    request = api_spec(api_key, "request")
    response = api_spec(api_key, "response")
    assert module.API_KEY == api_key
    assert module.NAME == request["name"].removesuffix("Request")
    assert module.LISTENERS == tuple(request["listeners"])
    problems = compare_message(module.REQUEST, request) + compare_message(module.RESPONSE, response)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("api_key,module", API_MODULES, ids=[m.NAME for _, m in API_MODULES])
def test_every_version_of_the_api_compiles(api_key: int, module: ModuleType) -> None:
    for message in (module.REQUEST, module.RESPONSE):
        versions = spec_versions(api_spec(api_key, "request" if message is module.REQUEST else "response"))
        for version in versions:
            codec = message.codec(version)
            assert callable(codec.parse) and callable(codec.build), f"{message.name} v{version}"
        with pytest.raises(ValueError):
            message.codec(versions.stop)


@pytest.mark.parametrize("var,spec_name", [("REQUEST_HEADER", "RequestHeader"), ("RESPONSE_HEADER", "ResponseHeader")])
def test_header_matches_spec(var: str, spec_name: str) -> None:
    spec = named_spec("message", spec_name)
    assert spec["type"] == "header"
    ours: Message = getattr(headers, var)
    problems = compare_message(ours, spec)
    assert not problems, "\n".join(problems)
    for version in spec_versions(spec):
        ours.codec(version)


def coordinator_record_messages() -> dict[str, Message]:
    return {m.name: m for m in vars(coordinator_records).values() if isinstance(m, Message)}


def test_coordinator_records_are_exactly_the_specs() -> None:
    assert set(coordinator_record_messages()) == {s["name"] for s in specs_in("coordinator-records")}


@pytest.mark.parametrize("name", sorted(coordinator_record_messages()))
def test_coordinator_record_matches_spec(name: str) -> None:
    spec = named_spec("coordinator-records", name)
    ours = coordinator_record_messages()[name]
    problems = compare_message(ours, spec)
    assert not problems, "\n".join(problems)
    for version in spec_versions(spec):
        ours.codec(version)


def data_messages() -> dict[str, Message]:
    return {m.name: m for m in vars(data).values() if isinstance(m, Message)}


def test_data_structures_are_exactly_the_specs() -> None:
    assert set(data_messages()) == {s["name"] for s in specs_in("message") if s.get("type") == "data"}


@pytest.mark.parametrize("name", sorted(data_messages()))
def test_data_structure_matches_spec(name: str) -> None:
    spec = named_spec("message", name)
    ours = data_messages()[name]
    problems = compare_message(ours, spec)
    assert not problems, "\n".join(problems)
    for version in spec_versions(spec):
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

    generate(SPECS, tmp_path)
    committed = REPO / "protocol" / "messages"
    generated = sorted(p.name for p in tmp_path.glob("*.py"))
    assert generated == sorted(p.name for p in committed.glob("*.py"))
    assert [name for name in generated if (tmp_path / name).read_text() != (committed / name).read_text()] == []


def test_generated_fields_carry_kafkas_about_text_as_their_doc() -> None:
    text = (REPO / "protocol" / "messages" / "delete_records.py").read_text()
    assert "# The partition low water mark.\n                    F('LowWatermark', 'int64')," in text
