"""Declarative message schemas, compiled per version into Python parsers and builders.

A message is declared once, as Kafka's own JSON specs declare it: fields with version ranges, nullable
versions, tagged fields, defaults and nested structs. For a given (message, version) each field's type
(:class:`Primitive`, :class:`KArray`, :class:`KStruct`, :class:`NullableStruct`) emits the straight-line
Python that reads and writes it, and the whole is compiled once into one parser and one builder function
(:class:`Codec`): Kafka's primitives (unsigned varints, compact strings, tagged-field sections, zero-copy
``records``) need nothing else. The same struct is also derived into a program for the schema machine
(``protocol/_codec.c``), which decodes and encodes at C speed; the Python functions are its reference, run
whenever the machine refuses an input or a value, so that errors are theirs.

Decoded structs are :class:`Container` objects (dicts with attribute access) that always carry every
field of the message, filled with the field's default when the version lacks it, so handlers never branch
on versions to read a field. Building takes dicts and uses the default for any missing key; under test (``CHECK_FIELD_NAMES``) a key that is not a
field of the struct in any version raises :class:`UnknownFieldError`.

Zero-copy: a ``records`` field decodes to a ``memoryview`` slice of the input buffer. When building, a
``records`` value may be any object with a ``length`` attribute (e.g. file slices to be sent with
sendfile): its length prefix is written and its position recorded, and :func:`encode` returns the parts
in order so the caller can send the record data itself.
"""

from __future__ import annotations

import io as _io
import operator
import os
import re
import struct
import sys
import threading
from typing import Any, Mapping, Protocol, cast

from odradek.protocol.kafka_uuid import ZERO_UUID, Uuid, uuid_of_bytes
from odradek.protocol.values import FrozenFields

try:
    from odradek.protocol import _codec
except ImportError:  # a tree whose extension was not rebuilt since it gained the machine: the Python codec runs
    _codec = None  # type: ignore[assignment]

__all__ = [
    "Versions",
    "F",
    "S",
    "Array",
    "Message",
    "Codec",
    "DecodeError",
    "EncodeError",
    "Splice",
    "SplicedRecords",
    "Records",
    "encode",
    "encode_parts",
    "encode_frame",
    "UnknownFieldError",
    "decode",
    "decode_frame",
    "decode_frame_by",
    "encode_frame_by",
    "frame_programs",
    "snake_case",
]


class Container(dict[str, Any]):
    """What decoded messages are: a dict whose keys are also its attributes (``body.topics``, read, set and
    deleted), equal to any dict with the same keys and values in any order, its private keys (``_unknown_tags``)
    aside on both sides.

    A field read costs a dict lookup: the key is looked up first, not after the ordinary attribute lookup
    failed and raised (~0.5 µs per field read, and a handler reads a dozen (produce) to twenty (fetch) per
    request). The dict's own attributes (its methods) still win over a key of the same name."""

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        if name in _CONTAINER_ATTRIBUTES:
            return object.__getattribute__(self, name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getattr__(self, name: str) -> Any:
        """A key that is no property of a :func:`_fields_container` class (whose attribute lookup is the
        ordinary one)."""
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, dict):
            return False
        return _public(self) == _public(other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # a dict: mutable

    def __repr__(self) -> str:
        return f"Container({', '.join(f'{k}={v!r}' for k, v in _public(self).items())})"

    def copy(self) -> Container:
        return Container(self)

    __copy__ = copy


def _public(value: dict[str, Any]) -> dict[str, Any]:
    """A struct's fields without its private keys (``_unknown_tags``), which equality and repr leave out."""
    return {k: v for k, v in value.items() if not (isinstance(k, str) and k.startswith("_"))}


_CONTAINER_ATTRIBUTES = frozenset(dir(Container))


def _fields_container(names: tuple[str, ...]) -> type[Container]:
    """The Container class of a decoded struct with these fields: each field read by a descriptor that looks
    its key up (no Python frame: about a quarter of a :class:`Container` field read, and its methods such as
    ``get`` a quarter), the generic lookup for any other key. A decoded struct carries every field of its
    declaration, so the descriptors always find their key. The descriptor is the extension's ``Field``
    (``protocol/_codec.c``: the lookup itself, half a property's instructions), or without the extension a
    property whose getter is ``operator.itemgetter``."""
    cls = _FIELDS_CONTAINERS.get(names)
    if cls is None:
        namespace: dict[str, Any] = {"__slots__": (), "__getattribute__": object.__getattribute__}
        for name in names:
            if name not in _CONTAINER_ATTRIBUTES and name.isidentifier():
                namespace[name] = _codec.Field(name) if _codec is not None else property(operator.itemgetter(name), _field_setter(name), _field_deleter(name))
        cls = _FIELDS_CONTAINERS.setdefault(names, type("Container", (Container,), namespace))
    return cls


def _field_setter(name: str) -> Any:
    def set_field(container: Container, value: Any) -> None:
        container[name] = value

    return set_field


def _field_deleter(name: str) -> Any:
    def delete_field(container: Container) -> None:
        Container.__delattr__(container, name)

    return delete_field


_FIELDS_CONTAINERS: dict[tuple[str, ...], type[Container]] = {}


class DecodeError(ValueError):
    """The one error raised for any input that is not a valid encoding of the requested message."""


class EncodeError(ValueError):
    """A value that its field cannot carry (a string over 32,767 bytes, a number outside its type's range):
    Kafka's generated writers refuse the same (``'memberId' field is too long to be serialized``), and its
    KafkaApis then answers the request's error response. Raised for any such value, never ``struct.error``."""


class UnknownFieldError(ValueError):
    """A value to encode has a key that no version of its struct declares: a misspelling, which would
    otherwise encode the field's default silently."""


CHECK_FIELD_NAMES = os.environ.get("ODRADEK_CHECK_FIELD_NAMES", "") == "1"
"""Whether built structs refuse keys their struct does not declare at any version (read once, at import;
tests/conftest.py sets it). A key of another version is accepted: handlers build one dict for all versions.
Off in production because it is not free on the hot path: measured at +7% encode time for a 100-partition
Fetch v12 response and for a 10-partition Produce v9 response (one subset test per struct)."""


# ----------------------------------------------------------------------------------------------------------
# Version ranges, as Kafka writes them: "0+", "3-7", "5", "none".


class Versions(FrozenFields):
    __slots__ = _FIELDS = ("low", "high")
    low: int
    high: int | None  # None = open-ended

    def __init__(self, low: int, high: int | None) -> None:
        # Set directly, not with FrozenFields._set: declarations make thousands of these at import (~1 M instructions).
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    @classmethod
    def parse(cls, spec: str | None) -> "Versions":
        """The range a spec (``"0-4"``, ``"3+"``, ``"2"``, ``"none"``) names; one object per spec (the declarations
        name the same few hundred ranges many times, and a range is immutable)."""
        parsed = _PARSED.get(spec)
        if parsed is None:
            if spec is None or spec == "none" or spec == "":
                parsed = NONE
            elif spec.endswith("+"):
                parsed = cls(int(spec[:-1]), None)
            elif "-" in spec:
                lo, hi = spec.split("-")
                parsed = cls(int(lo), int(hi))
            else:
                parsed = cls(int(spec), int(spec))
            _PARSED[spec] = parsed
        return parsed

    def __contains__(self, version: int) -> bool:
        return self.low <= version and (self.high is None or version <= self.high)

    def __str__(self) -> str:
        if self.low > (self.high if self.high is not None else self.low):
            return "none"
        if self.high is None:
            return f"{self.low}+"
        if self.low == self.high:
            return str(self.low)
        return f"{self.low}-{self.high}"


NONE = Versions(1, 0)  # empty range
_PARSED: dict[str | None, Versions] = {}


def _versions(spec: str | Versions | None) -> Versions:
    return spec if isinstance(spec, Versions) else Versions.parse(spec)


def snake_case(name: str) -> str:
    """Kafka's CamelCase field names as Python attribute names (``ThrottleTimeMs`` → ``throttle_time_ms``)."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


# ----------------------------------------------------------------------------------------------------------
# Declarations

class S(FrozenFields):
    """A struct: Kafka's nested field groups and common structs."""

    __slots__ = _FIELDS = ("name", "fields")
    name: str
    fields: tuple["F", ...]

    def __init__(self, name: str, *fields: "F") -> None:
        # Set directly, as Versions' fields.
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "fields", tuple(fields))


class Array(FrozenFields):
    __slots__ = _FIELDS = ("element",)
    element: "str | S"  # a primitive type name or a struct

    def __init__(self, element: "str | S") -> None:
        object.__setattr__(self, "element", element)


class F(FrozenFields):
    """A field: name, type (primitive name, ``S`` or ``Array``), versions and Kafka's per-field options."""

    __slots__ = _FIELDS = ("name", "type", "versions", "nullable", "tag", "tagged", "default", "flexible")
    name: str
    type: "str | S | Array"
    versions: Versions
    nullable: Versions
    tag: int | None
    tagged: Versions
    default: Any
    flexible: Versions | None  # a field-level override of the message's flexible versions (RequestHeader)

    def __init__(
        self,
        name: str,
        type: "str | S | Array",
        versions: str = "0+",
        *,
        nullable: str | None = None,
        tag: int | None = None,
        tagged: str | None = None,
        default: Any = None,
        flexible: str | None = None,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "type", type)
        set_(self, "versions", _versions(versions))
        set_(self, "nullable", _versions(nullable))
        set_(self, "tag", tag)
        set_(self, "tagged", _versions(tagged))
        set_(self, "default", default)
        set_(self, "flexible", None if flexible is None else _versions(flexible))

    def default_value(self) -> Any:
        """Kafka's default for the field: the declared one, else zero/empty/null by type."""
        t = self.type
        if self.default is not None:
            return self.default
        if isinstance(t, Array):
            return []
        if isinstance(t, S):
            return _struct_default(t)
        return _PRIMITIVE_DEFAULTS[t]


NULL = type("Null", (), {"__repr__": lambda self: "NULL"})()
"""Marker for a declared default of null (``None`` means 'no declared default')."""

_PRIMITIVE_DEFAULTS: dict[str, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "int64": 0,
    "float64": 0.0,
    "uuid": ZERO_UUID,
    "string": "",
    "bytes": b"",
    "records": None,
}


def _struct_default(s: S) -> Container:
    return Container((snake_case(f.name), _resolve_default(f)) for f in s.fields)


def _resolve_default(f: F) -> Any:
    value = f.default_value()
    return None if value is NULL else value


# ----------------------------------------------------------------------------------------------------------
# Code emission. Every parser is an expression over ``io`` (a BytesIO) and ``this`` (the context, whose
# ``_params`` the parsers read); every builder is an expression over ``obj``, ``io`` and ``this``.


class _Code:
    """One compilation's source: the functions emitted (each named by :meth:`fn`) and the constants they
    read (:meth:`const`), which are the globals the source runs with, beside the runtime ``_rt``."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.globals: dict[str, Any] = {"_rt": _Runtime}
        self._const_names: dict[int, str] = {}

    def fn(self, prefix: str, body: str) -> str:
        """Emit a function (``FN`` in ``body`` stands for its name); its unique name."""
        name = f"{prefix}_{len(self.blocks)}"
        self.blocks.append(body.replace("FN", name))
        return name

    def const(self, value: Any) -> str:
        """The name of a global holding ``value`` (one per object)."""
        name = self._const_names.get(id(value))
        if name is None:
            name = self._const_names[id(value)] = f"_c{len(self._const_names)}"
            self.globals[name] = value  # also keeps it alive, so that its id is not reused
        return name


class Codec:
    """One version of a message compiled: the functions :func:`decode_frame` and :func:`encode_frame` call."""

    __slots__ = ("parsefunc", "buildfunc", "program")

    def __init__(self, struct_: KStruct, label: str) -> None:
        code = _Code()
        parse = struct_.parse_function(code)
        build = struct_.build_function(code)
        namespace = code.globals
        exec(compile("\n".join(code.blocks), f"<{label}>", "exec"), namespace)
        self.parsefunc = namespace[parse]
        self.buildfunc = namespace[build]
        self.program: tuple[Any, ...] | None = struct_.program() if _codec is not None and struct_.machine_can_run() else None
        """The same struct as the schema machine's program (``protocol/_codec.c``), or None where the Python
        functions above run: the extension not built, or a construct the machine does not run."""


_COMPILE_LOCK = threading.RLock()
"""One compilation at a time (a coordinator's channel encodes on a thread of its own): a version is compiled once."""

_FIXED = {
    "bool": ("_rt.BOOL", 1),
    "int8": ("_rt.INT8", 1),
    "int16": ("_rt.INT16", 2),
    "uint16": ("_rt.UINT16", 2),
    "int32": ("_rt.INT32", 4),
    "int64": ("_rt.INT64", 8),
    "float64": ("_rt.FLOAT64", 8),
}


class _Field:
    """A field's type at one version, as the code that reads it and the code that writes it."""

    def emit_parse(self, code: _Code) -> str:
        """An expression reading the field from ``io``."""
        raise NotImplementedError

    def emit_build(self, code: _Code) -> str:
        """An expression writing ``obj`` to ``io``, whose value is ``obj``."""
        raise NotImplementedError

    def op(self) -> tuple[int, Any]:
        """The schema machine's op for this field: (code and flags, argument), as ``protocol/_codec.c`` reads it."""
        raise NotImplementedError

    def holds_records(self) -> bool:
        """Whether a ``records`` field is in it (the machine refuses one in a tagged field, see
        :meth:`KStruct.machine_can_run`)."""
        return False

    def machine_can_run(self) -> bool:
        """Whether the schema machine reads and writes it as the Python functions do."""
        return True


class Primitive(_Field):
    """A Kafka primitive: fixed-width numbers, uuid, (compact) (nullable) string/bytes, records."""

    def __init__(self, type_name: str, compact: bool, nullable: bool, name: str = "") -> None:
        self.type_name = type_name
        self.compact = compact
        self.nullable = nullable
        self.name = name
        """The field's name (Kafka's camelCase), for the error a value it cannot carry raises."""

    def emit_parse(self, code: _Code) -> str:
        t = self.type_name
        if t in _FIXED:
            # A short read makes unpack raise struct.error, which decode() reports as a DecodeError.
            packer, size = _FIXED[t]
            expr = f"{packer}.unpack(io.read({size}))[0]"
            return f"bool({expr})" if t == "bool" else expr
        if t == "uuid":
            return "_rt.read_uuid(io)"
        kind = {"string": "str", "bytes": "bytes", "records": "records"}[t]
        return f"_rt.read_{kind}(io, this, {self.compact}, {self.nullable})"

    def op(self) -> tuple[int, Any]:
        return (_op_word(_OPS[self.type_name], self.compact, self.nullable), None)

    def holds_records(self) -> bool:
        return self.type_name == "records"

    def build_statement(self, value: str) -> str:
        """A statement writing ``value`` (an expression evaluated once)."""
        t = self.type_name
        if t in _FIXED:
            return f"io.write({_FIXED[t][0]}.pack({value}))"
        if t == "uuid":
            return f"_rt.write_uuid({value}, io)"
        if t == "string":
            return f"_rt.write_str({value}, io, this, {self.compact}, {self.nullable}, {self.name!r})"
        kind = {"bytes": "bytes", "records": "records"}[t]
        return f"_rt.write_{kind}({value}, io, this, {self.compact}, {self.nullable})"

    def emit_build(self, code: _Code) -> str:
        t = self.type_name
        if t in _FIXED:
            packer, _ = _FIXED[t]
            return f"(io.write({packer}.pack(obj)), obj)[1]"
        if t == "uuid":
            return "_rt.write_uuid(obj, io)"
        if t == "string":
            return f"_rt.write_str(obj, io, this, {self.compact}, {self.nullable}, {self.name!r})"
        kind = {"bytes": "bytes", "records": "records"}[t]
        return f"_rt.write_{kind}(obj, io, this, {self.compact}, {self.nullable})"


class KArray(_Field):
    """Kafka arrays: int32 count (-1 = null) or compact unsigned-varint count+1 (0 = null).

    Other negative counts are refused like other negative lengths (Kafka's Java reader would take any
    negative count as null; no client writes one, so it can only be a corrupt or hostile frame).
    """

    def __init__(self, element: _Field, compact: bool, nullable: bool) -> None:
        self.element = element
        self.compact = compact
        self.nullable = nullable

    def parse_lines(self, code: _Code, target: str) -> list[str]:
        """Statements reading the array into ``target`` (an assignable expression), for the body of the
        function that reads the struct holding it: one Python call fewer per array than a function of its
        own, and a loop rather than a list comprehension, which on Python 3.11 is a call of its own too."""
        count = f"{_UVARINT_EXPR} - 1" if self.compact else "_rt.INT32.unpack(_rt.read(io, 4))[0]"
        null = f"{target} = None" if self.nullable else "raise _rt.DecodeError('null array in non-nullable field')"
        return [
            f"n = {count}",
            "if n < 0:",
            "    if n != -1:",
            "        raise _rt.DecodeError('bad array count %d' % n)",
            f"    {null}",
            "else:",
            "    if n > this['_params'].get('_size', 0x7FFFFFFF):",
            "        _rt.count_exceeds(n)",
            f"    {target} = a = []",
            "    for _ in range(n):",
            f"        a.append({self.element.emit_parse(code)})",
        ]

    def op(self) -> tuple[int, Any]:
        return (_op_word(_OP_ARRAY, self.compact, self.nullable), self.element.op())

    def holds_records(self) -> bool:
        return self.element.holds_records()

    def machine_can_run(self) -> bool:
        return self.element.machine_can_run()

    def emit_parse(self, code: _Code) -> str:
        body = "\n".join("    " + line for line in self.parse_lines(code, "r"))
        fn = code.fn("parse_array", f"\ndef FN(io, this):\n{body}\n    return r\n")
        return f"{fn}(io, this)"

    def build_lines(self, code: _Code, value: str) -> list[str]:
        """Statements writing the array ``value`` (an expression evaluated once), for the body of the function
        that writes the struct holding it (one Python call fewer per array)."""
        elem = _build_statement(self.element, "item", code)
        write_count = "io.write(_rt.UVARINTS[n] if (n := len(a) + 1) < 0x80 else _rt.uvarint_bytes(n))" if self.compact else "io.write(_rt.INT32.pack(len(a)))"
        null_count = "_rt.write_uvarint(0, io)" if self.compact else "io.write(_rt.INT32.pack(-1))"
        return [
            f"a = {value}",
            "if a is None:",
            f"    {null_count if self.nullable else 'raise _rt.EncodeError(' + repr('null array in non-nullable field') + ')'}",
            "else:",
            f"    {write_count}",
            "    for item in a:",
            f"        {elem}",
        ]

    def emit_build(self, code: _Code) -> str:
        body = "\n".join("    " + line for line in self.build_lines(code, "obj"))
        fn = code.fn("build_array", f"\ndef FN(obj, io, this):\n{body}\n    return obj\n")
        return f"{fn}(obj, io, this)"


class KStruct(_Field):
    """One struct at one version: its present fields in order, then (if flexible) the tagged-field section.

    The parsed Container carries every declared field; absent ones get their defaults. Unknown tagged
    fields are kept under ``_unknown_tags`` so that re-encoding reproduces the input exactly.
    """

    def __init__(self, decl: S, version: int, flexible: bool) -> None:
        self.decl = decl
        self.version = version
        self.flexible = flexible
        self.regular: list[tuple[str, _Field, F]] = []
        self.tagged: list[tuple[str, int, _Field, F]] = []
        self.absent: list[tuple[str, F]] = []
        for f in decl.fields:
            name = snake_case(f.name)
            field_flexible = flexible if f.flexible is None else (version in f.flexible)
            if version not in f.versions:
                self.absent.append((name, f))
            elif f.tag is not None and version in f.tagged:
                if flexible:
                    self.tagged.append((name, f.tag, _field_for(f, version, field_flexible), f))
                else:
                    self.absent.append((name, f))
            else:
                self.regular.append((name, _field_for(f, version, field_flexible), f))
        self.tagged.sort(key=lambda t: t[1])

    def op(self) -> tuple[int, Any]:
        return (_OP_STRUCT, self.program())

    def holds_records(self) -> bool:
        return any(sub.holds_records() for _, sub, _ in self.regular) or any(sub.holds_records() for _, _, sub, _ in self.tagged)

    def machine_can_run(self) -> bool:
        """Whether the schema machine reads and writes this struct as the Python functions do. It does not run a
        ``records`` field inside a tagged field: the Python reader takes such a field's slice at its place in
        the tagged field's own stream (no message declares one), so the machine leaves it to Python."""
        subs = [sub for _, sub, _ in self.regular] + [sub for _, _, sub, _ in self.tagged]
        return not any(sub.holds_records() for _, _, sub, _ in self.tagged) and all(sub.machine_can_run() for sub in subs)

    def program(self) -> tuple[Any, ...]:
        """The struct as the schema machine runs it (the layout is in ``protocol/_codec.c``'s opening comment):
        the same fields, defaults, container class and tagged fields as the functions emitted below."""
        fields = tuple((sys.intern(name), sub.op(), _resolve_default(f)) for name, sub, f in self.regular)
        absent = tuple(_default_entry(name, f) for name, f in self.absent)
        tag_defaults = tuple(_default_entry(name, f) for name, _, _, f in self.tagged)
        template = _codec.template(
            tuple(name for name, _, _ in fields) + tuple(name for name, _, _ in absent + tag_defaults),
            (None,) * len(fields) + tuple(value if kind == 0 else None for _, kind, value in absent + tag_defaults),
        )
        absent = tuple(entry for entry in absent if entry[1] != 0)
        tag_defaults = tuple(entry for entry in tag_defaults if entry[1] != 0)
        parsers = {tag: (sys.intern(name), sub.op()) for name, tag, sub, _ in self.tagged}
        known = frozenset(snake_case(f.name) for f in self.decl.fields) | {"_unknown_tags"} if CHECK_FIELD_NAMES else None
        tagged = tuple((tag, sys.intern(name), sub.op(), _resolve_default(f)) for name, tag, sub, f in self.tagged)
        container = _fields_container(tuple(snake_case(f.name) for f in self.decl.fields))
        return (container, fields, absent, tag_defaults, bool(self.flexible), parsers, known, tagged, template)

    def emit_parse(self, code: _Code) -> str:
        return f"{self.parse_function(code)}(io, this)"

    def parse_function(self, code: _Code) -> str:
        """Emit the function ``(io, this)`` that reads the struct; its name."""
        fields = code.const(_fields_container(tuple(snake_case(f.name) for f in self.decl.fields)))
        lines = ["def FN(io, this):", f"    r = {fields}()"]
        for run in _fixed_runs(self.regular):
            if len(run) == 1:
                name, sub, _ = run[0]
                if isinstance(sub, KArray):
                    lines += ["    " + line for line in sub.parse_lines(code, f"r[{name!r}]")]
                else:
                    lines.append(f"    r[{name!r}] = {sub.emit_parse(code)}")
            else:
                packer = _run_struct(run)
                targets = ", ".join(f"r[{name!r}]" for name, _, _ in run)
                lines.append(f"    {targets} = {code.const(packer)}.unpack(io.read({packer.size}))")
        for name, f in self.absent:
            lines.append(f"    r[{name!r}] = {_default_expr(code, f)}")
        if self.flexible:
            tag_parsers = {}
            for name, tag, sub, f in self.tagged:
                lines.append(f"    r[{name!r}] = {_default_expr(code, f)}")
                tag_parsers[tag] = (name, code.fn("parse_tag", f"\ndef FN(io, this):\n    return {sub.emit_parse(code)}\n"))
            table = "{" + ", ".join(f"{tag}: ({n!r}, {p})" for tag, (n, p) in tag_parsers.items()) + "}"
            # Most sections are empty (one zero byte): read inline, the rest by the runtime.
            lines.append("    t = io.read(1)")
            lines.append("    if t != b'\\x00':")
            lines.append(f"        _rt.read_tagged(io, this, r, {table}, t)")
        lines.append("    return r")
        return code.fn("parse_struct", "\n" + "\n".join(lines) + "\n")

    def emit_build(self, code: _Code) -> str:
        return f"{self.build_function(code)}(obj, io, this)"

    def build_function(self, code: _Code) -> str:
        """Emit the function ``(obj, io, this)`` that writes the struct; its name."""
        lines = ["def FN(obj, io, this):", "    get = obj.get"]
        if CHECK_FIELD_NAMES:
            known = code.const(frozenset(snake_case(f.name) for f in self.decl.fields) | {"_unknown_tags"})
            lines.append(f"    if not obj.keys() <= {known}: _rt.unknown_fields(obj, {known}, {self.decl.name!r})")
        for run in _fixed_runs(self.regular):
            values = [f"get({name!r}, {code.const(_resolve_default(f))})" for name, _, f in run]
            if len(run) == 1:
                sub = run[0][1]
                if isinstance(sub, KArray):
                    lines += ["    " + line for line in sub.build_lines(code, values[0])]
                else:
                    lines.append(f"    {_build_statement(sub, values[0], code)}")
            else:
                lines.append(f"    io.write({code.const(_run_struct(run))}.pack({', '.join(values)}))")
        if self.flexible:
            if self.tagged:
                entries = []
                for name, tag, sub, f in self.tagged:
                    sub_fn = code.fn("build_tag", f"\ndef FN(obj, io, this):\n    return {sub.emit_build(code)}\n")
                    entries.append(f"({tag}, {name!r}, {sub_fn}, {code.const(_resolve_default(f))})")
                # Tagged fields are mostly left out (their defaults): then the section is one zero byte.
                names = code.const(frozenset(name for name, _, _, _ in self.tagged) | {"_unknown_tags"})
                lines.append(f"    if obj.keys().isdisjoint({names}):")
                lines.append("        io.write(b'\\x00')")
                lines.append("    else:")
                lines.append(f"        _rt.write_tagged(obj, io, this, ({', '.join(entries)},))")
            else:
                lines.append("    io.write(b'\\x00') if not get('_unknown_tags') else _rt.write_tagged(obj, io, this, ())")
        lines.append("    return obj")
        return code.fn("build_struct", "\n" + "\n".join(lines) + "\n")


class NullableStruct(_Field):
    """Kafka's nullable struct: an int8 marker (-1 = null, 1 = present) before the struct."""

    def __init__(self, struct_: KStruct) -> None:
        self.struct = struct_

    def op(self) -> tuple[int, Any]:
        return (_OP_NULLABLE_STRUCT, self.struct.program())

    def holds_records(self) -> bool:
        return self.struct.holds_records()

    def machine_can_run(self) -> bool:
        return self.struct.machine_can_run()

    def emit_parse(self, code: _Code) -> str:
        inner = self.struct.emit_parse(code)
        return f"(None if _rt.INT8.unpack(_rt.read(io, 1))[0] < 0 else {inner})"

    def emit_build(self, code: _Code) -> str:
        inner = self.struct.emit_build(code)
        return f"(io.write(b'\\xff'), obj)[1] if obj is None else (io.write(b'\\x01'), {inner})[1]"


_UVARINT_EXPR = "(b[0] if (b := io.read(1)) and b[0] < 0x80 else _rt.read_uvarint_from(b, io))"
"""An unsigned varint, read inline when it is one byte (counts and lengths below 128: nearly all)."""

_IMMUTABLE = (type(None), bool, int, float, str, bytes, Uuid)


def _default_expr(code: _Code, f: F) -> str:
    """A field's default for a decoded struct: the constant itself when immutable, else a fresh copy (a flat
    struct's by one dict copy)."""
    value = _resolve_default(f)
    if isinstance(value, _IMMUTABLE):
        return code.const(value)
    if isinstance(value, list) and not value:
        return "[]"
    if isinstance(value, Container) and all(isinstance(v, _IMMUTABLE) for v in value.values()):
        return f"_rt.Container({code.const(value)})"
    return f"_rt.copy_default({code.const(value)})"


_OPS = {name: code for code, name in enumerate(("bool", "int8", "int16", "uint16", "int32", "int64", "float64", "uuid", "string", "bytes", "records"))}
"""The schema machine's op codes of the primitives (``protocol/_codec.c``'s enum, in its order)."""
_OP_ARRAY, _OP_STRUCT, _OP_NULLABLE_STRUCT = len(_OPS), len(_OPS) + 1, len(_OPS) + 2


def _op_word(code: int, compact: bool, nullable: bool) -> int:
    """An op's code and flags in one number, as the machine reads them."""
    return code | (compact | nullable << 1) << 4


def _default_entry(name: str, f: F) -> tuple[str, int, Any]:
    """A field's default for a struct the machine decodes, as :func:`_default_expr` makes it: (name, kind,
    value) with kind 0 the value itself, 1 a new empty list, 2 a Container copy of it, 3 its deep copy."""
    value = _resolve_default(f)
    if isinstance(value, _IMMUTABLE):
        kind = 0
    elif isinstance(value, list) and not value:
        kind = 1
    elif isinstance(value, Container) and all(isinstance(v, _IMMUTABLE) for v in value.values()):
        kind = 2
    else:
        kind = 3
    return (sys.intern(name), kind, value)


_RUN_FORMATS = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "int64": "q", "float64": "d"}
"""Fixed-width types read and written together when consecutive (bool is not: its values are normalized)."""

_Regular = tuple[str, _Field, F]


def _fixed_runs(regular: list[_Regular]) -> list[list[_Regular]]:
    """The struct's fields in order, consecutive fixed-width numbers grouped: each group is read with one
    ``read`` and one ``unpack`` (Fetch's six request fields after the replica id, a fetched partition's
    six numbers) and written with one ``pack``."""
    runs: list[list[_Regular]] = []
    fixed = False
    for item in regular:
        sub = item[1]
        is_fixed = isinstance(sub, Primitive) and sub.type_name in _RUN_FORMATS
        if is_fixed and fixed:
            runs[-1].append(item)
        else:
            runs.append([item])
        fixed = is_fixed
    return runs


def _run_struct(run: list[_Regular]) -> struct.Struct:
    return struct.Struct(">" + "".join(_RUN_FORMATS[cast(Primitive, sub).type_name] for _, sub, _ in run))  # a run: fixed-width primitives


_CALL_ARGUMENTS = "(obj, io, this)"
"""How an emitted struct or array expression calls its own function (``build_3(obj, io, this)``): the name is then
called directly. A string test: a regular expression compiled at import cost every start 0.4 M instructions."""


def _build_statement(sub: _Field, value: str, code: _Code) -> str:
    """A statement writing ``value`` with ``sub``: a primitive written in place, a struct or an array by a
    direct call of its function (one Python call fewer per field than a wrapper)."""
    if isinstance(sub, Primitive):
        return sub.build_statement(value)
    expr = sub.emit_build(code)
    called = expr.removesuffix(_CALL_ARGUMENTS)
    if called != expr and called.isidentifier():
        return f"{called}({value}, io, this)"
    fn = code.fn("build_field", f"\ndef FN(obj, io, this):\n    return {expr}\n")
    return f"{fn}({value}, io, this)"


def _field_for(f: F, version: int, flexible: bool) -> _Field:
    """The type that reads and writes field ``f`` at ``version``."""
    nullable = version in f.nullable
    t = f.type
    if isinstance(t, S):
        struct_ = KStruct(t, version, flexible)
        return NullableStruct(struct_) if nullable else struct_
    if isinstance(t, Array):
        el = t.element
        element = KStruct(el, version, flexible) if isinstance(el, S) else Primitive(el, flexible, False, f"{_camel(f.name)} element")
        return KArray(element, flexible, nullable)
    return Primitive(t, flexible, nullable, _camel(f.name))


def _camel(name: str) -> str:
    """A field's name as Kafka's generated code and its messages spell it (``MemberId`` → ``memberId``)."""
    return name[:1].lower() + name[1:]


# ----------------------------------------------------------------------------------------------------------
# Messages


class Message(FrozenFields):
    """A top-level request or response (or header, or coordinator record) with its versions."""

    _FIELDS = ("name", "valid", "flexible", "fields")
    __slots__ = (*_FIELDS, "_cache")
    name: str
    valid: Versions
    flexible: Versions
    fields: tuple[F, ...]
    _cache: dict[int, Codec]
    """The compiled versions (neither compared nor shown)."""

    def __init__(self, name: str, valid: str, flexible: str, *fields: F) -> None:
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "valid", _versions(valid))
        set_(self, "flexible", _versions(flexible))
        set_(self, "fields", tuple(fields))
        set_(self, "_cache", {})

    @property
    def struct(self) -> S:
        return S(self.name, *self.fields)

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible

    def versions(self) -> range:
        assert self.valid.high is not None
        return range(self.valid.low, self.valid.high + 1)

    def codec(self, version: int) -> Codec:
        """The compiled codec of one version (cached: compiling costs milliseconds)."""
        compiled = self._cache.get(version)
        if compiled is None:
            if version not in self.valid:
                raise ValueError(f"{self.name} has no version {version} (valid {self.valid})")
            with _COMPILE_LOCK:
                compiled = self._cache.get(version)
                if compiled is None:
                    compiled = Codec(KStruct(self.struct, version, self.is_flexible(version)), f"{self.name} v{version}")
                    self._cache[version] = compiled
        return compiled


class SplicedRecords(Protocol):
    """Record data sent beside the encoded frame (a segment's file slice, for sendfile): only its length is
    encoded, and :func:`encode_parts` returns its position as a :class:`Splice`."""

    @property
    def length(self) -> int: ...


Records = bytes | bytearray | memoryview | SplicedRecords
"""What a ``records`` field may be given to encode (``protocol/message_types``' type for it)."""


class Splice:
    """Where encoded output must be interleaved with data sent separately (a records placeholder)."""

    __slots__ = ("position", "value")

    def __init__(self, position: int, value: Any) -> None:
        self.position = position
        self.value = value


def decode(message: Message, version: int, data: bytes | bytearray | memoryview, offset: int = 0, *, exact: bool = True) -> tuple[Container, int]:
    """Decode ``message`` at ``version`` from ``data[offset:]``; returns (value, end offset).

    ``records`` fields come back as memoryview slices of ``data`` (no copy; writable if ``data`` is). Any malformed input raises
    :class:`DecodeError`, never another exception. With ``exact``, trailing bytes are an error.
    """
    (value,), end = decode_frame(data, (message, version), offset=offset)
    if exact and end != len(data):
        raise DecodeError(f"{message.name} v{version}: {len(data) - end} trailing bytes")
    return value, end


def decode_frame(data: bytes | bytearray | memoryview, *parts: tuple[Message, int], offset: int = 0) -> tuple[list[Container], int]:
    """Decode ``parts`` (header, body), one after the other, from ``data[offset:]``: their values and the end
    offset of the last, bytes after it ignored (one stream and context for all of them, as
    :func:`encode_frame` builds them). Errors as :func:`decode`'s."""
    return decode_frame_by(frame_programs(*parts), data, parts, offset)


def frame_programs(*parts: tuple[Message, int]) -> tuple[Any, ...] | None:
    """The schema machine's programs of ``parts`` (message, version), for :func:`decode_frame_by` and
    :func:`encode_frame_by` (a caller that encodes or decodes the same parts often keeps them); None where
    the Python codec runs."""
    if _codec is None:
        return None
    programs = tuple(message.codec(version).program for message, version in parts)
    return None if None in programs else programs


def decode_frame_by(
    programs: tuple[Any, ...] | None, data: bytes | bytearray | memoryview, parts: tuple[tuple[Message, int], ...], offset: int = 0
) -> tuple[list[Container], int]:
    """:func:`decode_frame` with the parts' :func:`frame_programs`."""
    # ``records`` views are taken on ``data`` itself, so a bytearray frame yields writable views the broker
    # patches in place.
    view = memoryview(data)
    if programs is not None:
        try:
            return _codec.decode(programs, view, offset)
        except Exception:  # noqa: BLE001 - the Python reader below gives the error its kind and text
            pass
    return _decode_frame_python(data, view, parts, offset)


def _decode_frame_python(
    data: bytes | bytearray | memoryview, view: memoryview, parts: tuple[tuple[Message, int], ...], offset: int
) -> tuple[list[Container], int]:
    """:func:`decode_frame` by the generated Python functions: the reference the schema machine is tested
    against, and what runs wherever the machine refuses the input (then raising the error)."""
    # BytesIO shares a bytes object's buffer but copies anything else: large mutable frames (produce
    # requests) are read through a view instead, which costs a little per field and saves copying the
    # records.
    size = len(view)
    stream: _io.BytesIO | _ViewStream = _io.BytesIO(data) if isinstance(data, bytes) or size < _VIEW_STREAM_THRESHOLD else _ViewStream(view)
    if offset:
        stream.seek(offset)
    # The emitted code reads nothing from its context but ``_params``.
    context = {"_params": {"_buf": view, "_size": size}}
    values = []
    message = version = None
    try:
        for message, version in parts:
            values.append(message.codec(version).parsefunc(stream, context))
    except DecodeError:
        raise
    except (struct.error, ValueError, IndexError, KeyError, TypeError, OverflowError, MemoryError, RecursionError) as exc:
        assert message is not None
        raise DecodeError(f"{message.name} v{version}: {exc.__class__.__name__}: {exc}") from None
    return values, stream.tell()


_VIEW_STREAM_THRESHOLD = 64 * 1024


class _ViewStream:
    """The part of BytesIO's interface the generated parsers use, over a memoryview, without copying it."""

    __slots__ = ("_view", "_pos")

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._pos = 0

    def read(self, n: int) -> bytes:
        pos = self._pos
        data = bytes(self._view[pos : pos + n])
        self._pos = pos + len(data)
        return data

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else self._pos + offset
        return self._pos


def encode_parts(message: Message, version: int, value: Mapping[str, Any]) -> tuple[bytes, list[Splice]]:
    """Encode ``value``; records fields that are not bytes-like become splices (length written, data not)."""
    program = message.codec(version).program
    if program is not None:
        try:
            return _codec.encode((program,), ((message, version, value),), False)
        except Exception:  # noqa: BLE001 - the Python writer below gives the error its kind and text
            pass
    return _encode_parts_python(message, version, value)


def _encode_parts_python(message: Message, version: int, value: Mapping[str, Any]) -> tuple[bytes, list[Splice]]:
    """:func:`encode_parts` by the generated Python functions (the reference, as :func:`_decode_frame_python`)."""
    stream = _io.BytesIO()
    splices = _build(stream, ((message, version, value),))
    return stream.getvalue(), splices


def encode_frame(*parts: tuple[Message, int, Mapping[str, Any]]) -> tuple[bytes, list[Splice]]:
    """A size-prefixed frame of ``parts`` (header, body) encoded in order, with one copy of the output.

    The size is written over a placeholder once the parts are built and before the buffer is taken out
    (writing after ``getvalue`` would copy it); it counts the spliced-in data, which is sent separately.
    Splice positions are offsets in the returned frame."""
    return encode_frame_by(frame_programs(*((message, version) for message, version, _ in parts)), parts)


def encode_frame_by(programs: tuple[Any, ...] | None, parts: tuple[tuple[Message, int, Mapping[str, Any]], ...]) -> tuple[bytes, list[Splice]]:
    """:func:`encode_frame` with the parts' :func:`frame_programs`."""
    if programs is not None:
        try:
            return _codec.encode(programs, parts, True)
        except Exception:  # noqa: BLE001 - the Python writer below gives the error its kind and text
            pass
    return _encode_frame_python(*parts)


def _encode_frame_python(*parts: tuple[Message, int, Mapping[str, Any]]) -> tuple[bytes, list[Splice]]:
    """:func:`encode_frame` by the generated Python functions (the reference, as :func:`_decode_frame_python`)."""
    stream = _io.BytesIO()
    stream.write(b"\0\0\0\0")
    splices = _build(stream, parts)
    size = stream.tell() - 4 + sum(s.value.length for s in splices)
    stream.seek(0)
    stream.write(_Runtime.INT32.pack(size))
    return stream.getvalue(), splices


def _build(stream: _io.BytesIO, parts: Any) -> list[Splice]:
    splices: list[Splice] = []
    context = {"_params": {"_splices": splices}}
    for message, version, value in parts:
        try:
            message.codec(version).buildfunc(value, stream, context)
        except struct.error as exc:  # a number outside its field's type
            raise EncodeError(f"{message.name} v{version}: {exc}") from None
    return splices


def encode(message: Message, version: int, value: Mapping[str, Any]) -> bytes:
    data, splices = encode_parts(message, version, value)
    if splices:
        raise ValueError("value holds records placeholders; use encode_parts")
    return data


class _Runtime:
    """Helpers the emitted code calls (kept in one namespace, ``_rt``, to keep the generated source short)."""

    DecodeError = DecodeError
    EncodeError = EncodeError
    Container = Container
    BOOL = struct.Struct(">?")
    INT8 = struct.Struct(">b")
    INT16 = struct.Struct(">h")
    UINT16 = struct.Struct(">H")
    INT32 = struct.Struct(">i")
    INT64 = struct.Struct(">q")
    FLOAT64 = struct.Struct(">d")
    UUID = Uuid
    UVARINTS = tuple(map(int.to_bytes, range(0x80)))
    """The one-byte varints, made once (each by ``int.to_bytes``, one byte, in C: a generator here ran 128 Python
    steps a start)."""

    @staticmethod
    def unknown_fields(obj: Any, known: frozenset[str], struct_name: str) -> None:
        unknown = ", ".join(repr(k) for k in sorted(map(str, obj.keys() - known)))
        raise UnknownFieldError(f"{struct_name} has no field {unknown} in any version (fields: {', '.join(sorted(known - {'_unknown_tags'}))})")

    @staticmethod
    def read(io: Any, n: int) -> bytes:
        data: bytes = io.read(n)
        if len(data) != n:
            raise DecodeError(f"truncated: wanted {n} bytes, got {len(data)}")
        return data

    @staticmethod
    def count_exceeds(n: int) -> None:
        """An array's count above the input's size (checked inline by the parsers): every element takes at
        least one byte except empty structs, which real messages never repeat; bounding by the input size
        stops hostile counts from allocating huge lists."""
        raise DecodeError(f"count {n} exceeds the remaining input")

    @staticmethod
    def read_uvarint(io: Any) -> int:
        result = 0
        shift = 0
        read = io.read
        while True:
            b = read(1)
            if not b:
                raise DecodeError("truncated varint")
            byte: int = b[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise DecodeError("unsigned varint longer than 5 bytes")

    @staticmethod
    def read_uvarint_from(first: bytes, io: Any) -> int:
        """An unsigned varint whose first byte was read already (``first``, empty at the end of the input)."""
        if not first:
            raise DecodeError("truncated varint")
        byte: int = first[0]
        if not byte & 0x80:
            return byte
        result = byte & 0x7F
        shift = 7
        read = io.read
        while True:
            b = read(1)
            if not b:
                raise DecodeError("truncated varint")
            byte = b[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise DecodeError("unsigned varint longer than 5 bytes")

    @staticmethod
    def write_uvarint(value: int, io: Any) -> None:
        io.write(_uvarint_bytes(value))

    @staticmethod
    def uvarint_bytes(value: int) -> bytes:
        return _uvarint_bytes(value)

    @staticmethod
    def read_str(io: Any, this: Any, compact: bool, nullable: bool) -> str | None:
        """Kafka's generated readers refuse a string over 32,767 bytes, compact strings too (``string field
        X had invalid length``): so no string a request carries is too long for an answer to echo. Stricter
        than Kafka (docs/compatibility.md): a negative length other than -1, which Kafka reads as null, and
        bytes that are not UTF-8, which Java decodes to U+FFFD, are refused."""
        if compact:
            b = io.read(1)
            n = (b[0] if b and b[0] < 0x80 else _Runtime.read_uvarint_from(b, io)) - 1
        else:
            n = _Runtime.INT16.unpack(io.read(2))[0]  # a short read: struct.error, reported as a DecodeError
        if n < 0:
            if nullable and n == -1:
                return None
            raise DecodeError("null string in non-nullable field" if n == -1 else f"bad string length {n}")
        if n > 0x7FFF:
            raise DecodeError(f"string field had invalid length {n}")
        data: bytes = io.read(n)
        if len(data) != n:
            raise DecodeError(f"truncated: wanted {n} bytes, got {len(data)}")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"string is not UTF-8: {exc}") from None

    @staticmethod
    def write_str(obj: str | None, io: Any, this: Any, compact: bool, nullable: bool, name: str) -> str | None:
        if obj is None:
            if not nullable:
                raise EncodeError(f"'{name}' is null in a non-nullable field")
            io.write(b"\x00" if compact else b"\xff\xff")
            return obj
        data = obj.encode("utf-8")
        if len(data) > 0x7FFF:  # Kafka's writers refuse it, compact strings too: no reader would take it
            raise EncodeError(f"'{name}' field is too long to be serialized")
        io.write((_UVARINTS[len(data) + 1] if len(data) < 0x7F else _uvarint_bytes(len(data) + 1)) if compact else _Runtime.INT16.pack(len(data)))
        io.write(data)
        return obj

    @staticmethod
    def read_bytes(io: Any, this: Any, compact: bool, nullable: bool) -> bytes | None:
        n = _Runtime.read_uvarint(io) - 1 if compact else _Runtime.INT32.unpack(_Runtime.read(io, 4))[0]
        if n < 0:
            if nullable and n == -1:
                return None
            raise DecodeError("null bytes in non-nullable field" if n == -1 else f"bad bytes length {n}")
        return _Runtime.read(io, n)

    @staticmethod
    def write_bytes(obj: Any, io: Any, this: Any, compact: bool, nullable: bool) -> Any:
        if obj is None:
            if not nullable:
                raise EncodeError("null bytes in a non-nullable field")
            io.write(b"\x00" if compact else b"\xff\xff\xff\xff")
            return obj
        io.write(_uvarint_bytes(len(obj) + 1) if compact else _Runtime.INT32.pack(len(obj)))
        io.write(obj)
        return obj

    @staticmethod
    def read_records(io: Any, this: Any, compact: bool, nullable: bool) -> memoryview | bytes | None:
        if compact:
            b = io.read(1)
            n = (b[0] if b and b[0] < 0x80 else _Runtime.read_uvarint_from(b, io)) - 1
        else:
            n = _Runtime.INT32.unpack(_Runtime.read(io, 4))[0]
        if n < 0:
            if n == -1:
                return None  # Kafka's records fields are nullable in every version
            raise DecodeError(f"bad records length {n}")
        buf: memoryview | None = this["_params"].get("_buf")
        if buf is None:
            return _Runtime.read(io, n)
        pos = io.tell()
        if pos + n > len(buf):
            raise DecodeError(f"truncated records: wanted {n} bytes, {len(buf) - pos} remain")
        io.seek(n, 1)
        return buf[pos : pos + n]

    @staticmethod
    def write_records(obj: Any, io: Any, this: Any, compact: bool, nullable: bool) -> Any:
        if obj is None:
            io.write(b"\x00" if compact else b"\xff\xff\xff\xff")
            return obj
        if isinstance(obj, (bytes, bytearray, memoryview)):
            length = len(obj) if not isinstance(obj, memoryview) else obj.nbytes
            io.write(_uvarint_bytes(length + 1) if compact else _Runtime.INT32.pack(length))
            io.write(obj)
            return obj
        length = obj.length
        io.write(_uvarint_bytes(length + 1) if compact else _Runtime.INT32.pack(length))
        splices = this["_params"].get("_splices")
        if splices is None:
            raise ValueError("records placeholder outside encode_parts")
        splices.append(Splice(io.tell(), obj))
        return obj

    @staticmethod
    def read_uuid(io: Any) -> Uuid:
        return uuid_of_bytes(_Runtime.read(io, 16))

    @staticmethod
    def write_uuid(obj: Uuid | bytes, io: Any) -> Any:
        io.write(_uuid_bytes(obj))
        return obj

    @staticmethod
    def copy_default(value: Any) -> Any:
        if isinstance(value, list):
            return []
        if isinstance(value, Container):
            return Container((k, _Runtime.copy_default(v)) for k, v in value.items())
        return value

    @staticmethod
    def read_tagged(io: Any, this: Any, result: dict[str, Any], parsers: dict[int, Any], first: bytes) -> None:
        """Tagged fields in strictly increasing tag order, each consumed exactly: KIP-482 requires both, and
        Kafka writes them so. Kafka's generated readers are laxer (any order, unconsumed bytes ignored);
        refusing such input is deliberate, as no client sends it and it is the shape of a corrupted frame.
        ``first`` is the count's first byte, which the parser read to see whether the section is empty."""
        count = _Runtime.read_uvarint_from(first, io)
        last = -1
        for _ in range(count):
            tag = _Runtime.read_uvarint(io)
            if tag <= last:
                raise DecodeError(f"tagged fields out of order: {tag} after {last}")
            last = tag
            size = _Runtime.read_uvarint(io)
            data = _Runtime.read(io, size)
            known = parsers.get(tag)
            if known is None:
                result.setdefault("_unknown_tags", {})[tag] = data
                continue
            name, parse = known
            sub = _io.BytesIO(data)
            result[name] = parse(sub, this)
            if sub.tell() != size:
                raise DecodeError(f"tagged field {tag}: {size - sub.tell()} trailing bytes")

    @staticmethod
    def write_tagged(obj: Any, io: Any, this: Any, entries: tuple[Any, ...]) -> None:
        fields: list[tuple[int, bytes]] = []
        get = obj.get
        for tag, name, build, default in entries:
            value = get(name, default)
            if value is default or value == default:
                continue
            sub = _io.BytesIO()
            build(value, sub, this)
            fields.append((tag, sub.getvalue()))
        unknown = get("_unknown_tags")
        if unknown:
            fields.extend(unknown.items())
            fields.sort(key=lambda item: item[0])
        io.write(_uvarint_bytes(len(fields)))
        for tag, data in fields:
            io.write(_uvarint_bytes(tag))
            io.write(_uvarint_bytes(len(data)))
            io.write(data)


def _uuid_bytes(obj: Uuid | bytes) -> bytes:
    """What a uuid field's value is written as: a Uuid's bytes (or a uuid.UUID's, or 16 bytes)."""
    return obj.bytes if isinstance(obj, Uuid) else bytes(getattr(obj, "bytes", obj))


def _uvarint_bytes(value: int) -> bytes:
    if value < 0x80:
        return _UVARINTS[value]
    return _long_uvarint_bytes(value)


def _long_uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_UVARINTS = _Runtime.UVARINTS

_rt = _Runtime

if _codec is not None:
    _codec.configure(DecodeError, EncodeError, Container, _Runtime.copy_default, uuid_of_bytes, _uuid_bytes, Splice)
