"""Write ``protocol/messages/*.py`` from Kafka's JSON message specs: Kafka 3.9's, and Kafka 4.4's for what 4.4 adds.

Kafka generates its message classes from these specs; we do the same once and commit the declarations,
so the specs stay the single source of truth and our definitions read like them (one compact module per
API key, Kafka's field names, version ranges as Kafka writes them, each field's ``about`` text as a comment
above it, its doc). The runtime never reads the specs; ``tests/protocol/test_spec_crosscheck.py`` keeps the
committed declarations equal to them, and the committed modules equal to what this generator writes.

Two spec sets, one declaration per message. odradek serves every version Kafka 3.9 defines (including the
old ones Kafka 4.0 dropped) and is growing Kafka 4.x's APIs (issue 24), so each message is declared from:

- Kafka 3.9's spec alone, verbatim, when 4.4 defines no stable version above 3.9's highest (most APIs,
  and the ones 4.x removed: LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown) -- unless 4.4
  only adds tagged fields at 3.9's versions (TransactionLogValue), which 4.4's spec then declares;
- Kafka 4.4's spec alone, verbatim, for what 3.9 lacks or had only as an unstable preview: the share-group
  APIs (KIP-932), the streams-group APIs (KIP-1071), the new coordinator records and data structures;
- a merge when 4.4 adds versions (Produce 12-13, EndTxn 5, ...): **3.9's declarations for versions up to
  3.9's highest, 4.4's above it.** Each version range of a field (versions, nullable, tagged, flexible)
  becomes the versions it covers in 3.9 up to 3.9's highest, joined to those it covers in 4.4 above it;
  fields keep 4.4's order, with fields only 3.9 has placed after their 3.9 predecessor; texts (``about``)
  come from 3.9 where 3.9 has the field. The merge is then checked version by version: at every version
  the merged message must read exactly as the spec that defines it, and at every version both specs define
  (e.g. Produce 3-11) as the other spec too. Any difference (the specs disagree on a shared version, or a
  range would not be contiguous) stops the generator with the message, field and version.

A version a spec marks unstable (``latestVersionUnstable``: InitProducerId v6 in 4.4) is left out: no
client uses it, and its format may still change. Kafka renamed one API after 3.9 (ListClientMetricsResources
became ListConfigResources, key 74): it is declared by 4.4's names, after checking that its versions 3.9
defines are the same on the wire (same shapes, the names aside). What the broker *serves* and advertises is
not decided here: ``broker/kafka_apis.py`` lists it per API, and each module's ``KAFKA_3_9_VERSIONS`` says
which versions Kafka 3.9 defines, the range that table serves unless a handler says more.

Usage: ``python -m odradek.tools.gen_messages [../shared/kafka-protocol [../shared/kafka-protocol-4.4 [protocol/messages]]]``
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek.protocol.schema import NONE, Versions, snake_case

KAFKA_3_9 = "3.9"
KAFKA_4_4 = "4.4"

RENAMED_AFTER_3_9 = {"ListClientMetricsResources": "ListConfigResources"}
"""APIs Kafka renamed (API name without Request/Response), declared by their 4.4 names."""

FIELDS_RENAMED_AFTER_3_9: dict[str, dict[str, str]] = {
    "TxnOffsetCommitRequest": {"GenerationIdOrMemberEpoch": "GenerationId"},
}
"""Fields of a merged message that 4.4 calls by a new name (message → {4.4 name: 3.9 name}): declared by
their 3.9 names at every version, which the handlers read; the merge checks them as one field."""


_STRING_OR_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*')


def load_spec(path: Path) -> dict[str, Any]:
    """Kafka's specs are JSON with ``//`` comments, whole-line or trailing; ``//`` inside strings stays."""
    return json.loads(_STRING_OR_COMMENT.sub(lambda m: m.group(1) or "", path.read_text()))


def served_by_broker(spec: dict[str, Any]) -> bool:
    """APIs a ZooKeeper-mode or KRaft broker listens for, less unstable previews (3.9's share-group APIs)."""
    listeners = spec.get("listeners", [])
    if "zkBroker" not in listeners and "broker" not in listeners:
        return False
    return not spec.get("latestVersionUnstable", False) or not _is_share_group_api(spec["name"])


def _is_share_group_api(name: str) -> bool:
    return name.startswith(("ShareGroup", "ShareFetch", "ShareAcknowledge")) or "ShareGroupState" in name


def field_versions(f: dict[str, Any]) -> str:
    """A field's versions; a tagged field may give only its taggedVersions (as Kafka's generator allows)."""
    return str(f.get("versions") or f["taggedVersions"])


class SpecMismatch(Exception):
    """Kafka 3.9's and 4.4's specs disagree where both define a version, or cannot be merged."""


def _empty(r: Versions) -> bool:
    return r.high is not None and r.low > r.high


def _within(r: Versions, low: int, high: int | None) -> Versions:
    """The part of ``r`` from ``low`` to ``high`` (None: open-ended)."""
    hi = r.high if high is None else high if r.high is None else min(r.high, high)
    within = Versions(max(r.low, low), hi)
    return NONE if _empty(r) or _empty(within) else within


def stable_top(spec: dict[str, Any]) -> int | None:
    """The highest version a spec defines that is not marked unstable; None when it defines none."""
    valid = Versions.parse(spec.get("validVersions"))
    if _empty(valid):
        return None
    assert valid.high is not None, f"{spec['name']}: open-ended validVersions"
    top = valid.high - 1 if spec.get("latestVersionUnstable", False) else valid.high
    return top if top >= valid.low else None


# ----------------------------------------------------------------------------------------------------------
# The merge: 3.9's declarations up to 3.9's highest version, 4.4's above it.


@dataclass(frozen=True)
class _Split:
    top: int  # 3.9's highest version; 4.4 declares the versions above it
    name: str  # the message, for errors

    def join(self, what: str, old: str | None, new: str | None) -> str | None:
        below = _within(Versions.parse(old), 0, self.top)
        above = _within(Versions.parse(new), self.top + 1, None)
        if _empty(below) or _empty(above):
            joined = above if _empty(below) else below
        elif below.high == self.top and above.low == self.top + 1:
            joined = Versions(below.low, above.high)
        else:
            raise SpecMismatch(f"{self.name}: {what} {old!r} (3.9) and {new!r} (4.4) do not join into one range at v{self.top}")
        return None if _empty(joined) else str(joined)

    def fields(self, path: str, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
        old_by_name = {f["name"]: f for f in old}
        new_by_name = {f["name"]: f for f in new}
        order = [f["name"] for f in new]
        for i, f in enumerate(old):
            if f["name"] not in new_by_name:
                after = old[i - 1]["name"] if i else None
                order.insert(order.index(after) + 1 if after else 0, f["name"])
        merged = []
        for name in order:
            o, n = old_by_name.get(name), new_by_name.get(name)
            field = self.field(f"{path}.{name}", o, n)
            if field is not None:
                merged.append(field)
        return merged

    def field(self, path: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any] | None:
        if old is not None and new is not None:
            for what, read in (("type", _type_of), ("tag", _tag_of), ("default", _default_of)):
                if read(old) != read(new):
                    raise SpecMismatch(f"{path}: {what} {read(old)!r} (3.9) != {read(new)!r} (4.4)")
        base = dict(new or {}) | dict(old or {})  # 3.9's texts where it has the field
        versions = self.join(f"{path} versions", None if old is None else field_versions(old), None if new is None else field_versions(new))
        if versions is None:
            return None
        base["versions"] = versions
        for key in ("nullableVersions", "taggedVersions", "flexibleVersions"):
            if key in base:
                joined = self.join(f"{path} {key}", (old or {}).get(key), (new or {}).get(key))
                if joined is None and key != "flexibleVersions":
                    del base[key]
                else:
                    base[key] = joined or "none"
        if "fields" in base:
            base["fields"] = self.fields(path, (old or {}).get("fields", []), (new or {}).get("fields", []))
        return base


def _type_of(f: dict[str, Any]) -> str:
    return str(f["type"])


def _tag_of(f: dict[str, Any]) -> int | None:
    return f.get("tag")


def _default_of(f: dict[str, Any]) -> str | None:
    return _default_literal(f) if "default" in f else None


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """One spec for a message both sets define: 3.9's up to its highest version, 4.4's above (checked)."""
    top = stable_top(old)
    new_top = stable_top(new)
    assert top is not None and new_top is not None and new_top > top
    new = _renamed(new, FIELDS_RENAMED_AFTER_3_9.get(new["name"], {}))
    split = _Split(top, new["name"])
    merged = dict(new) | {"name": old["name"], "validVersions": str(Versions(Versions.parse(old["validVersions"]).low, new_top))}
    merged.pop("latestVersionUnstable", None)
    flexible = split.join("flexibleVersions", old.get("flexibleVersions"), new.get("flexibleVersions"))
    merged["flexibleVersions"] = flexible or "none"
    merged["fields"] = split.fields(old["name"], old.get("fields", []), new.get("fields", []))
    old_common = {c["name"]: c for c in old.get("commonStructs", [])}
    new_common = {c["name"]: c for c in new.get("commonStructs", [])}
    names = [c["name"] for c in new.get("commonStructs", [])] + [n for n in old_common if n not in new_common]
    merged["commonStructs"] = [
        dict(new_common.get(n) or old_common[n]) | {"fields": split.fields(n, old_common.get(n, {}).get("fields", []), new_common.get(n, {}).get("fields", []))}
        for n in names
    ]
    if not merged["commonStructs"]:
        del merged["commonStructs"]
    for version in _versions_of(old):
        _check_reads_alike(merged, old, version, names=True)
    for version in _versions_of(new, new_top):
        _check_reads_alike(merged, new, version, names=True)
    return merged


def _renamed(spec: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    if not names:
        return spec

    def rename(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [f | {"name": names.get(f["name"], f["name"])} | ({"fields": rename(f["fields"])} if "fields" in f else {}) for f in fields]

    return spec | {"fields": rename(spec.get("fields", [])), "commonStructs": [c | {"fields": rename(c["fields"])} for c in spec.get("commonStructs", [])]}


def _versions_of(spec: dict[str, Any], top: int | None = None) -> range:
    valid = Versions.parse(spec["validVersions"])
    assert valid.high is not None
    return range(valid.low, (valid.high if top is None else top) + 1)


def shape(spec: dict[str, Any], version: int, names: bool) -> tuple[Any, ...]:
    """What a message is on the wire at one version (and, with ``names``, what its fields are called)."""
    common = {c["name"]: c for c in spec.get("commonStructs", [])}
    return (version in Versions.parse(spec.get("flexibleVersions")), _shape_fields(spec.get("fields", []), version, common, names))


def _shape_fields(fields: list[dict[str, Any]], version: int, common: dict[str, Any], names: bool) -> tuple[Any, ...]:
    out = []
    for f in fields:
        if version not in Versions.parse(field_versions(f)):
            continue
        t = f["type"]
        struct = f.get("fields") or (common[t.removeprefix("[]")]["fields"] if t.removeprefix("[]") in common else None)
        inner = None if struct is None else _shape_fields(struct, version, common, names)
        type_seen = t if names or inner is None else t.startswith("[]")
        tagged = version in Versions.parse(f.get("taggedVersions"))
        flexible = version in Versions.parse(f["flexibleVersions"]) if "flexibleVersions" in f else None
        out.append(
            (
                f["name"] if names else None,
                type_seen,
                version in Versions.parse(f.get("nullableVersions")),
                f.get("tag") if tagged else None,
                _default_of(f),
                flexible,
                inner,
            )
        )
    return tuple(out)


def _check_reads_alike(ours: dict[str, Any], spec: dict[str, Any], version: int, names: bool) -> None:
    mine, theirs = shape(ours, version, names), shape(spec, version, names)
    if mine != theirs:
        where = _first_difference(mine[1], theirs[1]) if mine[0] == theirs[0] else "flexibleVersions"
        raise SpecMismatch(f"{spec['name']} v{version}: Kafka 3.9's and 4.4's specs differ at {where}")


def _first_difference(a: tuple[Any, ...], b: tuple[Any, ...]) -> str:
    for x, y in zip(a, b):
        if x != y:
            if x[:-1] == y[:-1]:
                return f"{x[0]}.{_first_difference(x[-1], y[-1])}"
            return f"{x} != {y}"
    return f"{len(a)} fields != {len(b)}"


@dataclass(frozen=True)
class Declared:
    """A message as declared: its spec (one set's, or the merge) and the sets it comes from."""

    spec: dict[str, Any]
    sources: tuple[str, ...]
    kafka_3_9_versions: str | None


def adds_only_tagged_fields(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether 4.4's spec is 3.9's plus tagged fields at the same versions (TransactionLogValue v1's
    PreviousProducerId, NextProducerId, ClientTransactionVersion): 4.4's then declares the message, since a
    reader of 3.9's skips the tags it does not know and reads the rest alike."""
    if old.get("validVersions") != new.get("validVersions") or old.get("flexibleVersions") != new.get("flexibleVersions"):
        return False
    known = {f["name"] for f in old.get("fields", [])}
    added = [f for f in new.get("fields", []) if f["name"] not in known]
    if not added or any("taggedVersions" not in f or "versions" in f for f in added):
        return False
    without = dict(new, fields=[f for f in new["fields"] if f["name"] in known])
    return all(shape(without, v, False) == shape(old, v, False) for v in _versions_of(old))


def declare(old: dict[str, Any] | None, new: dict[str, Any] | None) -> Declared:
    """The declaration of a message from its 3.9 spec and its 4.4 spec (either may be absent)."""
    old_top = None if old is None else stable_top(old)
    new_top = None if new is None else stable_top(new)
    if old is not None and new is not None and adds_only_tagged_fields(old, new):
        return Declared(new, (KAFKA_3_9, KAFKA_4_4), old.get("validVersions"))
    if old is not None and (new_top is None or (old_top is not None and new_top <= old_top)):
        return Declared(old, (KAFKA_3_9,), old.get("validVersions"))
    assert new is not None
    if new.get("latestVersionUnstable", False):
        raise SpecMismatch(f"{new['name']}: an unstable version in a spec declared from 4.4 alone")
    if old is None:
        return Declared(new, (KAFKA_4_4,), None)
    if old["name"].removesuffix("Request").removesuffix("Response") in RENAMED_AFTER_3_9:
        if _versions_of(new).start > _versions_of(old).start:
            raise SpecMismatch(f"{new['name']}: renamed, and 4.4 dropped versions 3.9 defines")
        for version in _versions_of(old):
            _check_reads_alike(new, old, version, names=False)
        return Declared(new, (KAFKA_3_9, KAFKA_4_4), old["validVersions"])
    return Declared(merge(old, new), (KAFKA_3_9, KAFKA_4_4), old["validVersions"])


class _Writer:
    def __init__(self, prefix: str, common: list[dict[str, Any]]) -> None:
        self.prefix = prefix
        self.common = {c["name"]: c for c in common}
        self.lines: list[str] = []
        self.emitted: set[str] = set()

    def common_var(self, name: str) -> str:
        return f"{self.prefix}_{name}"

    def emit_common(self, name: str) -> None:
        if name in self.emitted:
            return
        self.emitted.add(name)
        struct = self.common[name]
        for dep in _struct_refs(struct["fields"]):
            if dep in self.common:
                self.emit_common(dep)
        body = self.fields(struct["fields"], 1)
        self.lines.append(f"{self.common_var(name)} = S(\n    {name!r},\n{body}\n)\n")

    def fields(self, fields: list[dict[str, Any]], depth: int) -> str:
        return "\n".join(self.field(f, depth) for f in fields)

    def field(self, f: dict[str, Any], depth: int) -> str:
        pad = "    " * depth
        args = [repr(f["name"]), self.type_expr(f, depth)]
        versions = field_versions(f)
        opts = []
        if "nullableVersions" in f:
            opts.append(f"nullable={f['nullableVersions']!r}")
        if "tag" in f:
            opts.append(f"tag={f['tag']}")
            opts.append(f"tagged={f.get('taggedVersions', versions)!r}")
        if "default" in f:
            opts.append(f"default={_default_literal(f)}")
        if "flexibleVersions" in f:
            opts.append(f"flexible={f['flexibleVersions']!r}")
        if versions != "0+" or opts:
            args.insert(2, repr(versions))
        return _about_comment(f, pad) + f"{pad}F({', '.join(args + opts)}),"

    def type_expr(self, f: dict[str, Any], depth: int) -> str:
        t = f["type"]
        is_array = t.startswith("[]")
        base = t[2:] if is_array else t
        if "fields" in f:
            inner = self.fields(f["fields"], depth + 2)
            pad = "    " * (depth + 1)
            struct = f"S(\n{pad}    {base!r},\n{inner}\n{pad})"
        elif base in self.common:
            self.emit_common(base)
            struct = self.common_var(base)
        else:
            return f"Array({base!r})" if is_array else repr(base)
        return f"Array({struct})" if is_array else struct


ABOUT_WIDTH = 110


def _about_comment(f: dict[str, Any], pad: str) -> str:
    """Kafka's ``about`` text for a field, as comment lines above its declaration (the field's doc)."""
    about = " ".join(f.get("about", "").split())
    return "".join(f"{pad}# {line}\n" for line in textwrap.wrap(about, ABOUT_WIDTH - len(pad)))


def _struct_refs(fields: list[dict[str, Any]]) -> list[str]:
    refs = []
    for f in fields:
        t = f["type"].removeprefix("[]")
        if "fields" in f:
            refs.extend(_struct_refs(f["fields"]))
        elif t[:1].isupper():
            refs.append(t)
    return refs


def _default_literal(f: dict[str, Any]) -> str:
    value = f["default"]
    t = f["type"]
    if value is None or value == "null":  # specs write a null default both ways: "null" and null
        return "NULL"
    if t in ("int8", "int16", "uint16", "int32", "int64"):
        return str(int(value, 0)) if isinstance(value, str) else str(value)
    if t == "float64":
        return repr(float(value))
    if t == "bool":
        return str(value if isinstance(value, bool) else value == "true")
    return repr(value)


def message_source(spec: dict[str, Any], var: str) -> tuple[str, list[str]]:
    writer = _Writer(f"_{var}", spec.get("commonStructs", []))
    body = writer.fields(spec.get("fields", []), 1)
    head = f"{var} = Message(\n    {spec['name']!r},\n    {spec['validVersions']!r},\n    {spec.get('flexibleVersions', 'none')!r},\n"
    return head + body + "\n)\n", writer.lines


def module_source(title: str, declared: list[tuple[str, Declared]], extra: list[str]) -> str:
    sources = [f'"""{title}\n\nGenerated by ``odradek.tools.gen_messages`` from {_provenance(declared)}; see that module."""\n']
    sources.append("from odradek.protocol.schema import NULL, Array, F, Message, S  # noqa: F401\n")
    sources.extend(extra)
    for var, d in declared:
        text, common = message_source(d.spec, var)
        sources.extend(common)
        sources.append(text)
    return "\n".join(sources).rstrip() + "\n"


def _provenance(declared: list[tuple[str, Declared]]) -> str:
    sets = sorted({s for _, d in declared for s in d.sources})
    return " and ".join(f"Kafka {s}'s" for s in sets) + " JSON specs"


@dataclass(frozen=True)
class SpecSet:
    """One Kafka release's specs: API requests and responses by key, the rest by name."""

    requests: dict[int, dict[str, Any]]
    responses: dict[int, dict[str, Any]]
    others: dict[str, dict[str, Any]]  # headers and data structures, by name
    records: dict[str, dict[str, Any]]  # coordinator records, by name

    @classmethod
    def read(cls, root: Path) -> "SpecSet":
        requests, responses, others = {}, {}, {}
        for path in sorted((root / "message").glob("*.json")):
            spec = load_spec(path)
            kind = spec.get("type")
            if kind == "request":
                requests[spec["apiKey"]] = spec
            elif kind == "response":
                responses[spec["apiKey"]] = spec
            else:
                others[spec["name"]] = spec
        records = {p.stem: load_spec(p) for p in sorted((root / "coordinator-records").glob("*.json"))}
        return cls(requests, responses, others, records)

    def broker_apis(self) -> set[int]:
        return {key for key, spec in self.requests.items() if served_by_broker(spec)}


def _by_name(old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]], kind: str | None = None) -> list[tuple[str, Declared]]:
    names = sorted(n for n in old.keys() | new.keys() if kind is None or (old.get(n) or new[n]).get("type") == kind)
    return [(_constant_name(n), declare(old.get(n), new.get(n))) for n in names]


def record_types_source(records: dict[str, dict[str, Any]]) -> str:
    """Kafka 4.x's type of each coordinator record: its key and value specs' ``apiKey``, checked alike."""
    types: dict[str, int] = {}
    for name, spec in sorted(records.items()):
        record = name.removesuffix("Key").removesuffix("Value")
        if types.setdefault(record, spec["apiKey"]) != spec["apiKey"]:
            raise SpecMismatch(f"{record}: its key and value specs give apiKey {types[record]} and {spec['apiKey']}")
    lines = "".join(f"    {name!r}: {key},\n" for name, key in types.items())
    return (
        "# Kafka 4.x's type of each record (its specs' apiKey), the int16 its key starts with (3.9's key version).\n"
        "# Each internal topic numbers its own: __consumer_offsets, __share_group_state, __transaction_state.\n"
        f"RECORD_TYPES = {{\n{lines}}}\n"
    )


def generate(spec_root: Path, newer_root: Path, out: Path) -> list[str]:
    """Write the modules from Kafka 3.9's specs (``spec_root``) and 4.4's (``newer_root``)."""
    old, new = SpecSet.read(spec_root), SpecSet.read(newer_root)
    old_apis = old.broker_apis()
    written = []
    modules = []
    declarations = []
    for key in sorted(old_apis | new.broker_apis()):
        kept = key in old_apis
        request = declare(old.requests[key] if kept else None, new.requests.get(key))
        response = declare(old.responses[key] if kept else None, new.responses.get(key))
        api_name = request.spec["name"].removesuffix("Request")
        module = snake_case(api_name)
        listeners = (old if kept else new).requests[key].get("listeners", [])
        extra = [
            f"API_KEY = {key}\n",
            f"NAME = {api_name!r}\n",
            f"LISTENERS = {tuple(listeners)!r}\n",
            f"KAFKA_3_9_VERSIONS = {request.kafka_3_9_versions!r}\n",
        ]
        title = f"{api_name} (API key {key})."
        text = module_source(title, [("REQUEST", request), ("RESPONSE", response)], extra)
        (out / f"{module}.py").write_text(text)
        written.append(module)
        throttled = any(f["name"] == "ThrottleTimeMs" for f in response.spec["fields"])
        modules.append((key, module, api_name))
        declarations.append(
            f"    {key}: Declaration({module!r}, {api_name!r}, {request.spec['validVersions']!r}, "
            f"{request.kafka_3_9_versions!r}, {tuple(listeners)!r}, {throttled!r}),\n"
        )
    headers = [(f"{_constant_name(n)}", declare(old.others[n], new.others.get(n))) for n in ("RequestHeader", "ResponseHeader")]
    (out / "headers.py").write_text(module_source("Request and response headers.", headers, []))
    data = _by_name(old.others, new.others, "data")
    (out / "data.py").write_text(
        module_source("Structures carried inside other messages' bytes fields (consumer protocol, KRaft control records, principals).", data, [])
    )
    records = _by_name(old.records, new.records)
    (out / "coordinator_records.py").write_text(
        module_source("Keys and values that the coordinators write to their internal topics.", records, [record_types_source(new.records)])
    )
    index = [INDEX_HEAD, "DECLARATIONS = {\n" + "".join(declarations) + "}\n"]
    # A class statement rather than a functional call so that a type checker knows every member.
    index.append(
        "\nclass ApiKey(CodeEnum):\n"
        '    """Every API key the broker can decode, named as Kafka names them (``ApiKey.Produce == 0``)."""\n\n'
        + "".join(f"    {name} = {k}\n" for k, _, name in modules)
    )
    (out / "__init__.py").write_text("\n".join(index))
    return written


INDEX_HEAD = '''"""Every API the broker can decode, by API key (generated; see ``odradek.tools.gen_messages``).

What the broker reads of every API as it starts (its versions, listeners, whether its response carries a
throttle time) is declared here; each API's messages are in its own module, imported at first use
(``odradek.protocol.api``), so that a broker starting does not build ninety APIs' codecs it may never use.
"""

import importlib
from types import ModuleType

from odradek.protocol.values import CodeEnum


class Declaration:
    """An API as the broker reads it at start (a class with slots: a NamedTuple costs ~1 M instructions to
    create at import, docs/performance.md "Start-up")."""

    __slots__ = ("module", "name", "versions", "kafka_3_9", "listeners", "throttled")

    def __init__(self, module: str, name: str, versions: str, kafka_3_9: str | None, listeners: tuple[str, ...], throttled: bool) -> None:
        self.module = module
        self.name = name
        self.versions = versions
        """The request's valid versions (as its module's ``REQUEST``)."""
        self.kafka_3_9 = kafka_3_9
        self.listeners = listeners
        self.throttled = throttled
        """Its response carries ThrottleTimeMs."""


def module(api_key: int) -> ModuleType:
    """The API's messages (imported now if not yet)."""
    return importlib.import_module(f"odradek.protocol.messages.{DECLARATIONS[api_key].module}")


def __getattr__(name: str) -> dict[int, ModuleType]:
    """``MODULES``, every API's module by key, imports them all: for tools and tests that read every API."""
    if name == "MODULES":
        return {key: module(key) for key in DECLARATIONS}
    raise AttributeError(name)

'''


def _constant_name(stem: str) -> str:
    return snake_case(stem).upper()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    spec_root = Path(args[0]) if args else Path("../shared/kafka-protocol")
    newer_root = Path(args[1]) if len(args) > 1 else Path("../shared/kafka-protocol-4.4")
    out = Path(args[2]) if len(args) > 2 else Path(__file__).resolve().parents[1] / "protocol" / "messages"
    try:
        written = generate(spec_root, newer_root, out)
    except SpecMismatch as exc:
        sys.exit(f"gen_messages: {exc}")
    print(f"wrote {len(written)} API modules, headers, data structures and coordinator records to {out}")


if __name__ == "__main__":
    main()
