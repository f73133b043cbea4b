"""Write ``protocol/message_types/*.py``: the static types of every API's request and response, for mypy.

The codec works on untyped values (decoded structs are ``Container`` objects, dicts read by attribute;
answers are built from dicts), so a handler that reads a field its request lacks, or answers with a misspelt
key, would fail only when it runs. These modules give mypy the shapes, derived from the same declarations the codec compiles
(``protocol/messages/*``, the runtime ``Message`` objects, not Kafka's JSON), each struct twice:

- ``ProduceRequest``, ``TopicProduceData``, ...: a ``Protocol`` of a decoded struct, read by attribute. Decoding
  fills every field the version lacks with its default, so every field of every version is there.
- ``ProduceResponseDict``, ``TopicProduceDataDict``, ...: a ``TypedDict`` of a struct to encode. Every key is
  optional (``total=False``): the encoder writes a missing key's default, and handlers build one dict for
  all versions. A key no version declares, or a value of the wrong type, is a type error.

They are annotations only: nothing on the request path creates or checks them. ``tests/protocol/
test_message_types.py`` keeps the committed modules equal to what this generator writes.

Usage: ``python -m odradek.tools.gen_message_types [protocol/message_types]``
"""

from __future__ import annotations

import keyword
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from odradek.protocol.messages import MODULES
from odradek.protocol.schema import Array, F, Message, S, Versions, snake_case

_SCALARS = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "int64": "int",
    "float64": "float",
    "uuid": "Uuid",
    "string": "str",
    "bytes": "bytes",
}
_RECORDS = {"decoded": "memoryview | bytes", "built": "Records"}
"""A ``records`` field decodes to a view of the request's buffer (bytes when read from a copy); to encode, it
may also be a file slice sent beside the frame (``schema.SplicedRecords``)."""


@dataclass(frozen=True)
class _Struct:
    name: str
    """The class name of its decoded form (its ``Dict`` form adds that suffix)."""
    decl: S
    valid: Versions


def _nullable(f: F, valid: Versions) -> bool:
    """Whether the field may be null at some version of the message that has it."""
    ranges = (f.nullable, f.versions, valid)
    low = max(r.low for r in ranges)
    highs = [r.high for r in ranges if r.high is not None]
    return not highs or low <= min(highs)


class _Module:
    """One API's classes: each struct of its request and response once, by name; a response struct whose name
    its request uses for another shape is prefixed with ``Response``."""

    def __init__(self) -> None:
        self.structs: dict[str, _Struct] = {}
        self.order: list[str] = []
        self.uses_uuid = False
        self.uses_records = False

    def add(self, name: str, decl: S, valid: Versions, clash_prefix: str) -> str:
        known = self.structs.get(name)
        if known is not None and known.decl != decl:
            name = clash_prefix + name
            known = self.structs.get(name)
            assert known is None or known.decl == decl, f"two shapes named {name}"
        if known is None:
            self.structs[name] = _Struct(name, decl, valid)
            self.order.append(name)
            for f in decl.fields:
                self.type_of(f, valid, "decoded", clash_prefix)
        return name

    def type_of(self, f: F, valid: Versions, form: str, clash_prefix: str) -> str:
        """The field's Python type in one form: ``decoded`` (a Protocol's attribute) or ``built`` (a dict's value)."""
        t = f.type
        suffix = "" if form == "decoded" else "Dict"
        if isinstance(t, S):
            text = self.add(t.name, t, valid, clash_prefix) + suffix
        elif isinstance(t, Array):
            element = t.element
            inner = self.add(element.name, element, valid, clash_prefix) + suffix if isinstance(element, S) else self.scalar(element, form)
            text = f"list[{inner}]"
        else:
            text = self.scalar(t, form)
        if t == "records" or _nullable(f, valid):
            text += " | None"
        return text

    def scalar(self, type_name: str, form: str) -> str:
        if type_name == "records":
            self.uses_records = True
            return _RECORDS[form]
        self.uses_uuid |= type_name == "uuid"
        return _SCALARS[type_name]

    def field_lines(self, struct: _Struct, form: str, clash_prefix: str) -> list[str]:
        lines = []
        for f in struct.decl.fields:
            name = snake_case(f.name)
            assert name.isidentifier() and not keyword.iskeyword(name), f"{struct.name}.{name} is not an attribute name"
            lines.append(f"    {name}: {self.type_of(f, struct.valid, form, clash_prefix)}")
        return lines or ["    pass"]


def module_source(module: ModuleType) -> str:
    request: Message = module.REQUEST
    response: Message = module.RESPONSE
    types = _Module()
    prefixes: dict[str, str] = {}
    for message, prefix in ((request, "Request"), (response, "Response")):
        name = types.add(message.name, message.struct, message.valid, prefix)
        assert name == message.name, f"{message.name} names one of its own structs"
        prefixes.update((struct_name, prefix) for struct_name in types.order if struct_name not in prefixes)
    classes = []
    for name in types.order:
        struct = types.structs[name]
        classes.append(
            f"class {name}(Protocol):\n"
            + "\n".join(types.field_lines(struct, "decoded", prefixes[name]))
            + "\n"
        )
    for name in types.order:
        struct = types.structs[name]
        classes.append(
            f"class {name}Dict(TypedDict, total=False):\n"
            + "\n".join(types.field_lines(struct, "built", prefixes[name]))
            + "\n"
        )
    imports = ["from __future__ import annotations", "", "from typing import Protocol, TypedDict"]
    ours = ["from odradek.protocol.kafka_uuid import Uuid"] if types.uses_uuid else []
    if types.uses_records:
        ours += ["from odradek.protocol.schema import Records"]
    if ours:
        imports += ["", *ours]
    head = (
        f'"""{module.NAME} (API key {module.API_KEY}, v{request.valid}): the types of its request and response, for mypy.\n\n'
        "Each struct as decoded (a Protocol: every field, at its default where a version lacks it) and as a dict to\n"
        "encode (``...Dict``: every key optional, a missing one encoded as its default). Generated by\n"
        f'``odradek.tools.gen_message_types`` from ``odradek.protocol.messages.{_module_name(module)}``; see those modules."""\n\n'
    )
    return head + "\n".join(imports) + "\n\n\n" + "\n\n".join(classes)


def _module_name(module: ModuleType) -> str:
    return str(module.__name__).rsplit(".", 1)[1]


def generate(out: Path) -> list[str]:
    """Write one module per API (and the package's ``__init__``) into ``out``; returns the module names."""
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for _, module in sorted(MODULES.items()):
        name = _module_name(module)
        (out / f"{name}.py").write_text(module_source(module))
        names.append(name)
    (out / "__init__.py").write_text(
        '"""The static types of every API\'s request and response (generated by ``odradek.tools.gen_message_types``;\n'
        'see that module): ``from odradek.protocol.message_types.produce import ProduceRequest, ProduceResponseDict``."""\n'
    )
    return names


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else Path(__file__).resolve().parent.parent / "protocol" / "message_types"
    names = generate(out)
    print(f"wrote {len(names)} modules to {out}")


if __name__ == "__main__":
    main()
