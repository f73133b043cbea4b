"""Write ``protocol/messages/*.py`` from Kafka's JSON message specs.

Kafka generates its message classes from these specs; we do the same once and commit the declarations,
so the specs stay the single source of truth and our definitions read like them (one compact module per
API key, Kafka's field names, version ranges as Kafka writes them, each field's ``about`` text as a comment
above it, its doc). The runtime never reads the specs; ``tests/protocol/test_spec_crosscheck.py`` keeps the
committed declarations equal to them, and the committed modules equal to what this generator writes.

Usage: ``python -m odradek.tools.gen_messages ../shared/kafka-protocol [protocol/messages]``
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

from odradek.protocol.schema import snake_case

SKIPPED_UNSTABLE_PREFIXES = ("ShareGroup", "ShareFetch", "ShareAcknowledge")


_STRING_OR_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*')


def load_spec(path: Path) -> dict[str, Any]:
    """Kafka's specs are JSON with ``//`` comments, whole-line or trailing; ``//`` inside strings stays."""
    return json.loads(_STRING_OR_COMMENT.sub(lambda m: m.group(1) or "", path.read_text()))


def served_by_broker(spec: dict[str, Any]) -> bool:
    """APIs a ZooKeeper-mode or KRaft broker listens for, less the unstable share-group APIs (KIP-932)."""
    listeners = spec.get("listeners", [])
    if "zkBroker" not in listeners and "broker" not in listeners:
        return False
    return not spec.get("latestVersionUnstable", False) or not _is_share_group_api(spec["name"])


def _is_share_group_api(name: str) -> bool:
    return name.startswith(SKIPPED_UNSTABLE_PREFIXES) or "ShareGroupState" in name


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
        versions = f.get("versions", "0+")
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
    if value == "null":
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


def module_source(title: str, specs: list[tuple[str, dict[str, Any]]], extra: list[str]) -> str:
    sources = [f'"""{title}\n\nGenerated by ``odradek.tools.gen_messages`` from Kafka 3.9\'s JSON specs; see that module."""\n']
    sources.append("from odradek.protocol.schema import NULL, Array, F, Message, S  # noqa: F401\n")
    sources.extend(extra)
    for var, spec in specs:
        text, common = message_source(spec, var)
        sources.extend(common)
        sources.append(text)
    return "\n".join(sources).rstrip() + "\n"


def generate(spec_root: Path, out: Path) -> list[str]:
    message_dir = spec_root / "message"
    requests = {}
    responses = {}
    for path in sorted(message_dir.glob("*.json")):
        spec = load_spec(path)
        if spec.get("type") == "request":
            requests[spec["apiKey"]] = spec
        elif spec.get("type") == "response":
            responses[spec["apiKey"]] = spec
    written = []
    modules = []
    for key in sorted(requests):
        request = requests[key]
        if not served_by_broker(request):
            continue
        api_name = request["name"].removesuffix("Request")
        module = snake_case(api_name)
        extra = [
            f"API_KEY = {key}\n",
            f"NAME = {api_name!r}\n",
            f"LISTENERS = {tuple(request.get('listeners', []))!r}\n",
        ]
        title = f"{api_name} (API key {key})."
        text = module_source(title, [("REQUEST", request), ("RESPONSE", responses[key])], extra)
        (out / f"{module}.py").write_text(text)
        written.append(module)
        modules.append((key, module, api_name))
    headers = [("REQUEST_HEADER", load_spec(message_dir / "RequestHeader.json")), ("RESPONSE_HEADER", load_spec(message_dir / "ResponseHeader.json"))]
    (out / "headers.py").write_text(module_source("Request and response headers.", headers, []))
    data = [(_constant_name(p.stem), spec) for p in sorted(message_dir.glob("*.json")) if (spec := load_spec(p)).get("type") == "data"]
    (out / "data.py").write_text(
        module_source("Structures carried inside other messages' bytes fields (consumer protocol, KRaft control records, principals).", data, [])
    )
    records_dir = spec_root / "coordinator-records"
    if records_dir.is_dir():
        specs = [(_constant_name(p.stem), load_spec(p)) for p in sorted(records_dir.glob("*.json"))]
        (out / "coordinator_records.py").write_text(
            module_source("Keys and values that the coordinators write to their internal topics.", specs, [])
        )
    index = ['"""Every API the broker can decode, by API key (generated; see ``odradek.tools.gen_messages``)."""\n']
    index.append("import enum\n\nfrom odradek.protocol.messages import (\n" + "".join(f"    {m},\n" for _, m, _ in modules) + ")\n")
    index.append("MODULES = {\n" + "".join(f"    {k}: {m},\n" for k, m, _ in modules) + "}\n")
    # A class statement rather than enum.IntEnum("ApiKey", {...}) so that a type checker knows every member.
    index.append(
        "\nclass ApiKey(enum.IntEnum):\n"
        '    """Every API key the broker can decode, named as Kafka names them (``ApiKey.Produce == 0``)."""\n\n'
        + "".join(f"    {name} = {k}\n" for k, _, name in modules)
    )
    (out / "__init__.py").write_text("\n".join(index))
    return written


def _constant_name(stem: str) -> str:
    return snake_case(stem).upper()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    spec_root = Path(args[0]) if args else Path("../shared/kafka-protocol")
    out = Path(args[1]) if len(args) > 1 else Path(__file__).resolve().parents[1] / "protocol" / "messages"
    written = generate(spec_root, out)
    print(f"wrote {len(written)} API modules, headers and coordinator records to {out}")


if __name__ == "__main__":
    main()
